// MCP for agent swarms: MCP traffic admitted exactly like chat (rpm,
// concurrency, budgets), per-key tool allow-lists, every protocol version a
// server agreed to, idle sessions that end, and plain HTTP clients (Python's
// httpx, as a swarm's tooling sends) served JSON at /v1/mcp/{server}/initialize.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

import { startEverything } from '../lib/everything.mjs';
import { relayConfig, startRelay, waitFor } from '../lib/harness.mjs';
import { recordedHeader, startRecordingMcp } from '../lib/mcp_recorder.mjs';
import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';

const run = promisify(execFile);
// Debian's interpreter, which has python3-httpx (a pyenv one on PATH may not).
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

const keyOf = (name) => `kr-mcp-swarm-${name}-3e5a7c9b1d2f4a6c8e0b2d4f6a8c`;
const SERVER_KEY = 'sk-mcp-swarm-server-5b7d9f1a3c5e7a9c1e3b';
const JSON_AND_SSE = 'application/json, text/event-stream';

const env = {};

before(async () => {
  env.rec = await startRecordingMcp({ name: 'rec', apiKey: SERVER_KEY });
  env.everything = await startEverything();
  env.relay = await startRelay(
    relayConfig({
      keys: [
        { name: 'rpm5', key: keyOf('rpm5'), limits: { rpm: 5 } },
        { name: 'conc1', key: keyOf('conc1'), limits: { concurrency: 1 } },
        { name: 'tools', key: keyOf('tools'), mcp_tools: { rec: ['whoami'] } },
        { name: 'spent', key: keyOf('spent'), budget: { max_output_tokens: 0 } },
        { name: 'plain', key: keyOf('plain') },
      ],
      upstreams: [],
      mcp: {
        servers: [
          { name: 'rec', url: env.rec.url, api_key: SERVER_KEY, region: 'eu-fra' },
          { name: 'everything', url: env.everything.url, region: 'loopback' },
        ],
        session_secret: 'mcp-swarm-session-secret-0123456789abcdef',
        session_idle_ms: 1000,
      },
    }),
  );
});

after(async () => {
  await env.relay?.stop();
  await env.rec?.close();
  await env.everything?.stop();
});

let nextId = 1;

async function rpc({ server = 'rec', key, session, version, method, params, accept = JSON_AND_SSE, path }) {
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${keyOf(key)}` };
  if (accept !== null) headers.accept = accept;
  if (session) headers['mcp-session-id'] = session;
  if (version) headers['mcp-protocol-version'] = version;
  const id = nextId++;
  const res = await fetch(`${env.relay.url}${path ?? `/v1/mcp/${server}`}`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) }),
  });
  return { res, id };
}

async function initialize(key, protocolVersion = '2025-06-18', server = 'rec') {
  const { res } = await rpc({
    server,
    key,
    method: 'initialize',
    params: { protocolVersion, capabilities: {}, clientInfo: { name: 'swarm-test', version: '1' } },
  });
  assert.equal(res.status, 200);
  await res.text();
  return res.headers.get('mcp-session-id');
}

describe('MCP admission', () => {
  test('rpm counts MCP requests: 10 tools/call with rpm 5 — 5 served, 5 refused with 429 and Retry-After', async () => {
    const session = await initialize('rpm5'); // the first of the 5
    const statuses = [];
    for (let i = 0; i < 10; ++i) {
      const { res, id } = await rpc({ key: 'rpm5', session, version: '2025-06-18', method: 'tools/call', params: { name: 'whoami', arguments: {} } });
      const body = await res.json();
      statuses.push(res.status);
      if (res.status === 429) {
        assert.equal(body.id, id, 'a JSON-RPC error with the request id');
        assert.match(body.error.message, /Rate limit reached for key 'rpm5'/);
        assert.ok(Number(res.headers.get('retry-after')) >= 1);
        assert.equal(res.headers.get('x-ratelimit-limit-requests'), '5');
      }
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429, 429, 429, 429, 429]);
    const refusals = metricSum(await scrapeMetrics(env.relay), 'kimi_relay_rate_limit_refusals_total', { reason: 'requests' });
    assert.ok(refusals >= 6);
    const counted = metricSum(await scrapeMetrics(env.relay), 'kimi_relay_mcp_requests_total', { key: 'rpm5', code: '429' });
    assert.equal(counted, 6, 'MCP refusals appear in the MCP request metrics under the key');
  });

  test('concurrency: a second call beside a long one is refused with Retry-After; an open GET stream holds no slot', async () => {
    const session = await initialize('conc1');
    const long = rpc({ key: 'conc1', session, version: '2025-06-18', method: 'tools/call', params: { name: 'sleep', arguments: { ms: 600 } } });
    await sleep(150);
    const { res: second } = await rpc({ key: 'conc1', session, version: '2025-06-18', method: 'ping' });
    assert.equal(second.status, 429);
    assert.equal(second.headers.get('retry-after'), '1', 'a concurrency refusal says when to come back');
    assert.equal(second.headers.get('retry-after-ms'), '1000');
    assert.match((await second.json()).error.message, /concurrent/);
    const { res: first } = await long;
    assert.equal(first.status, 200);
    await first.text();

    // The server-to-client stream stays open and takes no slot.
    const controller = new AbortController();
    const stream = await fetch(`${env.relay.url}/v1/mcp/rec`, {
      headers: { accept: 'text/event-stream', authorization: `Bearer ${keyOf('conc1')}`, 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' },
      signal: controller.signal,
    });
    assert.equal(stream.status, 200);
    const { res: call } = await rpc({ key: 'conc1', session, version: '2025-06-18', method: 'ping' });
    assert.equal(call.status, 200, 'a call beside an open stream is served');
    await call.text();
    controller.abort();
  });

  test('a key whose budget is spent is refused MCP calls too (429 insufficient_quota)', async () => {
    const { res } = await rpc({ key: 'spent', method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } });
    assert.equal(res.status, 429);
    assert.equal(res.headers.get('x-should-retry'), 'false');
    assert.match((await res.json()).error.message, /output-token budget/);
  });
});

describe('tool allow-lists (keys[].mcp_tools)', () => {
  test('a tool the key may call is served; another is refused with a JSON-RPC error naming it', async () => {
    const session = await initialize('tools');
    const before = env.rec.calls('tools/call').length;
    const { res: ok } = await rpc({ key: 'tools', session, version: '2025-06-18', method: 'tools/call', params: { name: 'whoami', arguments: {} } });
    assert.equal(ok.status, 200);
    await ok.text();
    const { res: refused, id } = await rpc({ key: 'tools', session, version: '2025-06-18', method: 'tools/call', params: { name: 'stream', arguments: {} } });
    const body = await refused.json();
    assert.equal(refused.status, 403);
    assert.equal(body.id, id);
    assert.equal(body.error.code, -32602);
    assert.match(body.error.message, /'stream'/);
    assert.match(body.error.message, /whoami/);
    assert.equal(env.rec.calls('tools/call').length, before + 1, 'the refused call never reached the server');
  });
});

describe('protocol versions', () => {
  test('a session initialized at 2024-11-05 (which the server agreed to) is served at that version', async () => {
    const session = await initialize('plain', '2024-11-05');
    const { res: same } = await rpc({ key: 'plain', session, version: '2024-11-05', method: 'ping' });
    assert.equal(same.status, 200);
    await same.text();
    const { res: other } = await rpc({ key: 'plain', session, version: '2025-06-18', method: 'ping' });
    const body = await other.json();
    assert.equal(other.status, 400);
    assert.match(body.error.message, /2025-06-18/);
    assert.match(body.error.message, /2024-11-05/);
  });
});

describe('idle sessions', () => {
  test('a session idle past mcp.session_idle_ms gets 404 and is deleted at its server', async () => {
    const session = await initialize('plain');
    const { res: active } = await rpc({ key: 'plain', session, version: '2025-06-18', method: 'ping' });
    assert.equal(active.status, 200);
    await active.text();
    const upstreamSid = recordedHeader(env.rec.calls('ping').at(-1), 'mcp-session-id')[0];
    await sleep(1300);
    const { res: expired, id } = await rpc({ key: 'plain', session, version: '2025-06-18', method: 'ping' });
    const body = await expired.json();
    assert.equal(expired.status, 404);
    assert.equal(body.id, id);
    assert.equal(body.error.code, -32001);
    assert.match(body.error.message, /session_idle_ms/);
    await waitFor(() => env.rec.calls('DELETE').some((r) => recordedHeader(r, 'mcp-session-id')[0] === upstreamSid), {
      what: 'the DELETE of the idle session at its server',
    });
    assert.ok(!env.rec.sessions.has(upstreamSid), 'the server no longer holds it');
  });
});

describe('plain HTTP clients', () => {
  // A swarm's plain tooling: Python's httpx, no MCP Accept header.
  async function httpxPost(path, body, headers = {}) {
    const script = `
import httpx, json, sys
r = httpx.post(sys.argv[1], json=json.loads(sys.argv[2]), headers=json.loads(sys.argv[3]), timeout=10)
print(json.dumps({"status": r.status_code, "headers": dict(r.headers), "body": r.text}))
`;
    const { stdout } = await run(PYTHON, ['-c', script, `${env.relay.url}${path}`, JSON.stringify(body), JSON.stringify(headers)], {
      env: { ...process.env, NO_PROXY: '*', no_proxy: '*' },
    });
    return JSON.parse(stdout);
  }

  const initializeBody = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'httpx', version: '1' } },
  };

  for (const server of ['rec', 'everything']) {
    test(`httpx: POST /v1/mcp/${server}/initialize gets JSON with serverInfo and x-relay-region`, async () => {
      const r = await httpxPost(`/v1/mcp/${server}/initialize`, initializeBody, { authorization: `Bearer ${keyOf('plain')}` });
      assert.equal(r.status, 200, r.body);
      assert.match(r.headers['content-type'], /^application\/json/);
      const body = JSON.parse(r.body);
      assert.equal(body.id, 1);
      assert.ok(body.result.serverInfo.name, r.body);
      assert.equal(r.headers['x-relay-region'], server === 'rec' ? 'eu-fra' : 'loopback');
      assert.match(r.headers['mcp-session-id'], /^kr1\./);
    });
  }

  test('the server was spoken to as MCP requires, whatever the plain client accepted', async () => {
    await httpxPost('/v1/mcp/rec/initialize', initializeBody, { authorization: `Bearer ${keyOf('plain')}` });
    const init = env.rec.calls('initialize').at(-1);
    assert.deepEqual(recordedHeader(init, 'accept'), [JSON_AND_SSE]);
  });

  test('an SSE answer is gathered into the one JSON-RPC response for a plain client', async () => {
    const session = await initialize('plain');
    const { res, id } = await rpc({ key: 'plain', session, version: '2025-06-18', method: 'tools/call', params: { name: 'stream', arguments: {} }, accept: null });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^application\/json/);
    const body = await res.json();
    assert.equal(body.id, id);
    assert.equal(body.result.content[0].text, 'streamed by rec');
  });

  test('/initialize takes only an initialize', async () => {
    const session = await initialize('plain');
    const { res } = await rpc({ key: 'plain', session, version: '2025-06-18', method: 'ping', path: '/v1/mcp/rec/initialize' });
    assert.equal(res.status, 400);
    assert.match((await res.json()).error.message, /initialize/);
  });
});
