// The SSE relay over HTTP/1.1: events pass through intact and unbuffered, usage
// chunks appear only when asked for, a caller that leaves cancels the upstream
// request, and a stream that breaks upstream is not silently truncated.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';

import { KEYS, MODELS, SECRETS, allRecorded, useTopology } from '../lib/fixtures.mjs';
import {
  chatRequest,
  collectSse,
  headerValues,
  postChat,
  readSse,
  streamedContent,
  waitFor,
} from '../lib/harness.mjs';

const env = useTopology();

// The same request straight to a mock (bypassing the gateway), for comparison.
function postMock(mock, body, headers = {}) {
  return fetch(`${mock.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${mock.apiKey}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

// Sum of one /_mock/stats counter over both mocks.
async function statSum(name) {
  const all = await Promise.all(Object.values(env.mocks).map((m) => m.stats()));
  return all.reduce((n, s) => n + s[name], 0);
}

function assertChunkShape(events) {
  assert.ok(events.length >= 2, `only ${events.length} events`);
  const last = events.at(-1);
  assert.equal(last.done, true, `the stream ends with [DONE], not ${last.data}`);
  const chunks = events.slice(0, -1);
  for (const e of chunks) {
    assert.ok(e.json, `event data is not JSON: ${e.data}`);
    assert.equal(e.json.object, 'chat.completion.chunk');
    assert.equal(e.json.id, chunks[0].json.id, 'one id per stream');
  }
  return chunks;
}

describe('SSE relay', () => {
  for (const [upstream, model] of [
    ['holysheep', 'kimi-agent-swarm'],
    ['moonshot', 'moonshot-v1-8k'],
  ]) {
    test(`streams ${upstream}'s events through unchanged in content`, async () => {
      const headers = { 'x-mock-chunks': '12' };
      const direct = await collectSse(await postMock(env.mocks[upstream], chatRequest({ model, stream: true }), headers));
      await env.mocks[upstream].clearRequests();

      const id = `sse-${randomUUID()}`;
      const res = await postChat(env.relay, chatRequest({ model, stream: true }), {
        key: KEYS.full,
        headers: { ...headers, 'x-request-id': id },
      });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
      assert.equal(res.headers.get('x-relay-upstream'), upstream);
      assert.equal(res.headers.get('x-request-id'), id);
      const events = await collectSse(res);
      const chunks = assertChunkShape(events);
      assert.equal(streamedContent(events), streamedContent(direct), 'content differs from the upstream stream');
      assert.equal(chunks.length, direct.length - 1, 'as many chunks as the upstream sent');
      assert.equal(chunks.at(-1).json.choices[0].finish_reason, 'stop');

      const [rec] = await env.mocks[upstream].requests();
      assert.deepEqual(headerValues(rec, 'x-request-id'), [id]);
      const sent = JSON.parse(rec.body);
      assert.equal(sent.model, model);
      assert.equal(sent.stream, true);
    });
  }

  test('rewrites the model for a stream and keeps every other field', async () => {
    const body = chatRequest({ stream: true, temperature: 0.3, foo: { bar: [1, 2] }, reasoning_effort: 'low' });
    const seen = new Set();
    for (let i = 0; i < 6; i++) {
      const res = await postChat(env.relay, body, { key: KEYS.full, headers: { 'x-mock-chunks': '2' } });
      assert.equal(res.status, 200);
      seen.add(res.headers.get('x-relay-upstream'));
      assertChunkShape(await collectSse(res));
    }
    assert.equal(seen.size, 2, 'both upstreams served kimi-k2 streams');
    for (const rec of await allRecorded(env.mocks)) {
      const sent = JSON.parse(rec.body);
      // The gateway may add stream_options to read usage; nothing else may change.
      const { stream_options: _added, ...rest } = sent;
      const { stream_options: _none, ...expected } = { ...body, model: MODELS[rec.upstream]['kimi-k2'] };
      assert.deepEqual(rest, expected, `fields changed on the way to ${rec.upstream}`);
    }
  });

  test('include_usage: the final chunk before [DONE] carries the usage', async () => {
    const res = await postChat(
      env.relay,
      chatRequest({ model: 'kimi-agent-swarm', stream: true, stream_options: { include_usage: true } }),
      { key: KEYS.full, headers: { 'x-mock-chunks': '7' } },
    );
    assert.equal(res.status, 200);
    const chunks = assertChunkShape(await collectSse(res));
    const usageChunk = chunks.at(-1);
    assert.deepEqual(usageChunk.json.choices, []);
    const { usage } = usageChunk.json;
    assert.equal(usage.completion_tokens, 7);
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
    for (const e of chunks.slice(0, -1)) assert.equal(e.json.usage ?? null, null, 'usage only in the last chunk');
  });

  // (Moonshot itself always puts usage in its last chunk; that is its own
  // format and passes through, so only the OpenAI-flavoured upstream is checked.)
  test('no include_usage: no chunk carries usage, even if the gateway asked upstream', async () => {
    const res = await postChat(env.relay, chatRequest({ model: 'kimi-agent-swarm', stream: true }), {
      key: KEYS.full,
      headers: { 'x-mock-chunks': '5' },
    });
    assert.equal(res.status, 200);
    const chunks = assertChunkShape(await collectSse(res));
    for (const e of chunks) {
      assert.ok(e.json.choices.length > 0, 'a usage-only chunk reached a caller that did not ask');
      assert.equal(e.json.usage ?? null, null, `usage in ${e.data}`);
    }
  });

  test("Moonshot include_usage: usage arrives once, in OpenAI's place (a last chunk with choices: [])", async () => {
    const res = await postChat(
      env.relay,
      chatRequest({ model: 'moonshot-v1-8k', stream: true, stream_options: { include_usage: true } }),
      { key: KEYS.full, headers: { 'x-mock-chunks': '4' } },
    );
    assert.equal(res.status, 200);
    const chunks = assertChunkShape(await collectSse(res));
    const last = chunks.at(-1).json;
    assert.deepEqual(last.choices, [], `the last chunk is the usage-only chunk: ${chunks.at(-1).data}`);
    assert.ok(last.usage, `no usage in the last chunk: ${chunks.at(-1).data}`);
    assert.equal(last.usage.completion_tokens, 4);
    for (const e of chunks) {
      assert.equal(e.json.choices[0]?.usage, undefined, `usage left inside a choice: ${e.data}`);
    }
  });
});

describe('pacing', () => {
  // Content chunks only (the usage-free chunks with a delta), with arrival times.
  const contentTimes = (events) =>
    events.filter((e) => e.json?.choices?.[0]?.delta?.content !== undefined).map((e) => e.at);

  test('10 chunks x 50 ms arrive as paced upstream, not buffered', async () => {
    const headers = { 'x-mock-chunks': '10', 'x-mock-chunk-delay-ms': '50' };
    const body = chatRequest({ model: 'kimi-agent-swarm', stream: true });

    const direct = contentTimes(await collectSse(await postMock(env.holysheep, body, headers)));
    const start = performance.now();
    const res = await postChat(env.relay, body, { key: KEYS.full, headers });
    assert.equal(res.status, 200);
    const relayed = contentTimes(await collectSse(res));

    assert.equal(direct.length, 10);
    assert.equal(relayed.length, 10);
    const directSpread = direct.at(-1) - direct[0];
    const relayedSpread = relayed.at(-1) - relayed[0];
    const detail = `direct ${directSpread.toFixed(0)} ms, relayed ${relayedSpread.toFixed(0)} ms`;
    assert.ok(directSpread > 0.8 * 450 && directSpread < 1.2 * 450 + 50, `the mock's own pacing is off: ${detail}`);
    assert.ok(Math.abs(relayedSpread - directSpread) <= 0.2 * directSpread, `pacing not preserved: ${detail}`);
    // The first chunk is not held back until the rest arrive.
    assert.ok(relayed[0] - start < relayed.at(-1) - start - 300, `first chunk late: ${detail}`);
    // Every chunk arrives on its own, about 50 ms after the previous one.
    const gaps = relayed.slice(1).map((t, i) => t - relayed[i]);
    const spaced = gaps.filter((g) => g >= 25).length;
    assert.ok(spaced >= 8, `chunks arrived in bursts: gaps ${gaps.map((g) => g.toFixed(0)).join(', ')} ms`);
  });
});

describe('client disconnect', () => {
  test('aborting mid-stream cancels the upstream request', async () => {
    const controller = new AbortController();
    const res = await postChat(env.relay, chatRequest({ stream: true }), {
      key: KEYS.full,
      headers: { 'x-mock-chunks': '50', 'x-mock-chunk-delay-ms': '100' },
      signal: controller.signal,
    });
    assert.equal(res.status, 200);
    let received = 0;
    await assert.rejects(async () => {
      for await (const event of readSse(res)) {
        assert.ok(event.json, event.data);
        received += 1;
        if (received === 2) controller.abort();
      }
    }, /abort/i);
    assert.equal(received, 2);
    const abortedAt = performance.now();

    await waitFor(async () => (await statSum('cancelled')) === 1, {
      timeoutMs: 2000,
      what: 'the upstream to see the request cancelled',
    });
    await waitFor(async () => (await statSum('in_flight')) === 0, { timeoutMs: 1000, what: 'in_flight 0' });
    const took = performance.now() - abortedAt;
    assert.equal(await statSum('completed_streams'), 0, 'the upstream stream ran to its end anyway');
    assert.ok(took < 2000, `cancellation took ${took.toFixed(0)} ms`);

    // The gateway goes on serving.
    const next = await postChat(env.relay, chatRequest({ stream: true }), {
      key: KEYS.full,
      headers: { 'x-mock-chunks': '3' },
    });
    assert.equal(next.status, 200);
    assertChunkShape(await collectSse(next));
  });

  test('aborting before the first byte cancels the upstream request', async () => {
    const controller = new AbortController();
    const pending = postChat(env.relay, chatRequest({ stream: true }), {
      key: KEYS.full,
      headers: { 'x-mock-fault': 'first_byte_delay_ms=5000' },
      signal: controller.signal,
    });
    await waitFor(async () => (await statSum('in_flight')) === 1, {
      timeoutMs: 2000,
      what: 'the request to reach an upstream',
    });
    controller.abort();
    await assert.rejects(pending, /abort/i);
    await waitFor(async () => (await statSum('cancelled')) === 1, {
      timeoutMs: 2000,
      what: 'the upstream to see the request cancelled',
    });
    await waitFor(async () => (await statSum('in_flight')) === 0, { timeoutMs: 1000, what: 'in_flight 0' });
  });
});

describe('upstream failure mid-stream', () => {
  test('a reset after 3 chunks ends the stream with an SSE error event, not silently', async () => {
    const res = await postChat(env.relay, chatRequest({ model: 'kimi-agent-swarm', stream: true }), {
      key: KEYS.full,
      headers: { 'x-mock-fault': 'reset_after=3', 'x-mock-chunks': '10' },
    });
    assert.equal(res.status, 200, 'headers were already on their way: the failure comes in-band');
    const events = [];
    try {
      for await (const e of readSse(res)) events.push(e);
    } catch {
      // a reset connection after the error event is acceptable
    }
    const content = events.filter((e) => e.json?.choices?.length);
    assert.equal(content.length, 3, `expected the 3 chunks sent before the reset, got ${events.map((e) => e.data)}`);
    const errorEvent = events.find((e) => e.json?.error);
    assert.ok(errorEvent, `no error event after the reset; events: ${events.map((e) => e.data).join(' | ')}`);
    for (const key of ['message', 'type', 'param', 'code']) assert.ok(key in errorEvent.json.error, key);
    assert.ok(!events.some((e) => e.done), 'a broken stream must not end with [DONE]');
  });
});

test('the gateway logs contain no caller key and no upstream key', () => {
  const logs = env.relay.logs();
  for (const secret of SECRETS) assert.ok(!logs.includes(secret), `a secret (${secret.slice(0, 12)}…) is in the logs`);
});
