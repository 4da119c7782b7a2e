// How the gateway reads an upstream's HTTP/1.1 framing beyond the common
// case: interim (1xx) answers before the final one, and trailer fields after
// a chunked body. Both come from a raw-TCP upstream (tests/lib/capture_upstream.mjs).

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';

import { CAPTURE_REPLY_CONTENT, startCaptureUpstream } from '../lib/capture_upstream.mjs';
import { KEYS, useTopology } from '../lib/fixtures.mjs';
import { chatRequest, collectSse, streamedContent } from '../lib/harness.mjs';

const interim = await startCaptureUpstream({ interim: true });
// The client reads at most 8 interim answers before the final one.
const MAX_INTERIM = 8;
const interimAtCap = await startCaptureUpstream({ interim: MAX_INTERIM });
const interimOverCap = await startCaptureUpstream({ interim: MAX_INTERIM + 1 });
const trailer = await startCaptureUpstream({ errorWithTrailer: 'Retry-After: 77' });
// An upstream's response head is at most 64 KiB, status line to blank line
// (docs/configuration.md, Bounds).
const MAX_HEAD = 64 * 1024;
const headAtCap = await startCaptureUpstream({ headBytes: MAX_HEAD });
const headOverCap = await startCaptureUpstream({ headBytes: MAX_HEAD + 1 });
const headEndless = await startCaptureUpstream({ endlessHead: true });
// A 204 whose Content-Length declares a body far over max_response_bytes.
const noBody = await startCaptureUpstream({ noBodyLength: 1024 ** 4 });
// Answers framed by Content-Length, head and body in one write: read whole
// at once (no wait, no coroutine of its own) against max_response_bytes.
const LENGTH_BODY = 4096;
const lengthFramed = await startCaptureUpstream({ contentLength: LENGTH_BODY });
// The same head with a Transfer-Encoding too, which frames the body to the
// connection's end: the declared length does not bound what follows.
const codingFramed = await startCaptureUpstream({ contentLength: LENGTH_BODY, codingOver: 1000 });
// Streams whose end is the connection's close, each event written apart.
const SSE_EVENTS = 20;
const sseUntilClose = await startCaptureUpstream({ sseUntilClose: { events: SSE_EVENTS } });
const sseCutAtClose = await startCaptureUpstream({ sseUntilClose: { events: SSE_EVENTS, cut: true } });
// A chunked stream whose size lines and data arrive apart, 350 ms between
// writes, under an idle deadline of 600 ms (timeouts.idle_ms below): the
// upstream is never silent for as long as the deadline, though each event
// takes 700 ms.
const IDLE_MS = 600;
const SPLIT_GAP_MS = 350;
const SPLIT_EVENTS = 2;
const sseSplit = await startCaptureUpstream({ sseSplitChunks: { events: SPLIT_EVENTS, gapMs: SPLIT_GAP_MS } });
const raw = [interim, interimAtCap, interimOverCap, trailer, headAtCap, headOverCap, headEndless, noBody, lengthFramed, codingFramed, sseUntilClose, sseCutAtClose, sseSplit];
after(() => Promise.all(raw.map((u) => u.close())));

const env = useTopology({
  upstreams: [
    { name: 'interim', url: interim.url, apiKey: 'sk-interim-upstream-secret-5e7a9c1e3b5d', weight: 1, models: { 'kimi-interim': 'kimi-interim-up' } },
    { name: 'interim-cap', url: interimAtCap.url, apiKey: 'sk-interim-cap-secret-2b4d6f8a0c2e4a6c', weight: 1, models: { 'kimi-interim-cap': 'kimi-interim-cap-up' } },
    { name: 'interim-over', url: interimOverCap.url, apiKey: 'sk-interim-over-secret-4d6f8a0c2e4a6c8e', weight: 1, models: { 'kimi-interim-over': 'kimi-interim-over-up' } },
    { name: 'trailer', url: trailer.url, apiKey: 'sk-trailer-upstream-secret-7c9e1a3b5d7f', weight: 1, models: { 'kimi-trailer': 'kimi-trailer-up' } },
    { name: 'head-cap', url: headAtCap.url, apiKey: 'sk-head-cap-secret-6f8a0c2e4a6c8e0a', weight: 1, models: { 'kimi-head-cap': 'kimi-head-cap-up' } },
    { name: 'head-over', url: headOverCap.url, apiKey: 'sk-head-over-secret-8a0c2e4a6c8e0a2c', weight: 1, models: { 'kimi-head-over': 'kimi-head-over-up' } },
    { name: 'head-endless', url: headEndless.url, apiKey: 'sk-head-endless-secret-0c2e4a6c8e0a2c4e', weight: 1, models: { 'kimi-head-endless': 'kimi-head-endless-up' } },
    { name: 'length-cap', url: lengthFramed.url, apiKey: 'sk-length-cap-secret-3e5a7c9b1d3f5a7c9e1b', weight: 1, max_response_bytes: LENGTH_BODY, models: { 'kimi-length-cap': 'kimi-length-up' } },
    { name: 'length-under', url: lengthFramed.url, apiKey: 'sk-length-under-secret-5a7c9e1b3d5f7a9c1e3b', weight: 1, max_response_bytes: LENGTH_BODY - 1, models: { 'kimi-length-under': 'kimi-length-up' } },
    { name: 'coding-over', url: codingFramed.url, apiKey: 'sk-coding-over-secret-7c9e1b3d5f7a9c1e3b5d', weight: 1, max_response_bytes: LENGTH_BODY, models: { 'kimi-coding-over': 'kimi-length-up' } },
    { name: 'sse-close', url: sseUntilClose.url, apiKey: 'sk-sse-close-secret-2c4e6a8c0e2a4c6e8a0c', weight: 1, models: { 'kimi-sse-close': 'kimi-sse-close-up' } },
    { name: 'sse-cut', url: sseCutAtClose.url, apiKey: 'sk-sse-cut-secret-4e6a8c0e2a4c6e8a0c2e', weight: 1, models: { 'kimi-sse-cut': 'kimi-sse-cut-up' } },
    { name: 'sse-split', url: sseSplit.url, apiKey: 'sk-sse-split-secret-6a8c0e2a4c6e8a0c2e4a', weight: 1, models: { 'kimi-sse-split': 'kimi-sse-split-up' } },
    { name: 'no-body', url: noBody.url, apiKey: 'sk-no-body-secret-1d3f5b7a9c1e3d5f7b9a', weight: 1, models: { 'kimi-no-body': 'kimi-no-body-up' } },
  ],
  extra: { timeouts: { idle_ms: IDLE_MS } },
});

const auth = { authorization: `Bearer ${KEYS.full}`, 'content-type': 'application/json' };

async function chat(model, id) {
  const res = await fetch(`${env.relay.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...auth, 'x-request-id': id },
    body: JSON.stringify(chatRequest({ model })),
  });
  return { res, text: await res.text() };
}

describe('upstream framing', () => {
  test('an answer framed by Content-Length that arrives with its head: at max_response_bytes it is passed on whole, twice; one byte over the limit is a 502 naming it', async () => {
    for (let i = 0; i < 2; i++) {
      const id = `length-cap-${i}-${randomUUID()}`;
      const { res, text } = await chat('kimi-length-cap', id);
      assert.equal(res.status, 200, text);
      assert.equal(Buffer.byteLength(text), LENGTH_BODY);
      assert.equal(JSON.parse(text).choices[0].message.content, CAPTURE_REPLY_CONTENT);
      assert.equal(res.headers.get('x-upstream-request-id'), id);
    }
    const { res, text } = await chat('kimi-length-under', `length-under-${randomUUID()}`);
    assert.equal(res.status, 502, text);
    assert.match(JSON.parse(text).error.message, /max_response_bytes/);
    assert.match(JSON.parse(text).error.message, /'length-under'/);
  });

  test('a Content-Length within max_response_bytes beside a Transfer-Encoding, whose body runs on past it in the same read: a 502 naming the limit, not the bytes', async () => {
    const { res, text } = await chat('kimi-coding-over', `coding-over-${randomUUID()}`);
    assert.equal(res.status, 502, text.slice(0, 200));
    assert.match(JSON.parse(text).error.message, /max_response_bytes/);
    assert.match(JSON.parse(text).error.message, /'coding-over'/);
  });

  test('a 103 Early Hints before the answer: the caller gets the final answer, and the next request its own', async () => {
    // Before the fix the 103 was taken for the answer (an error) and the
    // connection went back to the pool with the real 200 still coming: the
    // next request on it would have read that stale answer.
    for (let i = 0; i < 3; i++) {
      const id = `interim-${i}-${randomUUID()}`;
      const { res, text } = await chat('kimi-interim', id);
      assert.equal(res.status, 200, text);
      const body = JSON.parse(text);
      assert.equal(body.choices[0].message.content, CAPTURE_REPLY_CONTENT);
      assert.equal(body.model, 'kimi-interim-up', 'the upstream answered the model it was asked for');
      assert.equal(res.headers.get('x-upstream-request-id'), id, 'the final answer of this very request');
      assert.equal(res.headers.get('x-relay-attempts'), '1', 'one attempt: the 103 is no failure');
    }
    assert.equal(interim.requests.length, 3, 'each request reached the upstream once');
  });

  test(`at the bound: ${MAX_INTERIM} interim answers, then the final one, is served; one more is a 502`, async () => {
    const atCap = await chat('kimi-interim-cap', `cap-${randomUUID()}`);
    assert.equal(atCap.res.status, 200, atCap.text);
    assert.equal(JSON.parse(atCap.text).choices[0].message.content, CAPTURE_REPLY_CONTENT);

    const over = await chat('kimi-interim-over', `over-${randomUUID()}`);
    assert.equal(over.res.status, 502, over.text);
    const error = JSON.parse(over.text).error;
    assert.match(error.message, /more than 8 interim \(1xx\) answers/);
    // The connection of the refused answer is never reused: the next request
    // opens a new one and meets the same bound, not a stale answer.
    const again = await chat('kimi-interim-over', `over-${randomUUID()}`);
    assert.equal(again.res.status, 502, again.text);
  });

  test('a field in a chunked body\'s trailer is not taken for a field of the head', async () => {
    // The upstream's 400 carries Retry-After only as a trailer field. Read as
    // a head field, it would be passed to the caller (and steer retries).
    const { res, text } = await chat('kimi-trailer', `trailer-${randomUUID()}`);
    assert.equal(res.status, 400, text);
    assert.match(JSON.parse(text).error.message, /refused by the raw upstream/);
    assert.equal(res.headers.get('retry-after'), null, 'a trailer field became a Retry-After of the answer');
  });

  test(`at the bound: a response head of exactly ${MAX_HEAD} bytes is served; one byte more is a 502`, async () => {
    const atCap = await chat('kimi-head-cap', `head-cap-${randomUUID()}`);
    assert.equal(atCap.res.status, 200, atCap.text);
    assert.equal(JSON.parse(atCap.text).choices[0].message.content, CAPTURE_REPLY_CONTENT);
    assert.equal(atCap.res.headers.get('x-padding'), null, 'an unknown upstream field reached the caller');

    const over = await chat('kimi-head-over', `head-over-${randomUUID()}`);
    assert.equal(over.res.status, 502, over.text);
    const error = JSON.parse(over.text).error;
    assert.match(error.message, /response head is larger than 65536 bytes/);
    assert.doesNotMatch(over.text, /sk-head-over-secret/, 'the upstream key appeared in the error');
    // Every head within the bound was read the same way before and after.
    const again = await chat('kimi-head-cap', `head-cap-${randomUUID()}`);
    assert.equal(again.res.status, 200, again.text);
  });

  test('a head that never ends: a 502 once the bound is passed, and the upstream connection is closed', async () => {
    // Without the bound the gateway would read on until the first-byte
    // deadline (a 504 after 30 s here) holding everything it read.
    const started = Date.now();
    const { res, text } = await chat('kimi-head-endless', `head-endless-${randomUUID()}`);
    assert.equal(res.status, 502, text);
    assert.match(JSON.parse(text).error.message, /response head is larger than 65536 bytes/);
    assert.ok(Date.now() - started < 10_000, 'the answer waited for a deadline, not for the bound');
    // The gateway let go of the connection: the upstream sees it closed (it
    // would otherwise keep writing into it for as long as the test runs).
    const written = await headEndless.closedByPeer();
    assert.ok(written > MAX_HEAD, `the upstream wrote ${written} bytes before the close`);
  });

  test('a 204 whose Content-Length declares a body over the response limit: the 204 is passed on, twice on one connection', async () => {
    // No body belongs to a 204, so the declared length is neither a body to
    // wait for nor over max_response_bytes. The gateway took it for one and
    // answered 502 "too large" for an answer that was complete.
    for (let i = 0; i < 2; i++) {
      const id = `no-body-${i}-${randomUUID()}`;
      const { res, text } = await chat('kimi-no-body', id);
      assert.equal(res.status, 204, text);
      assert.equal(text, '');
      assert.equal(res.headers.get('x-upstream-request-id'), id);
    }
    assert.equal(noBody.requests.length, 2);
  });

  async function stream(model) {
    const res = await fetch(`${env.relay.url}/v1/chat/completions`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify(chatRequest({ model, stream: true, stream_options: { include_usage: true } })),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    return collectSse(res);
  }

  test('a stream whose body ends at the connection\'s close, each event written apart: every event, the usage and [DONE], twice', async () => {
    const expected = Array.from({ length: SSE_EVENTS }, (_, i) => `part${i} `).join('');
    for (let i = 0; i < 2; i++) {
      const events = await stream('kimi-sse-close');
      assert.equal(streamedContent(events), expected);
      const usage = events.find((e) => e.json?.usage)?.json.usage;
      assert.deepEqual(usage, { prompt_tokens: 3, completion_tokens: SSE_EVENTS, total_tokens: 3 + SSE_EVENTS });
      assert.ok(events.at(-1).done, 'the stream ends with [DONE]');
      assert.equal(events.filter((e) => e.json?.error).length, 0, 'no error event');
    }
    assert.equal(sseUntilClose.requests.length, 2, 'each request reached the upstream once');
  });

  test('a chunked stream whose size lines and data arrive apart: bytes that bring no event still restart the idle deadline', async () => {
    const started = performance.now();
    const events = await stream('kimi-sse-split');
    const ms = performance.now() - started;
    assert.equal(events.filter((e) => e.json?.error).length, 0, `no error event: ${JSON.stringify(events.find((e) => e.json?.error))}`);
    const expected = Array.from({ length: SPLIT_EVENTS }, (_, i) => `split${i} `).join('');
    assert.equal(streamedContent(events), expected);
    assert.ok(events.at(-1).done, 'the stream ends with [DONE]');
    assert.ok(ms >= 2 * SPLIT_GAP_MS * (SPLIT_EVENTS + 1), `each event took twice the gap (${ms.toFixed(0)} ms in all)`);
  });

  test('a stream the upstream closes in the middle of an event: the events before it, then an error event naming the cut', async () => {
    const events = await stream('kimi-sse-cut');
    const expected = Array.from({ length: SSE_EVENTS }, (_, i) => `part${i} `).join('');
    assert.equal(streamedContent(events), expected, 'every whole event was passed on');
    const error = events.find((e) => e.json?.error)?.json.error;
    assert.ok(error, 'an error event ends the stream');
    assert.match(error.message, /'sse-cut' ended the stream in the middle of an event/);
    assert.doesNotMatch(JSON.stringify(events), /never whole/, 'no part of the cut event reached the caller');
  });
});
