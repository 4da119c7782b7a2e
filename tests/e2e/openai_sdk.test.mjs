// End to end with the official `openai` npm package (6.x): what a caller who
// only changed `baseURL` sees through the gateway — completions with and
// without streaming, usage, the model list, and typed errors.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import OpenAI from 'openai';

import { KEYS, SECRETS, useTopology } from '../lib/fixtures.mjs';

const env = useTopology();

// maxRetries 0: a retried failure would hide what the gateway answered first
// and slow the suite down.
function client(apiKey = KEYS.full, options = {}) {
  return new OpenAI({ apiKey, baseURL: `${env.relay.url}/v1`, maxRetries: 0, timeout: 20_000, ...options });
}

const messages = [{ role: 'user', content: 'hi' }];

describe('chat.completions.create', () => {
  test('without streaming', async () => {
    const { data: completion, response } = await client()
      .chat.completions.create({ model: 'kimi-k2', messages })
      .withResponse();
    assert.equal(completion.object, 'chat.completion');
    assert.equal(completion.choices.length, 1);
    assert.equal(completion.choices[0].message.role, 'assistant');
    assert.ok(completion.choices[0].message.content.length > 0);
    assert.equal(completion.choices[0].finish_reason, 'stop');
    assert.ok(completion.usage.total_tokens > 0);
    assert.ok(['holysheep', 'moonshot'].includes(response.headers.get('x-relay-upstream')));
    assert.ok(response.headers.get('x-request-id'));
  });

  test('with stream: true, content accumulates chunk by chunk', async () => {
    const stream = await client().chat.completions.create(
      { model: 'kimi-agent-swarm', messages, stream: true },
      { headers: { 'x-mock-chunks': '8' } },
    );
    let content = '';
    let contentChunks = 0;
    let finish = null;
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'chat.completion.chunk');
      assert.equal(chunk.choices.length, 1, 'no usage-only chunk without include_usage');
      const piece = chunk.choices[0].delta.content;
      if (piece) {
        contentChunks += 1;
        content += piece;
      }
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    assert.equal(contentChunks, 8, `content: ${JSON.stringify(content)}`);
    assert.equal(finish, 'stop');
  });

  test('with stream_options.include_usage, a final chunk carries the usage', async () => {
    const stream = await client().chat.completions.create(
      { model: 'kimi-agent-swarm', messages, stream: true, stream_options: { include_usage: true } },
      { headers: { 'x-mock-chunks': '6' } },
    );
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage.completion_tokens, 6);
    assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens);
  });

  test('the SDK helper stream() assembles the final message', async () => {
    const runner = client().chat.completions.stream(
      { model: 'kimi-k2', messages },
      { headers: { 'x-mock-chunks': '5' } },
    );
    let fromDeltas = '';
    runner.on('content', (delta) => {
      fromDeltas += delta;
    });
    const final = await runner.finalChatCompletion();
    assert.ok(final.choices[0].message.content.length > 0);
    assert.equal(final.choices[0].message.content, fromDeltas);
    assert.equal(final.choices[0].finish_reason, 'stop');
  });
});

describe('models.list', () => {
  test('pages through the models the key may use', async () => {
    const ids = [];
    for await (const model of client(KEYS.limited).models.list()) ids.push(model.id);
    assert.deepEqual(ids, ['kimi-k2']);
  });
});

describe('errors', () => {
  test('a wrong key raises AuthenticationError (401)', async () => {
    await assert.rejects(
      client('kr-test-wrong-key-000000000000000000000000').chat.completions.create({ model: 'kimi-k2', messages }),
      (err) => {
        assert.ok(err instanceof OpenAI.AuthenticationError, `got ${err?.constructor?.name}: ${err?.message}`);
        assert.equal(err.status, 401);
        assert.equal(err.code, 'invalid_api_key');
        assert.ok(err.requestID, 'the error carries x-request-id');
        return true;
      },
    );
  });

  test('a wrong key on a stream raises AuthenticationError before any chunk', async () => {
    await assert.rejects(
      client('kr-test-wrong-key-000000000000000000000000').chat.completions.create({
        model: 'kimi-k2',
        messages,
        stream: true,
      }),
      OpenAI.AuthenticationError,
    );
  });

  test('an unknown model raises NotFoundError with code model_not_found', async () => {
    await assert.rejects(client().chat.completions.create({ model: 'no-such-model', messages }), (err) => {
      assert.ok(err instanceof OpenAI.NotFoundError, `got ${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.code, 'model_not_found');
      return true;
    });
  });

  test('a model outside the allow-list raises PermissionDeniedError', async () => {
    await assert.rejects(client(KEYS.limited).chat.completions.create({ model: 'moonshot-v1-8k', messages }), (err) => {
      assert.ok(err instanceof OpenAI.PermissionDeniedError, `got ${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.code, 'model_not_allowed');
      return true;
    });
  });

  test('an upstream failure mid-stream makes the stream throw, not end quietly', async () => {
    const stream = await client().chat.completions.create(
      { model: 'kimi-agent-swarm', messages, stream: true },
      { headers: { 'x-mock-fault': 'reset_after=2', 'x-mock-chunks': '10' } },
    );
    let chunks = 0;
    await assert.rejects(async () => {
      for await (const _chunk of stream) chunks += 1;
    }, OpenAI.APIError);
    assert.equal(chunks, 2);
  });
});

test('the gateway logs contain no caller key and no upstream key', () => {
  const logs = env.relay.logs();
  for (const secret of SECRETS) assert.ok(!logs.includes(secret), `a secret (${secret.slice(0, 12)}…) is in the logs`);
});
