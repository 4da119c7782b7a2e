// How the gateway reads an upstream's HTTP/1.1 framing beyond the common
// case: interim (1xx) answers before the final one, and trailer fields after
// a chunked body. Both come from a raw-TCP upstream (tests/lib/capture_upstream.mjs).

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';

import { CAPTURE_REPLY_CONTENT, startCaptureUpstream } from '../lib/capture_upstream.mjs';
import { KEYS, useTopology } from '../lib/fixtures.mjs';
import { chatRequest } from '../lib/harness.mjs';

const interim = await startCaptureUpstream({ interim: true });
// The client reads at most 8 interim answers before the final one.
const MAX_INTERIM = 8;
const interimAtCap = await startCaptureUpstream({ interim: MAX_INTERIM });
const interimOverCap = await startCaptureUpstream({ interim: MAX_INTERIM + 1 });
const trailer = await startCaptureUpstream({ errorWithTrailer: 'Retry-After: 77' });
after(() => Promise.all([interim, interimAtCap, interimOverCap, trailer].map((u) => u.close())));

const env = useTopology({
  upstreams: [
    { name: 'interim', url: interim.url, apiKey: 'sk-interim-upstream-secret-5e7a9c1e3b5d', weight: 1, models: { 'kimi-interim': 'kimi-interim-up' } },
    { name: 'interim-cap', url: interimAtCap.url, apiKey: 'sk-interim-cap-secret-2b4d6f8a0c2e4a6c', weight: 1, models: { 'kimi-interim-cap': 'kimi-interim-cap-up' } },
    { name: 'interim-over', url: interimOverCap.url, apiKey: 'sk-interim-over-secret-4d6f8a0c2e4a6c8e', weight: 1, models: { 'kimi-interim-over': 'kimi-interim-over-up' } },
    { name: 'trailer', url: trailer.url, apiKey: 'sk-trailer-upstream-secret-7c9e1a3b5d7f', weight: 1, models: { 'kimi-trailer': 'kimi-trailer-up' } },
  ],
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
});
