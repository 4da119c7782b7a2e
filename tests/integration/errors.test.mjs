// Every refusal the gateway makes on its own (authentication, allow-lists,
// request validation, body size, an unreachable upstream) and the upstream
// errors it passes back: exact status, OpenAI error shape, a message that says
// what to fix, and no secret anywhere.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { KEYS, SECRETS, allRecorded, useTopology } from '../lib/fixtures.mjs';
import { chatRequest, closedPort, postChat, readOpenAiError, utf8HeaderValue } from '../lib/harness.mjs';

const MAX_REQUEST_BYTES = 1024;
const DEADEND_KEY = 'sk-deadend-upstream-secret-5c7e9a1b3d5f7a9c1e3b';

// An upstream nobody listens on (the port was bound once, then released).
const env = useTopology({
  server: { max_request_bytes: MAX_REQUEST_BYTES },
  upstreams: [
    {
      name: 'deadend',
      url: `http://127.0.0.1:${await closedPort()}`,
      apiKey: DEADEND_KEY,
      weight: 1,
      models: { 'kimi-dead': 'kimi-dead' },
    },
  ],
});

// Sends a request the gateway must refuse by itself, checks the status, the
// OpenAI shape, x-request-id, and that nothing reached an upstream.
async function expectRefusal(status, { body = chatRequest(), key = null, headers = {} } = {}) {
  const res = await postChat(env.relay, body, { key, headers });
  assert.equal(res.status, status, `expected ${status}, got ${res.status}`);
  assert.ok(res.headers.get('x-request-id'), 'every response carries x-request-id');
  const err = await readOpenAiError(res, assert);
  const recorded = await allRecorded(env.mocks);
  assert.equal(recorded.length, 0, 'a refused request must not reach an upstream');
  return err;
}

describe('authentication', () => {
  test('missing key: 401 invalid_api_key', async () => {
    const err = await expectRefusal(401);
    assert.equal(err.type, 'invalid_request_error');
    assert.equal(err.code, 'invalid_api_key');
    assert.match(err.message, /key/i);
  });

  test('unknown key: 401 invalid_api_key', async () => {
    const err = await expectRefusal(401, { key: 'kr-test-nobody-0000000000000000000000' });
    assert.equal(err.type, 'invalid_request_error');
    assert.equal(err.code, 'invalid_api_key');
  });

  test('unknown key in x-api-key: 401 invalid_api_key', async () => {
    const err = await expectRefusal(401, { headers: { 'x-api-key': 'kr-test-nobody-0000000000000000000000' } });
    assert.equal(err.code, 'invalid_api_key');
  });

  test('Authorization that is not Bearer: 401', async () => {
    const basic = Buffer.from(`user:${KEYS.full}`).toString('base64');
    const err = await expectRefusal(401, { headers: { authorization: `Basic ${basic}` } });
    assert.equal(err.code, 'invalid_api_key');
    assert.match(err.message, /bearer/i);
  });

  test('valid key with a trailing zero-width space: 401 naming the character', async () => {
    const err = await expectRefusal(401, {
      headers: { authorization: utf8HeaderValue(`Bearer ${KEYS.full}\u200B`) },
    });
    assert.equal(err.code, 'invalid_api_key');
    assert.match(err.message, /zero-width|U\+200B/i);
  });

  test('valid key with a leading byte order mark: 401 naming the character', async () => {
    const err = await expectRefusal(401, { headers: { 'x-api-key': utf8HeaderValue(`\uFEFF${KEYS.full}`) } });
    assert.equal(err.code, 'invalid_api_key');
    assert.match(err.message, /byte order mark|BOM|U\+FEFF/i);
  });

  test('valid key with whitespace before it: 401 saying so', async () => {
    // fetch trims the ends of a header value, so the space sits after "Bearer ".
    const err = await expectRefusal(401, { headers: { authorization: `Bearer  ${KEYS.full}` } });
    assert.equal(err.code, 'invalid_api_key');
    assert.match(err.message, /whitespace|space/i);
  });

  test('Authorization and x-api-key with different keys: 400', async () => {
    const err = await expectRefusal(400, { key: KEYS.full, headers: { 'x-api-key': KEYS.limited } });
    assert.equal(err.type, 'invalid_request_error');
    assert.match(err.message, /x-api-key/i);
    assert.match(err.message, /authorization/i);
  });

  test('Authorization and x-api-key with the same key: 400 saying to send it once', async () => {
    const err = await expectRefusal(400, { key: KEYS.full, headers: { 'x-api-key': KEYS.full } });
    assert.equal(err.code, 'conflicting_api_keys');
    assert.match(err.message, /once/);
  });

  test('the refusal bodies never echo a key', async () => {
    for (const headers of [
      { authorization: `Bearer ${KEYS.full}x` },
      { authorization: utf8HeaderValue(`Bearer ${KEYS.full}\u200B`) },
      { authorization: `Bearer ${KEYS.full}`, 'x-api-key': KEYS.limited },
    ]) {
      const res = await postChat(env.relay, chatRequest(), { headers });
      const text = await res.text();
      assert.ok(res.status >= 400, text);
      for (const secret of SECRETS) assert.ok(!text.includes(secret), `key echoed in: ${text}`);
    }
  });
});

describe('model access', () => {
  test('model outside the key allow-list: 403 model_not_allowed', async () => {
    const err = await expectRefusal(403, { key: KEYS.limited, body: chatRequest({ model: 'moonshot-v1-8k' }) });
    assert.equal(err.code, 'model_not_allowed');
    assert.match(err.message, /moonshot-v1-8k/);
  });

  test('unknown model: 404 model_not_found naming the models that exist', async () => {
    const err = await expectRefusal(404, { key: KEYS.full, body: chatRequest({ model: 'gpt-4o' }) });
    assert.equal(err.type, 'invalid_request_error');
    assert.equal(err.code, 'model_not_found');
    assert.match(err.message, /gpt-4o/);
    for (const model of ['kimi-k2', 'kimi-agent-swarm', 'moonshot-v1-8k']) {
      assert.ok(err.message.includes(model), `message does not name ${model}: ${err.message}`);
    }
  });
});

describe('request validation', () => {
  test('malformed JSON: 400 invalid_request_error saying it is not valid JSON', async () => {
    const err = await expectRefusal(400, { key: KEYS.full, body: '{"model": "kimi-k2", "messages": [' });
    assert.equal(err.type, 'invalid_request_error');
    assert.match(err.message, /json/i);
  });

  test('a JSON body that is not an object: 400', async () => {
    const err = await expectRefusal(400, { key: KEYS.full, body: '[{"model": "kimi-k2"}]' });
    assert.equal(err.type, 'invalid_request_error');
  });

  test('missing model: 400 with param "model"', async () => {
    const err = await expectRefusal(400, {
      key: KEYS.full,
      body: { messages: [{ role: 'user', content: 'hi' }] },
    });
    assert.equal(err.type, 'invalid_request_error');
    assert.equal(err.param, 'model');
    assert.match(err.message, /model/);
  });

  test('model that is not a string: 400 with param "model"', async () => {
    const err = await expectRefusal(400, { key: KEYS.full, body: chatRequest({ model: 42 }) });
    assert.equal(err.type, 'invalid_request_error');
    assert.equal(err.param, 'model');
  });

  test('missing messages: 400 with param "messages"', async () => {
    const err = await expectRefusal(400, { key: KEYS.full, body: { model: 'kimi-k2' } });
    assert.equal(err.type, 'invalid_request_error');
    assert.equal(err.param, 'messages');
    assert.match(err.message, /messages/);
  });
});

describe('request body size', () => {
  const bodyOfSize = (n) => {
    const base = JSON.stringify(chatRequest({ messages: [{ role: 'user', content: '' }] }));
    const body = JSON.stringify(chatRequest({ messages: [{ role: 'user', content: 'x'.repeat(n - base.length) }] }));
    assert.equal(Buffer.byteLength(body), n);
    return body;
  };

  test('a body just under max_request_bytes is relayed', async () => {
    const res = await postChat(env.relay, bodyOfSize(MAX_REQUEST_BYTES - 24), { key: KEYS.full });
    assert.equal(res.status, 200, await res.text());
  });

  test('a body over max_request_bytes (Content-Length): 413', async () => {
    await expectRefusal(413, { key: KEYS.full, body: bodyOfSize(4 * MAX_REQUEST_BYTES) });
  });

  test('a chunked body over max_request_bytes: 413', async () => {
    const body = bodyOfSize(2 * MAX_REQUEST_BYTES);
    const stream = new ReadableStream({
      start(controller) {
        const bytes = Buffer.from(body);
        controller.enqueue(bytes.subarray(0, 700));
        controller.enqueue(bytes.subarray(700, 1400));
        controller.enqueue(bytes.subarray(1400));
        controller.close();
      },
    });
    const res = await fetch(`${env.relay.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEYS.full}`, 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    });
    assert.equal(res.status, 413);
    assert.ok(res.headers.get('x-request-id'), 'every response carries x-request-id');
    await readOpenAiError(res, assert);
    assert.equal((await allRecorded(env.mocks)).length, 0);
  });
});

describe('upstream failures', () => {
  test('unreachable upstream: 502 naming the upstream, without secrets', async () => {
    const res = await postChat(env.relay, chatRequest({ model: 'kimi-dead' }), { key: KEYS.full });
    const text = await res.clone().text();
    assert.equal(res.status, 502, text);
    assert.ok(res.headers.get('x-request-id'), 'every response carries x-request-id');
    const err = await readOpenAiError(res, assert);
    assert.match(err.message, /deadend/);
    for (const secret of [...SECRETS, DEADEND_KEY]) {
      assert.ok(!text.includes(secret), `a secret is in the 502 body: ${text}`);
    }
  });

  // The error the mock itself returns for `fault`, for comparison.
  async function directError(mock, fault, model) {
    const res = await fetch(`${mock.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${mock.apiKey}`, 'content-type': 'application/json', 'x-mock-fault': fault },
      body: JSON.stringify(chatRequest({ model })),
    });
    const body = await res.json();
    await mock.clearRequests();
    await mock.resetStats();
    return { status: res.status, error: body.error };
  }

  // A retryable upstream error is retried before the caller sees anything.
  test('a single upstream 503 is retried before anything reaches the caller', async () => {
    await env.holysheep.setFault('status=503;times=1');
    const res = await postChat(env.relay, chatRequest({ model: 'kimi-agent-swarm' }), { key: KEYS.full });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    assert.equal(JSON.parse(text).object, 'chat.completion');
    assert.equal((await env.holysheep.stats()).requests, 2, 'one failed attempt, one retry');
  });

  for (const [label, upstream, model] of [
    ['OpenAI-flavoured', 'holysheep', 'kimi-agent-swarm'],
    ['Moonshot-flavoured', 'moonshot', 'moonshot-v1-8k'],
  ]) {
    test(`${label} upstream 503 is passed back as 503 in OpenAI shape`, async () => {
      const mock = env.mocks[upstream];
      const fault = 'status=503';
      const direct = await directError(mock, fault, model);
      assert.equal(direct.status, 503);
      const res = await postChat(env.relay, chatRequest({ model }), {
        key: KEYS.full,
        headers: { 'x-mock-fault': fault },
      });
      assert.equal(res.status, 503);
      assert.ok(res.headers.get('x-request-id'));
      const err = await readOpenAiError(res, assert);
      assert.equal(err.type, direct.error.type);
      assert.ok(err.message.includes(direct.error.message), `upstream message lost: ${err.message}`);
      assert.ok((await mock.stats()).requests >= 1, 'the upstream was asked');
    });

    test(`${label} upstream 400 is passed back as 400, not retried`, async () => {
      const mock = env.mocks[upstream];
      const fault = 'status=400;error_type=invalid_request_error';
      const direct = await directError(mock, fault, model);
      assert.equal(direct.status, 400);
      const res = await postChat(env.relay, chatRequest({ model }), {
        key: KEYS.full,
        headers: { 'x-mock-fault': fault },
      });
      assert.equal(res.status, 400);
      const err = await readOpenAiError(res, assert);
      assert.equal(err.type, 'invalid_request_error');
      assert.ok(err.message.includes(direct.error.message), `upstream message lost: ${err.message}`);
      if (!('param' in direct.error)) assert.equal(err.param, null, 'a missing param is filled with null');
      if (!('code' in direct.error)) assert.equal(err.code, null, 'a missing code is filled with null');
      assert.equal((await allRecorded(env.mocks)).length, 1, 'a 400 is not worth a retry');
    });
  }
});

test('the gateway logs contain no caller key and no upstream key', () => {
  const logs = env.relay.logs();
  for (const secret of [...SECRETS, DEADEND_KEY]) {
    assert.ok(!logs.includes(secret), `a secret (${secret.slice(0, 12)}…) is in the logs`);
  }
});
