// POST /v1/embeddings through the official `openai` SDK: the same
// authentication, admission (tokens from the input), routing with model-id
// mapping, retries and failover, metrics and cost as chat.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import OpenAI from 'openai';

import { relayConfig, startMock, startRelay } from '../lib/harness.mjs';
import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';

const KEY = 'kr-embeddings-test-7a9c1e3b5d7f9a1c3e5b7d9f';
const TIGHT = 'kr-embeddings-tight-2b4d6f8a0c2e4a6c8e0a';
const UPSTREAM_KEY = 'sk-embeddings-upstream-3f5b7d9a1c3e';
const env = {};

before(async () => {
  env.primary = await startMock({ name: 'primary', apiKey: UPSTREAM_KEY });
  env.secondary = await startMock({ name: 'secondary', apiKey: UPSTREAM_KEY });
  env.relay = await startRelay(
    relayConfig({
      keys: [
        { name: 'memory', key: KEY },
        { name: 'tight', key: TIGHT, limits: { tpm: 50 } },
      ],
      upstreams: [
        { name: 'primary', url: env.primary.url, apiKey: UPSTREAM_KEY, weight: 1_000_000, models: { 'embed-small': 'text-embedding-3-small' } },
        { name: 'secondary', url: env.secondary.url, apiKey: UPSTREAM_KEY, weight: 1, models: { 'embed-small': 'text-embedding-3-small' } },
      ],
      retry: { max_attempts: 3, backoff: { base_ms: 10, max_ms: 50 } },
      prices: [{ model: 'embed-small', input: 0.02, output: 0 }],
    }),
  );
});
after(async () => {
  await env.relay?.stop();
  await env.primary?.stop();
  await env.secondary?.stop();
});

const client = (apiKey = KEY) => new OpenAI({ apiKey, baseURL: `${env.relay.url}/v1`, maxRetries: 0 });

describe('embeddings.create', () => {
  test('vectors and usage come back; the upstream got its own model id and key', async () => {
    const { data: out, response } = await client()
      .embeddings.create({ model: 'embed-small', input: ['hello world', 'second input'], encoding_format: 'float' })
      .withResponse();
    assert.equal(out.data.length, 2);
    assert.equal(out.data[0].embedding.length, 8);
    assert.ok(out.usage.prompt_tokens > 0);
    assert.equal(response.headers.get('x-relay-upstream'), 'primary');
    const [seen] = (await env.primary.requests()).filter((r) => r.path === '/v1/embeddings');
    assert.equal(JSON.parse(seen.body).model, 'text-embedding-3-small');
    assert.equal(seen.headers.find(([n]) => n.toLowerCase() === 'authorization')[1], `Bearer ${UPSTREAM_KEY}`);
  });

  test('a failing upstream is failed over, as for chat', async () => {
    await env.primary.setFault('status=503;times=1');
    const { response } = await client().embeddings.create({ model: 'embed-small', input: 'retry me' }).withResponse();
    assert.equal(response.headers.get('x-relay-upstream'), 'secondary');
    assert.equal(response.headers.get('x-relay-attempts'), '2');
  });

  test('admission counts the input: over the key\'s tpm it is a RateLimitError', async () => {
    await assert.rejects(client(TIGHT).embeddings.create({ model: 'embed-small', input: 'x'.repeat(400) }), (err) => {
      assert.ok(err instanceof OpenAI.RateLimitError, err?.constructor?.name);
      assert.equal(err.code, 'rate_limit_exceeded');
      return true;
    });
    const ok = await client(TIGHT).embeddings.create({ model: 'embed-small', input: 'short' });
    assert.equal(ok.data.length, 1);
  });

  test('bad input gets a 400 that names it; tokens and cost are counted per key', async () => {
    await assert.rejects(client().embeddings.create({ model: 'embed-small', input: [] }), (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.equal(err.param, 'input');
      return true;
    });
    const samples = await scrapeMetrics(env.relay);
    assert.ok(metricSum(samples, 'kimi_relay_tokens_total', { key: 'memory', model: 'embed-small', direction: 'input' }) > 0);
    assert.ok(metricSum(samples, 'kimi_relay_cost_usd_total', { key: 'memory', model: 'embed-small' }) > 0);
  });
});
