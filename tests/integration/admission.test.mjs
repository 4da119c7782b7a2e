// Per-key admission through the real binary: request and token buckets,
// reservations at admission, concurrency caps, and the rate-limit headers
// every authenticated response carries. Budgets and their persistence are in
// budgets.test.mjs.
//
// Every test uses its own key, so one test's spent buckets never refuse the
// next test's requests.

import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';

import { resetMocks } from '../lib/fixtures.mjs';
import {
  chatRequest,
  closedPort,
  postChat,
  readOpenAiError,
  readSse,
  relayConfig,
  startMock,
  startRelay,
  waitFor,
} from '../lib/harness.mjs';

const UPSTREAM_KEY = 'sk-admission-upstream-secret-4d6f8b0a2c4e6d8f0b2a';
const keyOf = (name) => `kr-test-adm-${name}-5e7a9c1b3d5f7e9a1c3b5d7f`;

const LIMITS = {
  rpm60: { rpm: 60 },
  'rpm-wait': { rpm: 60, rpm_burst: 3 },
  'tpm-large': { tpm: 1000 },
  'tpm-reserve': { tpm: 1000 },
  conc: { concurrency: 3 },
  'conc-stream': { concurrency: 1 },
  headers: { rpm: 600, tpm: 100000 },
};

const env = {};
before(async () => {
  env.mock = await startMock({ name: 'upstream', apiKey: UPSTREAM_KEY });
  const config = relayConfig({
    keys: Object.entries(LIMITS).map(([name, limits]) => ({ name, key: keyOf(name), limits })),
    upstreams: [
      { name: 'upstream', url: env.mock.url, apiKey: UPSTREAM_KEY, models: { 'kimi-k2': 'kimi-k2' } },
      {
        name: 'nowhere',
        url: `http://127.0.0.1:${await closedPort()}`,
        apiKey: UPSTREAM_KEY,
        models: { 'm-dead': 'm-dead' },
      },
    ],
    retry: { max_attempts: 1 },
  });
  env.relay = await startRelay(config);
});
after(async () => {
  await Promise.all([env.relay, env.mock].filter(Boolean).map((p) => p.stop()));
});
beforeEach(async () => {
  await resetMocks({ upstream: env.mock });
});

function chat(keyName, body = {}, headers = {}, signal) {
  return postChat(env.relay, chatRequest(body), { key: keyOf(keyName), headers, signal });
}

const upstreamRequests = async () => (await env.mock.stats()).requests;

// Parses a duration as Go's time.Duration.String() writes it ("0s", "12ms",
// "1.5µs", "59.5s", "6m0s", "1h2m3.5s") and returns seconds; throws on
// anything Go would not print (trailing zeros, "1h5s", "90s", "0.5s", ...).
function parseGoDuration(text) {
  if (text === '0s') return 0;
  const small = /^([1-9]\d{0,2})(?:\.(\d*[1-9]))?(ns|µs|ms)$/.exec(text);
  if (small) {
    const [, whole, frac = '', unit] = small;
    if (unit === 'ns' && frac) throw new Error(`Go writes no fraction of a nanosecond: ${text}`);
    const scale = { ns: 1e-9, µs: 1e-6, ms: 1e-3 }[unit];
    return Number(`${whole}.${frac || '0'}`) * scale;
  }
  const big = /^(?:([1-9]\d*)h)?(?:(\d+)m)?(\d+)(?:\.(\d*[1-9]))?s$/.exec(text);
  if (!big) throw new Error(`not a Go duration: ${JSON.stringify(text)}`);
  const [, h, m, s, frac = ''] = big;
  if (h !== undefined && m === undefined) throw new Error(`Go writes the minutes after hours: ${text}`);
  if (Number(s) >= 60) throw new Error(`Go writes 60 s and more with minutes: ${text}`);
  if (h !== undefined && Number(m) >= 60) throw new Error(`minutes >= 60: ${text}`);
  if (m !== undefined && h === undefined && m === '0') throw new Error(`Go omits 0m: ${text}`);
  if (/^0\d/.test(s) || (m !== undefined && /^0\d/.test(m))) throw new Error(`leading zero: ${text}`);
  const seconds = Number(h ?? 0) * 3600 + Number(m ?? 0) * 60 + Number(`${s}.${frac || '0'}`);
  if (seconds < 1) throw new Error(`Go writes durations under 1 s in ms/µs/ns: ${text}`);
  return seconds;
}

test('parseGoDuration reads what Go writes and refuses what it does not', () => {
  for (const [text, seconds] of [
    ['0s', 0],
    ['12ms', 0.012],
    ['1.5ms', 0.0015],
    ['999.999ms', 0.999999],
    ['3µs', 3e-6],
    ['1s', 1],
    ['59.5s', 59.5],
    ['1m0s', 60],
    ['6m0s', 360],
    ['2m59.56s', 179.56],
    ['1h0m0s', 3600],
  ]) {
    assert.ok(Math.abs(parseGoDuration(text) - seconds) < 1e-12, text);
  }
  for (const text of ['', '1', '1.0s', '0.5s', '60s', '1h5s', '0m5s', '1000ms', '01s', '1m60s', '5 s', '-1s', '1.50ms']) {
    assert.throws(() => parseGoDuration(text), undefined, text);
  }
});

// Checks the x-ratelimit-* headers of one dimension ("requests" or "tokens")
// and returns {limit, remaining, reset} (reset in seconds).
function rateLimitHeaders(res, dimension) {
  const get = (what) => res.headers.get(`x-ratelimit-${what}-${dimension}`);
  const [limitText, remainingText, resetText] = [get('limit'), get('remaining'), get('reset')];
  assert.match(limitText ?? '', /^\d+$/, `x-ratelimit-limit-${dimension}: ${limitText}`);
  assert.match(remainingText ?? '', /^\d+$/, `x-ratelimit-remaining-${dimension}: ${remainingText}`);
  assert.ok(resetText, `x-ratelimit-reset-${dimension} missing`);
  const reset = parseGoDuration(resetText);
  const limit = Number(limitText);
  const remaining = Number(remainingText);
  assert.ok(remaining <= limit, `remaining ${remaining} > limit ${limit}`);
  return { limit, remaining, reset, resetText };
}

// A 429 from a request or token bucket: shape, type, headers. Returns the
// error and the retry-after-ms value.
async function expectBucket429(res, type) {
  assert.equal(res.status, 429);
  assert.ok(res.headers.get('x-request-id'));
  const retryAfter = res.headers.get('retry-after');
  const retryAfterMs = res.headers.get('retry-after-ms');
  assert.match(retryAfter ?? '', /^[1-9]\d*$/, `Retry-After: ${retryAfter}`);
  assert.match(retryAfterMs ?? '', /^[1-9]\d*$/, `retry-after-ms: ${retryAfterMs}`);
  assert.equal(Number(retryAfter), Math.ceil(Number(retryAfterMs) / 1000), 'Retry-After is retry-after-ms rounded up');
  assert.notEqual(res.headers.get('x-should-retry'), 'false');
  const err = await readOpenAiError(res, assert);
  assert.equal(err.type, type);
  assert.equal(err.code, 'rate_limit_exceeded');
  return { err, retryAfterMs: Number(retryAfterMs) };
}

describe('request bucket', () => {
  test('rpm: 60 — a burst of 70 admits exactly the 60 of the bucket; the rest get 429 with honest headers', async () => {
    const N = 70;
    const t0 = performance.now();
    const responses = await Promise.all(Array.from({ length: N }, () => chat('rpm60')));
    const seconds = (performance.now() - t0) / 1000;
    const ok = responses.filter((r) => r.status === 200);
    const refused = responses.filter((r) => r.status !== 200);
    // One token refills per second: a slow burst may legitimately admit more.
    const most = 60 + Math.floor(seconds);
    assert.ok(ok.length >= 60 && ok.length <= most, `${ok.length} admitted in ${seconds.toFixed(2)} s (expected 60..${most})`);
    for (const res of ok) await res.arrayBuffer();
    for (const res of refused) {
      const { err, retryAfterMs } = await expectBucket429(res, 'requests');
      assert.ok(retryAfterMs <= 1000, `at 60 rpm a token is at most 1 s away, not ${retryAfterMs} ms`);
      assert.match(err.message, /rpm60/);
      assert.match(err.message, /requests per min/i);
      const h = rateLimitHeaders(res, 'requests');
      assert.equal(h.limit, 60);
      assert.equal(h.remaining, 0);
      assert.ok(h.reset > 59 && h.reset <= 60, `x-ratelimit-reset-requests ${h.resetText} for an empty 60 rpm bucket`);
    }
    assert.equal(await upstreamRequests(), ok.length, 'refused requests never reach the upstream');
  });

  test('a caller that waits the returned retry-after-ms is admitted', async () => {
    for (let i = 0; i < 3; ++i) {
      const res = await chat('rpm-wait');
      assert.equal(res.status, 200, await res.text());
    }
    const refused = await chat('rpm-wait');
    const { retryAfterMs } = await expectBucket429(refused, 'requests');
    assert.ok(retryAfterMs <= 1000, `retry-after-ms ${retryAfterMs}`);
    await new Promise((r) => setTimeout(r, retryAfterMs));
    const res = await chat('rpm-wait');
    assert.equal(res.status, 200, `refused again after waiting the ${retryAfterMs} ms it was told: ${await res.text()}`);
    assert.equal(await upstreamRequests(), 4);
  });
});

describe('token bucket', () => {
  test('max_tokens larger than the whole tpm bucket: refused at admission, waiting will not help', async () => {
    const res = await chat('tpm-large', { max_tokens: 5000 });
    assert.equal(res.status, 429);
    assert.equal(res.headers.get('x-should-retry'), 'false');
    assert.equal(res.headers.get('retry-after'), null, 'no Retry-After when waiting cannot help');
    const err = await readOpenAiError(res, assert);
    assert.equal(err.type, 'tokens');
    assert.equal(err.code, 'rate_limit_exceeded');
    assert.match(err.message, /max_tokens/);
    assert.match(err.message, /1000/);
    assert.equal(await upstreamRequests(), 0, 'the upstream never saw it');
  });

  test('a request in flight holds its reservation; a second one that does not fit is refused at admission', async () => {
    // Reserves 8 (prompt estimate) + 900 of the 1000 tokens while it streams.
    const first = await chat('tpm-reserve', { max_tokens: 900, stream: true }, { 'x-mock-chunks': '5', 'x-mock-chunk-delay-ms': '200' });
    assert.equal(first.status, 200);
    const events = readSse(first);
    await events.next(); // the stream is open: the reservation is held

    const second = await chat('tpm-reserve', { max_tokens: 500 });
    const { err } = await expectBucket429(second, 'tokens');
    assert.match(err.message, /tokens per min/i);
    const h = rateLimitHeaders(second, 'tokens');
    assert.equal(h.limit, 1000);
    assert.ok(h.remaining < 508, `x-ratelimit-remaining-tokens ${h.remaining} while 908 are reserved`);
    assert.equal(await upstreamRequests(), 1, 'the refused request never reached the upstream');

    for await (const e of events) void e; // the first stream ends; its reservation is settled at 5 + prompt tokens
    await waitFor(
      async () => {
        const res = await chat('tpm-reserve', { max_tokens: 500 });
        await res.arrayBuffer();
        return res.status === 200;
      },
      { timeoutMs: 2000, what: 'the refund of the unused reservation' },
    );
  });
});

describe('concurrency', () => {
  test('concurrency: 3 — of 8 parallel slow requests, 3 run and 5 are refused', async () => {
    const slow = { 'x-mock-chunks': '4', 'x-mock-chunk-delay-ms': '150' }; // 600 ms each
    const responses = await Promise.all(Array.from({ length: 8 }, () => chat('conc', {}, slow)));
    const ok = responses.filter((r) => r.status === 200);
    const refused = responses.filter((r) => r.status !== 200);
    assert.equal(ok.length, 3);
    for (const res of ok) await res.arrayBuffer();
    for (const res of refused) {
      assert.equal(res.status, 429);
      assert.notEqual(res.headers.get('x-should-retry'), 'false');
      const retryAfter = res.headers.get('retry-after');
      if (retryAfter !== null) assert.match(retryAfter, /^[1-9]\d*$/);
      const err = await readOpenAiError(res, assert);
      assert.equal(err.type, 'requests');
      assert.equal(err.code, 'rate_limit_exceeded');
      assert.match(err.message, /concurren/i);
    }
    const stats = await env.mock.stats();
    assert.equal(stats.requests, 3);
    assert.ok(stats.max_in_flight <= 3, `max_in_flight ${stats.max_in_flight}`);
    const after = await chat('conc');
    assert.equal(after.status, 200, 'slots are released when requests end');
    await after.arrayBuffer();
  });

  test('a stream holds its slot until it ends', async () => {
    const stream = await chat('conc-stream', { stream: true }, { 'x-mock-chunks': '4', 'x-mock-chunk-delay-ms': '150' });
    assert.equal(stream.status, 200);
    const events = readSse(stream);
    await events.next();
    const refused = await chat('conc-stream');
    assert.equal(refused.status, 429);
    await refused.arrayBuffer();
    for await (const e of events) void e;
    await waitFor(
      async () => {
        const res = await chat('conc-stream');
        await res.arrayBuffer();
        return res.status === 200;
      },
      { timeoutMs: 2000, what: 'the slot to be released after the stream' },
    );
  });
});

describe('x-ratelimit-* headers', () => {
  // The reset of a bucket is the time to refill what is missing.
  function assertConsistent(h, perMinute, dimension) {
    const expected = ((h.limit - h.remaining) * 60) / perMinute;
    assert.ok(
      Math.abs(h.reset - expected) <= 0.05 + expected * 0.02,
      `x-ratelimit-reset-${dimension} ${h.resetText} for ${h.limit - h.remaining} missing at ${perMinute}/min (expected ≈ ${expected.toFixed(3)} s)`,
    );
  }

  test('on a 200: limits, remaining and resets of both buckets, resets as Go durations', async () => {
    const res = await chat('headers');
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    const requests = rateLimitHeaders(res, 'requests');
    assert.equal(requests.limit, 600);
    assert.ok(requests.remaining <= 599, `remaining-requests ${requests.remaining} after one request`);
    assertConsistent(requests, 600, 'requests');
    const tokens = rateLimitHeaders(res, 'tokens');
    assert.equal(tokens.limit, 100000);
    assert.ok(tokens.remaining < 100000, 'the reservation shows in remaining-tokens');
    assertConsistent(tokens, 100000, 'tokens');
  });

  for (const [label, body, status] of [
    ['malformed JSON (400)', '{"model": ', 400],
    ['unknown model (404)', { model: 'gpt-none' }, 404],
    ['unreachable upstream (502)', { model: 'm-dead' }, 502],
  ]) {
    test(`on an error after authentication: ${label}`, async () => {
      const res = await postChat(env.relay, typeof body === 'string' ? body : chatRequest(body), { key: keyOf('headers') });
      assert.equal(res.status, status);
      await res.arrayBuffer();
      rateLimitHeaders(res, 'requests');
      rateLimitHeaders(res, 'tokens');
    });
  }

  test('not on a 401: nothing is known about an unauthenticated caller', async () => {
    const res = await postChat(env.relay, chatRequest(), { key: 'kr-test-adm-nobody-000000000000000000' });
    assert.equal(res.status, 401);
    await res.arrayBuffer();
    for (const [name] of res.headers) assert.ok(!name.startsWith('x-ratelimit-'), `${name} on a 401`);
  });
});
