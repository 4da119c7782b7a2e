// Regressions for failure paths: callers that leave must not be counted
// against the upstream (or one tenant could eject an upstream for everyone),
// and a request whose body length cannot be known is refused, not guessed.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';

import { chatRequest, postChat, readSse, relayConfig, startMock, startRelay, waitFor } from '../lib/harness.mjs';
import { PREFACE, SETTING, TYPE, connectRaw, dataFrame, frame, headersFrame, settingsFrame } from '../lib/h2frames.mjs';
import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';

const KEY = 'kr-test-robustness-7c5a3e1b9d7f5c3a1e9b7d5f3c1a9e7b';

// `promise`, or a failure naming `what` after `ms`: a socket event that
// never comes fails its test instead of hanging the file.
function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
const UPSTREAM_KEY = 'sk-robustness-upstream-2e4c6a8b0d2f4e6a8c0b';

describe('callers leaving', () => {
  const env = {};
  before(async () => {
    env.mock = await startMock({ name: 'solo', apiKey: UPSTREAM_KEY });
    env.relay = await startRelay(
      relayConfig({
        keys: [{ name: 'robust', key: KEY }],
        upstreams: [
          {
            name: 'solo',
            url: env.mock.url,
            apiKey: UPSTREAM_KEY,
            models: { 'm-solo': 'm-solo' },
            // Two failures would eject it for a minute.
            health: { eject_after_failures: 2, base_ejection_ms: 60_000 },
          },
        ],
      }),
    );
  });
  after(async () => {
    await Promise.all([env.relay, env.mock].filter(Boolean).map((p) => p.stop()));
  });

  const ejections = async () =>
    metricSum(await scrapeMetrics(env.relay), 'kimi_relay_upstream_ejections_total', { upstream: 'solo' });

  test('callers that abandon their streams do not eject the upstream', async () => {
    for (let i = 0; i < 5; ++i) {
      const abort = new AbortController();
      const res = await postChat(env.relay, chatRequest({ model: 'm-solo', stream: true }), {
        key: KEY,
        headers: { 'x-mock-chunks': '40', 'x-mock-chunk-delay-ms': '50' },
        signal: abort.signal,
      });
      assert.equal(res.status, 200);
      for await (const _event of readSse(res)) {
        abort.abort();  // gone after the first event, mid-stream
        break;
      }
    }
    await waitFor(async () => (await env.mock.stats()).in_flight === 0, {
      timeoutMs: 5000,
      what: 'the abandoned upstream requests to be cancelled',
    });
    assert.equal(await ejections(), 0, 'a caller leaving is not an upstream failure');
    const res = await postChat(env.relay, chatRequest({ model: 'm-solo' }), { key: KEY });
    assert.equal(res.status, 200, await res.text());
  });

  test('callers that leave before the answer starts do not eject it either', async () => {
    for (let i = 0; i < 4; ++i) {
      const abort = new AbortController();
      const pending = postChat(env.relay, chatRequest({ model: 'm-solo' }), {
        key: KEY,
        headers: { 'x-mock-fault': 'first_byte_delay_ms=2000' },
        signal: abort.signal,
      }).catch(() => null);
      await waitFor(async () => (await env.mock.stats()).in_flight > 0, { what: 'the upstream request' });
      abort.abort();
      await pending;
    }
    await waitFor(async () => (await env.mock.stats()).in_flight === 0, {
      timeoutMs: 5000,
      what: 'the upstream requests to be cancelled',
    });
    assert.equal(await ejections(), 0);
  });

  // A caller's FIN is taken as its leaving (docs/architecture.md, "A caller
  // that half-closes"): on TCP a shutdown(SHUT_WR) and a close() look the
  // same until a write fails, and an upstream request for a caller that is
  // gone costs tokens. nginx (proxy_ignore_client_abort off) does the same.
  async function halfClosed(request) {
    const { hostname, port } = new URL(env.relay.url);
    const sock = net.connect({ host: hostname, port: Number(port), allowHalfOpen: true });
    await once(sock, 'connect');
    let text = '';
    sock.on('data', (chunk) => {
      text += chunk.toString('latin1');
    });
    const ended = new Promise((resolve) => sock.once('end', resolve));
    sock.write(request);
    return { sock, closed: () => within(ended, 5000, 'close from the gateway'), text: () => text };
  }

  test('a caller that half-closes while its request waits upstream has left: the upstream request is cancelled, the connection closed', async () => {
    const before = await env.mock.stats();
    const body = JSON.stringify(chatRequest({ model: 'm-solo' }));
    const { sock, closed, text } = await halfClosed(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: relay\r\nauthorization: Bearer ${KEY}\r\n` +
        `content-type: application/json\r\nx-mock-fault: first_byte_delay_ms=3000\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    try {
      await waitFor(async () => (await env.mock.stats()).in_flight > 0, { what: 'the upstream request' });
      const t0 = performance.now();
      sock.end();
      await closed();
      assert.ok(performance.now() - t0 < 2000, 'the gateway closed at once, not after the answer');
      assert.equal(text(), '', 'nothing was written to a caller that left');
      await waitFor(
        async () => {
          const now = await env.mock.stats();
          return now.in_flight === 0 && now.cancelled === before.cancelled + 1;
        },
        { timeoutMs: 3000, what: 'the upstream request to be cancelled' },
      );
      assert.equal(await ejections(), 0, 'a caller leaving is not an upstream failure');
    } finally {
      sock.destroy();
    }
  });

  test('a request whose FIN follows it at once (printf | nc) is answered when its answer needs no upstream', async () => {
    const { sock, closed, text } = await halfClosed(
      `GET /v1/models HTTP/1.1\r\nhost: relay\r\nauthorization: Bearer ${KEY}\r\n\r\n`,
    );
    try {
      sock.end();
      await closed();
      const answer = text();
      assert.match(answer, /^HTTP\/1\.1 200 /);
      const length = Number(/\r\ncontent-length: (\d+)\r\n/i.exec(answer)?.[1]);
      const bodyText = answer.slice(answer.indexOf('\r\n\r\n') + 4);
      assert.equal(Buffer.byteLength(bodyText, 'latin1'), length, 'the whole answer');
      assert.ok(JSON.parse(bodyText).data.some((m) => m.id === 'm-solo'));
    } finally {
      sock.destroy();
    }
  });

  test('a chat request with a wrong key and its FIN right behind it gets its 401', async () => {
    const body = JSON.stringify(chatRequest({ model: 'm-solo' }));
    const { sock, closed, text } = await halfClosed(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: relay\r\nauthorization: Bearer kr-not-a-key-of-this-gateway\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    try {
      sock.end();
      await closed();
      const answer = text();
      assert.match(answer, /^HTTP\/1\.1 401 /);
      const bodyText = answer.slice(answer.indexOf('\r\n\r\n') + 4);
      assert.equal(JSON.parse(bodyText).error.code, 'invalid_api_key');
    } finally {
      sock.destroy();
    }
  });

  // The session cancels a running handler when its caller leaves; that left
  // the request loop's cancellation state set, the loop's next co_await threw,
  // and the connection was never closed nor its session freed (found by
  // tests/fuzz/fuzz_h1_request).
  test('a caller that leaves mid-stream gives its HTTP/1.1 connection back', async () => {
    const open = async () => metricSum(await scrapeMetrics(env.relay), 'kimi_relay_open_connections');
    const before = await open();
    const { hostname, port } = new URL(env.relay.url);
    const body = JSON.stringify(chatRequest({ model: 'm-solo', stream: true }));
    for (let i = 0; i < 3; ++i) {
      const socket = net.connect({ host: hostname, port: Number(port) });
      await once(socket, 'connect');
      socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${KEY}\r\n` +
          `content-type: application/json\r\nx-mock-chunks: 40\r\nx-mock-chunk-delay-ms: 50\r\n` +
          `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      await once(socket, 'data'); // the answer has started
      socket.destroy();
    }
    await waitFor(async () => (await open()) <= before, {
      timeoutMs: 5000,
      what: `kimi_relay_open_connections back to ${before} once the callers left`,
    });
  });

  // An HTTP/2 connection the gateway closes itself (GOAWAY after a protocol
  // error here) must cancel its streams like one the client closes: a handler
  // left running streamed its upstream's answer to nobody until the upstream
  // finished (found by tests/fuzz/fuzz_h2_session, for a body still awaited).
  test('an HTTP/2 connection closed for a protocol error cancels its streams upstream requests', async () => {
    const port = Number(new URL(env.relay.url).port);
    const conn = await connectRaw(port);
    try {
      const body = Buffer.from(JSON.stringify(chatRequest({ model: 'm-solo', stream: true })));
      await conn.write(
        Buffer.concat([
          PREFACE,
          settingsFrame(),
          headersFrame(1, [
            [':method', 'POST'],
            [':scheme', 'http'],
            [':path', '/v1/chat/completions'],
            [':authority', `127.0.0.1:${port}`],
            ['authorization', `Bearer ${KEY}`],
            ['content-type', 'application/json'],
            ['x-mock-chunks', '200'],
            ['x-mock-chunk-delay-ms', '50'],
          ]),
          dataFrame(1, body, { endStream: true }),
        ]),
      );
      await conn.nextFrame((f) => f.type === TYPE.DATA && f.streamId === 1, { what: 'the first event' });
      assert.equal((await env.mock.stats()).in_flight, 1);
      await conn.write(frame(TYPE.DATA, 0, 0, Buffer.from('x'))); // DATA on stream 0
      await conn.nextFrame((f) => f.type === TYPE.GOAWAY, { what: 'GOAWAY' });
      await conn.closed;
    } finally {
      conn.destroy();
    }
    // 200 chunks 50 ms apart would take 10 s.
    await waitFor(async () => (await env.mock.stats()).in_flight === 0, {
      timeoutMs: 2000,
      what: 'the upstream request of a stream whose connection closed to be cancelled',
    });
  });
});

describe('request framing', () => {
  const env = {};
  before(async () => {
    env.mock = await startMock({ name: 'frame', apiKey: UPSTREAM_KEY });
    env.relay = await startRelay(
      relayConfig({
        keys: [{ name: 'robust', key: KEY }],
        upstreams: [{ name: 'frame', url: env.mock.url, apiKey: UPSTREAM_KEY, models: { 'm-f': 'm-f' } }],
      }),
    );
  });
  after(async () => {
    await Promise.all([env.relay, env.mock].filter(Boolean).map((p) => p.stop()));
  });

  // Sends raw bytes and returns everything the gateway sent back until it closed.
  function raw(bytes) {
    const { port } = new URL(env.relay.url);
    return new Promise((resolve, reject) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(bytes));
      let text = '';
      socket.on('data', (d) => (text += d));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
      socket.setTimeout(3000, () => {
        socket.destroy();
        resolve(text);
      });
    });
  }

  test('a Transfer-Encoding that does not end in chunked gets 400 and a close, not a guessed body', async () => {
    const body = JSON.stringify(chatRequest({ model: 'm-f' }));
    const smuggled = `GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY}\r\n\r\n`;
    const reply = await raw(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY}\r\n` +
        `content-type: application/json\r\ntransfer-encoding: gzip\r\n\r\n${body}${smuggled}`,
    );
    assert.match(reply, /^HTTP\/1\.1 400 /);
    assert.match(reply, /connection: close/i);
    assert.equal((reply.match(/^HTTP\/1\.1 \d{3} /gm) || []).length, 1, 'the bytes after it are not served as a request');
    assert.equal((await env.mock.requests()).length, 0, 'nothing reached the upstream');
  });
});

describe('HTTP/2 requests that never finish', () => {
  const env = {};
  before(async () => {
    env.mock = await startMock({ name: 'slow', apiKey: UPSTREAM_KEY });
    env.relay = await startRelay(
      relayConfig({
        server: { header_timeout_ms: 300, body_timeout_ms: 400 },
        keys: [{ name: 'robust', key: KEY }],
        upstreams: [{ name: 'slow', url: env.mock.url, apiKey: UPSTREAM_KEY, models: { 'm-s': 'm-s' } }],
      }),
    );
  });
  after(async () => {
    await Promise.all([env.relay, env.mock].filter(Boolean).map((p) => p.stop()));
  });

  test('a stream whose request body never ends gets 408 after body_timeout_ms; the connection lives on', async () => {
    const session = http2.connect(env.relay.url); // h2c, prior knowledge
    try {
      const stalled = session.request(
        { ':method': 'POST', ':path': '/v1/chat/completions', authorization: `Bearer ${KEY}` },
        { endStream: false },
      );
      stalled.write('{"model":"m-s",'); // and never the rest
      const t0 = performance.now();
      const status = await new Promise((resolve) => stalled.on('response', (h) => resolve(h[':status'])));
      let text = '';
      stalled.setEncoding('utf8');
      stalled.on('data', (d) => (text += d));
      await new Promise((resolve) => stalled.on('close', resolve));
      const waited = performance.now() - t0;
      assert.equal(status, 408);
      assert.equal(JSON.parse(text).error.code, 'request_timeout');
      assert.match(JSON.parse(text).error.message, /body_timeout_ms/);
      assert.ok(waited >= 350 && waited < 3000, `answered after ${waited} ms`);
      assert.equal((await env.mock.requests()).length, 0, 'nothing reached the upstream');

      // The same connection still serves a complete request.
      const ok = session.request({ ':method': 'GET', ':path': '/v1/models', authorization: `Bearer ${KEY}` });
      const okStatus = await new Promise((resolve) => ok.on('response', (h) => resolve(h[':status'])));
      ok.resume();
      assert.equal(okStatus, 200);
    } finally {
      session.close();
    }
  });
});

describe('callers that take nothing', () => {
  const env = {};
  before(async () => {
    env.mock = await startMock({ name: 'window', apiKey: UPSTREAM_KEY });
    env.relay = await startRelay(
      relayConfig({
        server: { idle_timeout_ms: 400 },
        keys: [{ name: 'robust', key: KEY }],
        // Events up to 16 MiB: a stream whose first event the caller's socket
        // cannot take (the HTTP/1.1 stall below).
        upstreams: [
          { name: 'window', url: env.mock.url, apiKey: UPSTREAM_KEY, max_event_bytes: 16 * 1024 * 1024, models: { 'm-w': 'm-w' } },
        ],
      }),
    );
  });
  after(async () => {
    await Promise.all([env.relay, env.mock].filter(Boolean).map((p) => p.stop()));
  });

  const stalls = async () =>
    metricSum(await scrapeMetrics(env.relay), 'kimi_relay_limit_hits_total', { limit: 'write_stall' });

  // A zero window keeps every DATA frame back; without a bound the stream
  // and its connection stayed open for ever (found by tests/fuzz/fuzz_h2_session).
  test('a stream whose window never opens is reset after idle_timeout_ms, then the connection closes', async () => {
    const stallsBefore = await stalls();
    const conn = await connectRaw(Number(new URL(env.relay.url).port));
    try {
      const t0 = performance.now();
      await conn.write(
        Buffer.concat([
          PREFACE,
          settingsFrame({ [SETTING.INITIAL_WINDOW_SIZE]: 0 }),
          headersFrame(
            1,
            [
              [':method', 'GET'],
              [':scheme', 'http'],
              [':path', '/v1/models'],
              [':authority', 'relay'],
              ['authorization', `Bearer ${KEY}`],
            ],
            { endStream: true },
          ),
        ]),
      );
      await conn.nextFrame((f) => f.type === TYPE.HEADERS && f.streamId === 1, { what: 'the response head' });
      const reset = await conn.nextFrame((f) => f.type === TYPE.RST_STREAM && f.streamId === 1, {
        timeoutMs: 5000,
        what: 'RST_STREAM for the stalled stream',
      });
      const waited = reset.at - t0;
      assert.ok(waited >= 350, `reset after ${waited} ms, before idle_timeout_ms`);
      assert.equal(conn.frames.filter((f) => f.type === TYPE.DATA && f.length > 0).length, 0);
      await conn.nextFrame((f) => f.type === TYPE.GOAWAY, { timeoutMs: 5000, what: 'GOAWAY once idle' });
      assert.equal(await stalls(), stallsBefore + 1, 'the reset is counted as write_stall');
    } finally {
      conn.destroy();
    }
  });

  // HTTP/1.1 has no window: a caller that stops reading shows only as a
  // write the socket does not take. The session's watchdog resets the
  // connection once one write has waited idle_timeout_ms, so a caller that
  // reads nothing cannot hold its stream (and the upstream connection under
  // it) for ever. The caller's socket is paused from the start: its receive
  // window never grows, and the gateway's writes stall after a few MB.
  async function stalledHttp1(headers, body) {
    const port = Number(new URL(env.relay.url).port);
    const sock = net.connect(port, '127.0.0.1');
    await once(sock, 'connect');
    sock.pause();
    sock.on('error', () => {}); // the reset, once we read again
    const ended = new Promise((resolve) => sock.once('close', resolve));
    const t0 = performance.now();
    sock.write(
      'POST /v1/chat/completions HTTP/1.1\r\nhost: relay\r\n' +
        `authorization: Bearer ${KEY}\r\ncontent-type: application/json\r\n${headers}` +
        `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    return { sock, t0, ended };
  }

  // Reads what the gateway sent before the reset, to the socket's end.
  async function drain({ sock, ended }) {
    let received = 0;
    let tail = '';
    sock.on('data', (chunk) => {
      received += chunk.length;
      tail = (tail + chunk.toString('latin1')).slice(-64);
    });
    sock.resume();
    await within(ended, 10_000, 'end of the reset connection');
    return { received, tail };
  }

  // Waits for the write_stall count to pass `before`, then checks it moved
  // by exactly one.
  async function oneStallAfter(before, timeoutMs) {
    await waitFor(async () => (await stalls()) > before, {
      timeoutMs,
      what: 'kimi_relay_limit_hits_total{limit="write_stall"} to count the stalled write',
    });
    assert.equal(await stalls(), before + 1, 'one stalled write, one count');
  }

  test('HTTP/1.1: a streamed answer the caller does not read is reset after idle_timeout_ms (write_stall), and its upstream request cancelled', async () => {
    const EVENT = 12_000_000;
    const before = await stalls();
    const mockBefore = await env.mock.stats();
    const openBefore = metricSum(await scrapeMetrics(env.relay), 'kimi_relay_open_connections');
    const body = JSON.stringify(chatRequest({ model: 'm-w', stream: true }));
    // A first event of 12 MB (under this upstream's max_event_bytes), far
    // more than the paused caller's socket and the gateway's send buffer
    // take (over loopback's 64 KiB segments the kernel grows a send buffer
    // past 1 MB), then 1,000 events 10 ms apart: the upstream is still
    // sending when the gateway gives up on the caller.
    const stalled = await stalledHttp1(
      `x-mock-fault: event_bytes=${EVENT}\r\nx-mock-chunks: 1000\r\nx-mock-chunk-delay-ms: 10\r\n`,
      body,
    );
    try {
      await oneStallAfter(before, 6000);
      const waited = performance.now() - stalled.t0;
      assert.ok(waited >= 350, `reset after ${waited.toFixed(0)} ms, before idle_timeout_ms`);
      // The reset ends the exchange, and with it the upstream request, ten
      // seconds before the upstream would have finished it.
      await waitFor(
        async () => {
          const now = await env.mock.stats();
          return now.in_flight === 0 && now.cancelled === mockBefore.cancelled + 1;
        },
        { timeoutMs: 3000, what: 'the upstream stream to be cancelled' },
      );
      assert.equal((await env.mock.stats()).completed_streams, mockBefore.completed_streams, 'not finished upstream');
      const { received, tail } = await drain(stalled);
      assert.ok(received > 0 && received < EVENT, `got ${received} bytes: the stream was cut in its first event`);
      assert.doesNotMatch(tail, /\[DONE\]/, 'the stream did not end normally');
      await waitFor(async () => metricSum(await scrapeMetrics(env.relay), 'kimi_relay_open_connections') <= openBefore, {
        timeoutMs: 3000,
        what: 'the connection to be given back',
      });
    } finally {
      stalled.sock.destroy();
    }
    const res = await postChat(env.relay, chatRequest({ model: 'm-w' }), { key: KEY });
    assert.equal(res.status, 200, 'the next caller is served');
    await res.arrayBuffer();
  });

  test('HTTP/1.1: a whole answer the caller does not read is reset after idle_timeout_ms (write_stall)', async () => {
    const before = await stalls();
    const bytes = 40_000_000; // within max_response_bytes (64 MiB), far more than the sockets hold
    const body = JSON.stringify(chatRequest({ model: 'm-w' }));
    const stalled = await stalledHttp1(`x-mock-fault: body_bytes=${bytes}\r\n`, body);
    try {
      await oneStallAfter(before, 8000);
      assert.ok(performance.now() - stalled.t0 >= 350, 'not before idle_timeout_ms');
      const { received } = await drain(stalled);
      assert.ok(received > 0 && received < bytes, `got ${received} bytes: the answer was cut`);
    } finally {
      stalled.sock.destroy();
    }
  });
});
