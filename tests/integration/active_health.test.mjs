// Active health checks (upstreams[].health.active_interval_ms): the gateway
// probes GET {base_url}/models with the upstream's own key, an upstream that
// fails its probes is ejected without any caller traffic, and one that was
// ejected is let back in by a successful probe long before its ejection time
// would have run out.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { chatRequest, postChat, relayConfig, startMock, startRelay, waitFor } from '../lib/harness.mjs';
import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';

const KEY = 'kr-test-active-health-5e1c9a7b3d5f1e9c7a3b5d1f9e7c3a5b';
const UPSTREAM_KEY = 'sk-active-health-upstream-8d6b4f2a0c8e6d4b2f0a';
const INTERVAL_MS = 150;

describe('active health checks', () => {
  const env = {};
  before(async () => {
    env.probed = await startMock({ name: 'probed', apiKey: UPSTREAM_KEY });
    env.steady = await startMock({ name: 'steady', apiKey: UPSTREAM_KEY });
    env.relay = await startRelay(
      relayConfig({
        keys: [{ name: 'active', key: KEY }],
        upstreams: [
          {
            name: 'probed',
            url: env.probed.url,
            apiKey: UPSTREAM_KEY,
            models: { 'm-active': 'm-active' },
            // Ejected for a minute after 2 failures: only an active probe can
            // bring it back within this test.
            health: { eject_after_failures: 2, base_ejection_ms: 60_000, active_interval_ms: INTERVAL_MS },
          },
          {
            name: 'steady',
            url: env.steady.url,
            apiKey: UPSTREAM_KEY,
            models: { 'm-active': 'm-active' },
            health: { eject_after_failures: 0 },
          },
        ],
      }),
    );
  });
  after(async () => {
    await Promise.all([env.relay, env.probed, env.steady].filter(Boolean).map((p) => p.stop()));
  });

  const state = async () =>
    metricSum(await scrapeMetrics(env.relay), 'kimi_relay_upstream_health_state', { upstream: 'probed' });
  const probes = async () => (await env.probed.requests()).filter((r) => r.method === 'GET' && r.path === '/v1/models');

  test('probes GET /models with the upstream key, on the configured interval', async () => {
    await env.probed.clearRequests();
    const t0 = performance.now();
    await waitFor(async () => (await probes()).length >= 3, { timeoutMs: 5000, what: '3 active probes' });
    const elapsed = performance.now() - t0;
    assert.ok(elapsed >= 2 * INTERVAL_MS * 0.9, `3 probes came after ${elapsed} ms, faster than the interval`);
    // The first may come up to one interval after the clear; allow for a loaded runner.
    assert.ok(elapsed < 3 * INTERVAL_MS + 600, `3 probes took ${elapsed} ms: slower than the interval`);
    for (const p of await probes()) {
      const auth = p.headers.find(([n]) => n.toLowerCase() === 'authorization');
      assert.deepEqual(auth?.[1], `Bearer ${UPSTREAM_KEY}`);
    }
    assert.equal((await env.steady.requests()).filter((r) => r.path === '/v1/models').length, 0,
      'an upstream without active_interval_ms is never probed');
  });

  test('failing probes eject without caller traffic; a passing probe restores at once', async () => {
    await env.probed.setFault('status=503');
    await waitFor(async () => (await state()) === 2, { timeoutMs: 5000, what: 'ejection by failed probes' });
    // Callers are served by the other upstream meanwhile.
    await env.steady.clearRequests();
    const res = await postChat(env.relay, chatRequest({ model: 'm-active' }), { key: KEY });
    assert.equal(res.status, 200, await res.text());
    assert.equal(res.headers.get('x-relay-upstream'), 'steady');

    await env.probed.clearFault();
    const t0 = performance.now();
    await waitFor(async () => (await state()) === 0, { timeoutMs: 5000, what: 'recovery by a passing probe' });
    assert.ok(performance.now() - t0 < 10_000, 'recovered well before the 60 s ejection ran out');
    // And it takes traffic again.
    await waitFor(
      async () => {
        const r = await postChat(env.relay, chatRequest({ model: 'm-active' }), { key: KEY });
        await r.arrayBuffer();
        return r.headers.get('x-relay-upstream') === 'probed';
      },
      { timeoutMs: 5000, what: 'a request served by the recovered upstream' },
    );
  });
});
