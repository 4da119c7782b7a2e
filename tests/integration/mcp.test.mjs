// The MCP relay at /v1/mcp against recording MCP servers (lib/mcp_recorder.mjs),
// over HTTP/1.1 and h2c: no caller credential ever reaches a server, sessions
// are pinned to the instance that issued them and bound to their key, any
// gateway holding the same secret accepts them, and the gateway's own checks
// (Origin, Accept, Content-Type, MCP-Protocol-Version, allow-lists, forged or
// ended sessions) answer before anything is forwarded.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { openClient, PROTOCOLS } from '../lib/clients.mjs';
import { writeFileSync } from 'node:fs';

import { closedPort, collectSse, readSse, relayConfig, startRelay, toYaml, waitFor } from '../lib/harness.mjs';
import { recordedHeader, startRecordingMcp } from '../lib/mcp_recorder.mjs';

const KEY_ALPHA = 'kr-mcp-alpha-5c1f9e3a7b2d4c6e8f0a1b3c5d7e9f2a';
const KEY_BETA = 'kr-mcp-beta-8d2e4f6a0b1c3d5e7f9a2b4c6d8e0f1a';
const KEY_LIMITED = 'kr-mcp-limited-1a3c5e7f9b2d4f6a8c0e2b4d6f8a0c2e';
const SERVER_KEY = 'sk-mcp-server-secret-7e9f1a3b5c7d9e2f4a6b8c0d';
const SECRET = 'mcp-session-secret-for-the-integration-tests-0123456789';
const ALLOWED_ORIGIN = 'https://app.example.com';
const CALLER_KEYS = [KEY_ALPHA, KEY_BETA, KEY_LIMITED];

const SUITE = PROTOCOLS.filter((p) => !p.tls); // HTTP/1.1 and h2c

const env = {};

function gatewayConfig({ secret = SECRET, region = 'hkg' } = {}) {
  const { rec, pairA, pairB, flaky, other, dead, unreachable } = env;
  return relayConfig({
    keys: [
      { name: 'alpha', key: KEY_ALPHA },
      { name: 'beta', key: KEY_BETA },
      { name: 'limited', key: KEY_LIMITED, mcp_servers: ['other'] },
    ],
    upstreams: [],
    retry: { max_attempts: 3, backoff: { base_ms: 10, max_ms: 50 } },
    // Far below an MCP stream's silences: MCP streams must not inherit it.
    timeouts: { idle_ms: 200 },
    mcp: {
      servers: [
        { name: 'rec', url: rec.url, api_key: SERVER_KEY, region },
        { name: 'pair', instances: [pairA.url, pairB.url], api_key: SERVER_KEY },
        { name: 'flaky', instances: [unreachable, flaky.url] },
        { name: 'other', url: other.url },
        ...dead.map((d, i) => ({ name: `dead-${i}`, url: d.url })),
      ],
      allowed_origins: [ALLOWED_ORIGIN],
      ...(secret ? { session_secret: secret } : {}),
    },
  });
}

before(async () => {
  const names = ['rec', 'pairA', 'pairB', 'flaky', 'other'];
  const started = await Promise.all(
    names.map((name) => startRecordingMcp({ name, apiKey: ['rec', 'pairA', 'pairB'].includes(name) ? SERVER_KEY : undefined })),
  );
  names.forEach((n, i) => {
    env[n] = started[i];
  });
  env.dead = await Promise.all(SUITE.map((_, i) => startRecordingMcp({ name: `dead${i}` })));
  env.unreachable = `http://127.0.0.1:${await closedPort()}/mcp`;
  env.relay = await startRelay(gatewayConfig());
});

after(async () => {
  await env.relay?.stop();
  await Promise.all(['rec', 'pairA', 'pairB', 'flaky', 'other'].map((n) => env[n]?.close()));
  await Promise.all((env.dead ?? []).map((d) => d.close()));
});

let nextId = 1;

// POSTs one JSON-RPC message. `id: null` makes a notification.
async function rpc(client, { path = '/v1/mcp', key = KEY_ALPHA, session, method, params, id = nextId++, headers = {} }) {
  const h = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
  if (key) h.authorization = `Bearer ${key}`;
  if (session) {
    h['mcp-session-id'] = session;
    h['mcp-protocol-version'] = '2025-06-18';
  }
  Object.assign(h, headers);
  const body = { jsonrpc: '2.0', ...(id === null ? {} : { id }), method, ...(params ? { params } : {}) };
  return client.request({ method: 'POST', path, headers: h, body });
}

async function initialize(client, options = {}) {
  const reply = await rpc(client, {
    ...options,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'mcp-test', version: '1' } },
  });
  const body = await reply.json();
  assert.equal(reply.status, 200, JSON.stringify(body));
  const session = reply.headers['mcp-session-id'];
  assert.match(session, /^kr1\.[A-Za-z0-9_-]+$/);
  return { reply, body, session, version: body.result?.protocolVersion };
}

async function whoami(client, session, path = '/v1/mcp/pair', key = KEY_ALPHA) {
  const reply = await rpc(client, { path, key, session, method: 'tools/call', params: { name: 'whoami', arguments: {} } });
  const body = await reply.json();
  assert.equal(reply.status, 200, JSON.stringify(body));
  return body.result.content[0].text;
}

// Asserts a gateway 404 for an unknown session: a JSON-RPC error with the id.
async function assertSessionNotFound(reply, id) {
  const body = await reply.json();
  assert.equal(reply.status, 404, JSON.stringify(body));
  assert.equal(body.jsonrpc, '2.0');
  assert.equal(body.id, id);
  assert.equal(body.error.code, -32001);
  assert.match(body.error.message, /session/i);
}

async function metricsText() {
  const res = await fetch(`${env.relay.adminUrl}/metrics`);
  return res.text();
}

// The value of the first series of `name` whose labels include every pair of `labels`.
function metricValue(text, name, labels) {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const ok = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (ok) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

for (const [index, protocol] of SUITE.entries()) {
  describe(`MCP relay over ${protocol.name}`, () => {
    let client;
    let metricsAtStart; // this pass's metrics are deltas from here
    before(async () => {
      client = await openClient(protocol, { relay: env.relay });
      metricsAtStart = await metricsText();
    });
    after(async () => {
      await client?.close();
    });

    test('the caller’s credentials never reach the server; its own key and Host are used', async () => {
      const { rec } = env;
      const before = rec.requests.length;
      const leaky = { cookie: `token=${KEY_ALPHA}`, origin: ALLOWED_ORIGIN, 'x-custom-thing': KEY_ALPHA };
      const { reply, session } = await initialize(client, { path: '/v1/mcp', headers: leaky });
      assert.equal(reply.headers['x-relay-region'], 'hkg');
      assert.ok(!rec.sessions.has(session), 'the gateway id is not the upstream id');

      const ping = await rpc(client, { session, method: 'ping', headers: leaky });
      assert.equal(ping.status, 200);
      assert.deepEqual((await ping.json()).result, {});
      assert.equal(ping.headers['mcp-session-id'], session, 'the same session id on every answer');
      assert.equal(ping.headers['x-relay-region'], 'hkg');
      const note = await rpc(client, { session, method: 'notifications/initialized', id: null, headers: leaky });
      assert.equal(note.status, 202);
      await note.text();

      const seen = rec.requests.slice(before);
      assert.equal(seen.length, 3);
      const upstreamSession = recordedHeader(seen[1], 'mcp-session-id');
      assert.equal(upstreamSession.length, 1);
      assert.ok(rec.sessions.has(upstreamSession[0]), 'the server sees its own session id');
      for (const r of seen) {
        assert.deepEqual(recordedHeader(r, 'authorization'), [`Bearer ${SERVER_KEY}`]);
        assert.deepEqual(recordedHeader(r, 'host'), [rec.hostPort]);
        for (const name of ['x-api-key', 'cookie', 'origin', 'proxy-authorization', 'x-custom-thing']) {
          assert.deepEqual(recordedHeader(r, name), [], `${name} was forwarded`);
        }
        const all = JSON.stringify(r.headers) + r.body;
        for (const k of CALLER_KEYS) assert.ok(!all.includes(k), 'a caller key reached the server');
        assert.ok(!all.includes(session), 'the gateway session id reached the server');
        assert.deepEqual(recordedHeader(r, 'accept'), ['application/json, text/event-stream']);
      }
    });

    test('two instances: new sessions use both, and each session stays on its instance for 100 calls', async () => {
      const { pairA, pairB } = env;
      const owners = new Map();
      for (let i = 0; i < 6; i++) {
        const { session } = await initialize(client, { path: '/v1/mcp/pair' });
        owners.set(session, await whoami(client, session));
      }
      assert.deepEqual(new Set(owners.values()), new Set(['pairA', 'pairB']));
      for (const [session, owner] of [...owners].slice(0, 2)) {
        const other = owner === 'pairA' ? pairB : pairA;
        const otherBefore = other.requests.length;
        for (let i = 0; i < 100; i++) assert.equal(await whoami(client, session), owner, `call ${i}`);
        assert.equal(other.requests.length, otherBefore, 'the other instance saw none of these calls');
      }
    });

    test('a second gateway with the same secret accepts the session; one with another secret does not', async () => {
      const { session } = await initialize(client, { path: '/v1/mcp/pair' });
      const owner = await whoami(client, session);
      const twin = await startRelay(gatewayConfig());
      const stranger = await startRelay(gatewayConfig({ secret: `${SECRET}-other` }));
      try {
        const twinClient = await openClient(protocol, { relay: twin });
        for (let i = 0; i < 5; i++) assert.equal(await whoami(twinClient, session), owner);
        await twinClient.close();
        const strangerClient = await openClient(protocol, { relay: stranger });
        const id = nextId;
        const reply = await rpc(strangerClient, { path: '/v1/mcp/pair', session, method: 'ping' });
        await assertSessionNotFound(reply, id);
        await strangerClient.close();
      } finally {
        await Promise.all([twin.stop(), stranger.stop()]);
      }
    });

    test('tampered, truncated, unwrapped and unknown session ids get 404 from the gateway', async () => {
      const { rec } = env;
      const { session } = await initialize(client);
      const upstreamIds = [...rec.sessions];
      const flip = (s, at) => s.slice(0, at) + (s[at] === 'A' ? 'B' : 'A') + s.slice(at + 1);
      const forged = [
        flip(session, 10),
        flip(session, session.length - 3),
        session.slice(0, -4),
        `${session}AAAA`,
        `kr1.${Buffer.from('not a session at all, no mac here').toString('base64url')}`,
        upstreamIds[upstreamIds.length - 1],
        'kr1.',
        'kr1.!!!',
      ];
      const seenBefore = rec.requests.length;
      for (const bad of forged) {
        const id = nextId;
        await assertSessionNotFound(await rpc(client, { session: bad, method: 'tools/list' }), id);
      }
      // Without a JSON-RPC id (GET, DELETE): a plain error.
      for (const method of ['GET', 'DELETE']) {
        const reply = await client.request({
          method,
          path: '/v1/mcp',
          headers: { authorization: `Bearer ${KEY_ALPHA}`, accept: 'text/event-stream', 'mcp-session-id': forged[0] },
        });
        const body = await reply.json();
        assert.equal(reply.status, 404);
        assert.equal(body.error.code, 'mcp_session_not_found');
      }
      assert.equal(rec.requests.length, seenBefore, 'nothing forged reached the server');
    });

    test('a session belongs to the key and the server that created it', async () => {
      const { rec } = env;
      const { session } = await initialize(client);
      const seenBefore = rec.requests.length;
      let id = nextId;
      await assertSessionNotFound(await rpc(client, { key: KEY_BETA, session, method: 'ping' }), id);
      id = nextId;
      await assertSessionNotFound(await rpc(client, { path: '/v1/mcp/pair', session, method: 'ping' }), id);
      assert.equal(rec.requests.length, seenBefore);
      const ok = await rpc(client, { session, method: 'ping' });
      assert.equal(ok.status, 200);
      await ok.text();
    });

    test('Origin: a foreign one gets 403 before anything else; an allowed one gets CORS headers', async () => {
      const { rec } = env;
      const seenBefore = rec.requests.length;
      const id = nextId;
      const refused = await rpc(client, { method: 'ping', headers: { origin: 'https://evil.example.net' } });
      const body = await refused.json();
      assert.equal(refused.status, 403);
      assert.equal(body.id, id);
      assert.match(body.error.message, /origin/i);
      const noKey = await rpc(client, { key: null, method: 'ping', headers: { origin: 'http://localhost:8080' } });
      assert.equal(noKey.status, 403);
      await noKey.text();
      assert.equal(rec.requests.length, seenBefore);

      const { reply } = await initialize(client, { headers: { origin: ALLOWED_ORIGIN } });
      assert.equal(reply.headers['access-control-allow-origin'], ALLOWED_ORIGIN);
      assert.match(reply.headers['access-control-expose-headers'], /mcp-session-id/);
      const preflight = await client.request({
        method: 'OPTIONS',
        path: '/v1/mcp',
        headers: { origin: ALLOWED_ORIGIN, 'access-control-request-method': 'POST' },
      });
      assert.equal(preflight.status, 204);
      assert.match(preflight.headers['access-control-allow-headers'], /mcp-session-id/);
      assert.match(preflight.headers['access-control-allow-headers'], /authorization/);
      await preflight.text();
    });

    test('Accept (406), Content-Type (415) and MCP-Protocol-Version (400) are checked', async () => {
      const { session, version } = await initialize(client);
      const cases = [
        [{ accept: 'text/event-stream' }, 406],
        [{ accept: 'text/html' }, 406],
        [{ 'content-type': 'text/plain' }, 415],
        [{ 'mcp-protocol-version': 'banana' }, 400],
      ];
      for (const [headers, status] of cases) {
        const id = nextId;
        const reply = await rpc(client, { session, method: 'ping', headers });
        const body = await reply.json();
        assert.equal(reply.status, status, `${JSON.stringify(headers)}: ${JSON.stringify(body)}`);
        assert.equal(body.id, id);
      }
      // The session speaks the version its server agreed to at initialize;
      // another one is refused naming both.
      for (const other of ['2025-03-26', '2025-06-18', '2025-11-25'].filter((v) => v !== version)) {
        const reply = await rpc(client, { session, method: 'ping', headers: { 'mcp-protocol-version': other } });
        const body = await reply.json();
        assert.equal(reply.status, 400, other);
        assert.ok(body.error.message.includes(other) && body.error.message.includes(version), body.error.message);
      }
      const same = await rpc(client, { session, method: 'ping', headers: { 'mcp-protocol-version': version } });
      assert.equal(same.status, 200, version);
      await same.text();
      // A plain client that takes JSON only is served JSON.
      for (const accept of ['application/json', '*/*']) {
        const reply = await rpc(client, { session, method: 'ping', headers: { accept } });
        assert.equal(reply.status, 200, accept);
        assert.match(reply.headers['content-type'], /^application\/json/);
        assert.deepEqual((await reply.json()).result, {});
      }
      const get = await client.request({
        method: 'GET',
        path: '/v1/mcp',
        headers: { authorization: `Bearer ${KEY_ALPHA}`, accept: 'application/json', 'mcp-session-id': session },
      });
      assert.equal(get.status, 406);
      await get.text();
    });

    test('keys: none gets 401, and a key outside its mcp_servers allow-list gets 403', async () => {
      const missing = await rpc(client, { key: null, method: 'ping', id: null });
      assert.equal(missing.status, 401);
      assert.match(missing.headers['www-authenticate'], /^Bearer/);
      await missing.text();
      const id = nextId;
      const refused = await rpc(client, { key: KEY_LIMITED, method: 'ping' });
      const body = await refused.json();
      assert.equal(refused.status, 403);
      assert.equal(body.id, id);
      assert.match(body.error.message, /mcp_servers/);
      const allowed = await initialize(client, { path: '/v1/mcp/other', key: KEY_LIMITED });
      assert.equal(allowed.body.result.serverInfo.name, 'other');
      const unknown = await rpc(client, { path: '/v1/mcp/nope', method: 'ping', id: null });
      assert.equal(unknown.status, 404);
      await unknown.text();
    });

    test('DELETE ends the session; the server’s 400 for it afterwards becomes 404', async () => {
      const { rec } = env;
      const { session } = await initialize(client);
      const deletesBefore = rec.calls('DELETE').length;
      const del = await client.request({
        method: 'DELETE',
        path: '/v1/mcp',
        headers: { authorization: `Bearer ${KEY_ALPHA}`, 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' },
      });
      assert.equal(del.status, 200);
      await del.text();
      assert.equal(rec.calls('DELETE').length, deletesBefore + 1, 'the DELETE reached the server');
      const id = nextId;
      await assertSessionNotFound(await rpc(client, { session, method: 'tools/list' }), id);
    });

    test('an SSE answer is relayed event by event with its event ids', async () => {
      const { session } = await initialize(client);
      const reply = await rpc(client, { session, method: 'tools/call', params: { name: 'stream', arguments: {} } });
      assert.equal(reply.status, 200);
      assert.match(reply.headers['content-type'], /^text\/event-stream/);
      assert.equal(reply.headers['mcp-session-id'], session);
      const events = await collectSse(reply);
      assert.deepEqual(
        events.map((e) => e.fields.id),
        ['rec-ev-1', 'rec-ev-2'],
      );
      assert.equal(events[0].json.method, 'notifications/progress');
      assert.equal(events[1].json.result.content[0].text, 'streamed by rec');
    });

    test('GET holds the server stream open, passes Last-Event-ID, and counts open streams', async () => {
      const { rec } = env;
      const { session } = await initialize(client);
      const reply = await client.request({
        method: 'GET',
        path: '/v1/mcp',
        headers: {
          authorization: `Bearer ${KEY_ALPHA}`,
          accept: 'text/event-stream',
          'mcp-session-id': session,
          'mcp-protocol-version': '2025-06-18',
          'last-event-id': 'rec-ev-1',
        },
      });
      assert.equal(reply.status, 200);
      assert.equal(reply.headers['x-relay-region'], 'hkg');
      const events = readSse(reply);
      const first = (await events.next()).value;
      assert.equal(first.fields.id, 'rec-get-1');
      assert.equal(first.json.params.data.lastEventId, 'rec-ev-1');
      const gets = rec.calls('GET');
      assert.deepEqual(recordedHeader(gets[gets.length - 1], 'last-event-id'), ['rec-ev-1']);
      assert.equal(metricValue(await metricsText(), 'kimi_relay_mcp_open_streams', { server: 'rec' }), 1);
      // Silence well past timeouts.idle_ms: the stream stays open.
      await sleep(1000);
      rec.push('rec-get-2', { jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
      const second = (await events.next()).value;
      assert.equal(second.fields.id, 'rec-get-2');
      assert.equal(second.json.method, 'notifications/tools/list_changed');
      reply.cancel();
      await events.return();
      await waitFor(() => rec.openStreams() === 0, { what: 'the server stream to close' });
      await waitFor(
        async () => metricValue(await metricsText(), 'kimi_relay_mcp_open_streams', { server: 'rec' }) === 0,
        { what: 'the open-stream gauge to drop' },
      );
      if (protocol.h2 === false) client = await reopen(client);
    });

    test('unreachable instances: idempotent calls are retried, tools/call never is', async () => {
      const { flaky } = env;
      // flaky = [a closed port, a live instance]: every initialize lands.
      for (let i = 0; i < 4; i++) {
        const { body } = await initialize(client, { path: '/v1/mcp/flaky' });
        assert.equal(body.result.serverInfo.name, 'flaky');
      }
      assert.equal(flaky.calls('initialize').length >= 4, true);

      // A session pinned to an instance that then goes away.
      const dead = env.dead[index];
      const path = `/v1/mcp/dead-${index}`;
      const { session } = await initialize(client, { path });
      await dead.close();
      let id = nextId;
      let reply = await rpc(client, { path, session, method: 'ping' });
      let body = await reply.json();
      assert.equal(reply.status, 502, JSON.stringify(body));
      assert.equal(body.id, id);
      assert.match(body.error.message, /after 3 attempt\(s\)/);
      id = nextId;
      reply = await rpc(client, { path, session, method: 'tools/call', params: { name: 'whoami', arguments: {} } });
      body = await reply.json();
      assert.equal(reply.status, 502);
      assert.equal(body.id, id);
      assert.match(body.error.message, /after 1 attempt\(s\)/);
    });

    test('metrics count MCP requests by server, method and status', async () => {
      // Deltas over this pass only: the other protocol's pass must not carry it.
      const text = await metricsText();
      const delta = (name, labels) =>
        (metricValue(text, name, labels) ?? 0) - (metricValue(metricsAtStart, name, labels) ?? 0);
      assert.ok(delta('kimi_relay_mcp_requests_total', { server: 'pair', method: 'tools/call', code: '200' }) >= 100);
      assert.ok(delta('kimi_relay_mcp_requests_total', { server: 'rec', method: 'initialize', code: '200' }) >= 1);
      assert.ok(delta('kimi_relay_mcp_requests_total', { server: 'rec', method: 'tools/list', code: '404' }) >= 1);
      assert.ok(delta('kimi_relay_mcp_requests_total', { server: 'rec', method: 'stream_open', code: '200' }) >= 1);
      assert.ok(delta('kimi_relay_mcp_request_duration_seconds_count', { method: 'tools/call' }) >= 100);
    });
  });
}

// HTTP/1.1 cannot cancel one response without closing its connection.
async function reopen(client) {
  await client.close();
  return openClient(SUITE[0], { relay: env.relay });
}

describe('without a session_secret', () => {
  test('sessions survive a reload (SIGHUP) but not a restart', async () => {
    const config = gatewayConfig({ secret: '' });
    let relay = await startRelay(config);
    try {
      let client = await openClient(SUITE[0], { relay });
      const { session } = await initialize(client);
      const reloads = () => relay.logs().split('\n').filter((l) => /reloaded /.test(l)).length;
      const before = reloads();
      writeFileSync(relay.configPath, toYaml(gatewayConfig({ secret: '', region: 'sha' })));
      relay.process.kill('SIGHUP');
      await waitFor(() => reloads() > before, { what: 'the reload to be logged', timeoutMs: 5000 });
      // The worker serving this connection has moved to the new config.
      await waitFor(
        async () => {
          const r = await rpc(client, { session, method: 'ping' });
          await r.text();
          return r.status === 200 && r.headers['x-relay-region'] === 'sha';
        },
        { what: 'the reloaded region' },
      );
      for (let i = 0; i < 10; i++) {
        const r = await rpc(client, { session, method: 'ping' });
        assert.equal(r.status, 200);
        assert.equal(r.headers['x-relay-region'], 'sha');
        await r.text();
      }
      await client.close();

      await relay.stop();
      relay = await startRelay(config);
      client = await openClient(SUITE[0], { relay });
      const id = nextId;
      await assertSessionNotFound(await rpc(client, { session, method: 'ping' }), id);
      await client.close();
    } finally {
      await relay.stop();
    }
  });
});
