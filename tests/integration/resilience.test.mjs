// Retries, failover, deadlines and fallback models through the real binary,
// against kimi-relay-mock fault modes: each test asserts the status and
// headers the caller sees, how many attempts were made, and what every mock
// received. Retry budgets, ejection and upstream shaping are in
// resilience_health.test.mjs.
//
// Upstream choice is made deterministic by weight: "primary" (weight 1000000)
// takes every first attempt for m-failover, "secondary" (weight 1) the retries,
// since a retry prefers an upstream this request has not tried yet.

import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';

import { resetMocks } from '../lib/fixtures.mjs';
import {
  chatRequest,
  closedPort,
  collectSse,
  headerValue,
  postChat,
  readOpenAiError,
  relayConfig,
  startMock,
  startRelay,
  waitFor,
} from '../lib/harness.mjs';
import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';

const KEY = 'kr-test-resilience-2c4e6a8b0d1f3a5c7e9b1d3f5a7c9e1b';
const UPSTREAM_KEY = 'sk-resilience-upstream-secret-6b8d0f2a4c6e8a0c2e4f';

const TIMEOUTS = { connect_ms: 1000, first_byte_ms: 500, idle_ms: 500, total_ms: 4000 };
const MAX_ATTEMPTS = 3;

const env = {};
const mocks = {};

before(async () => {
  const started = await Promise.all(
    [
      ['primary', {}],
      ['secondary', {}],
      ['solo', {}],
      ['moonshot', { moonshot: true }],
      ['backup', {}],
    ].map(([name, opts]) => startMock({ name, apiKey: UPSTREAM_KEY, ...opts })),
  );
  for (const m of started) mocks[m.name] = m;
  const [dead1, dead2] = [await closedPort(), await closedPort()];
  // Ejection is off here so that one test's failures cannot change the next
  // test's routing; the retry budget is generous for the same reason.
  const health = { eject_after_failures: 0 };
  const up = (name, models, extra = {}) => ({
    name,
    url: mocks[name]?.url,
    apiKey: UPSTREAM_KEY,
    models,
    health,
    ...extra,
  });
  const config = relayConfig({
    keys: [{ name: 'resilience', key: KEY }],
    upstreams: [
      up('primary', { 'm-failover': 'm-failover', 'm-primary': 'm-primary' }, { weight: 1_000_000 }),
      up('secondary', { 'm-failover': 'm-failover-s', 'm-moon': 'm-moon-s' }, { weight: 1 }),
      up('solo', { 'm-solo': 'm-solo' }),
      up('moonshot', { 'm-moon': 'kimi-k2-0905-preview' }, { weight: 1_000_000 }),
      up('backup', { 'm-backup': 'm-backup' }),
      up('dead1', { 'm-dead': 'm-dead' }, { url: `http://127.0.0.1:${dead1}` }),
      up('dead2', { 'm-dead': 'm-dead' }, { url: `http://127.0.0.1:${dead2}` }),
    ],
    retry: {
      max_attempts: MAX_ATTEMPTS,
      backoff: { base_ms: 20, max_ms: 200 },
      budget: { ratio: 1, min_per_second: 100 },
    },
    timeouts: TIMEOUTS,
    routes: { 'm-primary': { fallback_models: ['m-backup'] } },
  });
  env.relay = await startRelay(config);
});

after(async () => {
  await Promise.all([env.relay, ...Object.values(mocks)].filter(Boolean).map((p) => p.stop()));
});

beforeEach(async () => {
  await resetMocks(mocks);
});

// POSTs a chat request and returns {res, ms} with ms the time to the response head.
async function timedChat(body, headers = {}) {
  const t0 = performance.now();
  const res = await postChat(env.relay, chatRequest(body), { key: KEY, headers });
  return { res, ms: performance.now() - t0 };
}

async function requestCounts() {
  const out = {};
  for (const [name, m] of Object.entries(mocks)) out[name] = (await m.stats()).requests;
  return out;
}

async function okBody(res) {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const body = JSON.parse(text);
  assert.equal(body.object, 'chat.completion');
  return body;
}

describe('retries and failover before the first byte', () => {
  test('503 from the first upstream: retried on the other one, caller gets its 200', async () => {
    await mocks.primary.setFault('status=503;times=1');
    const { res } = await timedChat({ model: 'm-failover' });
    const body = await okBody(res);
    assert.equal(res.headers.get('x-relay-attempts'), '2');
    assert.equal(res.headers.get('x-relay-upstream'), 'secondary');
    assert.equal(body.model, 'm-failover-s', 'the body is the answer of the upstream that served');
    const [p] = await mocks.primary.requests();
    const [s] = await mocks.secondary.requests();
    assert.equal(JSON.parse(p.body).model, 'm-failover');
    assert.equal(JSON.parse(s.body).model, 'm-failover-s');
    assert.deepEqual(await requestCounts(), { primary: 1, secondary: 1, solo: 0, moonshot: 0, backup: 0 });
  });

  // The change of every kimi_relay_* series named `name` across one failover
  // (primary 503, then secondary 200): [{...labels, delta}] of those that moved.
  async function failoverDeltas(name) {
    const before = await scrapeMetrics(env.relay);
    await mocks.primary.setFault('status=503;times=1');
    const { res } = await timedChat({ model: 'm-failover' });
    await okBody(res);
    assert.equal(res.headers.get('x-relay-upstream'), 'secondary');
    const after = await scrapeMetrics(env.relay);
    return after
      .filter((s) => s.name === name)
      .map((s) => ({ ...s.labels, delta: s.value - metricSum(before, s.name, s.labels) }))
      .filter((s) => s.delta !== 0);
  }

  test('the failover counts one retry, labelled with the upstream that failed', async () => {
    // docs/metrics.md: kimi_relay_retries_total{upstream} is "the one that failed".
    assert.deepEqual(await failoverDeltas('kimi_relay_retries_total'), [
      { reason: 'server_error', upstream: 'primary', delta: 1 },
    ]);
  });

  test('the failover counts one upstream fallback away from the upstream that failed', async () => {
    // docs/metrics.md: kind="upstream" counts requests moved to another upstream of the same model.
    assert.deepEqual(await failoverDeltas('kimi_relay_fallbacks_total'), [
      { kind: 'upstream', reason: 'server_error', upstream: 'primary', delta: 1 },
    ]);
  });

  test('429 with Retry-After: 1 on the only upstream: the retry waits 1 s', async () => {
    await mocks.solo.setFault('status=429;retry_after=1;times=1');
    const { res, ms } = await timedChat({ model: 'm-solo' });
    await okBody(res);
    assert.equal(res.headers.get('x-relay-attempts'), '2');
    const [first, second] = await mocks.solo.requests();
    assert.ok(second, 'the upstream was asked twice');
    const gap = second.time_ms - first.time_ms;
    assert.ok(gap >= 995, `the retry came ${gap.toFixed(0)} ms after the 429, before its Retry-After: 1`);
    assert.ok(ms >= 1000, `the caller got its answer after ${ms.toFixed(0)} ms`);
    assert.ok(gap < 2500, `the retry waited ${gap.toFixed(0)} ms, far longer than asked`);
  });

  test('retry-after-ms wins over Retry-After when both are sent', async () => {
    await mocks.solo.setFault('status=429;retry_after=3;retry_after_ms=400;times=1');
    const { res } = await timedChat({ model: 'm-solo' });
    await okBody(res);
    const [first, second] = await mocks.solo.requests();
    const gap = second.time_ms - first.time_ms;
    assert.ok(gap >= 395, `retried ${gap.toFixed(0)} ms after retry-after-ms: 400`);
    assert.ok(gap < 2500, `retried ${gap.toFixed(0)} ms after: Retry-After: 3 was used, not retry-after-ms`);
  });

  test('a Retry-After beyond the total deadline: the other upstream is tried at once', async () => {
    await mocks.primary.setFault('status=429;retry_after=30;times=1');
    const { res, ms } = await timedChat({ model: 'm-failover' });
    await okBody(res);
    assert.equal(res.headers.get('x-relay-attempts'), '2');
    assert.equal(res.headers.get('x-relay-upstream'), 'secondary');
    assert.ok(ms < 1000, `took ${ms.toFixed(0)} ms: the gateway waited instead of moving on`);
    assert.equal((await mocks.primary.stats()).requests, 1, 'the upstream that asked for 30 s was not retried');
  });

  test('a Retry-After beyond the deadline on the only upstream: its 429 is passed back at once', async () => {
    await mocks.solo.setFault('status=429;retry_after=30;times=1');
    const { res, ms } = await timedChat({ model: 'm-solo' });
    assert.equal(res.status, 429);
    assert.equal(res.headers.get('retry-after'), '30', 'the upstream Retry-After reaches the caller');
    assert.equal(res.headers.get('x-relay-attempts'), '1');
    const err = await readOpenAiError(res, assert);
    assert.match(err.message, /solo/);
    assert.ok(ms < 1000, `took ${ms.toFixed(0)} ms`);
    assert.equal((await mocks.solo.stats()).requests, 1);
  });

  test('an upstream that hangs: first-byte deadline, then failover', async () => {
    await mocks.primary.setFault('hang;times=1');
    const { res, ms } = await timedChat({ model: 'm-failover' });
    await okBody(res);
    assert.equal(res.headers.get('x-relay-attempts'), '2');
    assert.equal(res.headers.get('x-relay-upstream'), 'secondary');
    assert.ok(ms >= TIMEOUTS.first_byte_ms, `answered after ${ms.toFixed(0)} ms, before the first-byte deadline`);
    assert.ok(ms < TIMEOUTS.first_byte_ms + 1500, `answered after ${ms.toFixed(0)} ms`);
    // The hung request is abandoned, not left open.
    await waitFor(async () => (await mocks.primary.stats()).in_flight === 0, {
      timeoutMs: 3000,
      what: 'the hung upstream request to be closed',
    });
    assert.equal((await mocks.primary.stats()).cancelled, 1);
  });

  test('a connection reset before the answer: failover', async () => {
    await mocks.primary.setFault('reset');
    const { res } = await timedChat({ model: 'm-failover' });
    await okBody(res);
    assert.equal(res.headers.get('x-relay-attempts'), '2');
    assert.equal(res.headers.get('x-relay-upstream'), 'secondary');
    assert.ok((await mocks.primary.stats()).requests >= 1);
    assert.equal((await mocks.secondary.stats()).requests, 1);
  });

  test('every upstream unreachable: 503 within the deadline, naming each attempt', async () => {
    const { res, ms } = await timedChat({ model: 'm-dead' });
    assert.equal(res.status, 503);
    assert.ok(res.headers.get('x-request-id'));
    assert.equal(res.headers.get('x-relay-attempts'), String(MAX_ATTEMPTS));
    const err = await readOpenAiError(res, assert);
    assert.equal(err.type, 'server_error');
    assert.equal(err.code, 'upstream_unavailable');
    assert.match(err.message, /m-dead/);
    assert.match(err.message, /dead1/);
    assert.match(err.message, /dead2/);
    assert.match(err.message, new RegExp(`${MAX_ATTEMPTS} attempt`));
    assert.match(err.message, /connect|refused/i);
    assert.ok(ms < TIMEOUTS.total_ms, `took ${ms.toFixed(0)} ms`);
  });

  test('every attempt times out: 504 naming the first-byte deadline', async () => {
    const { res, ms } = await timedChat({ model: 'm-failover' }, { 'x-mock-fault': 'hang' });
    assert.equal(res.status, 504);
    assert.equal(res.headers.get('x-relay-attempts'), String(MAX_ATTEMPTS));
    const err = await readOpenAiError(res, assert);
    assert.equal(err.code, 'upstream_timeout');
    assert.match(err.message, /first byte/i);
    assert.match(err.message, /primary/);
    assert.match(err.message, /secondary/);
    assert.ok(ms >= MAX_ATTEMPTS * TIMEOUTS.first_byte_ms, `took ${ms.toFixed(0)} ms`);
    assert.ok(ms < TIMEOUTS.total_ms + 500, `took ${ms.toFixed(0)} ms`);
    // No hung request is left open upstream.
    await waitFor(
      async () => (await mocks.primary.stats()).in_flight === 0 && (await mocks.secondary.stats()).in_flight === 0,
      { timeoutMs: 3000, what: 'hung requests to be closed' },
    );
  });
});

describe('after the first byte: an error event, never a silent cut', () => {
  // The events of a stream that must end with an error event: the chunks
  // before it, and the error object.
  async function brokenStream(headers) {
    const t0 = performance.now();
    const res = await postChat(env.relay, chatRequest({ model: 'm-solo', stream: true }), { key: KEY, headers });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    assert.equal(res.headers.get('x-relay-attempts'), '1');
    const events = await collectSse(res);
    const ms = performance.now() - t0;
    assert.ok(!events.some((e) => e.done), 'a broken stream must not end with [DONE]');
    const last = events.at(-1);
    assert.ok(last?.json?.error, `the stream does not end with an error event: ${JSON.stringify(events.map((e) => e.data))}`);
    const { error } = last.json;
    for (const k of ['message', 'type', 'param', 'code']) assert.ok(k in error, `error.${k} missing`);
    assert.equal(error.type, 'server_error');
    const chunks = events.slice(0, -1);
    for (const e of chunks) assert.equal(e.json?.object, 'chat.completion.chunk');
    return { chunks, error, ms };
  }

  test('reset after 3 chunks: 3 chunks, then an SSE error event, not retried', async () => {
    const { chunks, error } = await brokenStream({ 'x-mock-fault': 'reset_after=3', 'x-mock-chunks': '10' });
    assert.equal(chunks.filter((e) => e.json.choices?.[0]?.delta?.content).length, 3);
    assert.match(error.message, /solo/);
    assert.equal((await mocks.solo.stats()).requests, 1, 'nothing is retried once the caller has bytes');
  });

  test('silence longer than idle_ms mid-stream: an error event naming the idle deadline', async () => {
    const { chunks, error, ms } = await brokenStream({ 'x-mock-chunks': '3', 'x-mock-chunk-delay-ms': '3000' });
    assert.ok(chunks.length >= 1);
    assert.match(error.message, /idle/i);
    assert.ok(ms < 3000, `the stream was cut after ${ms.toFixed(0)} ms, not at the idle deadline`);
    await waitFor(async () => (await mocks.solo.stats()).in_flight === 0, { timeoutMs: 3000, what: 'upstream closed' });
  });

  test('a stream outliving total_ms: an error event naming the total deadline', async () => {
    // 40 chunks 200 ms apart: never idle for idle_ms, but 8 s in all.
    const { chunks, error, ms } = await brokenStream({ 'x-mock-chunks': '40', 'x-mock-chunk-delay-ms': '200' });
    assert.ok(chunks.length >= 5 && chunks.length < 40, `${chunks.length} chunks`);
    assert.match(error.message, /total/i);
    assert.ok(ms >= TIMEOUTS.total_ms - 50 && ms < TIMEOUTS.total_ms + 1500, `cut after ${ms.toFixed(0)} ms`);
  });
});

describe('fallback models', () => {
  test('the primary model\'s only upstream fails: the fallback model answers', async () => {
    await mocks.primary.setFault('status=503');
    const { res } = await timedChat({ model: 'm-primary' });
    const text = await res.text();
    assert.equal(res.status, 200, `the fallback model m-backup was not used: ${res.status} ${text} ` +
      `(x-relay-attempts ${res.headers.get('x-relay-attempts')}, primary asked ${(await mocks.primary.stats()).requests} times)`);
    assert.equal(res.headers.get('x-relay-fallback-model'), 'm-backup');
    assert.equal(res.headers.get('x-relay-upstream'), 'backup');
    assert.equal(JSON.parse(text).model, 'm-backup');
    assert.equal((await mocks.backup.stats()).requests, 1);
  });

  test('the primary upstream asks for a wait past the deadline: the fallback model answers at once', async () => {
    await mocks.primary.setFault('status=429;retry_after=30;times=1');
    const { res, ms } = await timedChat({ model: 'm-primary' });
    const body = await okBody(res);
    assert.equal(res.headers.get('x-relay-fallback-model'), 'm-backup');
    assert.equal(res.headers.get('x-relay-attempts'), '2');
    assert.equal(body.model, 'm-backup');
    assert.ok(ms < 1000, `took ${ms.toFixed(0)} ms`);
    const [recorded] = await mocks.backup.requests();
    assert.equal(JSON.parse(recorded.body).model, 'm-backup');
  });

  test('no fallback header when the requested model served', async () => {
    const { res } = await timedChat({ model: 'm-primary' });
    await okBody(res);
    assert.equal(res.headers.get('x-relay-fallback-model'), null);
    assert.equal(res.headers.get('x-relay-attempts'), '1');
  });
});

describe('Moonshot error types', () => {
  for (const status of [429, 403]) {
    test(`exceeded_current_quota_error (${status}): insufficient_quota, x-should-retry: false, not retried`, async () => {
      const { res } = await timedChat(
        { model: 'm-moon' },
        { 'x-mock-fault': `status=${status};error_type=exceeded_current_quota_error` },
      );
      // PROTOCOLS.md: quota errors map by type, whatever the status.
      assert.ok([403, 429].includes(res.status), `status ${res.status}`);
      assert.equal(res.headers.get('x-should-retry'), 'false');
      assert.equal(res.headers.get('x-relay-attempts'), '1');
      const err = await readOpenAiError(res, assert);
      assert.equal(err.type, 'insufficient_quota');
      assert.equal(err.code, 'insufficient_quota');
      assert.deepEqual(await requestCounts(), { primary: 0, secondary: 0, solo: 0, moonshot: 1, backup: 0 });
    });
  }

  test("invalid_authentication_error: 502 naming the upstream whose key was refused, the next upstream tried", async () => {
    // The fault rides on the request, so the second upstream refuses too.
    const { res } = await timedChat({ model: 'm-moon' }, { 'x-mock-fault': 'status=401;error_type=invalid_authentication_error' });
    assert.equal(res.status, 502, 'the caller\'s own key is fine: not a 401');
    assert.equal(res.headers.get('x-should-retry'), 'false');
    assert.equal(res.headers.get('x-relay-attempts'), '2');
    const err = await readOpenAiError(res, assert);
    assert.equal(err.code, 'upstream_auth_failed');
    assert.match(err.message, /'moonshot'/);
    assert.match(err.message, /'secondary'/);
    assert.doesNotMatch(err.message, /mock fault/, 'the provider\'s words are not passed on');
    assert.equal((await mocks.moonshot.stats()).requests, 1);
    assert.equal((await mocks.secondary.stats()).requests, 1);
  });

  for (const type of ['rate_limit_reached_error', 'engine_overloaded_error']) {
    test(`${type} (429) is retryable: the other upstream serves`, async () => {
      await mocks.moonshot.setFault(`status=429;error_type=${type};times=1`);
      const { res } = await timedChat({ model: 'm-moon' });
      await okBody(res);
      assert.equal(res.headers.get('x-relay-attempts'), '2');
      assert.equal(res.headers.get('x-relay-upstream'), 'secondary');
    });
  }

  test('rate_limit_reached_error everywhere: 429 rate_limit_exceeded after every attempt', async () => {
    const { res } = await timedChat({ model: 'm-moon' }, { 'x-mock-fault': 'status=429;error_type=rate_limit_reached_error' });
    assert.equal(res.status, 429);
    assert.notEqual(res.headers.get('x-should-retry'), 'false');
    assert.equal(res.headers.get('x-relay-attempts'), String(MAX_ATTEMPTS));
    const err = await readOpenAiError(res, assert);
    assert.equal(err.code, 'rate_limit_exceeded');
  });
});

describe('x-relay-hops', () => {
  test('the upstream receives the caller\'s hop count plus one', async () => {
    for (const [sent, expected] of [[undefined, '1'], ['2', '3'], ['7', '8']]) {
      await mocks.solo.clearRequests();
      const headers = sent === undefined ? {} : { 'x-relay-hops': sent };
      const { res } = await timedChat({ model: 'm-solo' }, headers);
      await okBody(res);
      const [recorded] = await mocks.solo.requests();
      assert.equal(headerValue(recorded, 'x-relay-hops'), expected, `caller sent ${sent}`);
    }
  });

  test('a caller that is itself a relay (hops > 0): no retry here', async () => {
    await mocks.primary.setFault('status=503;times=1');
    const { res } = await timedChat({ model: 'm-failover' }, { 'x-relay-hops': '1' });
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('x-relay-attempts'), '1');
    await readOpenAiError(res, assert);
    assert.equal((await mocks.secondary.stats()).requests, 0);
  });

  test('8 hops: 508 loop detected, nothing forwarded', async () => {
    const { res } = await timedChat({ model: 'm-solo' }, { 'x-relay-hops': '8' });
    assert.equal(res.status, 508);
    const err = await readOpenAiError(res, assert);
    assert.equal(err.code, 'relay_loop_detected');
    assert.match(err.message, /x-relay-hops/);
    const counts = await requestCounts();
    assert.equal(Object.values(counts).reduce((a, b) => a + b, 0), 0);
  });
});
