// Usage, cost and request accounting (docs/metrics.md): after a known mixed run
// (streamed and whole answers, OpenAI- and Moonshot-flavoured upstreams, callers
// that asked for usage and callers that did not), /metrics, the access log and
// what the callers saw are checked against exact expected values computed from
// the mocks' documented usage formula (src/mock/chat.cpp) and the price table
// below. A stream cut by the upstream is counted with estimated usage.
//
// Every check compares the metrics before and after the traffic, so the tests
// do not depend on running first or alone.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { waitForAccessLines } from '../lib/access_log.mjs';
import { KEYS, allRecorded, resetMocks, useTopology } from '../lib/fixtures.mjs';
import { chatRequest, collectSse, headerValue, postChat, waitFor } from '../lib/harness.mjs';
import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';
import { metricDelta as delta } from '../lib/metrics_delta.mjs';

const logDir = mkdtempSync(join(tmpdir(), 'kimi-relay-telemetry-'));
const ACCESS_LOG = join(logDir, 'access.log');
after(() => rmSync(logDir, { recursive: true, force: true }));

// USD per million tokens. kimi-k2 is served by both upstreams and costs less on
// moonshot (the upstream-specific row must win); moonshot-v1-8k leaves
// cached_input out, so cached tokens cost the input price.
const PRICES = [
  { model: 'kimi-k2', input: 0.6, cached_input: 0.15, output: 2.5 },
  { model: 'kimi-k2', upstream: 'moonshot', input: 0.55, cached_input: 0.11, output: 2.2 },
  { model: 'kimi-agent-swarm', input: 1.2, cached_input: 0.3, output: 4.8 },
  { model: 'moonshot-v1-8k', input: 0.2, output: 2 },
];

const env = useTopology({ extra: { prices: PRICES, log: { access_log: ACCESS_LOG } } });

// ---------------------------------------------------------------------------
// Expected values

// Micro-USD per million tokens is pico-USD per token: costs are exact BigInts.
function priceRow(model, upstream) {
  const row =
    PRICES.find((p) => p.model === model && p.upstream === upstream) ??
    PRICES.find((p) => p.model === model && p.upstream === undefined);
  assert.ok(row, `no price for ${model} on ${upstream} in the test's table`);
  const pico = (usd) => BigInt(Math.round(usd * 1e6));
  return { input: pico(row.input), cached: pico(row.cached_input ?? row.input), output: pico(row.output) };
}

// Cost of one request in pico-USD; usage is {prompt, cached, completion}.
function costPico(model, upstream, usage) {
  const p = priceRow(model, upstream);
  return (
    BigInt(usage.prompt - usage.cached) * p.input +
    BigInt(usage.cached) * p.cached +
    BigInt(usage.completion) * p.output
  );
}

const picoToUsd = (pico) => Number(pico) / 1e12;
function picoText(pico) {
  const whole = pico / 10n ** 12n;
  const frac = (pico % 10n ** 12n).toString().padStart(12, '0').replace(/0+$/, '');
  return frac ? `${whole}.${frac}` : `${whole}`;
}

// What the mock answers a request with (the formula in src/mock/chat.cpp).
function plannedUsage(req) {
  const completion = req.maxTokens === undefined ? req.chunks : Math.min(req.chunks, req.maxTokens);
  return { prompt: req.prompt, cached: Math.min(req.cached, req.prompt), completion };
}

// The same formula applied to a request as the mock recorded it (what the
// gateway forwarded), i.e. the usage the mock reported for it.
function reportedUsage(rec) {
  const body = JSON.parse(rec.body);
  const num = (name) => {
    const v = headerValue(rec, name);
    return v === undefined ? undefined : Number(v);
  };
  const prompt = num('x-mock-prompt-tokens');
  const chunks = num('x-mock-chunks');
  assert.ok(prompt !== undefined && chunks !== undefined, `the x-mock-* headers did not reach ${rec.upstream}`);
  const cap = body.max_tokens ?? body.max_completion_tokens;
  return {
    prompt,
    cached: Math.min(num('x-mock-cached-tokens') ?? 0, prompt),
    completion: cap === undefined ? chunks : Math.min(chunks, cap),
  };
}

// Label lists of the series compared below.
const BY_REQUEST = ['key', 'model', 'upstream', 'code'];
const BY_TOKENS = ['key', 'model', 'upstream', 'direction'];
const BY_ESTIMATE = ['model', 'upstream', 'direction'];

// Asserts a cost in USD against an expected pico-USD amount: to the cent, and
// exactly (within a double's rounding) as docs/metrics.md promises.
function assertCost(gotUsd, pico, what) {
  const want = picoToUsd(pico);
  const text = `${what}: ${gotUsd} USD, expected ${picoText(pico)}`;
  assert.ok(Math.abs(gotUsd - want) < 0.005, `${text} (not even to the cent)`);
  assert.ok(Math.abs(gotUsd - want) < 1e-9, `${text} (not exactly)`);
}

function addTo(obj, k, n) {
  if (n !== 0) obj[k] = (obj[k] ?? 0) + n;
}

// ---------------------------------------------------------------------------
// The mixed run

// One request each. prompt/cached/chunks go to the mock as x-mock-* headers;
// `usage` means the caller asked for stream_options.include_usage. Token
// counts are large so that the costs run to many cents.
const PLAN = [
  { key: 'full', model: 'kimi-agent-swarm', stream: true, usage: false, prompt: 120_000, cached: 20_000, chunks: 7 },
  { key: 'full', model: 'kimi-agent-swarm', stream: true, usage: true, prompt: 80_000, cached: 0, chunks: 5 },
  { key: 'full', model: 'kimi-agent-swarm', stream: false, prompt: 1_000, cached: 0, chunks: 10, maxTokens: 2 },
  { key: 'full', model: 'moonshot-v1-8k', stream: true, usage: false, prompt: 50_000, cached: 10_000, chunks: 6 },
  { key: 'full', model: 'moonshot-v1-8k', stream: true, usage: true, prompt: 64_000, cached: 32_000, chunks: 4 },
  { key: 'full', model: 'moonshot-v1-8k', stream: false, prompt: 40_000, cached: 4_000, chunks: 8 },
  { key: 'limited', model: 'kimi-k2', stream: false, prompt: 300_000, cached: 100_000, chunks: 9 },
  { key: 'limited', model: 'kimi-k2', stream: true, usage: true, prompt: 200_000, cached: 50_000, chunks: 3 },
  { key: 'limited', model: 'kimi-k2', stream: true, usage: false, prompt: 150_000, cached: 0, chunks: 11 },
  { key: 'full', model: 'kimi-k2', stream: false, prompt: 90_000, cached: 30_000, chunks: 12 },
];
// kimi-k2 goes to either upstream by weight (70/30): more kimi-k2 requests are
// sent until both have served one, so both of its price rows are exercised.
const topUp = (i) => ({
  key: i % 3 === 0 ? 'limited' : 'full',
  model: 'kimi-k2',
  stream: i % 2 === 0,
  usage: i % 4 === 0,
  prompt: 10_000 + 1_000 * i,
  cached: 500 * (i % 5),
  chunks: 1 + (i % 6),
});
const MAX_TOP_UPS = 40;

async function send(req) {
  const body = chatRequest({
    model: req.model,
    ...(req.stream ? { stream: true } : {}),
    ...(req.usage ? { stream_options: { include_usage: true } } : {}),
    ...(req.maxTokens !== undefined ? { max_tokens: req.maxTokens } : {}),
  });
  const res = await postChat(env.relay, body, {
    key: KEYS[req.key],
    headers: {
      'x-mock-prompt-tokens': String(req.prompt),
      'x-mock-cached-tokens': String(req.cached),
      'x-mock-chunks': String(req.chunks),
    },
  });
  const seen = {
    req,
    status: res.status,
    upstream: res.headers.get('x-relay-upstream'),
    requestId: res.headers.get('x-request-id'),
  };
  if (res.status !== 200) seen.text = await res.text();
  else if (req.stream) seen.events = await collectSse(res);
  else seen.body = await res.json();
  return seen;
}

describe('a mixed run of streamed and whole answers', () => {
  const run = {};
  const change = (name, labels) => delta(run.after, run.before, name, labels);

  before(async () => {
    await resetMocks(env.mocks);
    run.before = await scrapeMetrics(env.relay);
    run.results = [];
    for (const req of PLAN) run.results.push(await send(req));
    const k2Upstreams = () => new Set(run.results.filter((r) => r.req.model === 'kimi-k2').map((r) => r.upstream));
    for (let i = 0; i < MAX_TOP_UPS && !['holysheep', 'moonshot'].every((u) => k2Upstreams().has(u)); i++) {
      run.results.push(await send(topUp(i)));
    }
    run.recorded = await allRecorded(env.mocks);
    // Settlement happens as each response ends; the last one may lag the
    // caller's read by a moment.
    await waitFor(
      async () => {
        run.after = await scrapeMetrics(env.relay);
        return metricSum(run.after, 'kimi_relay_requests_total') - metricSum(run.before, 'kimi_relay_requests_total') >=
          run.results.length;
      },
      { timeoutMs: 3000, what: 'every request of the run to be counted' },
    );
    // The expectations, from the plan and the upstream each request reached.
    run.expected = { requests: {}, tokens: {}, cost: {}, duration: {}, ttft: {}, upstreamLatency: {} };
    for (const r of run.results) {
      const { key, model, stream } = r.req;
      const u = plannedUsage(r.req);
      const labels = `${key}|${model}|${r.upstream}`;
      addTo(run.expected.requests, `${labels}|200`, 1);
      addTo(run.expected.tokens, `${labels}|input`, u.prompt - u.cached);
      addTo(run.expected.tokens, `${labels}|cached`, u.cached);
      addTo(run.expected.tokens, `${labels}|output`, u.completion);
      run.expected.cost[labels] = (run.expected.cost[labels] ?? 0n) + costPico(model, r.upstream, u);
      addTo(run.expected.duration, model, 1);
      if (stream) addTo(run.expected.ttft, model, 1);
      addTo(run.expected.upstreamLatency, `${r.upstream}|${model}`, 1);
    }
  });

  test('every request was answered 200 by the expected upstream', () => {
    for (const r of run.results) {
      assert.equal(r.status, 200, `${JSON.stringify(r.req)} -> ${r.status} ${r.text ?? ''}`);
      const allowed = {
        'kimi-k2': ['holysheep', 'moonshot'],
        'kimi-agent-swarm': ['holysheep'],
        'moonshot-v1-8k': ['moonshot'],
      }[r.req.model];
      assert.ok(allowed.includes(r.upstream), `${r.req.model} served by ${r.upstream}`);
      assert.ok(r.requestId, 'no x-request-id');
    }
    const k2 = new Set(run.results.filter((r) => r.req.model === 'kimi-k2').map((r) => r.upstream));
    assert.deepEqual([...k2].sort(), ['holysheep', 'moonshot'], 'kimi-k2 reached both upstreams');
  });

  test('kimi_relay_requests_total counts each request once by key, model, upstream and code', () => {
    assert.deepEqual(change('kimi_relay_requests_total', BY_REQUEST), run.expected.requests);
  });

  test('kimi_relay_tokens_total by direction: input (uncached prompt), cached, output', () => {
    assert.deepEqual(change('kimi_relay_tokens_total', BY_TOKENS), run.expected.tokens);
    assert.deepEqual(
      change('kimi_relay_tokens_estimated_total', BY_ESTIMATE),
      {},
      'nothing was estimated: every upstream reported usage',
    );
    assert.deepEqual(
      change('kimi_relay_unpriced_requests_total', ['model', 'upstream']),
      {},
      'every request matched a price row',
    );
  });

  test('kimi_relay_cost_usd_total per key, model and upstream, to the cent (exact, per docs/metrics.md)', () => {
    const got = change('kimi_relay_cost_usd_total', ['key', 'model', 'upstream']);
    const expectedText = Object.fromEntries(Object.entries(run.expected.cost).map(([k, v]) => [k, picoText(v)]));
    assert.deepEqual(
      Object.keys(got).sort(),
      Object.keys(expectedText).sort(),
      `cost series: got ${JSON.stringify(got)}, expected ${JSON.stringify(expectedText)}`,
    );
    for (const [k, pico] of Object.entries(run.expected.cost)) assertCost(got[k], pico, `cost of ${k}`);
    // The upstream-specific kimi-k2 row won on moonshot: at the model-wide row
    // (the one holysheep gets) the same tokens would have cost more.
    const onMoonshot = run.results.filter((r) => r.req.model === 'kimi-k2' && r.upstream === 'moonshot');
    const atModelWideRow = onMoonshot.reduce((n, r) => n + costPico('kimi-k2', 'holysheep', plannedUsage(r.req)), 0n);
    const moonshotCost = Object.entries(got)
      .filter(([k]) => k.endsWith('|kimi-k2|moonshot'))
      .reduce((n, [, v]) => n + v, 0);
    assert.ok(
      moonshotCost < picoToUsd(atModelWideRow) - 0.005,
      `kimi-k2 on moonshot cost ${moonshotCost} USD, as at the model-wide row (${picoText(atModelWideRow)})`,
    );
  });

  test('duration and time-to-first-token histogram counts; in-flight back to 0', async () => {
    const { duration, ttft, upstreamLatency } = run.expected;
    assert.deepEqual(change('kimi_relay_request_duration_seconds_count', ['model']), duration);
    assert.deepEqual(
      change('kimi_relay_time_to_first_token_seconds_count', ['model']),
      ttft,
      'time to first token is observed for streams only',
    );
    assert.deepEqual(change('kimi_relay_request_duration_window_seconds_count', ['model']), duration);
    assert.deepEqual(change('kimi_relay_time_to_first_token_window_seconds_count', ['model']), ttft);
    assert.deepEqual(change('kimi_relay_upstream_latency_seconds_count', ['upstream', 'model']), upstreamLatency);
    // The +Inf bucket of a histogram is its count.
    const inf = change('kimi_relay_request_duration_seconds_bucket', ['model', 'le']);
    for (const [model, n] of Object.entries(run.expected.duration)) {
      assert.equal(inf[`${model}|+Inf`], n, `+Inf bucket of ${model}`);
    }
    assert.deepEqual(
      change('kimi_relay_gateway_overhead_seconds_count', []),
      { '': run.results.length },
      'gateway overhead observed once per request',
    );
    await waitFor(async () => metricSum(await scrapeMetrics(env.relay), 'kimi_relay_in_flight_requests') === 0, {
      timeoutMs: 2000,
      what: 'kimi_relay_in_flight_requests to return to 0',
    });
  });

  test("the gateway's token totals equal the usage the mocks reported", () => {
    // Per upstream: the gateway's counters against the mock's formula applied
    // to what each mock received.
    const fromMocks = {};
    for (const rec of run.recorded) {
      const u = reportedUsage(rec);
      addTo(fromMocks, `${rec.upstream}|input`, u.prompt - u.cached);
      addTo(fromMocks, `${rec.upstream}|cached`, u.cached);
      addTo(fromMocks, `${rec.upstream}|output`, u.completion);
      const sent = JSON.parse(rec.body);
      if (sent.stream) {
        const asked = sent.stream_options?.include_usage;
        assert.equal(asked, true, `a stream went to ${rec.upstream} without include_usage: ${rec.body}`);
      }
    }
    assert.equal(run.recorded.length, run.results.length, 'one upstream request per caller request');
    assert.deepEqual(change('kimi_relay_tokens_total', ['upstream', 'direction']), fromMocks);
  });

  test('callers saw usage exactly as they asked for it', () => {
    for (const r of run.results) {
      const { req } = r;
      const u = plannedUsage(req);
      const shape = req.stream ? `stream${req.usage ? ' with include_usage' : ''}` : 'whole';
      const what = `${req.model} via ${r.upstream}, ${shape}`;
      if (!req.stream) {
        const usage = r.body.usage;
        assert.equal(usage?.prompt_tokens, u.prompt, `${what}: ${JSON.stringify(usage)}`);
        assert.equal(usage.completion_tokens, u.completion, what);
        assert.equal(usage.total_tokens, u.prompt + u.completion, what);
        assert.equal(usage.prompt_tokens_details?.cached_tokens ?? usage.cached_tokens, u.cached, what);
        continue;
      }
      const { events } = r;
      assert.equal(events.at(-1)?.done, true, `${what}: the stream ends with [DONE]`);
      const chunks = events.slice(0, -1);
      for (const e of chunks) assert.ok(e.json && !('error' in e.json), `${what}: ${e.data}`);
      const usageChunks = chunks.filter((e) => Array.isArray(e.json.choices) && e.json.choices.length === 0);
      const withUsage = chunks.filter((e) => e.json.usage != null);
      if (!req.usage) {
        // Neither OpenAI's usage chunk nor Moonshot's choices[0].usage.
        for (const e of chunks) {
          for (const c of e.json.choices) {
            assert.equal(c.usage, undefined, `${what}: choices[${c.index}].usage reached the caller: ${e.data}`);
          }
        }
        assert.equal(usageChunks.length, 0, `${what}: a usage chunk reached a caller that did not ask`);
        assert.equal(withUsage.length, 0, `${what}: usage reached a caller that did not ask: ${withUsage[0]?.data}`);
        continue;
      }
      assert.equal(usageChunks.length, 1, `${what}: ${usageChunks.length} usage chunks (choices: [])`);
      assert.equal(usageChunks[0], chunks.at(-1), `${what}: the usage chunk is the last before [DONE]`);
      assert.deepEqual(withUsage, usageChunks, `${what}: only the usage chunk carries usage`);
      const { usage } = usageChunks[0].json;
      assert.equal(usageChunks[0].json.object, 'chat.completion.chunk', what);
      assert.equal(usageChunks[0].json.id, chunks[0].json.id, `${what}: the usage chunk has the stream's id`);
      assert.equal(usage.prompt_tokens, u.prompt, `${what}: ${JSON.stringify(usage)}`);
      assert.equal(usage.completion_tokens, u.completion, what);
      assert.equal(usage.total_tokens, u.prompt + u.completion, what);
      const cached = usage.prompt_tokens_details?.cached_tokens;
      assert.equal(cached, u.cached, `${what}: cached tokens in OpenAI's place: ${JSON.stringify(usage)}`);
    }
  });

  test('one access log line per request with its exact usage and cost', async () => {
    const lines = await waitForAccessLines(ACCESS_LOG, run.results.map((r) => r.requestId));
    for (const r of run.results) {
      const line = lines.get(r.requestId);
      const u = plannedUsage(r.req);
      const what = `${r.requestId} (${r.req.model} via ${r.upstream})`;
      assert.equal(line.status, 200, what);
      assert.equal(line.key, r.req.key, what);
      assert.equal(line.model, r.req.model, what);
      assert.equal(line.upstream, r.upstream, what);
      assert.equal(line.attempts, 1, what);
      assert.equal(line.stream, r.req.stream, what);
      assert.equal(line.prompt_tokens, u.prompt, what);
      assert.equal(line.cached_tokens, u.cached, what);
      assert.equal(line.completion_tokens, u.completion, what);
      assert.equal(line.usage_estimated, false, what);
      assert.equal(line.priced, true, what);
      assert.equal(line.error_code, null, what);
      assertCost(line.cost_usd, costPico(r.req.model, r.upstream, u), `${what}: cost_usd`);
      if (r.req.stream) assert.equal(typeof line.ttft_ms, 'number', `${what}: ttft_ms of a stream`);
      else assert.equal(line.ttft_ms, null, `${what}: ttft_ms of a whole answer`);
    }
  });
});

describe('a stream the upstream cuts', () => {
  for (const [model, upstream] of [
    ['kimi-agent-swarm', 'holysheep'],
    ['moonshot-v1-8k', 'moonshot'],
  ]) {
    test(`${upstream}: usage is estimated and flagged in the metrics and the access log`, async () => {
      const beforeSamples = await scrapeMetrics(env.relay);
      const res = await postChat(
        env.relay,
        chatRequest({ model, stream: true, stream_options: { include_usage: true } }),
        { key: KEYS.full, headers: { 'x-mock-fault': 'reset_after=3', 'x-mock-chunks': '8' } },
      );
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-relay-upstream'), upstream);
      const requestId = res.headers.get('x-request-id');
      const events = await collectSse(res);
      const content = events.filter((e) => e.json?.choices?.[0]?.delta?.content !== undefined);
      assert.equal(content.length, 3, 'the three chunks sent before the cut reached the caller');

      const series = `full|${model}|${upstream}`;
      let afterSamples;
      await waitFor(
        async () => {
          afterSamples = await scrapeMetrics(env.relay);
          const counted = delta(afterSamples, beforeSamples, 'kimi_relay_requests_total', BY_REQUEST);
          return counted[`${series}|200`] === 1;
        },
        { timeoutMs: 3000, what: `the cut stream counted in kimi_relay_requests_total{${series}|200}` },
      );
      const tokens = delta(afterSamples, beforeSamples, 'kimi_relay_tokens_total', BY_TOKENS);
      const estimated = delta(afterSamples, beforeSamples, 'kimi_relay_tokens_estimated_total', BY_ESTIMATE);
      assert.ok(estimated[`${model}|${upstream}|input`] > 0, `estimated input tokens: ${JSON.stringify(estimated)}`);
      assert.ok(estimated[`${model}|${upstream}|output`] > 0, `estimated output tokens: ${JSON.stringify(estimated)}`);
      for (const dir of ['input', 'cached', 'output']) {
        assert.equal(
          estimated[`${model}|${upstream}|${dir}`] ?? 0,
          tokens[`${series}|${dir}`] ?? 0,
          `${dir}: all of this request's tokens are estimated (tokens ${JSON.stringify(tokens)})`,
        );
      }

      const line = (await waitForAccessLines(ACCESS_LOG, [requestId])).get(requestId);
      assert.equal(line.usage_estimated, true, JSON.stringify(line));
      assert.equal(line.status, 200);
      assert.equal(typeof line.error_code, 'string', `a cut stream has an error code: ${JSON.stringify(line)}`);
      assert.equal(line.prompt_tokens - line.cached_tokens, tokens[`${series}|input`], 'log and metrics agree (input)');
      assert.equal(line.completion_tokens, tokens[`${series}|output`], 'log and metrics agree (output)');
      // The estimate is priced like reported usage, once.
      const usage = { prompt: line.prompt_tokens, cached: line.cached_tokens, completion: line.completion_tokens };
      const want = costPico(model, upstream, usage);
      assertCost(line.cost_usd, want, 'cost_usd in the access log');
      const cost = delta(afterSamples, beforeSamples, 'kimi_relay_cost_usd_total', ['key', 'model', 'upstream']);
      assertCost(cost[series] ?? 0, want, 'kimi_relay_cost_usd_total');

      await waitFor(async () => metricSum(await scrapeMetrics(env.relay), 'kimi_relay_in_flight_requests') === 0, {
        timeoutMs: 2000,
        what: 'kimi_relay_in_flight_requests to return to 0',
      });
    });
  }
});

describe('an error answered by the upstream', () => {
  // docs/metrics.md: the upstream label is "none" only "when no upstream was
  // reached"; the access log's upstream is "the upstream that answered".
  test('is counted and logged against the upstream that answered it', async () => {
    const beforeSamples = await scrapeMetrics(env.relay);
    const res = await postChat(env.relay, chatRequest({ model: 'kimi-agent-swarm' }), {
      key: KEYS.full,
      headers: { 'x-mock-fault': 'status=400' },
    });
    assert.equal(res.status, 400, 'the upstream 400 is passed through');
    const requestId = res.headers.get('x-request-id');
    await res.arrayBuffer();
    assert.equal((await env.mocks.holysheep.stats()).requests, 1, 'holysheep answered it');

    let afterSamples;
    await waitFor(
      async () => {
        afterSamples = await scrapeMetrics(env.relay);
        const total = (samples) => metricSum(samples, 'kimi_relay_requests_total');
        return total(afterSamples) > total(beforeSamples);
      },
      { timeoutMs: 3000, what: 'the request to be counted' },
    );
    assert.deepEqual(delta(afterSamples, beforeSamples, 'kimi_relay_requests_total', BY_REQUEST), {
      'full|kimi-agent-swarm|holysheep|400': 1,
    });
    const line = (await waitForAccessLines(ACCESS_LOG, [requestId])).get(requestId);
    assert.equal(line.status, 400);
    assert.equal(line.attempts, 1);
    assert.equal(line.upstream, 'holysheep', JSON.stringify(line));
  });
});

describe('gateway overhead', () => {
  // docs/metrics.md: the time the gateway spent on a request "other than
  // waiting for the upstream". A stream whose upstream pauses 100 ms between
  // its writes lasts over half a second; the gateway's own part of it is a
  // few milliseconds, in a finite bucket (the largest is 0.1 s).
  test("a stream's overhead leaves out the upstream's pauses between its events", async () => {
    const beforeSamples = await scrapeMetrics(env.relay);
    const started = performance.now();
    const res = await postChat(env.relay, chatRequest({ model: 'kimi-k2', stream: true }), {
      key: KEYS.full,
      headers: { 'x-mock-chunks': '6', 'x-mock-chunk-delay-ms': '100' },
    });
    assert.equal(res.status, 200);
    const events = await collectSse(res);
    const tookMs = performance.now() - started;
    assert.equal(events.at(-1)?.done, true, 'the stream ends with [DONE]');
    assert.ok(tookMs >= 500, `the upstream's pauses make the stream last: ${tookMs} ms`);

    let afterSamples;
    await waitFor(
      async () => {
        afterSamples = await scrapeMetrics(env.relay);
        return delta(afterSamples, beforeSamples, 'kimi_relay_gateway_overhead_seconds_count', [])[''] === 1;
      },
      { timeoutMs: 3000, what: 'the stream observed in kimi_relay_gateway_overhead_seconds' },
    );
    const overhead = delta(afterSamples, beforeSamples, 'kimi_relay_gateway_overhead_seconds_bucket', ['le']);
    const within = Object.entries(overhead).filter(([le, n]) => le !== '+Inf' && n === 1);
    assert.ok(within.length > 0, `the overhead is in a finite bucket (at most 0.1 s): ${JSON.stringify(overhead)}`);
    const duration = delta(afterSamples, beforeSamples, 'kimi_relay_request_duration_seconds_bucket', ['le']);
    const underHalf = Object.entries(duration).filter(([le, n]) => le !== '+Inf' && Number(le) < 0.5 && n !== 0);
    assert.deepEqual(underHalf, [], `the duration counts the pauses: ${JSON.stringify(duration)}`);
  });
});

describe('in-flight requests', () => {
  test('kimi_relay_in_flight_requests counts a request while it is served, and lets go after', async () => {
    const inFlight = async () => metricSum(await scrapeMetrics(env.relay), 'kimi_relay_in_flight_requests');
    const before = await inFlight();
    const res = await postChat(env.relay, chatRequest({ model: 'kimi-k2', stream: true }), {
      key: KEYS.full,
      headers: { 'x-mock-chunks': '10', 'x-mock-chunk-delay-ms': '100' },
    });
    assert.equal(res.status, 200);
    assert.equal(await inFlight(), before + 1, 'the open stream is in flight');
    await res.text();
    await waitFor(async () => (await inFlight()) === before, { timeoutMs: 2000, what: 'in-flight to fall back' });
  });
});

