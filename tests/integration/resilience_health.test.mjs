// Protecting upstreams, through the real binary: the retry budget under a burst
// against a dead upstream, passive ejection with half-open probes, and the
// per-upstream max_concurrency / rpm shaping with its bounded queue. Each
// describe block runs its own gateway, since these settings are global or
// leave state behind. Figures come from the mocks' counters, the responses'
// x-relay-attempts and the gateway's /metrics (docs/metrics.md).

import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { after, before, beforeEach, describe, test } from 'node:test';

import { resetMocks } from '../lib/fixtures.mjs';
import {
  chatRequest,
  closedPort,
  postChat,
  readOpenAiError,
  relayConfig,
  startMock,
  startRelay,
  waitFor,
} from '../lib/harness.mjs';
import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';

const KEY = 'kr-test-health-9a7c5e3b1d9f7a5c3e1b9d7f5a3c1e9b';
const UPSTREAM_KEY = 'sk-health-upstream-secret-1f3d5b7a9c1e3f5d7b9a';

// Registers before/after hooks for a gateway in front of mocks named
// `mockNames`. `configFor(mocks)` returns the relayConfig() spec; upstreams get
// the upstream key filled in. Returns {relay, mocks}, filled in by `before`.
function useGateway(mockNames, configFor) {
  const env = { mocks: {} };
  before(async () => {
    const started = await Promise.all(mockNames.map((name) => startMock({ name, apiKey: UPSTREAM_KEY })));
    for (const m of started) env.mocks[m.name] = m;
    const spec = await configFor(env.mocks);
    spec.keys = [{ name: 'health', key: KEY }];
    spec.upstreams = spec.upstreams.map((u) => ({ apiKey: UPSTREAM_KEY, ...u }));
    env.relay = await startRelay(relayConfig(spec));
  });
  after(async () => {
    await Promise.all([env.relay, ...Object.values(env.mocks)].filter(Boolean).map((p) => p.stop()));
  });
  beforeEach(async () => {
    await resetMocks(env.mocks);
  });
  return env;
}

function chat(env, body, { headers, signal } = {}) {
  return postChat(env.relay, chatRequest(body), { key: KEY, headers, signal });
}

describe('retry budget', () => {
  const RATIO = 0.1;
  const MIN_PER_SECOND = 1;
  const BURST = 100;
  const env = useGateway(['healthy'], async (mocks) => ({
    upstreams: [
      // Never ejected, so that every request that lands on it first needs a retry.
      {
        name: 'dead',
        url: `http://127.0.0.1:${await closedPort()}`,
        models: { 'm-burst': 'm-burst' },
        health: { eject_after_failures: 0 },
      },
      { name: 'healthy', url: mocks.healthy.url, models: { 'm-burst': 'm-burst' }, health: { eject_after_failures: 0 } },
    ],
    retry: {
      max_attempts: 3,
      backoff: { base_ms: 10, max_ms: 50 },
      budget: { ratio: RATIO, min_per_second: MIN_PER_SECOND },
    },
  }));

  test(`a burst of ${BURST} against a dead upstream retries no more than the budget allows`, async (t) => {
    const before = await scrapeMetrics(env.relay);
    const t0 = performance.now();
    const results = await Promise.all(
      Array.from({ length: BURST }, async () => {
        const res = await chat(env, { model: 'm-burst' });
        const text = await res.text();
        return {
          status: res.status,
          attempts: Number(res.headers.get('x-relay-attempts')),
          upstream: res.headers.get('x-relay-upstream'),
          text,
        };
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const after = await scrapeMetrics(env.relay);

    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status !== 200);
    const retries = results.reduce((n, r) => n + r.attempts - 1, 0);
    // Requests whose first attempt went to the dead upstream: the refused ones
    // and those that were retried.
    const firstOnDead = refused.length + results.filter((r) => r.status === 200 && r.attempts > 1).length;
    const summary = `${ok.length} ok, ${refused.length} refused, ${retries} retries, ${firstOnDead} first on dead, ${seconds.toFixed(2)} s`;

    assert.ok(firstOnDead >= BURST / 4, `the burst did not exercise the dead upstream: ${summary}`);
    for (const r of ok) assert.equal(r.upstream, 'healthy', summary);
    for (const r of refused) {
      assert.equal(r.status, 502, `${summary}; ${r.text}`);
      assert.match(r.text, /dead/);
      // Short of max_attempts, only the budget can have stopped the retries.
      if (r.attempts < 3) assert.match(r.text, /retry budget/);
    }
    // Each upstream's budget: `ratio` per first attempt it took, plus a floor
    // of min_per_second that bursts to one second's worth. Summed over both
    // upstreams and the burst's duration:
    const bound = Math.floor(RATIO * BURST) + 2 * MIN_PER_SECOND * (1 + Math.ceil(seconds));
    t.diagnostic(`${summary}; budget ${bound}`);
    assert.ok(retries <= bound, `${retries} retries > budget ${bound}: ${summary}`);
    assert.ok(refused.length > 0, `the budget refused nothing: ${summary}`);

    assert.equal((await env.mocks.healthy.stats()).requests, ok.length, `the healthy upstream saw each served request once: ${summary}`);
    const delta = (name, labels) => metricSum(after, name, labels) - metricSum(before, name, labels);
    assert.equal(delta('kimi_relay_retries_total'), retries, `kimi_relay_retries_total: ${summary}`);
    const budgetRefused = refused.filter((r) => /retry budget/.test(r.text)).length;
    assert.equal(delta('kimi_relay_rate_limit_refusals_total', { reason: 'retry_budget' }), budgetRefused,
      `kimi_relay_rate_limit_refusals_total{reason="retry_budget"}: ${summary}`);
  });
});

describe('passive ejection and half-open probes', () => {
  const BASE_MS = 800;
  const EJECT_AFTER = 3;
  const env = useGateway(['flaky', 'steady', 'alone'], (mocks) => ({
    upstreams: [
      {
        name: 'alone',
        url: mocks.alone.url,
        models: { 'm-alone': 'm-alone' },
        health: { eject_after_failures: 2, base_ejection_ms: 60_000 },
      },
      {
        name: 'flaky',
        url: mocks.flaky.url,
        models: { 'm-eject': 'm-eject' },
        health: { eject_after_failures: EJECT_AFTER, base_ejection_ms: BASE_MS, max_ejection_ms: 8 * BASE_MS },
      },
      { name: 'steady', url: mocks.steady.url, models: { 'm-eject': 'm-eject' }, health: { eject_after_failures: 0 } },
    ],
    retry: { max_attempts: 3, backoff: { base_ms: 5, max_ms: 20 }, budget: { ratio: 1, min_per_second: 100 } },
  }));

  const ejections = async () =>
    metricSum(await scrapeMetrics(env.relay), 'kimi_relay_upstream_ejections_total', {
      upstream: 'flaky',
      reason: 'consecutive_failures',
    });
  const healthState = async () =>
    metricSum(await scrapeMetrics(env.relay), 'kimi_relay_upstream_health_state', { upstream: 'flaky' });
  const flakyRequests = async () => (await env.mocks.flaky.stats()).requests;
  const flakyTimes = async () => (await env.mocks.flaky.requests()).map((r) => r.time_ms);

  // Sends requests one after another (each must succeed, through failover if
  // need be) until `until()` holds.
  async function trafficUntil(until, what, timeoutMs) {
    await waitFor(
      async () => {
        const res = await chat(env, { model: 'm-eject' });
        const text = await res.text();
        assert.equal(res.status, 200, text);
        return until();
      },
      { timeoutMs, intervalMs: 25, what },
    );
  }

  test('consecutive failures eject; probes decide; a failed probe doubles the ejection; success restores', async () => {
    await env.mocks.flaky.setFault('status=503');
    assert.equal(await ejections(), 0);

    // 1. Failures up to the threshold eject the upstream.
    await trafficUntil(async () => (await flakyRequests()) >= EJECT_AFTER, `${EJECT_AFTER} failures`, 5000);
    const ejectedAt = performance.now();
    assert.equal(await flakyRequests(), EJECT_AFTER);
    assert.equal(await ejections(), 1);

    // 2. While ejected, nothing goes to it and callers are served by the other.
    // Checked only while the ejection surely lasts, but checked at least once:
    // a runner too slow for that fails here rather than skipping the point.
    let checked = 0;
    for (let i = 0; i < 8; ++i) {
      const res = await chat(env, { model: 'm-eject' });
      await res.arrayBuffer();
      assert.equal(res.status, 200);
      if (performance.now() - ejectedAt < BASE_MS - 100) {
        assert.equal(res.headers.get('x-relay-upstream'), 'steady');
        assert.equal(res.headers.get('x-relay-attempts'), '1', 'an ejected upstream costs the caller nothing');
        ++checked;
      }
    }
    assert.ok(checked > 0, 'no request was sent while the upstream was surely ejected (runner too slow)');
    if (performance.now() - ejectedAt < BASE_MS - 100) assert.equal(await flakyRequests(), EJECT_AFTER);

    // 3. After base_ejection_ms one probe goes through; it fails: ejected again, for twice as long.
    await trafficUntil(async () => (await flakyRequests()) > EJECT_AFTER, 'the first probe', 4 * BASE_MS);
    let times = await flakyTimes();
    const firstGap = times[EJECT_AFTER] - times[EJECT_AFTER - 1];
    assert.ok(firstGap >= BASE_MS - 20, `first probe ${firstGap.toFixed(0)} ms after the ejection (base ${BASE_MS})`);
    assert.equal(times.length, EJECT_AFTER + 1, 'exactly one probe');
    await waitFor(async () => (await ejections()) === 2, { what: 'the failed probe to eject again' });

    // 4. The fault is gone: the next probe succeeds and closes the circuit.
    await env.mocks.flaky.clearFault();
    await trafficUntil(async () => (await flakyRequests()) > EJECT_AFTER + 1, 'the second probe', 6 * BASE_MS);
    times = await flakyTimes();
    const secondGap = times[EJECT_AFTER + 1] - times[EJECT_AFTER];
    assert.ok(secondGap >= 2 * BASE_MS - 20, `second probe ${secondGap.toFixed(0)} ms after the first (expected ≥ ${2 * BASE_MS})`);

    // 5. Back in rotation.
    const before = await flakyRequests();
    for (let i = 0; i < 10; ++i) {
      const res = await chat(env, { model: 'm-eject' });
      await res.arrayBuffer();
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-relay-attempts'), '1');
    }
    assert.ok((await flakyRequests()) - before >= 2, 'the recovered upstream takes its share again');
    assert.equal(await ejections(), 2);
  });

  test('kimi_relay_upstream_health_state shows 2 while ejected and 0 once a probe succeeded', async () => {
    await env.mocks.flaky.setFault('status=503');
    const before = await ejections();
    await trafficUntil(async () => (await ejections()) > before, 'an ejection', 5000);
    const ejectedAt = performance.now();
    const state = await healthState();
    assert.ok(performance.now() - ejectedAt < BASE_MS, 'the scrape came after the ejection ended (runner too slow)');
    assert.equal(state, 2, 'kimi_relay_upstream_health_state{upstream="flaky"} while it is ejected');
    await env.mocks.flaky.clearFault();
    const served = await flakyRequests();
    await trafficUntil(async () => (await flakyRequests()) > served, 'a good probe', 4 * BASE_MS);
    assert.equal(await healthState(), 0);
  });

  test('a model whose only upstream is ejected still gets it (never eject a whole pool)', async () => {
    await env.mocks.alone.setFault('status=503');
    const before = metricSum(await scrapeMetrics(env.relay), 'kimi_relay_upstream_ejections_total', { upstream: 'alone' });
    // max_attempts 3 on one upstream: two failures eject it, the third attempt is the last resort.
    const res = await chat(env, { model: 'm-alone' });
    assert.equal(res.status, 503);
    await res.arrayBuffer();
    const ejected = metricSum(await scrapeMetrics(env.relay), 'kimi_relay_upstream_ejections_total', { upstream: 'alone' });
    assert.equal(ejected - before, 1, 'the upstream was ejected');
    await env.mocks.alone.clearFault();
    const served = await env.mocks.alone.stats();
    const again = await chat(env, { model: 'm-alone' });
    const text = await again.text();
    assert.equal(again.status, 200, `an ejected sole upstream must still be tried: ${text}`);
    assert.equal((await env.mocks.alone.stats()).requests, served.requests + 1);
  });
});

describe('upstream max_concurrency', () => {
  const CAP = 2;
  const env = useGateway(['capped', 'full', 'roomy'], (mocks) => ({
    upstreams: [
      { name: 'capped', url: mocks.capped.url, models: { 'm-cap': 'm-cap' }, max_concurrency: CAP },
      { name: 'full', url: mocks.full.url, models: { 'm-spill': 'm-spill' }, max_concurrency: 1, weight: 1_000_000 },
      { name: 'roomy', url: mocks.roomy.url, models: { 'm-spill': 'm-spill' }, weight: 1 },
    ],
    timeouts: { queue_ms: 15000 },
  }));
  const slow = { 'x-mock-chunks': '4', 'x-mock-chunk-delay-ms': '50' }; // about 200 ms each

  test('a parallel burst never has more than max_concurrency requests at the upstream', async () => {
    const N = 8;
    const t0 = performance.now();
    const statuses = await Promise.all(
      Array.from({ length: N }, async () => {
        const res = await chat(env, { model: 'm-cap' }, { headers: slow });
        await res.arrayBuffer();
        return res.status;
      }),
    );
    const ms = performance.now() - t0;
    assert.deepEqual(statuses, new Array(N).fill(200), 'requests beyond the cap wait for room (queue_ms)');
    const stats = await env.mocks.capped.stats();
    assert.equal(stats.requests, N);
    assert.ok(stats.max_in_flight <= CAP, `${stats.max_in_flight} requests in flight at once, cap ${CAP}`);
    assert.equal(stats.max_in_flight, CAP, 'the burst should fill the cap');
    assert.ok(ms >= (N / CAP) * 200 - 50, `${N} requests of 200 ms through ${CAP} slots took only ${ms.toFixed(0)} ms`);
  });

  test('a full upstream sends the overflow to another upstream of the model, without waiting', async () => {
    const N = 4;
    const t0 = performance.now();
    const responses = await Promise.all(
      Array.from({ length: N }, async () => {
        const res = await chat(env, { model: 'm-spill' }, { headers: slow });
        await res.arrayBuffer();
        return res;
      }),
    );
    const ms = performance.now() - t0;
    assert.deepEqual(responses.map((r) => r.status), new Array(N).fill(200));
    assert.ok(responses.every((r) => r.headers.get('x-relay-attempts') === '1'), 'capacity is not a failed attempt');
    const [full, roomy] = [await env.mocks.full.stats(), await env.mocks.roomy.stats()];
    assert.equal(full.max_in_flight, 1);
    assert.equal(full.requests + roomy.requests, N);
    assert.ok(roomy.requests >= 2, `roomy took ${roomy.requests} of ${N}`);
    assert.ok(ms < 2 * 200 + 300, `${ms.toFixed(0)} ms: requests queued for the full upstream instead of spilling over`);
  });
});

describe('upstream shaping: bounded queue, then 429', () => {
  const QUEUE_MS = 400;
  const env = useGateway(['narrow', 'metered'], (mocks) => ({
    upstreams: [
      { name: 'narrow', url: mocks.narrow.url, models: { 'm-narrow': 'm-narrow' }, max_concurrency: 1 },
      { name: 'metered', url: mocks.metered.url, models: { 'm-metered': 'm-metered' }, rpm: 60 },
    ],
    timeouts: { queue_ms: QUEUE_MS },
  }));

  async function expectCapacity429(res, ms) {
    assert.equal(res.status, 429);
    const err = await readOpenAiError(res, assert);
    assert.equal(err.code, 'upstream_capacity');
    const retryAfter = res.headers.get('retry-after');
    assert.match(retryAfter ?? '', /^[1-9]\d*$/, `Retry-After: ${retryAfter}`);
    assert.notEqual(res.headers.get('x-should-retry'), 'false');
    assert.ok(ms >= QUEUE_MS - 20, `refused after ${ms.toFixed(0)} ms, before queue_ms ${QUEUE_MS}`);
    assert.ok(ms < QUEUE_MS + 800, `refused after ${ms.toFixed(0)} ms`);
    return Number(retryAfter);
  }

  test('max_concurrency full for longer than queue_ms: 429 upstream_capacity with Retry-After', async () => {
    const abort = new AbortController();
    const slowHeaders = { 'x-mock-chunks': '50', 'x-mock-chunk-delay-ms': '100' }; // 5 s
    const slow = chat(env, { model: 'm-narrow', stream: true }, { headers: slowHeaders, signal: abort.signal });
    try {
      await waitFor(async () => (await env.mocks.narrow.stats()).in_flight === 1, { what: 'the slow request upstream' });
      const t0 = performance.now();
      const res = await chat(env, { model: 'm-narrow' });
      await expectCapacity429(res, performance.now() - t0);
      assert.equal((await env.mocks.narrow.stats()).requests, 1, 'the refused request never reached the upstream');
    } finally {
      abort.abort();
      await slow.then((r) => r.body?.cancel()).catch(() => {});
    }
    await waitFor(async () => (await env.mocks.narrow.stats()).in_flight === 0, { timeoutMs: 3000, what: 'the slow request to end' });
    const res = await chat(env, { model: 'm-narrow' });
    assert.equal(res.status, 200, 'room again once the slot is free');
    await res.arrayBuffer();
  });

  test('an answer read whole frees the upstream slot, though the caller has not taken it yet', async () => {
    // The slot is load on the upstream: once its answer is in, the upstream
    // is free for the next request even while the write to a caller that does
    // not read is still waiting for room.
    const bytes = 40_000_000; // far more than the caller's socket takes while it does not read
    const before = (await env.mocks.narrow.stats()).requests;
    const body = JSON.stringify(chatRequest({ model: 'm-narrow' }));
    const sock = net.connect(Number(new URL(env.relay.url).port), '127.0.0.1');
    await once(sock, 'connect');
    sock.pause();
    sock.write(
      'POST /v1/chat/completions HTTP/1.1\r\nhost: relay\r\n' +
        `authorization: Bearer ${KEY}\r\ncontent-type: application/json\r\n` +
        `x-mock-fault: body_bytes=${bytes}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    try {
      await waitFor(
        async () => {
          const s = await env.mocks.narrow.stats();
          return s.requests === before + 1 && s.in_flight === 0;
        },
        { timeoutMs: 5000, what: 'the upstream to have sent the whole answer' },
      );
      const t0 = performance.now();
      const res = await chat(env, { model: 'm-narrow' });
      const ms = performance.now() - t0;
      const answer = await res.text();
      assert.equal(res.status, 200, `the slot was still held for a caller that had not read: ${answer}`);
      assert.ok(ms < QUEUE_MS, `waited ${ms.toFixed(0)} ms for a slot that should have been free`);

      // The slow caller still gets its whole answer.
      let received = 0;
      let text = '';
      sock.on('data', (chunk) => {
        if (received < 512) text += chunk.subarray(0, 512).toString('latin1');
        received += chunk.length;
      });
      sock.resume();
      const whole = () => {
        const headEnd = text.indexOf('\r\n\r\n');
        return headEnd >= 0 && received >= headEnd + 4 + bytes;
      };
      await waitFor(async () => whole(), { timeoutMs: 20000, what: 'the whole answer' });
      assert.match(text, /^HTTP\/1\.1 200 /);
      assert.match(text, new RegExp(`content-length: ${bytes}\r\n`, 'i'));
      assert.equal(received, text.indexOf('\r\n\r\n') + 4 + bytes, 'nothing after the answer');
    } finally {
      sock.destroy();
    }
  });

  test('rpm: 60 (one a second): the second request at once gets 429, and is served after Retry-After', async () => {
    const first = await chat(env, { model: 'm-metered' });
    assert.equal(first.status, 200);
    await first.arrayBuffer();
    const t0 = performance.now();
    const res = await chat(env, { model: 'm-metered' });
    const retryAfter = await expectCapacity429(res, performance.now() - t0);
    assert.equal(retryAfter, 1, 'the next slot is less than a second away');
    assert.equal((await env.mocks.metered.stats()).requests, 1);
    await new Promise((r) => setTimeout(r, retryAfter * 1000));
    const later = await chat(env, { model: 'm-metered' });
    assert.equal(later.status, 200, await later.text());
    assert.equal((await env.mocks.metered.stats()).requests, 2);
  });
});
