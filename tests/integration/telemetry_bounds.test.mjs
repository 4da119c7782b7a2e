// What the gateway's telemetry may reveal (docs/metrics.md): label values come
// only from the config or fixed sets (X-Node-Id only for configured ids, never
// a model name a caller made up); /metrics on the main port answers the admin
// key only and is otherwise indistinguishable from an unknown URL; every access
// log line is JSON with the documented fields; and no secret (caller key,
// upstream key, admin key, any Authorization value, or a key's digest) reaches
// the access log, the gateway's own output or the exposition.
//
// The tests run in order: the last one searches everything the earlier ones
// made the gateway write.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { parseAccessLog, waitForAccessLines } from '../lib/access_log.mjs';
import { ALL_MODELS, KEYS, UPSTREAM_KEYS, useTopology } from '../lib/fixtures.mjs';
import { chatRequest, collectSse, postChat, sha256Hex, startRelay, waitFor } from '../lib/harness.mjs';
import { metricSum, parseMetrics, scrapeMetrics } from '../lib/metrics.mjs';
import { metricDelta as delta } from '../lib/metrics_delta.mjs';

const logDir = mkdtempSync(join(tmpdir(), 'kimi-relay-telemetry-bounds-'));
const ACCESS_LOG = join(logDir, 'access.log');
after(() => rmSync(logDir, { recursive: true, force: true }));

const ADMIN_KEY = 'kr-admin-telemetry-secret-5e1a9c3f7b2d4e6a8c0f';
// Credentials a caller might send that the gateway does not accept.
const WRONG_KEY = 'kr-wrong-caller-secret-0a2c4e6f8b1d3f5a7c9e';
const BASIC_AUTH = `Basic ${Buffer.from('someone:basic-password-secret-91c3e5a7').toString('base64')}`;
const NODE_IDS = ['edge-a', 'edge-b'];

const env = useTopology({
  server: { metrics_on_main: true },
  extra: {
    admin: { key_sha256: sha256Hex(ADMIN_KEY) },
    prices: [
      { model: 'kimi-agent-swarm', input: 1, cached_input: 0.25, output: 4 },
      { model: 'moonshot-v1-8k', input: 0.2, output: 2 },
    ],
    // debug: the gateway's own log as talkative as it gets, for the secret search.
    log: { level: 'debug', access_log: ACCESS_LOG },
    metrics: { node_ids: NODE_IDS },
  },
});

// The mock's x-mock-* usage headers (src/mock/chat.cpp).
const usageHeaders = (prompt, cached, chunks) => ({
  'x-mock-prompt-tokens': String(prompt),
  'x-mock-cached-tokens': String(cached),
  'x-mock-chunks': String(chunks),
});

// Every request id the gateway returned in this file, for the final search.
const sentIds = [];
function remember(res) {
  const id = res.headers.get('x-request-id');
  if (id) sentIds.push(id);
  return id;
}

async function exposition(url, headers = {}) {
  const res = await fetch(`${url}/metrics`, { headers });
  const text = await res.text();
  assert.equal(res.status, 200, `GET ${url}/metrics -> ${res.status}: ${text}`);
  return text;
}

async function settledScrape(beforeSamples, count) {
  let samples;
  await waitFor(
    async () => {
      samples = await scrapeMetrics(env.relay);
      const total = (list) => metricSum(list, 'kimi_relay_requests_total');
      return total(samples) - total(beforeSamples) >= count;
    },
    { timeoutMs: 3000, what: `${count} more requests in kimi_relay_requests_total` },
  );
  return samples;
}

// ---------------------------------------------------------------------------

describe('label values are bounded by the config', () => {
  test('X-Node-Id becomes the node label only for configured ids, else "other" (none without it)', async () => {
    const beforeSamples = await scrapeMetrics(env.relay);
    const nodes = ['edge-a', 'edge-b', 'edge-a-but-not', 'rogue-node-7f3c9', undefined];
    const ids = [];
    for (const node of nodes) {
      const res = await postChat(env.relay, chatRequest({ model: 'kimi-agent-swarm' }), {
        key: KEYS.full,
        headers: { 'x-mock-prompt-tokens': '1000', 'x-mock-chunks': '2', ...(node ? { 'x-node-id': node } : {}) },
      });
      assert.equal(res.status, 200, await res.text());
      ids.push(remember(res));
    }
    const afterSamples = await settledScrape(beforeSamples, nodes.length);
    const series = 'full|kimi-agent-swarm|holysheep|200';
    const byNode = ['key', 'model', 'upstream', 'code', 'node'];
    assert.deepEqual(delta(afterSamples, beforeSamples, 'kimi_relay_requests_total', byNode), {
      [`${series}|edge-a`]: 1,
      [`${series}|edge-b`]: 1,
      [`${series}|other`]: 2,
      [`${series}|none`]: 1,
    });
    assert.deepEqual(delta(afterSamples, beforeSamples, 'kimi_relay_tokens_total', ['direction', 'node']), {
      'input|edge-a': 1000,
      'input|edge-b': 1000,
      'input|other': 2000,
      'input|none': 1000,
      'output|edge-a': 2,
      'output|edge-b': 2,
      'output|other': 4,
      'output|none': 2,
    });
    const cost = delta(afterSamples, beforeSamples, 'kimi_relay_cost_usd_total', ['node']);
    const one = (1000 * 1 + 2 * 4) / 1e6;
    assert.deepEqual(Object.keys(cost).sort(), ['edge-a', 'edge-b', 'none', 'other']);
    for (const [node, n] of [['edge-a', 1], ['edge-b', 1], ['other', 2], ['none', 1]]) {
      assert.ok(Math.abs(cost[node] - n * one) < 1e-9, `cost for node ${node}: ${cost[node]}`);
    }
    // Latency per swarm node: the duration histogram counts each request under its node.
    assert.deepEqual(
      delta(afterSamples, beforeSamples, 'kimi_relay_request_duration_seconds_count', ['model', 'node']),
      { 'kimi-agent-swarm|edge-a': 1, 'kimi-agent-swarm|edge-b': 1, 'kimi-agent-swarm|other': 2, 'kimi-agent-swarm|none': 1 },
    );
    const text = await exposition(env.relay.adminUrl);
    for (const quantile of ['0.5', '0.95', '0.99']) {
      assert.match(
        text,
        new RegExp(`kimi_relay_request_duration_window_seconds\\{model="kimi-agent-swarm",node="edge-a",quantile="${quantile}"\\} [0-9.e-]+`),
        `p${quantile} for node edge-a`,
      );
    }
    for (const value of ['edge-a-but-not', 'rogue-node-7f3c9']) {
      assert.ok(!text.includes(value), `the unlisted node id ${value} appears in /metrics`);
    }
    const lines = await waitForAccessLines(ACCESS_LOG, ids);
    assert.deepEqual(
      ids.map((id) => lines.get(id).node),
      ['edge-a', 'edge-b', 'other', 'other', null],
      'the access log carries the bounded node label too',
    );
  });

  test('a model nobody serves is counted as model="none" and never appears in /metrics', async () => {
    const beforeSamples = await scrapeMetrics(env.relay);
    const invented = 'gpt-imaginary-zq81';
    for (const stream of [false, true]) {
      const res = await postChat(env.relay, chatRequest({ model: invented, stream }), { key: KEYS.full });
      assert.equal(res.status, 404, 'unknown model');
      remember(res);
      await res.arrayBuffer();
    }
    const afterSamples = await settledScrape(beforeSamples, 2);
    const byRequest = ['key', 'model', 'upstream', 'code'];
    assert.deepEqual(delta(afterSamples, beforeSamples, 'kimi_relay_requests_total', byRequest), {
      'full|none|none|404': 2,
    });
    const text = await exposition(env.relay.adminUrl);
    assert.ok(!text.includes(invented), `${invented} appears in /metrics`);
  });

  test('every label value in the exposition comes from the config or a documented fixed set', async () => {
    const allowed = {
      key: ['full', 'limited', 'none'],
      model: [...ALL_MODELS, 'none'],
      upstream: ['holysheep', 'moonshot', 'none'],
      region: ['none'],  // upstreams[].region (none configured here)
      node: [...NODE_IDS, 'other', 'none'],
      direction: ['input', 'cached', 'output'],
      kind: ['upstream', 'model'],
      outcome: ['success', 'failure'],
      server: ['none'],
      reason: [
        'connect_error', 'timeout', 'rate_limited', 'server_error', 'reset', 'other',
        'consecutive_failures', 'active_check', 'credential_refused',
        'requests', 'tokens', 'concurrency', 'budget', 'upstream_capacity', 'retry_budget', 'shared_state',
      ],
      limit: [
        'max_header_bytes', 'max_request_bytes', 'max_connection_body_bytes', 'header_timeout',
        'body_timeout', 'idle_timeout', 'write_stall', 'max_connections', 'max_connections_per_ip',
        'http2_flood', 'http2_protocol_error', 'upstream_max_response_bytes', 'sse_event_bytes',
        'access_log_dropped', 'event_subscribers', 'events_dropped',
      ],
      method: [
        'initialize', 'ping', 'tools/list', 'tools/call', 'resources/list', 'resources/read',
        'resources/templates/list', 'resources/subscribe', 'resources/unsubscribe', 'prompts/list',
        'prompts/get', 'completion/complete', 'logging/setLevel', 'notification', 'response', 'batch',
        'stream_open', 'session_delete', 'other',
      ],
    };
    const samples = parseMetrics(await exposition(env.relay.adminUrl));
    assert.ok(samples.length > 0);
    for (const s of samples) {
      assert.match(s.name, /^kimi_relay_/, `a metric outside the kimi_relay_ namespace: ${s.name}`);
      for (const [label, value] of Object.entries(s.labels)) {
        if (label === 'le' || label === 'quantile') continue;
        if (label === 'code') {
          assert.match(value, /^(\d{3}|none)$/, `${s.name}{code="${value}"}`);
          continue;
        }
        assert.ok(allowed[label], `${s.name} has an undocumented label ${label}="${value}"`);
        assert.ok(allowed[label].includes(value), `${s.name}{${label}="${value}"}: not from the config or docs`);
      }
    }
  });
});

describe('/metrics on the main port (server.metrics_on_main)', () => {
  // The 404 a caller gets for a URL that does not exist, with the path masked.
  async function notFoundShape(url, path, headers = {}) {
    const res = await fetch(`${url}${path}`, { headers });
    const text = await res.text();
    return { status: res.status, contentType: res.headers.get('content-type'), body: text.split(path).join('/PATH') };
  }

  test('answers the admin key (Bearer or x-api-key) with the exposition', async () => {
    for (const headers of [{ authorization: `Bearer ${ADMIN_KEY}` }, { 'x-api-key': ADMIN_KEY }]) {
      const res = await fetch(`${env.relay.url}/metrics`, { headers });
      const text = await res.text();
      assert.equal(res.status, 200, `${Object.keys(headers)[0]}: ${text}`);
      assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
      assert.match(text, /^# TYPE kimi_relay_requests_total counter$/m);
      assert.ok(parseMetrics(text).length > 0);
    }
  });

  test('without the admin key it is a 404 like any unknown URL', async () => {
    const unknown = await notFoundShape(env.relay.url, '/no-such-page-3b7d');
    assert.equal(unknown.status, 404);
    for (const [what, headers] of [
      ['no credentials', {}],
      ['a caller key', { authorization: `Bearer ${KEYS.full}` }],
      ['a wrong key', { authorization: `Bearer ${WRONG_KEY}` }],
      ['Basic auth', { authorization: BASIC_AUTH }],
      ['the admin key digest', { authorization: `Bearer ${sha256Hex(ADMIN_KEY)}` }],
    ]) {
      assert.deepEqual(await notFoundShape(env.relay.url, '/metrics', headers), unknown, `/metrics with ${what}`);
    }
  });

  test('a gateway without metrics_on_main answers 404 even to the admin key', async () => {
    const { log: _log, ...rest } = env.config;
    const relay = await startRelay({ ...rest, server: { ...env.config.server, metrics_on_main: false } });
    try {
      const unknown = await notFoundShape(relay.url, '/no-such-page-3b7d');
      const got = await notFoundShape(relay.url, '/metrics', { authorization: `Bearer ${ADMIN_KEY}` });
      assert.deepEqual(got, unknown);
      await exposition(relay.adminUrl);
    } finally {
      await relay.stop();
    }
  });
});

describe('the access log', () => {
  // Requests of several outcomes; `expect` is what their log line must say.
  const cases = [
    {
      what: 'a stream with usage',
      send: () =>
        postChat(
          env.relay,
          chatRequest({ model: 'kimi-agent-swarm', stream: true, stream_options: { include_usage: true } }),
          {
            key: KEYS.full,
            headers: { ...usageHeaders(2000, 500, 3), 'x-node-id': 'edge-b' },
          },
        ),
      expect: {
        status: 200,
        key: 'full',
        model: 'kimi-agent-swarm',
        upstream: 'holysheep',
        node: 'edge-b',
        stream: true,
        prompt_tokens: 2000,
        cached_tokens: 500,
        completion_tokens: 3,
        cost_usd: (1500 * 1 + 500 * 0.25 + 3 * 4) / 1e6,
        error_code: null,
      },
    },
    {
      what: 'a model the key may not use (key in x-api-key)',
      send: () =>
        postChat(env.relay, chatRequest({ model: 'moonshot-v1-8k' }), { headers: { 'x-api-key': KEYS.limited } }),
      expect: { key: 'limited', upstream: null, attempts: 0, stream: false, completion_tokens: 0, cost_usd: 0 },
    },
    {
      what: 'a whole answer from moonshot',
      send: () =>
        postChat(env.relay, chatRequest({ model: 'moonshot-v1-8k' }), {
          headers: { 'x-api-key': KEYS.full, ...usageHeaders(300, 100, 4) },
        }),
      expect: {
        status: 200,
        key: 'full',
        model: 'moonshot-v1-8k',
        upstream: 'moonshot',
        node: null,
        stream: false,
        prompt_tokens: 300,
        cached_tokens: 100,
        completion_tokens: 4,
        cost_usd: (300 * 0.2 + 4 * 2) / 1e6, // cached tokens at the input price
        error_code: null,
        ttft_ms: null,
      },
    },
    {
      what: 'a wrong key',
      send: () => postChat(env.relay, chatRequest(), { key: WRONG_KEY }),
      expect: { status: 401, key: null, upstream: null, error_code: 'invalid_api_key', attempts: 0, cost_usd: 0 },
    },
    {
      what: "an upstream's key used as a caller key",
      send: () => postChat(env.relay, chatRequest(), { key: UPSTREAM_KEYS.moonshot }),
      expect: { status: 401, key: null, upstream: null, error_code: 'invalid_api_key', attempts: 0 },
    },
    {
      what: 'Basic auth',
      send: () => postChat(env.relay, chatRequest(), { headers: { authorization: BASIC_AUTH } }),
      expect: { status: 401, key: null, upstream: null, attempts: 0 },
    },
    {
      what: 'no key',
      send: () => postChat(env.relay, chatRequest()),
      expect: { status: 401, key: null, upstream: null, attempts: 0 },
    },
    {
      what: 'an error from the upstream',
      send: () =>
        postChat(env.relay, chatRequest({ model: 'kimi-agent-swarm' }), {
          key: KEYS.full,
          headers: { 'x-mock-fault': 'status=429;error_type=insufficient_quota' },
        }),
      // (Which upstream it is counted against is telemetry.test.mjs's concern.)
      expect: { status: 429, key: 'full', model: 'kimi-agent-swarm', attempts: 1, error_code: 'insufficient_quota' },
    },
  ];
  const seen = [];

  test('every line is JSON with the documented fields and types', async () => {
    for (const c of cases) {
      const res = await c.send();
      const id = remember(res);
      const text = await res.text();
      let code;
      if (res.status >= 400) code = JSON.parse(text).error?.code ?? null;
      seen.push({ c, id, status: res.status, code });
    }
    await waitForAccessLines(ACCESS_LOG, seen.map((s) => s.id));
    const entries = parseAccessLog(ACCESS_LOG);
    assert.ok(entries.length >= seen.length);
    const isType = (v, t) => (t === 'null' ? v === null : t === 'int' ? Number.isInteger(v) : typeof v === t);
    const oneOf = (v, types) => types.some((t) => isType(v, t));
    const FIELDS = {
      time: ['string'], request_id: ['string'], key: ['string', 'null'], model: ['string', 'null'],
      upstream: ['string', 'null'], region: ['string', 'null'], node: ['string', 'null'], status: ['int'], attempts: ['int'],
      duration_ms: ['number'], ttft_ms: ['number', 'null'], upstream_ms: ['number', 'null'],
      prompt_tokens: ['int'], cached_tokens: ['int'], completion_tokens: ['int'], usage_estimated: ['boolean'],
      cost_usd: ['number'], priced: ['boolean'], error_code: ['string', 'null'], fallback_model: ['string', 'null'],
      protocol: ['string', 'null'], stream: ['boolean'],
    };
    for (const e of entries) {
      for (const [field, types] of Object.entries(FIELDS)) {
        assert.ok(field in e, `field ${field} missing: ${JSON.stringify(e)}`);
        const got = JSON.stringify(e[field]);
        assert.ok(oneOf(e[field], types), `${field} is ${got}, not ${types.join('/')}: ${JSON.stringify(e)}`);
      }
      assert.match(e.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'RFC 3339 UTC with milliseconds');
      assert.ok(Math.abs(Date.parse(e.time) - Date.now()) < 120_000, `time ${e.time} is not now`);
      assert.ok(e.duration_ms >= 0 && e.cost_usd >= 0 && e.attempts >= 0);
      assert.ok(e.cached_tokens <= e.prompt_tokens, JSON.stringify(e));
      if (e.ttft_ms !== null) assert.ok(e.ttft_ms <= e.duration_ms, `ttft_ms > duration_ms: ${JSON.stringify(e)}`);
      assert.ok(!('cost' in e) && !('currency' in e), 'no display-currency fields when the currency is USD');
    }
  });

  test('each request is logged with its status, names, usage, cost and error code', async () => {
    const lines = await waitForAccessLines(ACCESS_LOG, seen.map((s) => s.id));
    for (const { c, id, status, code } of seen) {
      const line = lines.get(id);
      const what = `${c.what} (${id}): ${JSON.stringify(line)}`;
      assert.equal(line.status, status, what);
      for (const [field, want] of Object.entries(c.expect)) {
        if (field === 'cost_usd') assert.ok(Math.abs(line.cost_usd - want) < 1e-12, `cost_usd: ${what}`);
        else assert.deepEqual(line[field], want, `${field}: ${what}`);
      }
      if (status >= 400) {
        // OpenAI's code is null for some errors (a missing key); when the
        // caller got one, the log has the same.
        if (code !== null) assert.equal(line.error_code, code, `the error code the caller got: ${what}`);
      } else {
        assert.equal(line.error_code, null, what);
      }
      if (c.expect.stream) assert.equal(typeof line.ttft_ms, 'number', what);
    }
  });

  test('the model field is the model the caller asked for, even one nobody serves', async () => {
    const res = await postChat(env.relay, chatRequest({ model: 'kimi-k9-nonexistent' }), { key: KEYS.full });
    const id = remember(res);
    assert.equal(res.status, 404);
    await res.arrayBuffer();
    const line = (await waitForAccessLines(ACCESS_LOG, [id])).get(id);
    assert.equal(line.error_code, 'model_not_found');
    const why = `docs/metrics.md: model = "the model the caller asked for": ${JSON.stringify(line)}`;
    assert.equal(line.model, 'kimi-k9-nonexistent', why);
  });
});

describe('secrets', () => {
  test('no key, digest or Authorization value in the access log, the gateway output or /metrics', async () => {
    // A stream too, and an admin call on the admin listener, so every path wrote something.
    const res = await postChat(env.relay, chatRequest({ stream: true }), { key: KEYS.limited });
    remember(res);
    await collectSse(res);
    await (await fetch(`${env.relay.adminUrl}/healthz`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })).text();
    // Reloads write to the gateway's log: one accepted, one refused by an
    // error at an api_key value (which must not be quoted).
    const reload = () =>
      fetch(`${env.relay.adminUrl}/admin/reload`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_KEY}` },
      });
    const accepted = await reload();
    assert.equal(accepted.status, 200, await accepted.text());
    const yaml = readFileSync(env.relay.configPath, 'utf8');
    const quoted = JSON.stringify(UPSTREAM_KEYS.holysheep);
    assert.ok(yaml.includes(quoted));
    writeFileSync(env.relay.configPath, yaml.replace(quoted, `[${quoted}]`));
    let refusedBody;
    try {
      const refused = await reload();
      refusedBody = await refused.text();
      assert.equal(refused.status, 422, refusedBody);
    } finally {
      writeFileSync(env.relay.configPath, yaml);
    }
    await waitForAccessLines(ACCESS_LOG, sentIds);

    const secrets = {
      'caller key full': KEYS.full,
      'caller key limited': KEYS.limited,
      'wrong caller key': WRONG_KEY,
      'upstream key holysheep': UPSTREAM_KEYS.holysheep,
      'upstream key moonshot': UPSTREAM_KEYS.moonshot,
      'admin key': ADMIN_KEY,
      'Basic Authorization value': BASIC_AUTH.slice('Basic '.length),
      'digest of caller key full': sha256Hex(KEYS.full),
      'digest of caller key limited': sha256Hex(KEYS.limited),
      'digest of the admin key': sha256Hex(ADMIN_KEY),
    };
    const outputs = {
      'access log': readFileSync(ACCESS_LOG, 'utf8'),
      'gateway stderr/stdout': env.relay.logs(),
      '/metrics (admin listener)': await exposition(env.relay.adminUrl),
      '/metrics (main, admin key)': await exposition(env.relay.url, { authorization: `Bearer ${ADMIN_KEY}` }),
      'the refused reload answer': refusedBody,
    };
    assert.ok(outputs['access log'].split('\n').length > sentIds.length, 'the access log was written');
    const leaks = [];
    for (const [where, text] of Object.entries(outputs)) {
      for (const [what, secret] of Object.entries(secrets)) {
        // Also a leading piece, in case a value is cut before it is written.
        if (text.includes(secret) || text.includes(secret.slice(0, 20))) leaks.push(`${what} in ${where}`);
      }
    }
    assert.deepEqual(leaks, []);
  });
});
