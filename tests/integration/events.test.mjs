// The relay event stream (GET /v1/events, /admin/events, /v1/mcp/{server}/events):
// what an operator sees with `curl -N`, live and in order — routing, retries,
// failover, the finish of each request, rate limits, budgets, upstream
// ejection and restore, MCP sessions — who may see what (a caller key only its
// own requests, the admin key everything), filters, Last-Event-ID resume, the
// per-key stream cap, HTTP/2, and the errors of the endpoint.
//
// Upstream choice is deterministic by weight: "primary" (weight 1000000) takes
// every first attempt for m-failover, "secondary" (weight 1) the retry, since a
// retry prefers an upstream the request has not tried; likewise "flaky" and
// "steady" for m-eject.
//
// Every frame read here is checked for the documented shape: the stream opens
// with `retry: 2000` and a comment, then `id: N\nevent: KIND\ndata: {...}`
// with the JSON's id and kind equal to N and KIND.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, beforeEach, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { PROTOCOLS, openClient } from '../lib/clients.mjs';
import { resetMocks } from '../lib/fixtures.mjs';
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

const ADMIN_KEY = 'kr-events-admin-9c1e3a5b7d9f1b3d5f7a9c1e3b5d7f9a';
const UPSTREAM_KEY = 'sk-events-upstream-secret-4d6f8a0c2e4b6d8f0a2c';
const MCP_KEY = 'sk-events-mcp-server-7a9c1e3b5d7f9a1c3e5b';
const keyOf = (name) => `kr-events-${name}-2b4d6f8a0c2e4a6c8e0b2d4f`;
const JSON_AND_SSE = 'application/json, text/event-stream';
// flaky's first ejection: long enough for a request to see it ejected on a busy machine.
const EJECTION_MS = 700;

const env = {};
const mocks = {};

before(async () => {
  const started = await Promise.all(
    ['primary', 'secondary', 'flaky', 'steady'].map((name) => startMock({ name, apiKey: UPSTREAM_KEY })),
  );
  for (const m of started) mocks[m.name] = m;
  env.rec = await startRecordingMcp({ name: 'rec', apiKey: MCP_KEY });
  const noEject = { eject_after_failures: 0 };
  env.relay = await startRelay(
    relayConfig({
      keys: [
        { name: 'ops', key: keyOf('ops') },
        { name: 'alice', key: keyOf('alice') },
        { name: 'bob', key: keyOf('bob'), limits: { rpm: 2 } },
        { name: 'spender', key: keyOf('spender'), budget: { max_output_tokens: 50, period: 'total' } },
        { name: 'capped', key: keyOf('capped') },
        { name: 'other', key: keyOf('other') },
      ],
      upstreams: [
        {
          name: 'primary',
          url: mocks.primary.url,
          apiKey: UPSTREAM_KEY,
          weight: 1_000_000,
          models: { 'm-failover': 'm-failover', 'm-plain': 'm-plain' },
          health: noEject,
        },
        { name: 'secondary', url: mocks.secondary.url, apiKey: UPSTREAM_KEY, weight: 1, models: { 'm-failover': 'm-failover-s' }, health: noEject },
        {
          name: 'flaky',
          url: mocks.flaky.url,
          apiKey: UPSTREAM_KEY,
          weight: 1_000_000,
          models: { 'm-eject': 'm-eject' },
          health: { eject_after_failures: 2, base_ejection_ms: EJECTION_MS, max_ejection_ms: 4 * EJECTION_MS },
        },
        { name: 'steady', url: mocks.steady.url, apiKey: UPSTREAM_KEY, weight: 1, models: { 'm-eject': 'm-eject-s', 'm-solo': 'm-solo' }, health: noEject },
      ],
      admin: { key_sha256: sha256Hex(ADMIN_KEY) },
      retry: { max_attempts: 3, backoff: { base_ms: 10, max_ms: 50 }, budget: { ratio: 1, min_per_second: 100 } },
      prices: [{ model: 'm-failover', input: 1000, output: 2000 }],
      routes: { 'm-solo': { fallback_models: ['m-plain'] } },
      mcp: {
        servers: [{ name: 'rec', url: env.rec.url, api_key: MCP_KEY }],
        session_secret: 'events-test-session-secret-0123456789abcdef',
      },
    }),
  );
});

after(async () => {
  await Promise.all([env.relay, ...Object.values(mocks)].filter(Boolean).map((p) => p.stop()));
  await env.rec?.close();
});

beforeEach(async () => {
  await resetMocks(mocks);
});

// ---------------------------------------------------------------------------
// Reading an event stream

// Watches an SSE body (a web ReadableStream) in the background:
//   hello      the first block (must be "retry: 2000\n: kimi-relay events for ...")
//   events     [{...json, $id, $event, $at}] of every event frame, in order
//   malformed  blocks that are neither an event frame nor a comment
//   waitEvent(pred)  the first event matching pred (waits up to timeoutMs)
//   close()    cancels the stream and waits for the reader to stop
function watchStream(body, abort) {
  const s = { hello: null, events: [], comments: [], malformed: [], ended: false, error: null, closing: false };
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const handle = (block, at) => {
    if (s.hello === null) {
      s.hello = block;
      return;
    }
    const lines = block.split('\n');
    if (lines.every((l) => l.startsWith(':'))) {
      s.comments.push(block);
      return;
    }
    const fields = {};
    let ok = true;
    for (const line of lines) {
      const m = line.match(/^(id|event|data): (.*)$/);
      if (!m || m[1] in fields) ok = false;
      else fields[m[1]] = m[2];
    }
    let json;
    try {
      json = JSON.parse(fields.data);
    } catch {
      ok = false;
    }
    if (!ok || !fields.event) {
      s.malformed.push(block);
      return;
    }
    s.events.push({ ...json, $id: fields.id === undefined ? undefined : Number(fields.id), $event: fields.event, $at: at });
  };
  s.done = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        const at = performance.now();
        let blank;
        while ((blank = buffer.indexOf('\n\n')) >= 0) {
          handle(buffer.slice(0, blank), at);
          buffer = buffer.slice(blank + 2);
        }
      }
    } catch (err) {
      if (!s.closing) s.error = err;
    } finally {
      s.ended = true;
    }
  })();
  s.waitEvent = (pred, { timeoutMs = 3000, what = 'an event' } = {}) =>
    waitFor(
      () => {
        const found = s.events.find(pred);
        if (found) return found;
        if (s.ended) throw new Error(`stream ended (${s.error ?? 'cleanly'}) before ${what}; got ${kinds(s.events)}`);
        return null;
      },
      { timeoutMs, what: `${what}; events so far: ${kinds(s.events)}` },
    );
  s.close = async () => {
    s.closing = true;
    abort();
    await reader.cancel().catch(() => {});
    await s.done;
  };
  return s;
}

const kinds = (events) => JSON.stringify(events.map((e) => `${e.$id}:${e.kind}${e.request_id ? `(${e.request_id})` : ''}`));

// Every frame has the documented shape: id and event lines that agree with the JSON.
function assertWellFormed(s) {
  assert.match(s.hello ?? '', /^retry: 2000\n: kimi-relay events for .+$/, 'the stream opens with retry: 2000 and a comment');
  assert.deepEqual(s.malformed, [], 'every block is an event frame or a comment');
  for (const e of s.events) {
    assert.equal(e.$event, e.kind, `event: line vs JSON kind in ${JSON.stringify(e)}`);
    if (e.kind === 'events.dropped') continue;
    assert.equal(e.$id, e.id, `id: line vs JSON id in ${JSON.stringify(e)}`);
    assert.match(e.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, `time of ${JSON.stringify(e)}`);
  }
  for (let i = 1; i < s.events.length; ++i) {
    assert.ok(s.events[i].$id > s.events[i - 1].$id, `ids increase: ${kinds(s.events)}`);
  }
}

// Opens an event stream with fetch. `key` goes in Authorization: Bearer (null: none).
async function subscribe({ base, path = '/v1/events', query = '', key = ADMIN_KEY, headers = {} } = {}) {
  const controller = new AbortController();
  const h = { accept: 'text/event-stream', ...headers };
  if (key !== null) h.authorization = `Bearer ${key}`;
  const res = await fetch(`${base ?? env.relay.url}${path}${query}`, { headers: h, signal: controller.signal });
  if (res.status !== 200) return { res };
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const s = watchStream(res.body, () => controller.abort());
  s.res = res;
  // The first block is written at once: a stream is live once it arrived.
  await waitFor(() => s.hello !== null || s.ended, { what: 'the first block of the event stream' });
  return s;
}

async function chat(key, body = {}, headers = {}) {
  const res = await postChat(env.relay, chatRequest({ model: 'm-plain', ...body }), { key: keyOf(key), headers });
  const text = await res.text();
  return { res, text, status: res.status, id: res.headers.get('x-request-id') };
}

const ofRequest = (s, id) => s.events.filter((e) => e.request_id === id);

// ---------------------------------------------------------------------------

describe('a failover, live', () => {
  test('curl -sN ... | grep --line-buffered request.failover shows the failover before the request is answered', async () => {
    const cmd =
      `curl -sN --noproxy '*' -H 'Authorization: Bearer ${ADMIN_KEY}' ${env.relay.url}/v1/events` +
      ' | grep --line-buffered request.failover';
    const pipeline = spawn('sh', ['-c', cmd], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const lines = [];
    let pending = '';
    pipeline.stdout.setEncoding('utf8');
    pipeline.stdout.on('data', (text) => {
      pending += text;
      const parts = pending.split('\n');
      pending = parts.pop();
      for (const line of parts) lines.push({ line, at: performance.now() });
    });
    let stderr = '';
    pipeline.stderr.on('data', (t) => (stderr += t));
    try {
      // Prime until the pipeline shows a failover (curl has connected by then).
      let primed = false;
      for (let i = 0; i < 20 && !primed; ++i) {
        await mocks.primary.setFault('status=503;times=1');
        const rid = `ev-curl-prime-${i}-${Date.now()}`;
        const r = await chat('ops', { model: 'm-failover' }, { 'x-request-id': rid });
        assert.equal(r.status, 200, r.text);
        primed = await waitFor(() => lines.some((l) => l.line.includes(rid)), { timeoutMs: 500, what: 'primed' }).catch(() => false);
      }
      assert.ok(primed, `the curl | grep pipeline never showed a request.failover; stderr: ${stderr}; lines: ${JSON.stringify(lines)}`);

      // The measured failover: the secondary answers 700 ms after it is asked.
      await mocks.primary.setFault('status=503;times=1');
      await mocks.secondary.setFault('first_byte_delay_ms=700;times=1');
      const rid = `ev-curl-live-${Date.now()}`;
      const t0 = performance.now();
      const r = await chat('ops', { model: 'm-failover' }, { 'x-request-id': rid });
      const answeredAt = performance.now();
      assert.equal(r.status, 200, r.text);
      assert.equal(r.res.headers.get('x-relay-upstream'), 'secondary');
      const dataLine = await waitFor(() => lines.find((l) => l.line.startsWith('data: ') && l.line.includes(rid)), {
        timeoutMs: 1000,
        what: `the data line of ${rid}'s failover in the grep output`,
      });
      const eventLine = lines.find((l) => l.line === 'event: request.failover' && l.at <= dataLine.at);
      assert.ok(eventLine, `an "event: request.failover" line; lines: ${JSON.stringify(lines.map((l) => l.line))}`);
      const ev = JSON.parse(dataLine.line.slice('data: '.length));
      assert.equal(ev.kind, 'request.failover');
      assert.equal(ev.from, 'primary');
      assert.equal(ev.to, 'secondary');
      assert.equal(ev.reason, 'http_status');
      assert.equal(ev.key, 'ops');
      assert.ok(
        dataLine.at < answeredAt,
        `the failover line came ${(dataLine.at - t0).toFixed(0)} ms after the request, ` +
          `the answer after ${(answeredAt - t0).toFixed(0)} ms: not live (buffered?)`,
      );
    } finally {
      try {
        process.kill(-pipeline.pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
  });

  test('an admin stream sees routed → retry → failover → routed → finished, in order, while the request runs', async () => {
    const s = await subscribe();
    try {
      await mocks.primary.setFault('status=503;times=1');
      await mocks.secondary.setFault('first_byte_delay_ms=600;times=1');
      const r = await chat('ops', { model: 'm-failover' }, { 'x-node-id': 'planner-9' });
      const answeredAt = performance.now();
      assert.equal(r.status, 200, r.text);
      assert.equal(r.res.headers.get('x-relay-attempts'), '2');
      assert.ok(r.id, 'x-request-id');
      await s.waitEvent((e) => e.request_id === r.id && e.kind === 'request.finished', { what: 'request.finished' });
      assertWellFormed(s);
      const mine = ofRequest(s, r.id);
      assert.deepEqual(
        mine.map((e) => e.kind),
        ['request.routed', 'request.retry', 'request.failover', 'request.routed', 'request.finished'],
        kinds(mine),
      );
      const [routed1, retry, failover, routed2, finished] = mine;
      for (const e of mine) {
        assert.equal(e.key, 'ops');
        assert.equal(e.node, 'planner-9');
      }
      assert.equal(routed1.upstream, 'primary');
      assert.equal(routed1.model, 'm-failover');
      assert.equal(routed1.attempt, 1);
      assert.equal(retry.upstream, 'primary', 'a retry names the upstream that failed');
      assert.equal(retry.reason, 'http_status');
      assert.equal(retry.status, 503);
      assert.equal(retry.attempt, 1);
      assert.ok(Number.isInteger(retry.delay_ms) && retry.delay_ms >= 0 && retry.delay_ms <= 50, `delay_ms ${retry.delay_ms}`);
      assert.equal(failover.from, 'primary');
      assert.equal(failover.to, 'secondary');
      assert.equal(failover.reason, 'http_status');
      assert.equal(routed2.upstream, 'secondary');
      assert.equal(routed2.model, 'm-failover');
      assert.equal(routed2.attempt, 2);
      assert.equal(finished.status, 200);
      assert.equal(finished.upstream, 'secondary');
      assert.equal(finished.model, 'm-failover');
      assert.equal(finished.attempt, 2);
      assert.ok(!('reason' in finished), 'a success has no error code');
      assert.ok(finished.latency_ms >= 500, `latency_ms ${finished.latency_ms} (the secondary took 600 ms)`);
      assert.ok(finished.prompt_tokens >= 1, `prompt_tokens ${finished.prompt_tokens}`);
      assert.ok(finished.completion_tokens >= 1, `completion_tokens ${finished.completion_tokens}`);
      assert.ok(finished.cost_usd > 0, `cost_usd ${finished.cost_usd} (m-failover has a price)`);
      // Live: everything up to the second routing arrived while the secondary was still thinking.
      assert.ok(routed2.$at < answeredAt, 'the failover events arrived before the answer');
    } finally {
      await s.close();
    }
  });
});

describe('streams and fallback models', () => {
  test('a streamed request: routed → first_byte (ttft_ms) → finished', async () => {
    const s = await subscribe({ query: '?kind=request.' });
    try {
      const r = await chat('ops', { stream: true }, { 'x-mock-chunks': '3' });
      assert.equal(r.status, 200, r.text);
      await s.waitEvent((e) => e.request_id === r.id && e.kind === 'request.finished', { what: 'finish of the stream' });
      assertWellFormed(s);
      const mine = ofRequest(s, r.id);
      assert.deepEqual(mine.map((e) => e.kind), ['request.routed', 'request.first_byte', 'request.finished'], kinds(mine));
      const [, firstByte, finished] = mine;
      assert.equal(firstByte.upstream, 'primary');
      assert.ok(Number.isInteger(firstByte.ttft_ms) && firstByte.ttft_ms >= 0, `ttft_ms ${firstByte.ttft_ms}`);
      assert.equal(finished.status, 200);
      assert.equal(finished.completion_tokens, 3);
    } finally {
      await s.close();
    }
  });

  test('every upstream of a model failed: request.fallback_model (from, to), then the fallback is routed and finishes', async () => {
    const s = await subscribe({ query: '?kind=request.' });
    try {
      await mocks.steady.setFault('status=503;times=3');
      const r = await chat('ops', { model: 'm-solo' });
      assert.equal(r.status, 200, r.text);
      await s.waitEvent((e) => e.request_id === r.id && e.kind === 'request.finished', { what: 'finish' });
      assertWellFormed(s);
      const mine = ofRequest(s, r.id);
      const fallback = mine.find((e) => e.kind === 'request.fallback_model');
      assert.ok(fallback, kinds(mine));
      assert.equal(fallback.from, 'm-solo');
      assert.equal(fallback.to, 'm-plain');
      const routed = mine.filter((e) => e.kind === 'request.routed');
      assert.deepEqual(
        routed.map((e) => [e.model, e.upstream, e.attempt]),
        [
          ['m-solo', 'steady', 1],
          ['m-plain', 'primary', 2],
        ],
      );
      assert.ok(routed[1].$id > fallback.$id, 'the fallback is announced before it is routed');
      assert.equal(mine.at(-1).kind, 'request.finished');
      assert.equal(mine.at(-1).model, 'm-plain');
      assert.equal(mine.at(-1).upstream, 'primary');
      assert.equal(mine.at(-1).status, 200);
    } finally {
      await s.close();
    }
  });
});

describe('who sees what', () => {
  test("a caller sees only its own requests; another key's refusal reaches that key with retry_after_ms", async () => {
    const alice = await subscribe({ key: keyOf('alice') });
    const bob = await subscribe({ key: keyOf('bob') });
    try {
      assert.match(alice.hello, /alice/);
      const b1 = await chat('bob');
      const b2 = await chat('bob');
      const b3 = await chat('bob');
      assert.deepEqual([b1.status, b2.status, b3.status], [200, 200, 429], b3.text);
      const limited = await bob.waitEvent((e) => e.kind === 'request.rate_limited', { what: "bob's request.rate_limited" });
      await bob.waitEvent((e) => e.request_id === b2.id && e.kind === 'request.finished', { what: "bob's 2nd finish" });
      assert.equal(limited.request_id, b3.id);
      assert.equal(limited.key, 'bob');
      assert.equal(limited.reason, 'requests');
      assert.equal(limited.model, 'm-plain');
      assert.ok(Number.isInteger(limited.retry_after_ms) && limited.retry_after_ms > 0, `retry_after_ms ${limited.retry_after_ms}`);
      assert.equal(typeof limited.message, 'string');
      assert.match(limited.message, /bob/);

      const a1 = await chat('alice');
      assert.equal(a1.status, 200, a1.text);
      await alice.waitEvent((e) => e.request_id === a1.id && e.kind === 'request.finished', { what: "alice's finish" });
      assertWellFormed(alice);
      assertWellFormed(bob);
      assert.deepEqual(
        alice.events.map((e) => e.kind),
        ['request.routed', 'request.finished'],
        `alice's stream: ${kinds(alice.events)}`,
      );
      for (const e of alice.events) assert.equal(e.key, 'alice', `alice saw ${JSON.stringify(e)}`);
      for (const e of bob.events) assert.equal(e.key, 'bob', `bob saw ${JSON.stringify(e)}`);
      assert.ok(!bob.events.some((e) => e.request_id === a1.id), "bob never sees alice's request");
      for (const id of [b1.id, b2.id]) {
        assert.ok(bob.events.some((e) => e.request_id === id && e.kind === 'request.finished'), `bob sees his ${id}`);
      }
    } finally {
      await Promise.all([alice.close(), bob.close()]);
    }
  });

  test('budget: 45 of 50 output tokens → budget.threshold (used_fraction >= 0.8); the next request → budget.exceeded', async () => {
    const s = await subscribe({ key: keyOf('spender') });
    try {
      const r1 = await chat('spender', { max_tokens: 45 }, { 'x-mock-chunks': '45' });
      assert.equal(r1.status, 200, r1.text);
      assert.equal(JSON.parse(r1.text).usage.completion_tokens, 45);
      const threshold = await s.waitEvent((e) => e.kind === 'budget.threshold', { what: 'budget.threshold' });
      assert.equal(threshold.key, 'spender');
      assert.equal(threshold.request_id, r1.id);
      assert.ok(threshold.used_fraction >= 0.8 && threshold.used_fraction <= 1, `used_fraction ${threshold.used_fraction}`);
      const finished = await s.waitEvent((e) => e.request_id === r1.id && e.kind === 'request.finished', { what: 'finish' });
      assert.equal(finished.completion_tokens, 45);

      const r2 = await chat('spender', { max_tokens: 10 }, { 'x-mock-chunks': '10' });
      assert.equal(r2.status, 429, r2.text);
      const exceeded = await s.waitEvent((e) => e.kind === 'budget.exceeded', { what: 'budget.exceeded' });
      assert.equal(exceeded.key, 'spender');
      assert.equal(exceeded.request_id, r2.id);
      assert.equal(typeof exceeded.message, 'string');
      assert.ok(exceeded.message.length > 0);
      assertWellFormed(s);
      assert.equal(s.events.filter((e) => e.kind === 'budget.threshold').length, 1, 'the 80% line is crossed once');
    } finally {
      await s.close();
    }
  });

  test('ejection and restore: upstream.ejected and upstream.restored on the admin stream only', async () => {
    const admin = await subscribe();
    const caller = await subscribe({ key: keyOf('ops') });
    try {
      await mocks.flaky.setFault('status=503;times=2');
      for (let i = 0; i < 2; ++i) {
        const r = await chat('ops', { model: 'm-eject' });
        assert.equal(r.status, 200, r.text);
        assert.equal(r.res.headers.get('x-relay-upstream'), 'steady', 'the failed first attempt moved to steady');
      }
      const ejected = await admin.waitEvent((e) => e.kind === 'upstream.ejected', { what: 'upstream.ejected' });
      assert.equal(ejected.upstream, 'flaky');
      assert.equal(ejected.reason, 'consecutive_failures');
      assert.ok(!('key' in ejected), 'an upstream event belongs to no key');
      const ejectedAt = performance.now();

      // While ejected, flaky is not tried.
      const during = await chat('ops', { model: 'm-eject' });
      assert.equal(during.status, 200, during.text);
      assert.equal(during.res.headers.get('x-relay-upstream'), 'steady');
      assert.equal(during.res.headers.get('x-relay-attempts'), '1');
      assert.ok(!admin.events.some((e) => e.kind === 'upstream.restored'), 'not restored while ejected');

      await sleep(Math.max(0, EJECTION_MS + 100 - (performance.now() - ejectedAt)));
      const back = await chat('ops', { model: 'm-eject' });
      assert.equal(back.status, 200, back.text);
      assert.equal(back.res.headers.get('x-relay-upstream'), 'flaky', 'after base_ejection_ms the upstream is tried again');
      const restored = await admin.waitEvent((e) => e.kind === 'upstream.restored', { what: 'upstream.restored' });
      assert.equal(restored.upstream, 'flaky');
      assert.ok(!('key' in restored));
      assert.ok(restored.$id > ejected.$id);

      await caller.waitEvent((e) => e.request_id === back.id && e.kind === 'request.finished', { what: "the caller's last finish" });
      assertWellFormed(admin);
      assertWellFormed(caller);
      assert.deepEqual(
        caller.events.filter((e) => e.kind.startsWith('upstream.')),
        [],
        'a caller key never sees upstream events',
      );
      assert.ok(caller.events.some((e) => e.kind === 'request.failover' && e.from === 'flaky' && e.to === 'steady'));
    } finally {
      await Promise.all([admin.close(), caller.close()]);
    }
  });
});

describe('streams', () => {
  test('Last-Event-ID: a reconnecting client gets what it missed, with consecutive ids and no duplicates', async () => {
    const first = await subscribe();
    const r1 = await chat('ops');
    assert.equal(r1.status, 200);
    await first.waitEvent((e) => e.request_id === r1.id && e.kind === 'request.finished', { what: 'finish of r1' });
    await first.close();
    assertWellFormed(first);
    const lastSeen = first.events.at(-1).$id;
    // No subscriber is left once the gateway noticed: what follows is kept
    // only because events linger for a reconnecting client.
    await sleep(200);

    const missed = [];
    for (let i = 0; i < 3; ++i) {
      const r = await chat('ops', {}, { 'x-node-id': `resume-${i}` });
      assert.equal(r.status, 200);
      missed.push(r.id);
    }
    await sleep(100); // the last request.finished is published as the request settles

    for (const how of ['header', 'query']) {
      const s =
        how === 'header'
          ? await subscribe({ headers: { 'last-event-id': String(lastSeen) } })
          : await subscribe({ query: `?last_event_id=${lastSeen}` });
      try {
        await s.waitEvent((e) => e.request_id === missed[2] && e.kind === 'request.finished', { what: `the missed events (${how})` });
        assertWellFormed(s);
        const ids = s.events.map((e) => e.$id);
        assert.equal(ids[0], lastSeen + 1, `${how}: resumes right after ${lastSeen}: ${kinds(s.events)}`);
        ids.forEach((id, i) => assert.equal(id, lastSeen + 1 + i, `${how}: consecutive ids: ${ids}`));
        assert.ok(!s.events.some((e) => e.request_id === r1.id), `${how}: nothing already seen`);
        for (const id of missed) {
          assert.deepEqual(
            ofRequest(s, id).map((e) => e.kind),
            ['request.routed', 'request.finished'],
            `${how}: ${id}: ${kinds(s.events)}`,
          );
        }
      } finally {
        await s.close();
      }
    }
  });

  test('at most 8 streams per key: the 9th gets 429 with Retry-After; another key still gets one; closing one makes room', async () => {
    const open = [];
    try {
      for (let i = 0; i < 8; ++i) {
        const s = await subscribe({ key: keyOf('capped') });
        assert.equal(s.res.status, 200, `stream ${i + 1}`);
        open.push(s);
      }
      const { res: ninth } = await subscribe({ key: keyOf('capped') });
      assert.equal(ninth.status, 429);
      const retryAfter = Number(ninth.headers.get('retry-after'));
      assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After ${ninth.headers.get('retry-after')}`);
      const err = await readOpenAiError(ninth, assert);
      assert.match(err.message, /capped/);

      const other = await subscribe({ key: keyOf('other') });
      assert.equal(other.res.status, 200, 'another key is not affected');
      open.push(other);
      const admin = await subscribe();
      assert.equal(admin.res.status, 200, 'the admin is counted apart');
      open.push(admin);

      await open.shift().close();
      const again = await waitFor(
        async () => {
          const s = await subscribe({ key: keyOf('capped') });
          if (s.res.status === 200) return s;
          await s.res.arrayBuffer();
          return null;
        },
        { timeoutMs: 3000, intervalMs: 50, what: 'room for a new stream after closing one' },
      );
      open.push(again);
      // Still capped at 8.
      const { res: tenth } = await subscribe({ key: keyOf('capped') });
      assert.equal(tenth.status, 429);
      await tenth.arrayBuffer();
    } finally {
      await Promise.all(open.map((s) => s.close()));
    }
  });

  test('HTTP/2 (h2c, prior knowledge): the stream works and events arrive', async () => {
    const client = await openClient(
      PROTOCOLS.find((p) => p.h2 && !p.tls),
      { relay: env.relay },
    );
    try {
      assert.equal(client.negotiated().http2, true);
      const reply = await client.request({
        method: 'GET',
        path: '/v1/events?kind=request.',
        headers: { authorization: `Bearer ${ADMIN_KEY}`, accept: 'text/event-stream' },
      });
      assert.equal(reply.status, 200);
      assert.match(reply.headers['content-type'], /^text\/event-stream/);
      const s = watchStream(reply.body, () => reply.cancel());
      try {
        await waitFor(() => s.hello !== null, { what: 'the first block over h2c' });
        // A request over the same HTTP/2 connection while the stream stays open.
        const chatReply = await client.request({
          path: '/v1/chat/completions',
          headers: { authorization: `Bearer ${keyOf('ops')}`, 'content-type': 'application/json' },
          body: chatRequest({ model: 'm-plain' }),
        });
        assert.equal(chatReply.status, 200);
        await chatReply.text();
        const id = chatReply.headers['x-request-id'];
        const finished = await s.waitEvent((e) => e.request_id === id && e.kind === 'request.finished', { what: 'finish over h2c' });
        assert.equal(finished.status, 200);
        assert.equal(finished.upstream, 'primary');
        assertWellFormed(s);
        assert.deepEqual(ofRequest(s, id).map((e) => e.kind), ['request.routed', 'request.finished']);
      } finally {
        await s.close();
      }
    } finally {
      await client.close();
    }
  });

  test('admin listener: /admin/events needs the admin key (401 otherwise) and streams with it', async () => {
    for (const key of [keyOf('ops'), null, 'not-a-key']) {
      const { res } = await subscribe({ base: env.relay.adminUrl, path: '/admin/events', key });
      assert.equal(res.status, 401, `key ${key}`);
      await readOpenAiError(res, assert);
    }
    const s = await subscribe({ base: env.relay.adminUrl, path: '/admin/events' });
    try {
      assert.equal(s.res.status, 200);
      const r = await chat('alice');
      assert.equal(r.status, 200);
      const finished = await s.waitEvent((e) => e.request_id === r.id && e.kind === 'request.finished', { what: 'finish on /admin/events' });
      assert.equal(finished.key, 'alice', 'the admin sees every key');
      assertWellFormed(s);
    } finally {
      await s.close();
    }
  });

  test('filters: ?kind=request.finished only finishes; ?node=planner-1 only that node; kind prefix; admin ?key=', async () => {
    const byKind = await subscribe({ query: '?kind=request.finished' });
    const byNode = await subscribe({ query: '?node=planner-1' });
    const byKindPrefix = await subscribe({ key: keyOf('ops'), query: '?kind=request.&node=planner-2' });
    const byKey = await subscribe({ query: '?key=alice' });
    try {
      await mocks.primary.setFault('status=503;times=1');
      const other = await chat('ops', { model: 'm-failover' }, { 'x-node-id': 'planner-2' });
      const mine = await chat('ops', {}, { 'x-node-id': 'planner-1' });
      assert.equal(other.status, 200, other.text);
      assert.equal(mine.status, 200, mine.text);
      const last = (e) => e.request_id === mine.id && e.kind === 'request.finished';
      await byKind.waitEvent(last, { what: 'finish of the planner-1 request (kind filter)' });
      await byNode.waitEvent(last, { what: 'finish of the planner-1 request (node filter)' });
      await byKindPrefix.waitEvent((e) => e.request_id === other.id && e.kind === 'request.finished', { what: 'planner-2 finish' });
      const fromAlice = await chat('alice');
      assert.equal(fromAlice.status, 200);
      await byKey.waitEvent((e) => e.request_id === fromAlice.id && e.kind === 'request.finished', { what: "alice's finish (key filter)" });
      await byKind.waitEvent((e) => e.request_id === fromAlice.id, { what: "alice's finish (kind filter)" });
      for (const s of [byKind, byNode, byKindPrefix, byKey]) assertWellFormed(s);
      assert.ok(byKey.events.every((e) => e.key === 'alice'), `admin ?key=alice: ${kinds(byKey.events)}`);

      assert.deepEqual(
        byKind.events.map((e) => [e.kind, e.request_id]),
        [
          ['request.finished', other.id],
          ['request.finished', mine.id],
          ['request.finished', fromAlice.id],
        ],
      );
      assert.ok(byNode.events.every((e) => e.node === 'planner-1'), kinds(byNode.events));
      assert.deepEqual(ofRequest(byNode, mine.id).map((e) => e.kind), ['request.routed', 'request.finished']);
      assert.ok(!byNode.events.some((e) => e.request_id === other.id));
      assert.deepEqual(
        byKindPrefix.events.map((e) => e.kind),
        ['request.routed', 'request.retry', 'request.failover', 'request.routed', 'request.finished'],
        kinds(byKindPrefix.events),
      );
      assert.ok(byKindPrefix.events.every((e) => e.node === 'planner-2' && e.key === 'ops'));
    } finally {
      await Promise.all([byKind.close(), byNode.close(), byKindPrefix.close(), byKey.close()]);
    }
  });
});

describe('MCP', () => {
  test('/v1/mcp/rec/events: mcp.session_opened after initialize, mcp.session_closed (deleted) after DELETE', async () => {
    const s = await subscribe({ path: '/v1/mcp/rec/events' });
    try {
      const init = await fetch(`${env.relay.url}/v1/mcp/rec`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: JSON_AND_SSE, authorization: `Bearer ${keyOf('ops')}`, 'x-node-id': 'mcp-node' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'events-test', version: '1' } },
        }),
      });
      assert.equal(init.status, 200, await init.clone().text());
      await init.text();
      const session = init.headers.get('mcp-session-id');
      assert.ok(session, 'a session id');
      const opened = await s.waitEvent((e) => e.kind === 'mcp.session_opened', { what: 'mcp.session_opened' });
      assert.equal(opened.server, 'rec');
      assert.equal(opened.key, 'ops');
      assert.equal(opened.node, 'mcp-node');

      // A chat request meanwhile: not an event of this server.
      const r = await chat('ops');
      assert.equal(r.status, 200);

      const del = await fetch(`${env.relay.url}/v1/mcp/rec`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${keyOf('ops')}`, 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' },
      });
      await del.arrayBuffer();
      assert.ok(del.status >= 200 && del.status < 300, `DELETE -> ${del.status}`);
      const closed = await s.waitEvent((e) => e.kind === 'mcp.session_closed', { what: 'mcp.session_closed' });
      assert.equal(closed.server, 'rec');
      assert.equal(closed.key, 'ops');
      assert.equal(closed.reason, 'deleted');
      assertWellFormed(s);
      assert.ok(s.events.every((e) => e.server === 'rec'), `only rec's events: ${kinds(s.events)}`);
      assert.ok(!s.events.some((e) => e.request_id === r.id));
    } finally {
      await s.close();
    }
  });
});

describe('errors', () => {
  test('405 for POST, 401 without or with a bad key, 406 for Accept: application/json', async () => {
    const post = await fetch(`${env.relay.url}/v1/events`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    assert.equal(post.status, 405);
    assert.match(post.headers.get('allow') ?? '', /GET/);
    await readOpenAiError(post, assert);

    for (const key of [null, 'kr-events-wrong-key']) {
      const { res } = await subscribe({ key });
      assert.equal(res.status, 401, `key ${key}`);
      await readOpenAiError(res, assert);
    }

    for (const key of [ADMIN_KEY, keyOf('ops')]) {
      const { res } = await subscribe({ key, headers: { accept: 'application/json' } });
      assert.equal(res.status, 406);
      await readOpenAiError(res, assert);
    }

    // The admin-only key filter is not a caller's: a caller key still sees only its own.
    const s = await subscribe({ key: keyOf('alice'), query: '?key=bob' });
    try {
      assert.equal(s.res.status, 200);
      const b = await chat('other');
      const a = await chat('alice');
      await s.waitEvent((e) => e.request_id === a.id && e.kind === 'request.finished', { what: "alice's finish" });
      assert.ok(s.events.every((e) => e.key === 'alice'), kinds(s.events));
      assert.ok(!s.events.some((e) => e.request_id === b.id));
    } finally {
      await s.close();
    }
  });
});
