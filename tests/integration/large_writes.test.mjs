// Writes that do not fit the socket at once. The gateway writes a request to
// its upstream, and an answer to its caller, with one non-blocking sendmsg
// and only waits for room when that did not take everything: these tests
// make sure the rest follows, in order, with nothing lost or repeated — a
// request body far larger than a socket's send buffer, and an answer far
// larger than what the caller's socket takes while the caller is not reading.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { after, describe, test } from 'node:test';

import { startCaptureUpstream } from '../lib/capture_upstream.mjs';
import { KEYS, useTopology } from '../lib/fixtures.mjs';
import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';

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
  // The answers that come whole with their upstream's head are written by the
  // handler without a wait (ResponseSink::respondNow); what the socket does
  // not take is written by the session once the handler has returned, before
  // the next request is read. A caller that pipelines requests and does not
  // read fills its socket: the gateway must stop there, and then deliver
  // every answer whole and in order.
  test('pipelined answers to a caller that does not read stop at a full socket, then all arrive in order', async () => {
    const N = 12_000;
    const body = JSON.stringify({ model: 'kimi-k2', messages: [{ role: 'user', content: 'one of many' }] });
    let requests = '';
    for (let i = 0; i < N; i++) {
      requests +=
        `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${KEYS.full}\r\n` +
        `content-type: application/json\r\nx-request-id: pipelined-${i}\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    }
    const served = async () => metricSum(await scrapeMetrics(env.relay), 'kimi_relay_requests_total');
    const before = await served();
    const { hostname, port } = new URL(env.relay.url);
    const socket = net.connect(Number(port), hostname);
    const chunks = [];
    socket.on('data', (d) => chunks.push(d));
    socket.pause(); // not reading: the caller's socket fills
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.write(requests);
    try {
      // Served answers stop growing short of N: the gateway waits for room.
      // (The first answers, then five polls 100 ms apart without a change.)
      let now = await served();
      for (let polls = 0, still = 0; still < 5 && polls < 600; polls++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        const next = await served();
        still = next === now && next > before ? still + 1 : 0;
        now = next;
      }
      assert.ok(now - before < N, `all ${N} answers went out while the caller read nothing`);
      assert.ok(now - before > 0, 'no answer was written at all');

      socket.resume();
      const text = await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('the answers did not all arrive')), 60_000);
        // Done when the last answer's head and its whole body are here.
        const check = () => {
          const all = Buffer.concat(chunks).toString('latin1');
          const last = all.lastIndexOf(`\r\nx-request-id: pipelined-${N - 1}\r\n`);
          if (last < 0) return;
          const end = all.indexOf('\r\n\r\n', last);
          const length = /\r\ncontent-length: (\d+)/i.exec(all.slice(all.lastIndexOf('HTTP/1.1 ', last), end));
          if (end < 0 || !length || all.length < end + 4 + Number(length[1])) return;
          clearTimeout(timer);
          resolve(all);
        };
        socket.on('data', check);
        check();
      });
      let at = 0;
      for (let i = 0; i < N; i++) {
        const end = text.indexOf('\r\n\r\n', at);
        assert.ok(end > at, `answer ${i}: no head`);
        const head = text.slice(at, end);
        assert.match(head, /^HTTP\/1\.1 200 /, `answer ${i}: ${head.slice(0, 80)}`);
        assert.match(head, new RegExp(`\\r\\nx-request-id: pipelined-${i}\\r\\n`), `answer ${i} out of order`);
        const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)[1]);
        const json = JSON.parse(text.slice(end + 4, end + 4 + length));
        assert.equal(json.object, 'chat.completion', `answer ${i}`);
        at = end + 4 + length;
      }
      assert.equal(at, text.length, 'bytes after the last answer');
    } finally {
      socket.destroy();
    }
  });
  // Stream chunks the caller's socket takes at once are written without a
  // wait (ResponseSink::writeNow); one it does not take whole is kept and
  // goes out before anything after it. A caller that reads nothing for a
  // while fills its socket mid-stream: every event must still arrive, whole
  // and in order, and the stream end after them.
  test('a streamed answer of several MB to a caller that pauses reading arrives whole and in order', async () => {
    const PAD = 1_000_000; // one event near max_event_bytes, then many small ones
    const CHUNKS = 20_000;
    const body = JSON.stringify({ model: 'kimi-k2', stream: true, messages: [{ role: 'user', content: 'a long stream' }] });
    const { hostname, port } = new URL(env.relay.url);
    const socket = net.connect(Number(port), hostname);
    const chunks = [];
    socket.on('data', (d) => chunks.push(d));
    const ended = new Promise((resolve) => socket.on('close', resolve));
    socket.pause(); // not reading: the caller's socket fills
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${KEYS.full}\r\n` +
        `content-type: application/json\r\nconnection: close\r\nx-mock-chunks: ${CHUNKS}\r\n` +
        `x-mock-fault: event_bytes=${PAD}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    try {
      await new Promise((resolve) => setTimeout(resolve, 500));
      socket.resume();
      let timer;
      const late = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('the stream did not end')), 60_000);
      });
      await Promise.race([ended, late]).finally(() => clearTimeout(timer));
    } finally {
      socket.destroy();
    }
    const raw = Buffer.concat(chunks);
    const headEnd = raw.indexOf('\r\n\r\n');
    const head = raw.subarray(0, headEnd).toString('latin1');
    assert.match(head, /^HTTP\/1\.1 200 /, head);
    assert.match(head, /\r\ntransfer-encoding: chunked\r\n/i);
    // The chunked framing, undone.
    const parts = [];
    let at = headEnd + 4;
    for (;;) {
      const eol = raw.indexOf('\r\n', at);
      assert.ok(eol > at, `no chunk size line at byte ${at}`);
      const size = parseInt(raw.subarray(at, eol).toString('latin1'), 16);
      assert.ok(Number.isInteger(size), `a bad chunk size line at byte ${at}`);
      if (size === 0) {
        assert.equal(raw.subarray(eol, eol + 4).toString('latin1'), '\r\n\r\n', 'the last chunk is not the end');
        assert.equal(eol + 4, raw.length, 'bytes after the last chunk');
        break;
      }
      parts.push(raw.subarray(eol + 2, eol + 2 + size));
      assert.equal(raw.subarray(eol + 2 + size, eol + 4 + size).toString('latin1'), '\r\n', 'a chunk without its CRLF');
      at = eol + 4 + size;
    }
    const events = Buffer.concat(parts).toString('latin1').split('\n\n');
    assert.equal(events.pop(), '', 'the stream ends with a whole event');
    assert.equal(events.shift(), `data: {"pad":"${'x'.repeat(PAD - 24)}"}`, 'the large event, whole');
    assert.equal(events.at(-1), 'data: [DONE]');
    const deltas = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)));
    const content = deltas.filter((d) => d.choices?.[0]?.delta?.content !== undefined);
    assert.equal(content.length, CHUNKS, 'every content chunk arrived');
    assert.equal(deltas.at(-1).choices?.[0]?.finish_reason ?? deltas.at(-2).choices?.[0]?.finish_reason, 'stop');
  });
});
