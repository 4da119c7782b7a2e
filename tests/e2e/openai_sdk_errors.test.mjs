// End to end with the official `openai` npm package (6.x): the errors a caller
// meets when the gateway refuses or an upstream breaks, and what the SDK's own
// retry logic does with them — it must wait as long as the gateway says, and
// not retry what the gateway marks x-should-retry: false.
//
// A recording fetch counts the SDK's HTTP requests and their statuses.

import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';

import OpenAI from 'openai';

import { resetMocks } from '../lib/fixtures.mjs';
import { headerValue, relayConfig, startMock, startRelay } from '../lib/harness.mjs';

const UPSTREAM_KEY = 'sk-sdk-errors-upstream-secret-2e4a6c8b0d2f4e6a8c';
const keyOf = (name) => `kr-test-sdk-${name}-3f5b7d9a1c3e5f7b9d1a`;

const KEYS = {
  'rate-a': { limits: { rpm: 60, rpm_burst: 1 } },
  'rate-b': { limits: { rpm: 60, rpm_burst: 1 } },
  quota: { budget: { max_output_tokens: 25 } },
  plain: {},
};

const env = {};
before(async () => {
  const [openai, moonshot] = await Promise.all([
    startMock({ name: 'openai-like', apiKey: UPSTREAM_KEY }),
    startMock({ name: 'moonshot', apiKey: UPSTREAM_KEY, moonshot: true }),
  ]);
  env.mocks = { openai, moonshot };
  env.relay = await startRelay(
    relayConfig({
      keys: Object.entries(KEYS).map(([name, more]) => ({ name, key: keyOf(name), ...more })),
      upstreams: [
        { name: 'openai-like', url: openai.url, apiKey: UPSTREAM_KEY, models: { 'kimi-k2': 'kimi-k2' } },
        { name: 'moonshot', url: moonshot.url, apiKey: UPSTREAM_KEY, models: { 'm-moon': 'kimi-k2-0905-preview' } },
      ],
    }),
  );
});
after(async () => {
  await Promise.all([env.relay, ...Object.values(env.mocks ?? {})].filter(Boolean).map((p) => p.stop()));
});
beforeEach(async () => {
  await resetMocks(env.mocks);
});

// A client for key `name` whose fetches are recorded in `calls`:
// [{status, at, retryAfterMs}], `at` being when the response head arrived.
function client(name, options = {}) {
  const calls = [];
  const recordingFetch = async (url, init) => {
    const res = await fetch(url, init);
    calls.push({
      status: res.status,
      at: performance.now(),
      retryAfterMs: res.headers.get('retry-after-ms'),
      shouldRetry: res.headers.get('x-should-retry'),
    });
    return res;
  };
  const sdk = new OpenAI({
    apiKey: keyOf(name),
    baseURL: `${env.relay.url}/v1`,
    maxRetries: 0,
    timeout: 20_000,
    fetch: recordingFetch,
    ...options,
  });
  return { sdk, calls };
}

const messages = [{ role: 'user', content: 'hi' }];

describe('rate limits', () => {
  test('a request over the key\'s rpm raises RateLimitError with the retry headers', async () => {
    const { sdk } = client('rate-a');
    await sdk.chat.completions.create({ model: 'kimi-k2', messages });
    await assert.rejects(sdk.chat.completions.create({ model: 'kimi-k2', messages }), (err) => {
      assert.ok(err instanceof OpenAI.RateLimitError, `got ${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.status, 429);
      assert.equal(err.type, 'requests');
      assert.equal(err.code, 'rate_limit_exceeded');
      assert.ok(err.requestID, 'the error carries x-request-id');
      assert.match(err.headers.get('retry-after') ?? '', /^[1-9]\d*$/);
      assert.match(err.headers.get('retry-after-ms') ?? '', /^[1-9]\d*$/);
      assert.equal(err.headers.get('x-ratelimit-remaining-requests'), '0');
      return true;
    });
    assert.equal((await env.mocks.openai.stats()).requests, 1);
  });

  test('with maxRetries: 1 the SDK waits the gateway\'s retry-after-ms, then succeeds', async () => {
    const { sdk, calls } = client('rate-b', { maxRetries: 1 });
    await sdk.chat.completions.create({ model: 'kimi-k2', messages }, { maxRetries: 0 });
    const t0 = performance.now();
    const completion = await sdk.chat.completions.create({ model: 'kimi-k2', messages });
    const ms = performance.now() - t0;
    assert.equal(completion.object, 'chat.completion');
    assert.deepEqual(calls.map((c) => c.status), [200, 429, 200]);
    const asked = Number(calls[1].retryAfterMs);
    assert.ok(asked > 0 && asked <= 1000, `retry-after-ms ${calls[1].retryAfterMs} at 60 rpm with burst 1`);
    const waited = calls[2].at - calls[1].at;
    assert.ok(waited >= asked, `the SDK retried ${waited.toFixed(0)} ms after being told ${asked} ms`);
    assert.ok(ms < asked + 1000, `the call took ${ms.toFixed(0)} ms for a ${asked} ms wait`);
    // The gateway admitted the retry: the refused attempt never reached the upstream.
    const recorded = await env.mocks.openai.requests();
    assert.equal(recorded.length, 2);
    assert.equal(headerValue(recorded[1], 'x-stainless-retry-count'), '1');
  });
});

describe('insufficient_quota is final', () => {
  test('a spent budget: RateLimitError insufficient_quota, and the SDK does not retry it', async () => {
    const { sdk, calls } = client('quota', { maxRetries: 2 });
    await sdk.chat.completions.create({ model: 'kimi-k2', messages, max_tokens: 20 }); // 20 of 25
    await assert.rejects(sdk.chat.completions.create({ model: 'kimi-k2', messages, max_tokens: 20 }), (err) => {
      assert.ok(err instanceof OpenAI.RateLimitError, `got ${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.code, 'insufficient_quota');
      assert.equal(err.type, 'insufficient_quota');
      return true;
    });
    // The recording fetch sees every HTTP request the SDK makes, retries included.
    assert.deepEqual(calls.map((c) => c.status), [200, 429], 'one refused request, no retries');
    assert.equal(calls[1].shouldRetry, 'false');
    assert.equal((await env.mocks.openai.stats()).requests, 1);
  });

  test('a Moonshot upstream out of quota: RateLimitError insufficient_quota, retried by neither gateway nor SDK', async () => {
    const { sdk, calls } = client('plain', { maxRetries: 2 });
    await assert.rejects(
      sdk.chat.completions.create(
        { model: 'm-moon', messages },
        { headers: { 'x-mock-fault': 'status=429;error_type=exceeded_current_quota_error' } },
      ),
      (err) => {
        assert.ok(err instanceof OpenAI.RateLimitError, `got ${err?.constructor?.name}: ${err?.message}`);
        assert.equal(err.code, 'insufficient_quota');
        return true;
      },
    );
    assert.deepEqual(calls.map((c) => c.status), [429]);
    assert.equal((await env.mocks.moonshot.stats()).requests, 1);
  });
});

describe('failures after the stream started', () => {
  test('an upstream reset mid-stream raises APIError after the chunks that arrived', async () => {
    const { sdk } = client('plain');
    const stream = await sdk.chat.completions.create(
      { model: 'kimi-k2', messages, stream: true },
      { headers: { 'x-mock-fault': 'reset_after=3', 'x-mock-chunks': '10' } },
    );
    const contents = [];
    await assert.rejects(
      (async () => {
        for await (const chunk of stream) {
          const piece = chunk.choices[0]?.delta?.content;
          if (piece) contents.push(piece);
        }
      })(),
      (err) => {
        assert.ok(err instanceof OpenAI.APIError, `got ${err?.constructor?.name}: ${err?.message}`);
        assert.equal(err.type, 'server_error');
        assert.match(err.message, /openai-like/);
        assert.match(err.message, /mid-stream|interrupted/i);
        return true;
      },
      'the SDK must raise, not end the stream as if it were complete',
    );
    assert.equal(contents.length, 3);
    assert.equal((await env.mocks.openai.stats()).requests, 1);
  });

  test('the stream helper rejects finalChatCompletion() on the same failure', async () => {
    const { sdk } = client('plain');
    const runner = sdk.chat.completions.stream(
      { model: 'kimi-k2', messages },
      { headers: { 'x-mock-fault': 'reset_after=2', 'x-mock-chunks': '6' } },
    );
    await assert.rejects(runner.finalChatCompletion(), OpenAI.APIError);
  });
});
