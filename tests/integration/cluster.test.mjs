// Shared state through a real redis-server (cluster.redis_url): three
// gateways in front of one mock enforce one rpm bucket, one concurrency limit
// and one budget per key; a replica that dies frees its slots when its leases
// expire; Redis going away is handled per cluster.on_redis_failure without a
// caller left hanging, and its return makes the limits global again.
//
// Leases are shortened to 2 s (KIMI_RELAY_LEASE_MS) so that expiry and
// renewal can be observed in a test.

import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';

import { resetMocks } from '../lib/fixtures.mjs';
import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';
import {
  chatRequest,
  postChat,
  readOpenAiError,
  relayConfig,
  sha256Hex,
  startMock,
  startRelay,
  waitFor,
} from '../lib/harness.mjs';
import { startRecordingMcp } from '../lib/mcp_recorder.mjs';
import { startRedis } from '../lib/redis.mjs';

const UPSTREAM_KEY = 'sk-cluster-upstream-secret-4f6a8c0e2b4d6f8a0c2e';
const REDIS_PASSWORD = 'redis-pass-9d1f3b5e7a9c1e3b5d7f';
const keyOf = (name) => `kr-test-cluster-${name}-2a4c6e8b0d2f4a6c8e0b`;
const LEASE_MS = 2000;
const RELAY_ENV = { KIMI_RELAY_LEASE_MS: String(LEASE_MS) };

const KEYS = {
  burst: { limits: { rpm: 6, rpm_burst: 300 } },
  conc: { limits: { concurrency: 3 } },
  spender: { budget: { usd: 0.005, period: 'total' } },
  tokens: { limits: { tpm: 6, tpm_burst: 1000 } },
  small: { limits: { rpm: 6, rpm_burst: 5 } },
  free: {},
  outage: { budget: { usd: 0.005, period: 'total' } },
};
const ADMIN_KEY = 'kr-admin-cluster-test-5e7a9c1e3b5d7f9a1c3e5b7d';

const env = { relays: [] };

function clusterConfig(redisUrl, { onFailure = 'local', timeoutMs = 50, mcp } = {}) {
  return relayConfig({
    ...(mcp ? { mcp } : {}),
    keys: Object.entries(KEYS).map(([name, more]) => ({ name, key: keyOf(name), ...more })),
    upstreams: [
      {
        name: 'upstream',
        url: env.mock.url,
        apiKey: UPSTREAM_KEY,
        models: { 'kimi-k2': 'kimi-k2', 'm-priced': 'm-priced' },
      },
    ],
    prices: [{ model: 'm-priced', input: 0, output: 100 }],
    cluster: { redis_url: redisUrl, redis_timeout_ms: timeoutMs, on_redis_failure: onFailure },
    admin: { key_sha256: sha256Hex(ADMIN_KEY) },
  });
}

async function startCluster(n, options) {
  const relays = [];
  for (let i = 0; i < n; i += 1) relays.push(await startRelay(clusterConfig(env.redis.url, options), { env: RELAY_ENV }));
  env.relays.push(...relays);
  // Every worker connected before the test counts anything.
  for (const r of relays) {
    await waitFor(async () => metricSum(await scrapeMetrics(r), 'kimi_relay_redis_up') === 1, {
      timeoutMs: 5000,
      what: 'redis_up',
    });
  }
  return relays;
}

function chat(relay, keyName, body = {}, headers = {}) {
  return postChat(relay, chatRequest(body), { key: keyOf(keyName), headers });
}

// Runs `total` requests from `make(i)` with at most `parallel` in flight;
// resolves to their statuses (and bodies of the refused ones).
async function run(total, parallel, make) {
  const results = new Array(total);
  let next = 0;
  async function lane() {
    while (next < total) {
      const i = next;
      next += 1;
      const res = await make(i);
      const text = await res.text();
      results[i] = { status: res.status, text, headers: res.headers };
    }
  }
  await Promise.all(Array.from({ length: parallel }, lane));
  return results;
}

before(async () => {
  env.mock = await startMock({ name: 'upstream', apiKey: UPSTREAM_KEY });
  env.redis = await startRedis({ password: REDIS_PASSWORD });
});
after(async () => {
  await Promise.all(env.relays.map((r) => r.stop()));
  await env.mock.stop();
  await env.redis.stop();
});

describe('three replicas share one set of limits', () => {
  before(async () => {
    // A generous call deadline: on a loaded machine (a sanitizer build beside
    // other suites) 50 ms is missed now and then, and the documented local
    // fallback would then admit on a replica's own state; the tests below
    // measure the sharing, and assert that no fallback happened.
    env.three = await startCluster(3, { timeoutMs: 1000 });
  });
  beforeEach(async () => {
    await resetMocks({ upstream: env.mock });
  });

  test('rpm: 900 requests across 3 replicas admit what one bucket of 300 allows (within 1 %)', async () => {
    const started = Date.now();
    const results = await run(900, 60, (i) => chat(env.three[i % 3], 'burst'));
    const seconds = (Date.now() - started) / 1000;
    const admitted = results.filter((r) => r.status === 200).length;
    const refused = results.filter((r) => r.status === 429);
    assert.equal(admitted + refused.length, 900, 'every request answered 200 or 429');
    for (const r of env.three) {
      assert.equal(metricSum(await scrapeMetrics(r), 'kimi_relay_redis_fallbacks_total'), 0, 'no call fell back');
    }
    // The bucket holds 300 and refills 6 per minute.
    const allowed = 300 + Math.floor((seconds * 6) / 60);
    assert.ok(admitted <= allowed, `admitted ${admitted} > allowed ${allowed}`);
    assert.ok(admitted >= Math.floor(allowed * 0.99), `admitted ${admitted} < 99 % of ${allowed}`);
    const body = JSON.parse(refused[0].text);
    assert.equal(body.error.code, 'rate_limit_exceeded');
    assert.match(body.error.message, /key 'burst' on requests per min \(RPM\): Limit 300/);
    const retryMs = Number(refused[0].headers.get('retry-after-ms'));
    assert.ok(retryMs > 0 && retryMs <= 10_000, `retry-after-ms ${retryMs}`);
    assert.equal(refused[0].headers.get('x-ratelimit-limit-requests'), '300');
    assert.equal(refused[0].headers.get('x-ratelimit-remaining-requests'), '0');
  });

  test('tpm: a reservation on one replica is seen by the others, and its settlement refunds them all', async () => {
    // A stream on replica 0 reserves its prompt + max_tokens 600 of the 1000.
    const held = await chat(env.three[0], 'tokens', { stream: true, max_tokens: 600 }, {
      'x-mock-chunks': '5',
      'x-mock-chunk-delay-ms': '100',
    });
    assert.equal(held.status, 200);
    // Replica 1 cannot reserve another 500 meanwhile.
    const refused = await chat(env.three[1], 'tokens', { max_tokens: 500 });
    const err = await readOpenAiError(refused, assert);
    assert.equal(refused.status, 429);
    assert.equal(err.type, 'tokens');
    assert.match(err.message, /key 'tokens' on tokens per min \(TPM\): Limit 1000/);
    // The stream ends having used a few tokens: the rest comes back for everyone.
    await held.text();
    await waitFor(async () => (await chat(env.three[2], 'tokens', { max_tokens: 900 })).status === 200, {
      what: 'the settlement refund to reach replica 2',
    });
  });

  test('concurrency: 3 slots for the key across every replica; freed when the requests end', async () => {
    const slow = { 'x-mock-chunks': '10', 'x-mock-chunk-delay-ms': '100' };
    const results = await run(9, 9, (i) => chat(env.three[i % 3], 'conc', { stream: true }, slow));
    const ok = results.filter((r) => r.status === 200).length;
    const refused = results.filter((r) => r.status === 429);
    assert.equal(ok, 3, `exactly 3 in flight at once: ${results.map((r) => r.status)}`);
    assert.equal(refused.length, 6);
    assert.match(JSON.parse(refused[0].text).error.message, /Too many concurrent requests for key 'conc': Limit 3/);
    // All ended: their slots are free on every replica.
    const again = await run(3, 3, (i) => chat(env.three[i], 'conc'));
    assert.deepEqual(again.map((r) => r.status), [200, 200, 200]);
  });

  test('budget: spend on one replica is spent on all, and parallel requests cannot overshoot it', async () => {
    // $0.005 at $100 per million output tokens = 50 tokens. Each request may
    // produce 10 and does.
    const results = await run(12, 12, (i) =>
      chat(env.three[i % 3], 'spender', { model: 'm-priced', max_tokens: 10 }, { 'x-mock-chunks': '10' }),
    );
    const ok = results.filter((r) => r.status === 200).length;
    assert.equal(ok, 5, `5 requests of 10 tokens fit $0.005: ${results.map((r) => r.status)}`);
    for (const r of results.filter((x) => x.status === 429)) {
      assert.equal(JSON.parse(r.text).error.code, 'insufficient_quota');
    }
    // Spent: every replica refuses, with the shared figure.
    for (const relay of env.three) {
      const res = await chat(relay, 'spender', { model: 'm-priced', max_tokens: 1 });
      const err = await readOpenAiError(res, assert);
      assert.equal(res.status, 429);
      assert.match(err.message, /key 'spender' has \$0\.00 left of its total budget of \$0\.005/);
    }
    const [shared] = await env.redis.command('HMGET', 'kr:{spender}:b:0', 'su');
    assert.equal(Number(shared), 5_000_000, 'nano-dollars spent in Redis');
  });

  test('a replica that dies holding slots frees them when its leases expire; a running request keeps its lease', async () => {
    const doomed = await startRelay(clusterConfig(env.redis.url), { env: RELAY_ENV });
    await waitFor(async () => metricSum(await scrapeMetrics(doomed), 'kimi_relay_redis_up') === 1, { what: 'redis_up' });
    // Three streams that would run for 4 s (twice the lease) take the key's slots.
    const slow = { 'x-mock-chunks': '40', 'x-mock-chunk-delay-ms': '100' };
    const held = [0, 1, 2].map(() => chat(doomed, 'conc', { stream: true }, slow));
    const heads = await Promise.all(held);
    assert.deepEqual(heads.map((r) => r.status), [200, 200, 200]);
    // Renewed past one lease: still held.
    await new Promise((r) => setTimeout(r, LEASE_MS + 500));
    assert.equal((await chat(env.three[0], 'conc')).status, 429, 'renewed leases keep the slots');
    doomed.process.kill('SIGKILL');
    await doomed.exitStatus;
    const killedAt = Date.now();
    await waitFor(async () => (await chat(env.three[1], 'conc')).status === 200, {
      timeoutMs: LEASE_MS + 2000,
      intervalMs: 100,
      what: 'slots of the dead replica to expire',
    });
    assert.ok(Date.now() - killedAt <= LEASE_MS + 1500, 'freed within about one lease');
    for (const h of heads) h.body?.cancel().catch(() => {});
  });
});

describe('Redis down and back', () => {
  test('on_redis_failure: local — no caller hangs, each replica decides alone, then limits are shared again', async () => {
    const relays = await startCluster(2);
    await env.redis.kill();
    // Requests keep being answered promptly on this replica's own state.
    const t0 = Date.now();
    const during = await run(20, 5, (i) => chat(relays[i % 2], 'free'));
    assert.ok(during.every((r) => r.status === 200), during.map((r) => r.status).join());
    assert.ok(Date.now() - t0 < 5000, `answered in ${Date.now() - t0} ms`);
    const m = await scrapeMetrics(relays[0]);
    assert.equal(metricSum(m, 'kimi_relay_redis_up'), 0);
    assert.ok(metricSum(m, 'kimi_relay_redis_fallbacks_total', { mode: 'local' }) > 0);
    assert.match(relays[0].logs(), /shared state: lost redis:\/\/127\.0\.0\.1:\d+\/0/);
    assert.doesNotMatch(relays[0].logs(), new RegExp(REDIS_PASSWORD));

    // Back: within seconds every worker reconnects and the bucket is shared again.
    await env.redis.restart();
    for (const r of relays) {
      await waitFor(async () => metricSum(await scrapeMetrics(r), 'kimi_relay_redis_up') === 1, {
        timeoutMs: 5000,
        what: 'reconnect',
      });
    }
    const statuses = (await run(10, 1, (i) => chat(relays[i % 2], 'small'))).map((r) => r.status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429, 429, 429, 429, 429], 'one bucket of 5 again');
  });

  test('budgets through an outage: replicas start from the shared spend, and what they spend alone reaches Redis when it is back', async () => {
    await env.redis.command('FLUSHALL');
    const [a, b] = await startCluster(2);
    const spendOn = (relay) =>
      chat(relay, 'outage', { model: 'm-priced', max_tokens: 10 }, { 'x-mock-chunks': '10' });
    // $0.001 per request; $0.005 in all.
    for (let i = 0; i < 3; i += 1) assert.equal((await spendOn(a)).status, 200);
    // Replica b learns the shared spend without serving the key.
    const spentSeenBy = async (relay) => {
      const res = await fetch(`${relay.adminUrl}/admin/keys/outage`, {
        headers: { authorization: `Bearer ${ADMIN_KEY}` },
      });
      return (await res.json()).usage.spent_usd;
    };
    await waitFor(async () => Math.abs((await spentSeenBy(b)) - 0.003) < 1e-9, {
      timeoutMs: 6000,
      intervalMs: 200,
      what: "replica b to see a's spend",
    });
    await env.redis.kill();
    // Alone, b allows only what is left of the shared budget.
    const alone = [];
    for (let i = 0; i < 4; i += 1) alone.push((await spendOn(b)).status);
    assert.deepEqual(alone, [200, 200, 429, 429]);
    // Redis returns empty (no persistence here): the replay of b's $0.002 and
    // the spend each replica knows put the whole $0.005 back.
    await env.redis.restart();
    for (const r of [a, b]) {
      await waitFor(async () => metricSum(await scrapeMetrics(r), 'kimi_relay_redis_up') === 1, {
        timeoutMs: 5000,
        what: 'reconnect',
      });
    }
    await waitFor(async () => Number((await env.redis.command('HGET', 'kr:{outage}:b:0', 'su')) ?? 0) === 5_000_000, {
      what: 'the shared spend to be $0.005 again',
    });
    for (const r of [a, b]) assert.equal((await spendOn(r)).status, 429, 'the budget is spent everywhere');
    const m = await scrapeMetrics(b);
    assert.equal(metricSum(m, 'kimi_relay_redis_settlements_queued'), 0);
  });

  test('on_redis_failure: reject — 503 naming the shared state store, at once', async () => {
    const [relay] = await startCluster(1, { onFailure: 'reject' });
    await env.redis.kill();
    const t0 = Date.now();
    const res = await chat(relay, 'conc');
    const err = await readOpenAiError(res, assert);
    assert.equal(res.status, 503);
    assert.equal(err.code, 'shared_state_unavailable');
    assert.match(err.message, /shared rate-limit and budget store \(Redis at redis:\/\/127\.0\.0\.1:\d+\/0\) is unreachable/);
    assert.doesNotMatch(err.message, new RegExp(REDIS_PASSWORD));
    assert.equal(res.headers.get('retry-after'), '1');
    assert.ok(Date.now() - t0 < 1000, 'not made to wait for a timeout');
    const m = await scrapeMetrics(relay);
    assert.ok(metricSum(m, 'kimi_relay_redis_fallbacks_total', { mode: 'reject' }) >= 1);
    assert.ok(metricSum(m, 'kimi_relay_rate_limit_refusals_total', { reason: 'shared_state' }) >= 1);
    await env.redis.restart();
    await waitFor(async () => metricSum(await scrapeMetrics(relay), 'kimi_relay_redis_up') === 1, {
      timeoutMs: 5000,
      what: 'reconnect',
    });
    assert.equal((await chat(relay, 'conc')).status, 200);
  });
});

describe('runtime keys and MCP sessions across replicas', () => {
  before(async () => {
    env.rec = await startRecordingMcp({ name: 'rec' });
    const mcp = {
      servers: [{ name: 'rec', url: env.rec.url }],
      session_secret: 'cluster-test-session-secret-0123456789abcdef',
    };
    env.pair = [];
    for (let i = 0; i < 2; i += 1) {
      const relay = await startRelay(clusterConfig(env.redis.url, { mcp }), { env: RELAY_ENV });
      env.relays.push(relay);
      env.pair.push(relay);
      await waitFor(async () => metricSum(await scrapeMetrics(relay), 'kimi_relay_redis_up') === 1, { what: 'redis_up' });
    }
  });
  after(async () => env.rec?.close());

  async function adminCall(relay, method, path, body) {
    const res = await fetch(`${relay.adminUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null, text };
  }
  const chatWith = async (relay, secret) => {
    const res = await postChat(relay, chatRequest(), { key: secret });
    await res.text();
    return res.status;
  };

  test('a key created on one replica works on the other within seconds; a revocation there reaches the first', async () => {
    const [a, b] = env.pair;
    const created = await adminCall(a, 'POST', '/admin/keys', { name: 'roaming', limits: { rpm: 600 } });
    assert.equal(created.status, 201, created.text);
    const secret = created.body.key;
    assert.equal(await chatWith(a, secret), 200);
    await waitFor(async () => (await chatWith(b, secret)) === 200, { timeoutMs: 5000, intervalMs: 100, what: 'the key on replica b' });
    const stored = await env.redis.command('HGET', 'kr:keys', 'roaming');
    assert.ok(stored && !stored.includes(secret), 'Redis holds the digest, never the secret');
    const revoked = await adminCall(b, 'DELETE', '/admin/keys/roaming');
    assert.equal(revoked.status, 200, revoked.text);
    await waitFor(async () => (await chatWith(a, secret)) === 401, { timeoutMs: 5000, intervalMs: 100, what: 'the revocation on replica a' });
    // The log line may reach the pipe just after the first 401 is answered.
    await waitFor(async () => /runtime keys: 'roaming' changed on another replica/.test(a.logs()),
      { timeoutMs: 5000, intervalMs: 50, what: 'replica a logging the change' });
  });

  test('an MCP session made through one replica is served by the other (same session_secret)', async () => {
    const [a, b] = env.pair;
    const headers = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${keyOf('free')}`,
    };
    const init = await fetch(`${a.url}/v1/mcp/rec`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        jsonrpc: '2.0', id: 1, method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'cluster-test', version: '1' } },
      }),
    });
    assert.equal(init.status, 200);
    await init.text();
    const session = init.headers.get('mcp-session-id');
    assert.ok(session);
    const call = await fetch(`${b.url}/v1/mcp/rec`, {
      method: 'POST',
      headers: { ...headers, 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'whoami', arguments: {} } }),
    });
    const text = await call.text();
    assert.equal(call.status, 200, text);
    assert.match(text, /rec/);
    // The server saw one session throughout.
    assert.equal(env.rec.sessions.size, 1);
  });
});
