// The operator console on the admin listener (docs/operations.md, Console):
// its page and files load without a key, with a strict CSP and no inline
// script or style; every data endpoint needs the admin key; the JSON it
// reads has the documented shape, counts what happened, bounds its lists and
// never carries a secret. The browser itself is driven in
// tests/e2e/console_browser.test.mjs.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { chatRequest, postChat, readOpenAiError, relayConfig, sha256Hex, startMock, startRelay } from '../lib/harness.mjs';

const ADMIN_KEY = 'kr-console-admin-3c5e7a9b1d3f5a7c9e1b3d5f7a9c1e3b';
const OPS_KEY = 'kr-console-ops-8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8a';
const VIEWER_KEY = 'kr-console-viewer-6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a6c';
const UPSTREAM_KEYS = { steady: 'sk-console-steady-upstream-2b4d6f8a', flaky: 'sk-console-flaky-upstream-9e1c3a5b' };
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
  "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";
const EJECTION_MS = 60_000;

const env = {};

before(async () => {
  env.dir = mkdtempSync(join(tmpdir(), 'kimi-relay-console-'));
  [env.steady, env.flaky] = await Promise.all([
    startMock({ name: 'steady', apiKey: UPSTREAM_KEYS.steady }),
    startMock({ name: 'flaky', apiKey: UPSTREAM_KEYS.flaky }),
  ]);
  env.relay = await startRelay(
    relayConfig({
      admin: { key_sha256: sha256Hex(ADMIN_KEY) },
      keys: [
        { name: 'ops', key: OPS_KEY, limits: { rpm: 600, tpm: 100000, concurrency: 4 }, budget: { usd: 10, period: 'month' } },
        { name: 'viewer', key: VIEWER_KEY, models: ['kimi-k2'] },
      ],
      upstreams: [
        {
          name: 'flaky',
          url: env.flaky.url,
          apiKey: UPSTREAM_KEYS.flaky,
          weight: 1_000_000,
          region: 'eu-fra',
          models: { 'kimi-k2': 'kimi-k2' },
          health: { eject_after_failures: 2, base_ejection_ms: EJECTION_MS, max_ejection_ms: EJECTION_MS },
        },
        { name: 'steady', url: env.steady.url, apiKey: UPSTREAM_KEYS.steady, weight: 1, max_concurrency: 50, models: { 'kimi-k2': 'kimi-k2', 'kimi-solo': 'kimi-solo' } },
      ],
      prices: [{ model: 'kimi-k2', input: 1, output: 2 }],
      metrics: { node_ids: ['planner-1'] },
      retry: { max_attempts: 3, backoff: { base_ms: 5, max_ms: 10 }, budget: { ratio: 1, min_per_second: 100 } },
      state_dir: env.dir,
    }),
  );
});

after(async () => {
  await Promise.all([env.relay, env.steady, env.flaky].filter(Boolean).map((p) => p.stop()));
  if (env.dir) rmSync(env.dir, { recursive: true, force: true });
});

async function admin(path, { key = ADMIN_KEY, method = 'GET' } = {}) {
  const headers = key === null ? {} : { authorization: `Bearer ${key}` };
  const res = await fetch(`${env.relay.adminUrl}${path}`, { method, headers });
  const text = await res.text();
  return { res, status: res.status, text, body: text && res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : null };
}

function assertSecurityHeaders(res, what) {
  assert.equal(res.headers.get('content-security-policy'), CSP, `${what}: CSP`);
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff', `${what}: nosniff`);
  assert.equal(res.headers.get('referrer-policy'), 'no-referrer', `${what}: referrer`);
  assert.equal(res.headers.get('x-frame-options'), 'DENY', `${what}: framing`);
  assert.equal(res.headers.get('set-cookie'), null, `${what}: no cookie, ever`);
}

describe('the page', () => {
  test('GET / and its files load without a key, from this origin only, with the security headers', async () => {
    const page = await fetch(`${env.relay.adminUrl}/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type'), /^text\/html; charset=utf-8/);
    assertSecurityHeaders(page, 'GET /');
    const html = await page.text();
    assert.match(html, /<form id="login-form"/);
    // No inline script or style: every <script> has a src, no <style>, no style= or on*= attributes.
    assert.doesNotMatch(html, /<script(?![^>]*\ssrc=)[^>]*>/, 'an inline <script>');
    assert.doesNotMatch(html, /<style[\s>]/, 'a <style> element');
    assert.doesNotMatch(html, /\sstyle=/, 'a style attribute');
    assert.doesNotMatch(html, /\son[a-z]+=/, 'an inline event handler');
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    assert.ok(refs.length >= 2, `refs: ${refs}`);
    const files = new Set(['/console/app.js']);
    for (const ref of refs) {
      assert.ok(ref.startsWith('/console/') || ref === 'data:,', `a reference to another origin: ${ref}`);
      if (ref.startsWith('/console/')) files.add(ref);
    }
    // The scripts import their siblings (ES modules): follow them.
    const types = { js: /^text\/javascript/, css: /^text\/css/ };
    for (const file of files) {
      const res = await fetch(`${env.relay.adminUrl}${file}`);
      assert.equal(res.status, 200, file);
      assertSecurityHeaders(res, file);
      const ext = file.split('.').pop();
      assert.match(res.headers.get('content-type'), types[ext], file);
      const text = await res.text();
      for (const m of text.matchAll(/from '\.\/([a-z_]+\.js)'/g)) files.add(`/console/${m[1]}`);
      // Nothing from elsewhere (the SVG namespace is a name, not a fetch), no eval, no HTML parsing.
      const urls = [...text.matchAll(/https?:\/\/[^\s'"`)]+/g)].map((m) => m[0]).filter((u) => u !== 'http://www.w3.org/2000/svg');
      assert.deepEqual(urls, [], `${file} names another origin`);
      assert.doesNotMatch(text, /\beval\(|new Function\(|innerHTML|outerHTML|insertAdjacentHTML|document\.write/, file);
      assert.doesNotMatch(text, /document\.cookie|localStorage/, `${file}: the key lives in sessionStorage only`);
      assert.doesNotMatch(text, /@import|url\(\s*['"]?https?:/, `${file}: no external stylesheet or font`);
    }
    assert.ok(files.size >= 7, `every module was followed: ${[...files]}`);
  });

  test('unknown files are 404, other methods 405', async () => {
    const missing = await fetch(`${env.relay.adminUrl}/console/nope.js`);
    assert.equal(missing.status, 404);
    await readOpenAiError(missing, assert);
    const post = await fetch(`${env.relay.adminUrl}/`, { method: 'POST', body: 'x' });
    assert.equal(post.status, 405);
    assert.match(post.headers.get('allow'), /GET/);
    await post.arrayBuffer();
  });
});

describe('the data', () => {
  test('every data endpoint answers 401 without the admin key, with a caller key, or with a wrong one', async () => {
    const endpoints = [
      ['GET', '/admin/console/state'],
      ['GET', '/admin/console/history'],
      ['GET', '/admin/keys'],
      ['GET', '/admin/keys/ops'],
      ['PATCH', '/admin/keys/ops'],
      ['DELETE', '/admin/keys/ops'],
      ['POST', '/admin/keys'],
      ['POST', '/admin/keys/ops/rotate'],
      ['GET', '/admin/events'],
      ['POST', '/admin/reload'],
    ];
    for (const [method, path] of endpoints) {
      for (const key of [null, OPS_KEY, 'kr-wrong']) {
        const r = await admin(path, { key, method });
        assert.equal(r.status, 401, `${method} ${path} with ${key}: ${r.text}`);
        assertSecurityHeaders(r.res, path);
        assert.equal(r.res.headers.get('cache-control'), 'no-store', path);
        assert.equal(r.body.error.code, 'invalid_api_key');
      }
    }
  });

  test('state: keys, upstreams and nodes, counted as they happen', async () => {
    const sent = { ops: 0, viewer: 0 };
    for (let i = 0; i < 5; ++i) {
      const r = await postChat(env.relay, chatRequest({ max_tokens: 20 }), { key: OPS_KEY, headers: { 'x-node-id': 'planner-1' } });
      assert.equal(r.status, 200, await r.text());
      sent.ops += 1;
    }
    const stream = await postChat(env.relay, chatRequest({ stream: true }), { key: VIEWER_KEY, headers: { 'x-node-id': 'rogue-7' } });
    assert.equal(stream.status, 200);
    await stream.text();
    sent.viewer += 1;

    // The stream's upstream slot is given back once the upstream's last read
    // is in, before the last write to the caller; the bounded wait only keeps
    // a slow machine from turning that order into a flaky read.
    let r;
    for (const until = Date.now() + 2000; ; ) {
      r = await admin('/admin/console/state');
      const flakyNow = r.body.upstreams?.find((u) => u.name === 'flaky');
      if (flakyNow?.in_flight === 0 || Date.now() > until) break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.equal(r.status, 200, r.text);
    assert.match(r.res.headers.get('content-type'), /^application\/json/);
    assert.equal(r.res.headers.get('cache-control'), 'no-store');
    assertSecurityHeaders(r.res, 'state');
    const s = r.body;
    assert.equal(s.object, 'console.state');
    assert.match(s.version, /^\d+\.\d+\.\d+/);
    assert.ok(Date.parse(s.time) && Date.parse(s.started_at) <= Date.parse(s.time));
    assert.equal(s.keys_total, 2);
    assert.deepEqual(s.models.sort(), ['kimi-k2', 'kimi-solo']);

    const ops = s.keys.find((k) => k.name === 'ops');
    assert.deepEqual(ops.limits, { rpm: 600, rpm_burst: 0, tpm: 100000, tpm_burst: 0, concurrency: 4 });
    assert.equal(ops.budget.usd, 10);
    assert.equal(ops.last_minute.requests, sent.ops);
    assert.ok(ops.last_minute.tokens > 0, JSON.stringify(ops.last_minute));
    assert.equal(ops.requests_total, sent.ops);
    assert.equal(ops.rate.in_flight, 0);
    assert.ok(ops.usage.spent_usd > 0);
    assert.ok(Date.parse(ops.usage.resets_at) > Date.now(), 'a monthly budget resets in the future');
    assert.equal(ops.source, 'file');
    assert.ok(!('sha256' in ops), 'no digest');
    assert.equal(s.keys.find((k) => k.name === 'viewer').last_minute.requests, sent.viewer);

    assert.deepEqual(s.upstreams.map((u) => u.name), ['flaky', 'steady']);
    const flaky = s.upstreams.find((u) => u.name === 'flaky');
    assert.equal(flaky.region, 'eu-fra');
    assert.equal(flaky.weight, 1_000_000);
    assert.deepEqual(flaky.models, ['kimi-k2']);
    assert.equal(flaky.health.state, 'healthy');
    assert.equal(flaky.health.ejected_until, null);
    assert.equal(flaky.health.eject_after_failures, 2);
    assert.equal(flaky.in_flight, 0);
    assert.equal(flaky.last_minute.requests, 6);
    assert.equal(flaky.last_minute.attempts, 6);
    assert.equal(flaky.last_minute.error_rate, 0);
    assert.equal(flaky.requests_total, 6);
    for (const q of ['p50', 'p95', 'p99']) assert.ok(flaky.latency_ms[q] > 0, `latency ${q}`);
    assert.ok(flaky.ttft_ms.p50 > 0, 'the stream had a first token');
    assert.ok(flaky.cost_usd_total > 0 && flaky.cost_usd_last_hour === flaky.cost_usd_total);
    const steady = s.upstreams.find((u) => u.name === 'steady');
    assert.equal(steady.region, null);
    assert.equal(steady.max_concurrency, 50);
    assert.equal(steady.last_minute.error_rate, null, 'no attempt: no rate');
    assert.equal(steady.latency_ms.p50, null, 'an empty window is null');

    const nodes = Object.fromEntries(s.nodes.map((n) => [n.node, n]));
    assert.equal(nodes['planner-1'].requests_total, sent.ops);
    assert.equal(nodes['planner-1'].requests_last_minute, sent.ops);
    assert.ok(nodes['planner-1'].latency_ms.p99 >= nodes['planner-1'].latency_ms.p50);
    assert.equal(nodes.other.requests_total, 1, 'an unlisted X-Node-Id counts as "other"');
    assert.deepEqual(s.node_ids, ['planner-1']);
    assert.deepEqual(s.bounds, {
      keys_listed: 1000,
      history_points: 360,
      history_interval_seconds: 10,
      tracked_keys: 4096,
      tracked_upstreams: 1024,
      tracked_nodes: 256,
    });
  });

  test('history: the documented columns, at most 360 samples of 10 s', async () => {
    const r = await admin('/admin/console/history');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.res.headers.get('cache-control'), 'no-store');
    const h = r.body;
    assert.equal(h.object, 'console.history');
    assert.equal(h.interval_seconds, 10);
    assert.equal(h.capacity, 360);
    const n = h.t.length;
    assert.ok(n >= 1 && n <= 360, `${n} samples (one is taken at start)`);
    for (const column of [h.requests, h.errors, h.spend_usd, h.latency_ms.p50, h.latency_ms.p95, h.latency_ms.p99, h.ttft_ms.p50, h.ttft_ms.p95, h.ttft_ms.p99]) {
      assert.equal(column.length, n);
    }
    for (let i = 1; i < n; ++i) assert.ok(h.t[i] > h.t[i - 1]);
    assert.ok(Math.abs(h.t[n - 1] - Date.now()) < 60_000);
  });

  test('failed attempts raise the error rate; an ejection shows with its end', async () => {
    await env.flaky.setFault('status=503;times=2');
    for (let i = 0; i < 2; ++i) {
      const r = await postChat(env.relay, chatRequest(), { key: OPS_KEY });
      assert.equal(r.status, 200, await r.text());
      assert.equal(r.headers.get('x-relay-upstream'), 'steady');
    }
    const s = (await admin('/admin/console/state')).body;
    const flaky = s.upstreams.find((u) => u.name === 'flaky');
    assert.equal(flaky.health.state, 'ejected');
    const until = Date.parse(flaky.health.ejected_until);
    assert.ok(until > Date.now() + EJECTION_MS / 2 && until <= Date.now() + EJECTION_MS + 1000, flaky.health.ejected_until);
    assert.equal(flaky.health.ejections_total, 1);
    assert.equal(flaky.last_minute.failed_attempts, 2);
    assert.ok(flaky.last_minute.error_rate > 0 && flaky.last_minute.error_rate < 1, String(flaky.last_minute.error_rate));
    const steady = s.upstreams.find((u) => u.name === 'steady');
    assert.equal(steady.last_minute.requests, 2);
    assert.equal(steady.last_minute.error_rate, 0);
  });

  test('no secret reaches the page: caller, upstream and admin keys, or their digests', async () => {
    const texts = [];
    for (const path of ['/admin/console/state', '/admin/console/history', '/admin/keys']) texts.push((await admin(path)).text);
    for (const secret of [ADMIN_KEY, OPS_KEY, VIEWER_KEY, ...Object.values(UPSTREAM_KEYS)]) {
      for (const text of texts) {
        assert.ok(!text.includes(secret), `a secret in the console's data: ${secret.slice(0, 12)}...`);
        assert.ok(!text.includes(sha256Hex(secret)), 'a digest in the console\'s data');
      }
    }
    assert.ok(!texts.join('').includes('authorization'));
  });
});

describe('bounds', () => {
  test('the key list is capped at 1000 (keys_total says how many there are)', async () => {
    const keys = [];
    for (let i = 0; i < 1005; ++i) keys.push({ name: `k${String(i).padStart(4, '0')}`, key: `kr-console-bound-${i}-0123456789abcdef` });
    const relay = await startRelay(
      relayConfig({
        admin: { key_sha256: sha256Hex(ADMIN_KEY) },
        keys,
        upstreams: [{ name: 'steady', url: env.steady.url, apiKey: UPSTREAM_KEYS.steady, models: { 'kimi-k2': 'kimi-k2' } }],
      }),
    );
    try {
      const res = await fetch(`${relay.adminUrl}/admin/console/state`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
      const s = await res.json();
      assert.equal(s.keys_total, 1005);
      assert.equal(s.keys.length, 1000);
      const all = await fetch(`${relay.adminUrl}/admin/keys`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
      assert.equal((await all.json()).data.length, 1005, '/admin/keys lists every key');
    } finally {
      await relay.stop();
    }
  });

  test('without admin.key_sha256 the data endpoints are 403 (the page still loads, and shows nothing)', async () => {
    const relay = await startRelay(
      relayConfig({ upstreams: [{ name: 'steady', url: env.steady.url, apiKey: UPSTREAM_KEYS.steady, models: { 'kimi-k2': 'kimi-k2' } }] }),
    );
    try {
      const page = await fetch(`${relay.adminUrl}/`);
      assert.equal(page.status, 200);
      await page.text();
      const res = await fetch(`${relay.adminUrl}/admin/console/state`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
      assert.equal(res.status, 403);
      assert.equal((await readOpenAiError(res, assert)).code, 'admin_disabled');
    } finally {
      await relay.stop();
    }
  });
});
