// Writes that do not fit the socket at once. The gateway writes a request to
// its upstream, and an answer to its caller, with one non-blocking sendmsg
// and only waits for room when that did not take everything: these tests
// make sure the rest follows, in order, with nothing lost or repeated — a
// request body far larger than a socket's send buffer, and an answer far
// larger than what the caller's socket takes while the caller is not reading.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, describe, test } from 'node:test';

import { startCaptureUpstream } from '../lib/capture_upstream.mjs';
import { KEYS, useTopology } from '../lib/fixtures.mjs';

const capture = await startCaptureUpstream();
after(() => capture.close());

// Room for a body far larger than a loopback socket takes in one sendmsg
// (which can be several megabytes while the reader keeps up).
const BIG_REQUEST = 24_000_000;
const env = useTopology({
  server: { max_request_bytes: 32 * 1024 * 1024 },
  // The first-byte deadline runs from the request's first byte: writing and
  // reading 24 MB on a loaded machine under a sanitizer took longer than the
  // 15 s default once, and the retry that followed reached the upstream as a
  // second request. These tests are about writes, not that deadline.
  extra: { timeouts: { first_byte_ms: 120_000 } },
  upstreams: [
    { name: 'capture', url: capture.url, apiKey: 'sk-capture-upstream-secret-6a8c0e2a4c6e', weight: 1, models: { 'kimi-capture': 'kimi-capture-up' } },
  ],
});

const auth = { authorization: `Bearer ${KEYS.full}`, 'content-type': 'application/json' };

// Printable text that is different everywhere: a lost, repeated or reordered
// piece cannot go unnoticed.
function text(bytes) {
  let out = '';
  for (let i = 0; out.length < bytes; i++) out += createHash('sha256').update(String(i)).digest('hex');
  return out.slice(0, bytes);
}

describe('writes larger than a socket takes at once', () => {
  test('a 24 MB request body reaches the upstream whole and in order', async () => {
    const content = text(BIG_REQUEST);
    const res = await fetch(`${env.relay.url}/v1/chat/completions`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ model: 'kimi-capture', max_tokens: 8, messages: [{ role: 'user', content }] }),
    });
    const answer = await res.text();
    assert.equal(res.status, 200, answer);
    assert.equal(capture.requests.length, 1);
    const forwarded = JSON.parse(capture.requests[0].body);
    assert.equal(forwarded.model, 'kimi-capture-up');
    assert.equal(forwarded.messages[0].content.length, content.length);
    assert.ok(forwarded.messages[0].content === content, 'the forwarded text differs from the text sent');
  });

  test('a 16 MB answer reaches a caller that waits 300 ms before reading, whole', async () => {
    const bytes = 16_000_000;
    const res = await fetch(`${env.relay.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...auth, 'x-mock-fault': `body_bytes=${bytes}` },
      body: JSON.stringify({ model: 'kimi-k2', messages: [{ role: 'user', content: 'a big answer' }] }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-length'), String(bytes));
    // The gateway's first write cannot take 16 MB while nobody reads: the
    // rest waits for room, and must still come out whole.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const body = Buffer.from(await res.arrayBuffer());
    assert.equal(body.length, bytes);
    assert.equal(body[0], 0x7b); // '{'
    assert.equal(body[bytes - 1], 0x7d); // '}'
    assert.equal(body.subarray(1, bytes - 1).every((b) => b === 0x20), true, 'only the spaces the mock wrote');

    // The connection goes on serving: the next answer is whole too.
    const next = await fetch(`${env.relay.url}/v1/chat/completions`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ model: 'kimi-k2', messages: [{ role: 'user', content: 'and a small one' }] }),
    });
    assert.equal(next.status, 200);
    assert.equal(JSON.parse(await next.text()).object, 'chat.completion');
  });
});
