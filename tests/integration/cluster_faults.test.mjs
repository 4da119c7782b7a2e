// Shared state (cluster.redis_url) when Redis misbehaves without going away:
// it answers later than cluster.redis_timeout_ms, it forgets its scripts
// (SCRIPT FLUSH), its hash of runtime keys is larger than one reply may
// carry; and a drain while settlements wait for a Redis that is down.

import assert from 'node:assert/strict';
import { createServer, connect } from 'node:net';
import { after, before, describe, test } from 'node:test';

import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';
import { chatRequest, postChat, relayConfig, sha256Hex, startMock, startRelay, waitFor } from '../lib/harness.mjs';
import { startRedis } from '../lib/redis.mjs';

const UPSTREAM_KEY = 'sk-cluster-faults-upstream-secret-7b9d1f3a5c7e9b1d';
const REDIS_PASSWORD = 'redis-pass-faults-3c5e7a9b1d3f5a7c9e1b';
const ADMIN_KEY = 'kr-admin-cluster-faults-8e0a2c4e6b8d0f2a4c6e';
const keyOf = (name) => `kr-test-faults-${name}-6d8f0b2d4f6a8c0e2b4d`;
const KEYS = {
  limited: { limits: { rpm: 600, rpm_burst: 600 } },
  spender: { budget: { usd: 1, period: 'total' } },
  daily: { budget: { usd: 1, period: 'day' } },
};

const env = { relays: [] };

function config(redisUrl, timeoutMs = 1000) {
  return relayConfig({
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
    cluster: { redis_url: redisUrl, redis_timeout_ms: timeoutMs, on_redis_failure: 'local' },
    admin: { key_sha256: sha256Hex(ADMIN_KEY) },
  });
}

async function start(redisUrl, { timeoutMs, leaseMs = 60_000, clockOffsetS = 0 } = {}) {
  const relay = await startRelay(config(redisUrl, timeoutMs), {
    env: { KIMI_RELAY_LEASE_MS: String(leaseMs), KIMI_RELAY_CLOCK_OFFSET_S: String(clockOffsetS) },
  });
  env.relays.push(relay);
  await waitFor(async () => metricSum(await scrapeMetrics(relay), 'kimi_relay_redis_up') === 1, {
    timeoutMs: 5000,
    what: 'redis_up',
  });
  return relay;
}

async function chatStatus(relay, secret, body = {}, headers = {}) {
  const res = await postChat(relay, chatRequest(body), { key: secret, headers });
  await res.text();
  return res.status;
}

// A TCP proxy in front of Redis whose replies can be held back `delayMs`
// (in order): a Redis that answers, but late.
async function startDelayProxy(port) {
  const sockets = new Set();
  const proxy = { delayMs: 0 };
  const server = createServer((client) => {
    const redis = connect(port, '127.0.0.1');
    sockets.add(client).add(redis);
    client.on('data', (d) => redis.write(d));
    redis.on('data', (d) => {
      if (proxy.delayMs === 0) client.write(d);
      else setTimeout(() => client.destroyed || client.write(d), proxy.delayMs);
    });
    for (const [a, b] of [[client, redis], [redis, client]]) {
      a.on('error', () => b.destroy());
      a.on('close', () => b.destroy());
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.port = server.address().port;
  proxy.close = () => {
    for (const s of sockets) s.destroy();
    server.close();
  };
  return proxy;
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

describe('a Redis that answers, but not as it should', () => {
  test('slower than redis_timeout_ms: three timeouts in a row trip the breaker, late replies do not reset it', async () => {
    const proxy = await startDelayProxy(env.redis.port);
    try {
      const url = env.redis.url.replace(`:${env.redis.port}/`, `:${proxy.port}/`);
      const relay = await start(url, { timeoutMs: 50 });
      // Each reply comes 30 ms after its call gave up: before the next call
      // gives up, the late reply of the one before arrives.
      proxy.delayMs = 80;
      const statuses = [];
      for (let i = 0; i < 12 && !/calls in a row failed/.test(relay.logs()); i += 1) {
        statuses.push(await chatStatus(relay, keyOf('limited')));
      }
      assert.ok(statuses.every((s) => s === 200), statuses.join());
      assert.match(relay.logs(), /shared state: lost redis:\/\/127\.0\.0\.1:\d+\/0: 3 calls in a row failed \(timeout\)/);
      // Two workers, a connection each: the fifth request at the latest is
      // one worker's third.
      assert.ok(statuses.length <= 5, `tripped after ${statuses.length} requests`);
      // Tripped, calls fail at once instead of each waiting for the timeout.
      const m = await scrapeMetrics(relay);
      assert.ok(metricSum(m, 'kimi_relay_redis_errors_total', { kind: 'timeout' }) >= 3);
    } finally {
      proxy.close();
    }
  });

  test('SCRIPT FLUSH while a request runs: its settlement meets NOSCRIPT, is sent again after the scripts, and its cost is charged', async () => {
    await env.redis.command('FLUSHALL');
    const relay = await start(env.redis.url);
    const spentInRedis = async () => Number((await env.redis.command('HGET', 'kr:{spender}:b:0', 'su')) ?? 0);
    const stream = () =>
      postChat(relay, chatRequest({ model: 'm-priced', max_tokens: 10, stream: true }), {
        key: keyOf('spender'),
        headers: { 'x-mock-chunks': '10', 'x-mock-chunk-delay-ms': '50' },
      });
    // One stream's cost, as Redis counts it.
    const first = await stream();
    await first.text();
    await waitFor(async () => (await spentInRedis()) > 0, { what: "the first stream's cost in Redis" });
    const cost = await spentInRedis();

    const res = await stream();
    assert.equal(res.status, 200);
    // Admitted through Redis: the running request's lease is there.
    assert.equal(await env.redis.command('ZCARD', 'kr:{spender}:l'), 1);
    await env.redis.command('SCRIPT', 'FLUSH');
    await res.text();
    await waitFor(async () => (await spentInRedis()) === 2 * cost, {
      timeoutMs: 3000,
      what: `Redis to have both streams' cost (${2 * cost} nano-USD)`,
    });
    assert.equal(await env.redis.command('ZCARD', 'kr:{spender}:l'), 0, 'the lease was settled, not left to expire');
    const m = await scrapeMetrics(relay);
    assert.ok(metricSum(m, 'kimi_relay_redis_errors_total', { kind: 'reply' }) >= 1, 'the settlement met NOSCRIPT');
  });

  test('SCRIPT FLUSH under load: every call in flight meets NOSCRIPT, which is no failure of Redis — the link stays up', async () => {
    // Replies held back 40 ms: the calls of 40 parallel requests are all in
    // flight when the first NOSCRIPT comes back.
    const proxy = await startDelayProxy(env.redis.port);
    try {
      const url = env.redis.url.replace(`:${env.redis.port}/`, `:${proxy.port}/`);
      const relay = await start(url);
      proxy.delayMs = 40;
      await env.redis.command('SCRIPT', 'FLUSH');
      const statuses = await Promise.all(Array.from({ length: 40 }, () => chatStatus(relay, keyOf('limited'))));
      assert.ok(statuses.every((s) => s === 200), statuses.join());
      const m = await scrapeMetrics(relay);
      assert.ok(metricSum(m, 'kimi_relay_redis_errors_total', { kind: 'reply' }) >= 3, 'calls met NOSCRIPT');
      assert.doesNotMatch(relay.logs(), /shared state: lost/);
    } finally {
      proxy.close();
    }
  });

  test('2,100 runtime keys (more than one reply may carry: 4,096 elements) reach another replica', async () => {
    await env.redis.command('FLUSHALL');
    const a = await start(env.redis.url);
    const b = await start(env.redis.url);
    const created = await fetch(`${a.adminUrl}/admin/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'template', limits: { rpm: 600 } }),
    });
    assert.equal(created.status, 201);
    await created.text();
    const template = JSON.parse(await env.redis.command('HGET', 'kr:keys', 'template'));
    const secretOf = (i) => `kr-bulk-${i}-0d2f4a6c8e0b2d4f6a8c0e2b`;
    const fields = [];
    for (let i = 0; i < 2100; i += 1) {
      const settings = { ...template.settings, name: `bulk-${i}`, sha256: sha256Hex(secretOf(i)) };
      fields.push(`bulk-${i}`, JSON.stringify({ ...template, settings }));
    }
    await env.redis.command('HSET', 'kr:keys', ...fields);
    await env.redis.command('INCR', 'kr:keys:version');
    assert.equal(await env.redis.command('HLEN', 'kr:keys'), 2101);
    await waitFor(async () => (await chatStatus(b, secretOf(2099))) === 200, {
      timeoutMs: 30_000,
      intervalMs: 200,
      what: 'the last of 2,100 keys on replica b',
    });
    assert.equal(await chatStatus(b, secretOf(0)), 200);
    assert.doesNotMatch(b.logs(), /shared state: lost/);
    await Promise.all([a, b].map((r) => r.stop()));
  });

  test('a drain counts settlements waiting for a Redis that is down: it waits for them, then says how many it could not confirm', async () => {
    const relay = await start(env.redis.url, { leaseMs: 2000 });
    await env.redis.kill();
    await waitFor(async () => metricSum(await scrapeMetrics(relay), 'kimi_relay_redis_up') === 0, { what: 'redis down' });
    assert.equal(await chatStatus(relay, keyOf('spender'), { model: 'm-priced', max_tokens: 10 }), 200);
    await waitFor(async () => metricSum(await scrapeMetrics(relay), 'kimi_relay_redis_settlements_queued') >= 1, {
      what: 'the charge queued for Redis',
    });
    const t0 = Date.now();
    await relay.stop();
    assert.match(relay.logs(), /drained: [1-9]\d* settlements to Redis not confirmed; stopping anyway/);
    assert.ok(Date.now() - t0 >= 900, `waited ${Date.now() - t0} ms for them`);
    await env.redis.restart();
  });

  test('spend replayed after an outage goes to the period it was made in, not the one Redis is in when it returns; spend Redis admitted stays in its period', async () => {
    await env.redis.command('FLUSHALL');
    // This replica's clock is a day behind Redis's: all it spends, it spends
    // in the day before Redis's, as an outage across midnight would leave it.
    const relay = await start(env.redis.url, { clockOffsetS: -86400 });
    const today = Math.floor(Date.now() / 86_400_000) * 86_400;
    const spentIn = async (start) => Number((await env.redis.command('HGET', `kr:{daily}:b:${start}`, 'su')) ?? 0);
    // Admitted by Redis in its day, a request is charged to that day,
    // whatever this replica's clock says (never past the cap of the day
    // that admitted it).
    assert.equal(await chatStatus(relay, keyOf('daily'), { model: 'm-priced', max_tokens: 10 }), 200);
    await waitFor(async () => (await spentIn(today)) > 0, { what: "the spend in Redis's day" });
    assert.equal(await spentIn(today - 86_400), 0);
    await env.redis.kill();
    await waitFor(async () => metricSum(await scrapeMetrics(relay), 'kimi_relay_redis_up') === 0, { what: 'redis down' });
    assert.equal(await chatStatus(relay, keyOf('daily'), { model: 'm-priced', max_tokens: 10 }), 200);
    await env.redis.restart();
    await waitFor(async () => metricSum(await scrapeMetrics(relay), 'kimi_relay_redis_settlements_queued') === 0 &&
      metricSum(await scrapeMetrics(relay), 'kimi_relay_redis_up') === 1, { timeoutMs: 5000, what: 'the charge replayed' });
    await waitFor(async () => (await spentIn(today - 86_400)) > 0, { what: "the day before's spend" });
    // (Redis came back empty: its day held only what it admitted.)
    assert.equal(await spentIn(today), 0, "Redis's day has none of it");
    await relay.stop();
  });
});
