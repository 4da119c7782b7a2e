// The JSON relay over HTTP/1.1: routing by model, the model rewrite, the body
// passing through untouched, credential injection, request ids, weighted
// distribution, /v1/models and the admin probes.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { describe, test } from 'node:test';

import { ALL_MODELS, KEYS, MODELS, SECRETS, UPSTREAM_KEYS, allRecorded, useTopology } from '../lib/fixtures.mjs';
import { chatRequest, headerValue, headerValues, postChat, readOpenAiError } from '../lib/harness.mjs';

const env = useTopology();

// The recorded upstream request carrying x-request-id `id`, asserting it
// reached exactly one mock exactly once.
async function recordedById(id) {
  const hits = (await allRecorded(env.mocks)).filter((r) => headerValues(r, 'x-request-id').includes(id));
  assert.equal(hits.length, 1, `request ${id} reached the upstreams ${hits.length} times`);
  return hits[0];
}

describe('JSON relay', () => {
  // Odd but valid JSON: spacing, escapes, number spellings and an unknown
  // nested field. A relay that re-serialises the body would change these bytes.
  const sentBody =
    '{ "model" : "kimi-k2",\n  "messages": [{"role":"user","content":"caf\\u00e9 \\"quoted\\" \u00e9 \\/"}],' +
    ' "temperature":0.70, "top_p":1.0e0, "foo":{"bar":[1,2]}, "n" : 1 }';

  test('routes to both upstreams by weight and rewrites only the model value', async () => {
    const seen = new Set();
    for (let i = 0; i < 10; i++) {
      const id = `test-${randomUUID()}`;
      const res = await postChat(env.relay, sentBody, { key: KEYS.full, headers: { 'x-request-id': id } });
      const text = await res.text();
      assert.equal(res.status, 200, text);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
      const upstream = res.headers.get('x-relay-upstream');
      assert.ok(upstream === 'holysheep' || upstream === 'moonshot', `x-relay-upstream: ${upstream}`);
      seen.add(upstream);
      assert.equal(res.headers.get('x-request-id'), id, 'caller x-request-id is echoed');

      const completion = JSON.parse(text);
      assert.equal(completion.object, 'chat.completion');
      assert.equal(typeof completion.choices[0].message.content, 'string');

      const rec = await recordedById(id);
      assert.equal(rec.upstream, upstream, 'x-relay-upstream names the upstream that answered');
      assert.equal(rec.method, 'POST');
      assert.equal(rec.path, '/v1/chat/completions');
      const expected = sentBody.replace('"kimi-k2"', JSON.stringify(MODELS[upstream]['kimi-k2']));
      assert.equal(rec.body, expected, `body forwarded to ${upstream} differs from the caller's beyond the model`);
    }
    assert.deepEqual([...seen].sort(), ['holysheep', 'moonshot'], 'ten requests at 70/30 reach both upstreams');
  });

  test('a model mapped by one upstream only always goes there', async () => {
    for (const [model, upstream] of [
      ['moonshot-v1-8k', 'moonshot'],
      ['kimi-agent-swarm', 'holysheep'],
    ]) {
      for (let i = 0; i < 4; i++) {
        const res = await postChat(env.relay, chatRequest({ model }), { key: KEYS.full });
        assert.equal(res.status, 200, await res.text());
        assert.equal(res.headers.get('x-relay-upstream'), upstream, model);
      }
    }
    assert.equal((await env.holysheep.requests()).length, 4);
    assert.equal((await env.moonshot.requests()).length, 4);
  });

  test('generates an x-request-id when the caller sends none, and sends it upstream', async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const res = await postChat(env.relay, chatRequest(), { key: KEYS.full });
      assert.equal(res.status, 200, await res.text());
      const id = res.headers.get('x-request-id');
      assert.ok(id && id.length >= 8, `generated x-request-id: ${id}`);
      ids.push(id);
      const rec = await recordedById(id);
      assert.deepEqual(headerValues(rec, 'x-request-id'), [id], 'exactly one x-request-id upstream');
    }
    assert.equal(new Set(ids).size, ids.length, `ids are unique: ${ids}`);
  });
});

test('keeps the caller connection alive across requests', async () => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const body = JSON.stringify(chatRequest());
  const once = () =>
    new Promise((resolve, reject) => {
      const req = http.request(
        `${env.relay.url}/v1/chat/completions`,
        {
          method: 'POST',
          agent,
          headers: { authorization: `Bearer ${KEYS.full}`, 'content-type': 'application/json' },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode, reused: req.reusedSocket }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  try {
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await once());
    assert.deepEqual(
      results.map((r) => r.status),
      [200, 200, 200],
    );
    assert.deepEqual(
      results.map((r) => r.reused),
      [false, true, true],
      'requests 2 and 3 reuse the first connection',
    );
  } finally {
    agent.destroy();
  }
});

describe('credential injection', () => {
  // Every header the upstream saw, with no value containing a caller key.
  function assertNoCallerKey(rec) {
    for (const [name, value] of rec.headers) {
      for (const key of Object.values(KEYS)) {
        assert.ok(!value.includes(key), `caller key leaked upstream in header ${name}`);
      }
    }
    assert.ok(!Object.values(KEYS).some((k) => rec.body.includes(k)), 'caller key leaked in the body');
  }

  for (const how of ['authorization', 'x-api-key']) {
    test(`caller key in ${how}: upstream sees only its own Bearer key`, async () => {
      const headers = how === 'authorization' ? { authorization: `Bearer ${KEYS.full}` } : { 'x-api-key': KEYS.full };
      for (let i = 0; i < 6; i++) {
        const id = `cred-${randomUUID()}`;
        const res = await postChat(env.relay, chatRequest(), { headers: { ...headers, 'x-request-id': id } });
        assert.equal(res.status, 200, await res.text());
        const rec = await recordedById(id);
        assert.deepEqual(headerValues(rec, 'authorization'), [`Bearer ${UPSTREAM_KEYS[rec.upstream]}`]);
        assert.deepEqual(headerValues(rec, 'x-api-key'), [], 'x-api-key is not forwarded');
        assertNoCallerKey(rec);
      }
    });
  }

  test('the same key in both Authorization and x-api-key is refused: send it once', async () => {
    const res = await postChat(env.relay, chatRequest(), {
      key: KEYS.full,
      headers: { 'x-api-key': KEYS.full },
    });
    assert.equal(res.status, 400);
    const body = await res.json();
    assert.equal(body.error.code, 'conflicting_api_keys');
    assert.match(body.error.message, /once/);
  });

  test('x-api-key alone authenticates and never reaches the upstream', async () => {
    const id = `xkey-${randomUUID()}`;
    const res = await fetch(`${env.relay.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEYS.full, 'x-request-id': id },
      body: JSON.stringify(chatRequest()),
    });
    assert.equal(res.status, 200, await res.text());
    const rec = await recordedById(id);
    assert.equal(headerValue(rec, 'authorization'), `Bearer ${UPSTREAM_KEYS[rec.upstream]}`);
    assertNoCallerKey(rec);
  });
});

test('weighted distribution: 300 requests split 70/30 within 3 points', async () => {
  const counts = { holysheep: 0, moonshot: 0 };
  const total = 300;
  const batch = 10; // a few connections at a time, so both workers take part
  for (let done = 0; done < total; done += batch) {
    const results = await Promise.all(
      Array.from({ length: batch }, async () => {
        const res = await postChat(env.relay, chatRequest(), { key: KEYS.full });
        await res.arrayBuffer();
        assert.equal(res.status, 200);
        return res.headers.get('x-relay-upstream');
      }),
    );
    for (const u of results) counts[u] += 1;
  }
  assert.equal(counts.holysheep + counts.moonshot, total, JSON.stringify(counts));
  const share = counts.holysheep / total;
  assert.ok(Math.abs(share - 0.7) <= 0.03, `holysheep share ${share.toFixed(3)} (${JSON.stringify(counts)})`);
  // The header tells the truth: each mock received what it was credited with.
  assert.equal((await env.holysheep.stats()).requests, counts.holysheep);
  assert.equal((await env.moonshot.stats()).requests, counts.moonshot);
});

describe('/v1/models', () => {
  async function listModels(key) {
    const res = await fetch(`${env.relay.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    const body = JSON.parse(text);
    assert.equal(body.object, 'list');
    for (const m of body.data) {
      assert.equal(m.object, 'model');
      assert.equal(typeof m.id, 'string');
    }
    return body.data.map((m) => m.id).sort();
  }

  test('lists every client model id for an unrestricted key', async () => {
    assert.deepEqual(await listModels(KEYS.full), ALL_MODELS);
  });

  test("lists only the caller's allowed models", async () => {
    assert.deepEqual(await listModels(KEYS.limited), ['kimi-k2']);
  });

  test('requires a key', async () => {
    const res = await fetch(`${env.relay.url}/v1/models`);
    assert.equal(res.status, 401);
    const err = await readOpenAiError(res, assert);
    assert.equal(err.code, 'invalid_api_key');
  });
});

describe('admin listener', () => {
  for (const path of ['/healthz', '/readyz']) {
    test(`${path} answers 200`, async () => {
      const res = await fetch(env.relay.adminUrl + path);
      await res.arrayBuffer();
      assert.equal(res.status, 200);
    });
  }
});

test('the gateway logs contain no caller key and no upstream key', () => {
  const logs = env.relay.logs();
  assert.ok(logs.length > 0, 'the gateway logged something');
  for (const secret of SECRETS) assert.ok(!logs.includes(secret), `a secret (${secret.slice(0, 12)}…) is in the logs`);
});
