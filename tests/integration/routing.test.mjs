// Routing policy through the real binary: upstream regions on responses, logs
// and metrics; data residency per key (also under failover: an EU key whose EU
// upstreams are down gets a 503 naming the rule and nothing reaches the US
// mock); the load-time residency check; least_latency moving traffic to the
// faster upstream and back when latencies swap; least_in_flight avoiding the
// busy upstream; weighted unchanged.

import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';

import { resetMocks } from '../lib/fixtures.mjs';
import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';
import {
  chatRequest,
  closedPort,
  postChat,
  readOpenAiError,
  relayConfig,
  startMock,
  startRelay,
  toYaml,
  waitFor,
} from '../lib/harness.mjs';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const UPSTREAM_KEY = 'sk-routing-upstream-1a3c5e7b9d1f3a5c7e9b';
const keyOf = (name) => `kr-test-routing-${name}-7e9b1d3f5a7c9e1b3d5f`;
const env = { relays: [] };

function upstream(name, mock, more = {}) {
  return { name, url: mock.url, apiKey: UPSTREAM_KEY, models: { 'kimi-k2': 'kimi-k2' }, ...more };
}

async function relay(config) {
  const r = await startRelay(config);
  env.relays.push(r);
  return r;
}

async function chat(r, key, headers = {}, body = {}) {
  const res = await postChat(r, chatRequest(body), { key: keyOf(key), headers });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text };
}

// Which mock answered: the mock's name is in x-relay-upstream.
async function shares(r, key, n) {
  const counts = {};
  for (let i = 0; i < n; i += 1) {
    const { status, headers } = await chat(r, key);
    assert.equal(status, 200);
    const up = headers.get('x-relay-upstream');
    counts[up] = (counts[up] ?? 0) + 1;
  }
  return counts;
}

before(async () => {
  env.fra = await startMock({ name: 'fra', apiKey: UPSTREAM_KEY, args: ['--no-record'] });
  env.ams = await startMock({ name: 'ams', apiKey: UPSTREAM_KEY });
  env.us = await startMock({ name: 'us', apiKey: UPSTREAM_KEY });
  env.fast = await startMock({ name: 'fast', apiKey: UPSTREAM_KEY, args: ['--no-record'] });
  env.slow = await startMock({ name: 'slow', apiKey: UPSTREAM_KEY, args: ['--no-record'] });
});
after(async () => {
  await Promise.all([...env.relays, env.fra, env.ams, env.us, env.fast, env.slow].map((p) => p.stop()));
});

describe('regions and data residency', () => {
  before(async () => {
    env.region = await relay(
      relayConfig({
        keys: [
          { name: 'eu', key: keyOf('eu'), regions: ['eu-fra', 'eu-ams'] },
          { name: 'any', key: keyOf('any') },
        ],
        upstreams: [
          upstream('fra', env.fra, { region: 'eu-fra' }),
          upstream('ams', env.ams, { region: 'eu-ams' }),
          upstream('us', env.us, { region: 'us-east', weight: 5 }),
        ],
        retry: { max_attempts: 3, backoff: { base_ms: 1, max_ms: 5 } },
        routing: { debug_header: true },
        log: { access_log: 'stdout' },
      }),
    );
  });
  beforeEach(async () => {
    await resetMocks({ fra: env.fra, ams: env.ams, us: env.us });
  });

  test('the region of the answering upstream is on the response, the access log and the metrics', async () => {
    const seen = new Set();
    for (let i = 0; i < 14; i += 1) {
      const { status, headers } = await chat(env.region, 'any');
      assert.equal(status, 200);
      seen.add(`${headers.get('x-relay-upstream')}=${headers.get('x-relay-region')}`);
      assert.match(headers.get('x-relay-route'), /^strategy=weighted; upstream=(fra|ams|us); score=/);
    }
    assert.deepEqual([...seen].sort(), ['ams=eu-ams', 'fra=eu-fra', 'us=us-east']);
    const m = await scrapeMetrics(env.region);
    assert.ok(metricSum(m, 'kimi_relay_requests_total', { upstream: 'us', region: 'us-east' }) >= 1);
    assert.ok(metricSum(m, 'kimi_relay_request_duration_seconds_count', { region: 'eu-fra' }) >= 1);
    await waitFor(() => /"upstream":"us","region":"us-east"/.test(env.region.logs()), { what: 'access log region' });
  });

  test('an EU key is served only by EU upstreams, whatever their weights', async () => {
    for (let i = 0; i < 12; i += 1) {
      const { status, headers } = await chat(env.region, 'eu');
      assert.equal(status, 200);
      assert.match(headers.get('x-relay-region'), /^eu-(fra|ams)$/);
    }
    assert.equal((await env.us.requests()).length, 0);
  });

  test('failover stays in the allowed regions: EU upstreams down → 503 naming the rule, nothing reaches the US', async () => {
    await env.fra.setFault('status=503');
    await env.ams.setFault('reset');
    try {
      const { status, text, headers } = await chat(env.region, 'eu');
      assert.equal(status, 503, text);
      const err = JSON.parse(text).error;
      assert.equal(err.code, 'residency_unavailable');
      assert.match(err.message, /key 'eu' is kept to regions eu-fra, eu-ams \(keys\[\]\.regions\)/);
      assert.match(err.message, /upstreams in other regions are never used/);
      assert.equal(headers.get('retry-after'), '1');
      assert.equal((await env.us.requests()).length, 0, 'no request reached the US upstream');
      // The key without a rule fails over to the US upstream.
      const other = await chat(env.region, 'any', { 'x-mock-fault': '' });
      assert.equal(other.status, 200);
    } finally {
      await env.fra.clearFault();
      await env.ams.clearFault();
    }
  });

  test('a key whose model has no upstream in its regions is refused at load, naming model and regions', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kimi-relay-routing-'));
    const path = join(dir, 'relay.yaml');
    writeFileSync(
      path,
      toYaml(
        relayConfig({
          keys: [{ name: 'sg', key: keyOf('sg'), regions: ['ap-sin'] }],
          upstreams: [upstream('fra', env.fra, { region: 'eu-fra' }), upstream('us', env.us)],
        }),
      ),
    );
    let message = '';
    try {
      execFileSync(process.env.RELAY_BIN, ['--check-config', path], { stdio: 'pipe' });
    } catch (err) {
      message = err.stderr.toString();
    }
    assert.match(message, /keys\[0\]\.regions: no upstream may serve model 'kimi-k2' for this key: key 'sg' is kept to ap-sin, but its upstreams are fra \(eu-fra\), us \(no region\)/);
  });
});

describe('strategies', () => {
  before(async () => {
    const ups = [upstream('fast', env.fast), upstream('slow', env.slow)];
    env.latency = await relay(
      relayConfig({
        keys: [{ name: 'k', key: keyOf('k') }],
        upstreams: ups,
        routes: { 'kimi-k2': { strategy: 'least_latency' } },
        routing: { exploration: 0.05, debug_header: true },
      }),
    );
    env.weighted = await relay(relayConfig({ keys: [{ name: 'k', key: keyOf('k') }], upstreams: ups }));
    env.inflight = await relay(
      relayConfig({
        keys: [{ name: 'k', key: keyOf('k') }],
        upstreams: ups,
        routing: { strategy: 'least_in_flight' },
        server: { workers: 1 },
      }),
    );
  });

  test('least_latency: ≥ 90 % of traffic on the 10 ms upstream against one of 200 ms; back within seconds when they swap', async () => {
    await env.fast.setFault('first_byte_delay_ms=10');
    await env.slow.setFault('first_byte_delay_ms=200');
    await shares(env.latency, 'k', 10); // both get measured
    let counts = await shares(env.latency, 'k', 100);
    assert.ok((counts.fast ?? 0) >= 90, `fast served ${counts.fast} of 100: ${JSON.stringify(counts)}`);
    const { headers } = await chat(env.latency, 'k');
    assert.match(headers.get('x-relay-route'), /^strategy=least_latency; upstream=(fast|slow); score=\d+\.\d{3}/);

    // Swap: the formerly fast one is now slow.
    await env.fast.setFault('first_byte_delay_ms=200');
    await env.slow.setFault('first_byte_delay_ms=10');
    // Back within seconds: a whole window of 100 requests with ≥ 90 % on the
    // now-fast upstream. (The window right after the move can still hold a
    // re-probe or two of the other one: each worker keeps its own costs, and
    // the now-fast upstream's old 200 ms fades with the 10 s decay.)
    const t0 = Date.now();
    const windows = [];
    await waitFor(
      async () => {
        counts = await shares(env.latency, 'k', 100);
        windows.push(counts);
        return (counts.slow ?? 0) >= 90;
      },
      { timeoutMs: 15_000, intervalMs: 0, what: "a window of 100 with >= 90 on the now-fast upstream" },
    );
    const seconds = (Date.now() - t0) / 1000;
    assert.ok(seconds < 15, `moved back in ${seconds} s: ${JSON.stringify(windows)}`);
    await env.fast.clearFault();
    await env.slow.clearFault();
  });

  test('weighted is unchanged: equal weights share equally whatever the latency', async () => {
    await env.slow.setFault('first_byte_delay_ms=50');
    const counts = await shares(env.weighted, 'k', 40);
    await env.slow.clearFault();
    assert.equal(counts.fast, 20);
    assert.equal(counts.slow, 20);
  });

  test('least_in_flight: new requests go to the upstream with fewer requests in flight', async () => {
    // Four long streams on whichever upstreams P2C picks, then a burst of
    // short requests: each pick compares the two upstreams' in-flight counts.
    const long = [];
    const controllers = [];
    for (let i = 0; i < 4; i += 1) {
      const c = new AbortController();
      controllers.push(c);
      long.push(
        postChat(env.inflight, chatRequest({ stream: true }), {
          key: keyOf('k'),
          headers: { 'x-mock-chunks': '200', 'x-mock-chunk-delay-ms': '50' },
          signal: c.signal,
        }),
      );
    }
    const heads = await Promise.all(long);
    const busy = {};
    for (const h of heads) busy[h.headers.get('x-relay-upstream')] = (busy[h.headers.get('x-relay-upstream')] ?? 0) + 1;
    assert.deepEqual(Object.values(busy).sort(), [2, 2], `the long streams were spread 2/2: ${JSON.stringify(busy)}`);
    // One more long stream: 3 vs 2 in flight now.
    const extra = new AbortController();
    const third = await postChat(env.inflight, chatRequest({ stream: true }), {
      key: keyOf('k'),
      headers: { 'x-mock-chunks': '200', 'x-mock-chunk-delay-ms': '50' },
      signal: extra.signal,
    });
    const heavy = third.headers.get('x-relay-upstream');
    const light = heavy === 'fast' ? 'slow' : 'fast';
    const counts = await shares(env.inflight, 'k', 20);
    assert.equal(counts[light] ?? 0, 20, `every short request went to the lighter upstream: ${JSON.stringify(counts)}`);
    for (const c of [...controllers, extra]) c.abort();
    await Promise.allSettled([...heads, third].map((h) => h.body?.cancel()));
  });
});
