// The gateway's bounds at their edges (docs/configuration.md, "Bounds"): for
// each limit, what is at it is served and one byte / stream / connection more
// gets the documented answer, the limit-hit counter moves, and where a peer
// could make the gateway hold memory or descriptors, RSS and open fds stay
// bounded. Small limits keep every case fast.
//
//   HTTP/1.1 heads and bodies   max_header_bytes, max_request_bytes, header/body/idle timeouts,
//                               slowloris, framing (CL+TE, two CLs, "Host :", bad chunk, obs-fold,
//                               pipelining)
//   authentication on the head  a wrong key is refused before any body byte (HTTP/1.1 and HTTP/2)
//   HTTP/2 header lists         SETTINGS_MAX_HEADER_LIST_SIZE, 431, RST_STREAM past 4x, HPACK bomb
//   HTTP/2 floods               PING, SETTINGS, PRIORITY, empty DATA, rapid reset: ENHANCE_YOUR_CALM;
//                               body and header-block timeouts
//   HTTP/2 request bodies       max_request_bytes, per-connection body budget
//                               (max_connection_body_bytes), idle connections (GOAWAY)
//   connection caps             max_connections, max_connections_per_ip, admin apart, fd/RSS
//   upstream answers            max_response_bytes, max_event_bytes, max_attempts with a reset
//   upstream credentials        401 from an upstream: 502 upstream_auth_failed, ejection, failover
//   what reaches an upstream    header allow-list, X-Forwarded-For (trusted_proxies)

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';

import {
  chatRequest,
  collectSse,
  headerValue,
  headerValues,
  postChat,
  readOpenAiError,
  relayConfig,
  startMock,
  startRelay,
  waitFor,
} from '../lib/harness.mjs';
import {
  FLAG,
  PREFACE,
  SETTING,
  TYPE,
  connectRaw,
  dataFrame,
  frame,
  headerListSize,
  headersFrame,
  headersFrameRaw,
  hpackIncrementalLiteral,
  hpackIndexed,
  parseGoaway,
  parseSettings,
  pingFrame,
  priorityFrame,
  responseStatus,
  rstStreamFrame,
  settingsAck,
  settingsFrame,
  windowUpdateFrame,
} from '../lib/h2frames.mjs';
import { metricSum, parseMetrics } from '../lib/metrics.mjs';

const KEY = 'kr-test-edge-5e1d9c3b7a2f4e6d8c0b1a3f5e7d9c2b';
const WRONG_KEY = 'kr-test-edge-wrong-0a9b8c7d6e5f4a3b2c1d0e9f8a7b';
const UPSTREAM_KEY = 'sk-edge-upstream-4f6a8c0e2b4d6f8a0c2e4b6d8f0a';
const MODEL = 'kimi-k2';

// ---------------------------------------------------------------------------
// Helpers

const portOf = (relay) => Number(new URL(relay.url).port);

// Resident set size of a process, in bytes.
function rssBytes(pid) {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+)\s+kB/m);
  return Number(m[1]) * 1024;
}
const fdCount = (pid) => readdirSync(`/proc/${pid}/fd`).length;
const MiB = 1024 * 1024;

// The gateway's admin /metrics, on a connection of its own: a pooled
// keep-alive connection may be closed by the gateway's idle_timeout_ms (short
// in these tests) just as it is reused.
function scrape(relay) {
  return new Promise((resolve, reject) => {
    const req = http.get(`${relay.adminUrl}/metrics`, { agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`GET /metrics -> ${res.statusCode}: ${text}`));
        else resolve(parseMetrics(text));
      });
    });
    req.on('error', reject);
  });
}

async function limitHits(relay, limit) {
  return metricSum(await scrape(relay), 'kimi_relay_limit_hits_total', { limit });
}

// kimi_relay_limit_hits_total{limit} now; .assertMoved(n) later checks that it
// grew by at least n (waiting a moment for counts made on another worker).
async function limitCounter(relay, limit) {
  const before = await limitHits(relay, limit);
  return {
    async assertMoved(atLeast = 1) {
      let now = before;
      const deadline = performance.now() + 1500;
      while ((now = await limitHits(relay, limit)) - before < atLeast && performance.now() < deadline) await sleep(25);
      assert.ok(
        now - before >= atLeast,
        `kimi_relay_limit_hits_total{limit="${limit}"} moved by ${now - before}, expected >= ${atLeast}`,
      );
    },
  };
}

// A raw TCP connection for HTTP/1.1 at the byte level: what came back (with
// arrival times), and when the gateway closed (FIN or reset).
async function rawConnect(port, { localAddress } = {}) {
  const t0 = performance.now();
  const socket = net.connect({ host: '127.0.0.1', port, localAddress, noDelay: true });
  const conn = {
    socket,
    t0,
    chunks: [],
    firstByteAt: null,
    closedAt: null,
    error: null,
    get text() {
      return Buffer.concat(this.chunks).toString('latin1');
    },
  };
  const waiters = new Set();
  const notify = () => waiters.forEach((w) => w());
  socket.on('data', (d) => {
    conn.firstByteAt ??= performance.now();
    conn.chunks.push(d);
    notify();
  });
  socket.on('error', (err) => {
    conn.error = err;
  });
  socket.on('close', () => {
    conn.closedAt = performance.now();
    notify();
  });
  await new Promise((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  conn.connectedAt = performance.now();
  conn.write = (bytes) =>
    new Promise((resolve) => {
      socket.write(bytes, () => resolve());
    });
  // Resolves once `pred(text)` holds, or the connection closed, or timeoutMs passed.
  conn.until = (pred, timeoutMs = 3000) =>
    new Promise((resolve) => {
      const check = () => {
        if (pred(conn.text) || conn.closedAt !== null) {
          clearTimeout(timer);
          waiters.delete(check);
          resolve(conn.text);
        }
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        resolve(conn.text);
      }, timeoutMs);
      waiters.add(check);
      check();
    });
  conn.closed = (timeoutMs = 3000) => conn.until(() => false, timeoutMs).then(() => conn.closedAt !== null);
  conn.destroy = () => socket.destroy();
  return conn;
}

// One exchange on a fresh connection: writes `bytes`, returns what came back
// until the gateway closed (or timeoutMs).
async function rawExchange(port, bytes, { timeoutMs = 3000, localAddress } = {}) {
  const conn = await rawConnect(port, { localAddress });
  try {
    await conn.write(bytes);
    await conn.closed(timeoutMs);
    return conn;
  } finally {
    conn.destroy();
  }
}

// Splits raw HTTP/1.1 response text into {status, headers, body} (bodies by
// content-length; what cannot be parsed is left in `rest`).
function parseResponses(text) {
  const out = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (!/^HTTP\/1\.1 \d{3} /.test(rest) || end < 0) break;
    const lines = rest.slice(0, end).split('\r\n');
    const status = Number(lines[0].slice(9, 12));
    const headers = {};
    for (const line of lines.slice(1)) {
      const c = line.indexOf(':');
      headers[line.slice(0, c).trim().toLowerCase()] = line.slice(c + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    const body = rest.slice(end + 4, end + 4 + length);
    out.push({ status, headers, body, json: tryJson(body) });
    rest = rest.slice(end + 4 + length);
  }
  out.rest = rest;
  return out;
}
function tryJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// A chat request body of exactly `bytes` bytes (the user message is padded).
function chatBodyOfSize(bytes, extra = {}) {
  const base = JSON.stringify(chatRequest({ model: MODEL, messages: [{ role: 'user', content: '' }], ...extra }));
  const body = JSON.stringify(
    chatRequest({ model: MODEL, messages: [{ role: 'user', content: 'p'.repeat(bytes - base.length) }], ...extra }),
  );
  assert.equal(Buffer.byteLength(body), bytes);
  return body;
}

// A GET /v1/models request head of exactly `bytes` bytes (request line, fields
// and the final CRLF), padded with an x-pad field.
function modelsHeadOfSize(bytes, { key = KEY, close = true } = {}) {
  const head = (pad) =>
    `GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${key}\r\n` +
    `${close ? 'connection: close\r\n' : ''}x-pad: ${pad}\r\n\r\n`;
  const text = head('a'.repeat(bytes - Buffer.byteLength(head(''))));
  assert.equal(Buffer.byteLength(text), bytes);
  return text;
}

function stopAll(env) {
  return Promise.all(Object.values(env).filter((p) => p && typeof p.stop === 'function').map((p) => p.stop()));
}

// ---------------------------------------------------------------------------

describe('HTTP/1.1 heads and bodies', () => {
  const MAX_HEADER = 8192;
  const MAX_REQUEST = 65536;
  const HEADER_TIMEOUT = 300;
  const BODY_TIMEOUT = 400;
  const IDLE_TIMEOUT = 1000;
  const env = {};
  let port;
  before(async () => {
    env.mock = await startMock({ name: 'h1', apiKey: UPSTREAM_KEY });
    env.relay = await startRelay(
      relayConfig({
        server: {
          max_header_bytes: MAX_HEADER,
          max_request_bytes: MAX_REQUEST,
          header_timeout_ms: HEADER_TIMEOUT,
          body_timeout_ms: BODY_TIMEOUT,
          idle_timeout_ms: IDLE_TIMEOUT,
        },
        keys: [{ name: 'edge', key: KEY }],
        upstreams: [{ name: 'h1', url: env.mock.url, apiKey: UPSTREAM_KEY, models: { [MODEL]: MODEL } }],
      }),
    );
    port = portOf(env.relay);
  });
  after(() => stopAll(env));

  const chatHead = (extra) =>
    `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${KEY}\r\n` +
    `content-type: application/json\r\n${extra}\r\n`;

  test('max_header_bytes: a head of exactly the limit is served, one byte more gets 431 headers_too_large and a close', async () => {
    const atLimit = await rawExchange(port, modelsHeadOfSize(MAX_HEADER));
    const [ok] = parseResponses(atLimit.text);
    assert.equal(ok?.status, 200, atLimit.text.slice(0, 300));
    assert.equal(ok.json?.object, 'list');

    const hits = await limitCounter(env.relay, 'max_header_bytes');
    const over = await rawExchange(port, modelsHeadOfSize(MAX_HEADER + 1));
    const [refused] = parseResponses(over.text);
    assert.equal(refused?.status, 431, `a head of ${MAX_HEADER + 1} bytes: ${over.text.slice(0, 200)}`);
    assert.equal(refused.json?.error?.code, 'headers_too_large');
    assert.match(refused.json.error.message, /max_header_bytes/);
    assert.equal(refused.headers.connection, 'close');
    assert.notEqual(over.closedAt, null, 'the connection was not closed after the 431');
    await hits.assertMoved();
  });

  test('max_header_bytes holds for the whole head, however it is split across TCP segments', async () => {
    // ~3.8 KB of complete fields, a pause, then one field that alone fits the
    // limit: the head as a whole (~11.8 KB) is over it.
    let first = `GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${KEY}\r\nconnection: close\r\n`;
    for (let i = 0; first.length < 3800; i++) first += `x-a${i}: ${'v'.repeat(100)}\r\n`;
    const second = `x-big: ${'w'.repeat(8000)}\r\n\r\n`;
    const hits = await limitCounter(env.relay, 'max_header_bytes');
    const conn = await rawConnect(port);
    try {
      await conn.write(first);
      await sleep(50);
      await conn.write(second);
      await conn.closed(3000);
      const [r] = parseResponses(conn.text);
      assert.equal(r?.status, 431, `a head of ${first.length + second.length} bytes in two segments: ${conn.text.slice(0, 100)}`);
      assert.equal(r.json?.error?.code, 'headers_too_large');
      await hits.assertMoved();
    } finally {
      conn.destroy();
    }
  });

  test('max_header_bytes holds for a head that arrives whole: the next request on a keep-alive connection', async () => {
    // Beast counts the start line and the fields each against the limit on
    // their own: a head that reached the parser in one piece could be the
    // limit plus its request line. A connection's first bytes are read on
    // their own (the HTTP/2 preface check), so it is a later request, sent
    // once the one before was answered, that arrives whole.
    const secondHead = async (head) => {
      const conn = await rawConnect(port);
      try {
        await conn.write(modelsHeadOfSize(1000, { close: false }));
        await conn.until((text) => parseResponses(text).length === 1);
        await conn.write(head);
        await conn.closed(3000);
        return parseResponses(conn.text);
      } finally {
        conn.destroy();
      }
    };
    const atLimit = await secondHead(modelsHeadOfSize(MAX_HEADER));
    assert.deepEqual(atLimit.map((r) => r.status), [200, 200], 'a second head of exactly the limit');

    const hits = await limitCounter(env.relay, 'max_header_bytes');
    const over = await secondHead(modelsHeadOfSize(MAX_HEADER + 1));
    assert.deepEqual(over.map((r) => r.status), [200, 431], 'a second head one byte over the limit');
    assert.equal(over[1].json?.error?.code, 'headers_too_large');
    await hits.assertMoved();

    // The same with most of the head in the request line (6,000 bytes).
    const longLine = (bytes) => {
      const head = (pad) =>
        `GET /v1/models?pad=${pad} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${KEY}\r\n` +
        `connection: close\r\nx-pad: ${'b'.repeat(bytes - 6000)}\r\n\r\n`;
      const text = head('a'.repeat(6000 - Buffer.byteLength(head('')) + (bytes - 6000)));
      assert.equal(Buffer.byteLength(text), bytes);
      return text;
    };
    const longAtLimit = await secondHead(longLine(MAX_HEADER));
    assert.deepEqual(longAtLimit.map((r) => r.status), [200, 200], 'a long request line, a head of exactly the limit');
    const longOver = await secondHead(longLine(MAX_HEADER + 1));
    assert.deepEqual(longOver.map((r) => r.status), [200, 431], 'a long request line, a head one byte over the limit');
  });

  test('max_request_bytes: a Content-Length of exactly the limit is served; one more gets 413 at once, before any body byte', async () => {
    const body = chatBodyOfSize(MAX_REQUEST);
    const atLimit = await rawExchange(
      port,
      chatHead(`content-length: ${MAX_REQUEST}\r\nconnection: close\r\n`) + body,
    );
    const [ok] = parseResponses(atLimit.text);
    assert.equal(ok?.status, 200, atLimit.text.slice(0, 300));
    assert.equal(ok.json?.object, 'chat.completion');

    const conn = await rawConnect(port);
    try {
      const hits = await limitCounter(env.relay, 'max_request_bytes');
      await conn.write(chatHead(`content-length: ${MAX_REQUEST + 1}\r\n`)); // and no body
      await conn.closed(2000);
      await hits.assertMoved();
      const [refused] = parseResponses(conn.text);
      assert.equal(refused?.status, 413, conn.text.slice(0, 300));
      assert.equal(refused.json?.error?.code, 'request_too_large');
      assert.match(refused.json.error.message, /max_request_bytes/);
      assert.equal(refused.headers.connection, 'close');
      assert.ok(conn.firstByteAt - conn.connectedAt < 1000, 'the 413 waited for the body');
      assert.notEqual(conn.closedAt, null, 'the connection stays open after the 413');
    } finally {
      conn.destroy();
    }
  });

  test('max_request_bytes: a chunked body of exactly the limit is served; one that grows past it gets 413 and a close', async () => {
    const chunked = (text) => {
      const parts = [];
      for (let at = 0; at < text.length; at += 10000) {
        const piece = text.slice(at, at + 10000);
        parts.push(`${Buffer.byteLength(piece).toString(16)}\r\n${piece}\r\n`);
      }
      return `${parts.join('')}0\r\n\r\n`;
    };
    const atLimit = await rawExchange(
      port,
      chatHead('transfer-encoding: chunked\r\nconnection: close\r\n') + chunked(chatBodyOfSize(MAX_REQUEST)),
    );
    const [ok] = parseResponses(atLimit.text);
    assert.equal(ok?.status, 200, atLimit.text.slice(0, 300));
    assert.equal(ok.json?.object, 'chat.completion');

    const before = (await env.mock.requests()).length;
    const hits = await limitCounter(env.relay, 'max_request_bytes');
    const over = await rawExchange(port, chatHead('transfer-encoding: chunked\r\n') + chunked(chatBodyOfSize(MAX_REQUEST + 1)));
    await hits.assertMoved();
    const [refused] = parseResponses(over.text);
    assert.equal(refused?.status, 413, over.text.slice(0, 300));
    assert.equal(refused.json?.error?.code, 'request_too_large');
    assert.equal(refused.headers.connection, 'close');
    assert.notEqual(over.closedAt, null);
    assert.equal((await env.mock.requests()).length, before, 'the oversized body reached the upstream');
  });

  test('max_request_bytes: chunk-extension bytes count toward it; at the limit 200, one byte more 413', async () => {
    // Eight bytes of extension on the one chunk line, and a body eight bytes
    // short of the limit: exactly at it. One more extension byte is over.
    const withExtension = (extension) => {
      const body = chatBodyOfSize(MAX_REQUEST - 8);
      return `${Buffer.byteLength(body).toString(16)}${extension}\r\n${body}\r\n0\r\n\r\n`;
    };
    const atLimit = await rawExchange(
      port,
      chatHead('transfer-encoding: chunked\r\nconnection: close\r\n') + withExtension(';e=vvvvv'),
    );
    const [ok] = parseResponses(atLimit.text);
    assert.equal(ok?.status, 200, atLimit.text.slice(0, 300));
    const before = (await env.mock.requests()).length;
    const over = await rawExchange(port, chatHead('transfer-encoding: chunked\r\n') + withExtension(';e=vvvvvv'));
    const [refused] = parseResponses(over.text);
    assert.equal(refused?.status, 413, over.text.slice(0, 300));
    assert.equal(refused.json?.error?.code, 'request_too_large');
    assert.equal((await env.mock.requests()).length, before, 'the oversized body reached the upstream');
  });

  test('header_timeout_ms counts from the accept: a request line sent late and never finished gets 408 request_timeout at the deadline', async () => {
    const conn = await rawConnect(port);
    try {
      const hits = await limitCounter(env.relay, 'header_timeout');
      await sleep(HEADER_TIMEOUT - 100 - (performance.now() - conn.connectedAt));
      await conn.write('GET /v1/models HT'); // half a request line, then nothing
      await conn.closed(3000);
      await hits.assertMoved();
      const [timedOut] = parseResponses(conn.text);
      assert.equal(timedOut?.status, 408, conn.text.slice(0, 300));
      assert.equal(timedOut.json?.error?.code, 'request_timeout');
      assert.match(timedOut.json.error.message, /header_timeout_ms/);
      assert.equal(timedOut.headers.connection, 'close');
      const waited = conn.firstByteAt - conn.connectedAt;
      // From the accept: about HEADER_TIMEOUT; from the first byte it would be ~HEADER_TIMEOUT + 200.
      assert.ok(waited >= HEADER_TIMEOUT - 50 && waited < HEADER_TIMEOUT + 180, `408 after ${waited.toFixed(0)} ms`);
      assert.notEqual(conn.closedAt, null);
    } finally {
      conn.destroy();
    }
  });

  test('header_timeout_ms: a connection that sends nothing is closed without a response', async () => {
    const conn = await rawConnect(port);
    try {
      const hits = await limitCounter(env.relay, 'header_timeout');
      await conn.closed(3000);
      await hits.assertMoved();
      assert.notEqual(conn.closedAt, null, 'still open');
      const waited = conn.closedAt - conn.connectedAt;
      assert.ok(waited >= HEADER_TIMEOUT - 50 && waited < HEADER_TIMEOUT + 1000, `closed after ${waited.toFixed(0)} ms`);
      assert.equal(conn.text, '', 'a connection that asked nothing got an answer');
    } finally {
      conn.destroy();
    }
  });

  test('header_timeout_ms counts a later request from its first byte; idle_timeout_ms closes a quiet keep-alive connection', async () => {
    // A later request: the connection may idle (idle_timeout_ms) before its
    // first byte, then the head has header_timeout_ms.
    const conn = await rawConnect(port);
    try {
      await conn.write(modelsHeadOfSize(300, { close: false }));
      await conn.until((t) => parseResponses(t).length === 1);
      assert.equal(parseResponses(conn.text)[0]?.status, 200);
      await sleep(HEADER_TIMEOUT + 150); // longer than header_timeout_ms, shorter than idle_timeout_ms
      assert.equal(conn.closedAt, null, 'closed while idle for less than idle_timeout_ms');
      const sentAt = performance.now();
      const hits = await limitCounter(env.relay, 'header_timeout');
      await conn.write('GET /v1/models HTTP/1.1\r\nhost: x\r\n'); // not finished
      await conn.closed(3000);
      await hits.assertMoved();
      const responses = parseResponses(conn.text);
      assert.equal(responses[1]?.status, 408, conn.text);
      assert.equal(responses[1].json?.error?.code, 'request_timeout');
      const waited = conn.closedAt - sentAt;
      assert.ok(waited >= HEADER_TIMEOUT - 50 && waited < HEADER_TIMEOUT + 400, `408 ${waited.toFixed(0)} ms after the first byte`);
    } finally {
      conn.destroy();
    }

    const idle = await rawConnect(port);
    try {
      await idle.write(modelsHeadOfSize(300, { close: false }));
      await idle.until((t) => parseResponses(t).length === 1);
      const answeredAt = performance.now();
      const hits = await limitCounter(env.relay, 'idle_timeout');
      await idle.closed(IDLE_TIMEOUT + 2000);
      assert.notEqual(idle.closedAt, null, 'the idle connection was never closed');
      const waited = idle.closedAt - answeredAt;
      assert.ok(waited >= IDLE_TIMEOUT - 100 && waited < IDLE_TIMEOUT + 1000, `closed after ${waited.toFixed(0)} ms idle`);
      const responses = parseResponses(idle.text);
      assert.equal(responses.length, 1, 'an idle close sends nothing');
      assert.equal(responses.rest, '');
      await hits.assertMoved();
    } finally {
      idle.destroy();
    }
  });

  test('body_timeout_ms: a body that stops arriving gets 408 naming body_timeout_ms and a close; one that arrives in time is served', async () => {
    const body = JSON.stringify(chatRequest({ model: MODEL }));
    const conn = await rawConnect(port);
    try {
      const before = (await env.mock.requests()).length;
      const hits = await limitCounter(env.relay, 'body_timeout');
      await conn.write(chatHead(`content-length: ${body.length}\r\n`) + body.slice(0, 10));
      await conn.closed(3000);
      await hits.assertMoved();
      const [timedOut] = parseResponses(conn.text);
      assert.equal(timedOut?.status, 408, conn.text.slice(0, 300));
      assert.equal(timedOut.json?.error?.code, 'request_timeout');
      assert.match(timedOut.json.error.message, /body_timeout_ms/);
      assert.equal(timedOut.headers.connection, 'close');
      const waited = conn.firstByteAt - conn.connectedAt;
      assert.ok(waited >= BODY_TIMEOUT - 50 && waited < BODY_TIMEOUT + 1000, `408 after ${waited.toFixed(0)} ms`);
      assert.notEqual(conn.closedAt, null);
      assert.equal((await env.mock.requests()).length, before, 'a partial body reached the upstream');
    } finally {
      conn.destroy();
    }

    // In two pieces, both within body_timeout_ms of the head.
    const slow = await rawConnect(port);
    try {
      await slow.write(chatHead(`content-length: ${body.length}\r\nconnection: close\r\n`) + body.slice(0, 10));
      await sleep(BODY_TIMEOUT / 2);
      await slow.write(body.slice(10));
      await slow.closed(3000);
      const [ok] = parseResponses(slow.text);
      assert.equal(ok?.status, 200, slow.text.slice(0, 300));
      assert.equal(ok.json?.object, 'chat.completion');
    } finally {
      slow.destroy();
    }
  });

  test('slowloris: 40 connections that each send half a request line are all answered 408 and closed; open fds return to the start', async () => {
    const pid = env.relay.process.pid;
    const N = 40;
    await sleep(50);
    const fdsBefore = fdCount(pid);
    const hits = await limitCounter(env.relay, 'header_timeout');
    const conns = await Promise.all(Array.from({ length: N }, () => rawConnect(port)));
    try {
      await Promise.all(conns.map((c) => c.write('POST /v1/chat/comp')));
      await sleep(100);
      const fdsDuring = fdCount(pid);
      assert.ok(fdsDuring >= fdsBefore + N, `only ${fdsDuring - fdsBefore} more fds while ${N} connections are open`);
      await Promise.all(conns.map((c) => c.closed(HEADER_TIMEOUT + 3000)));
      for (const c of conns) {
        assert.notEqual(c.closedAt, null, 'a slowloris connection is still open');
        assert.ok(c.closedAt - c.connectedAt < HEADER_TIMEOUT + 2000, `closed after ${(c.closedAt - c.connectedAt).toFixed(0)} ms`);
        assert.equal(parseResponses(c.text)[0]?.status, 408, c.text.slice(0, 200));
      }
      await waitFor(() => fdCount(pid) <= fdsBefore + 2, {
        timeoutMs: 3000,
        what: `the relay's fds to return to ${fdsBefore} (now ${fdCount(pid)})`,
      });
      await hits.assertMoved(N);
    } finally {
      conns.forEach((c) => c.destroy());
    }
  });

  test('framing: Content-Length with Transfer-Encoding gets 400 and a close; nothing after it is served', async () => {
    const body = JSON.stringify(chatRequest({ model: MODEL }));
    const smuggled = `GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY}\r\n\r\n`;
    const conn = await rawExchange(
      port,
      chatHead(`content-length: ${body.length + 5}\r\ntransfer-encoding: chunked\r\n`) +
        `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n${smuggled}`,
    );
    const responses = parseResponses(conn.text);
    assert.equal(responses[0]?.status, 400, conn.text.slice(0, 300));
    assert.equal(responses[0].headers.connection, 'close');
    assert.equal(responses.length, 1, 'a request after the bad one was served');
    assert.notEqual(conn.closedAt, null);
  });

  test('framing: two different Content-Lengths get 400 and a close', async () => {
    const body = JSON.stringify(chatRequest({ model: MODEL }));
    const conn = await rawExchange(
      port,
      chatHead(`content-length: ${body.length}\r\ncontent-length: ${body.length + 1}\r\n`) + body + ' ',
    );
    const responses = parseResponses(conn.text);
    assert.equal(responses[0]?.status, 400, conn.text.slice(0, 300));
    assert.equal(responses[0].headers.connection, 'close');
    assert.equal(responses.length, 1);
    assert.notEqual(conn.closedAt, null);
  });

  test('framing: a space before the colon ("Host : x") gets 400', async () => {
    const conn = await rawExchange(
      port,
      `GET /v1/models HTTP/1.1\r\nHost : x\r\nauthorization: Bearer ${KEY}\r\n\r\n`,
    );
    const responses = parseResponses(conn.text);
    assert.equal(responses[0]?.status, 400, conn.text.slice(0, 300));
    assert.notEqual(conn.closedAt, null);
  });

  test('framing: a bad chunk size gets 400 and a close', async () => {
    const before = (await env.mock.requests()).length;
    const conn = await rawExchange(port, chatHead('transfer-encoding: chunked\r\n') + 'zz\r\n{"model":"x"}\r\n0\r\n\r\n');
    const responses = parseResponses(conn.text);
    assert.equal(responses[0]?.status, 400, conn.text.slice(0, 300));
    assert.equal(responses[0].headers.connection, 'close');
    assert.notEqual(conn.closedAt, null);
    assert.equal((await env.mock.requests()).length, before);
  });

  test('framing: obs-fold (a field line starting with a space) gets 400 and a close; nothing reaches the upstream', async () => {
    // RFC 9112 §5.2 allows refusing or unfolding; a proxy in front that took
    // the folded line for a field of its own would see other framing than
    // ours (here: a Transfer-Encoding beside our Content-Length), so it is
    // refused.
    const before = (await env.mock.requests()).length;
    const body = JSON.stringify(chatRequest({ model: MODEL, messages: [{ role: 'user', content: 'obs-fold' }] }));
    const conn = await rawExchange(
      port,
      chatHead(`user-agent: folded-agent\r\n transfer-encoding: chunked\r\ncontent-length: ${body.length}\r\n`) + body,
    );
    const responses = parseResponses(conn.text);
    assert.equal(responses[0]?.status, 400, conn.text.slice(0, 300));
    assert.match(responses[0].body, /obs-fold/);
    assert.equal(responses[0].headers.connection, 'close');
    assert.notEqual(conn.closedAt, null);
    assert.equal((await env.mock.requests()).length, before);
  });

  test('framing: Transfer-Encoding in an HTTP/1.0 request gets 400 and a close; what follows is not served', async () => {
    const smuggled = `GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY}\r\n\r\n`;
    const conn = await rawExchange(
      port,
      `POST /v1/chat/completions HTTP/1.0\r\nconnection: keep-alive\r\nauthorization: Bearer ${KEY}\r\n` +
        `transfer-encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`,
    );
    const responses = parseResponses(conn.text);
    assert.equal(responses[0]?.status, 400, conn.text.slice(0, 300));
    assert.equal(responses.length, 1, 'a request after the bad one was served');
    assert.notEqual(conn.closedAt, null);
  });

  test('framing: a Connection field naming 16 fields is served; 17 get 400 (the bound on hop-by-hop names)', async () => {
    const names = (n) => Array.from({ length: n }, (_, i) => `x-hop-${i}`);
    const ask = async (n) => {
      const list = names(n);
      const fields = list.map((name) => `${name}: v\r\n`).join('');
      // Empty elements and repeats cost nothing and count for nothing.
      const connection = `${list.join(', ,')}, ${list[0]}, , close`;
      const conn = await rawExchange(
        port,
        `GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY}\r\n${fields}connection: ${connection}\r\n\r\n`,
      );
      return parseResponses(conn.text)[0];
    };
    assert.equal((await ask(15))?.status, 200, 'fifteen names and close: sixteen');
    const over = await ask(16);
    assert.equal(over?.status, 400);
    assert.match(over.body, /more than 16 fields/);
  });

  test('framing: two pipelined GETs in one write are answered in order', async () => {
    const get = (id, close) =>
      `GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY}\r\nx-request-id: ${id}\r\n` +
      `${close ? 'connection: close\r\n' : ''}\r\n`;
    const conn = await rawExchange(port, get('pipelined-first', false) + get('pipelined-second', true));
    const responses = parseResponses(conn.text);
    assert.equal(responses.length, 2, conn.text);
    assert.deepEqual(
      responses.map((r) => [r.status, r.headers['x-request-id']]),
      [
        [200, 'pipelined-first'],
        [200, 'pipelined-second'],
      ],
    );
    assert.equal(responses[1].json?.object, 'list');
  });
});

// ---------------------------------------------------------------------------
// HTTP/2 at the frame level

// A raw h2c connection past the handshake: our SETTINGS (header table 0, so
// that responseStatus() can read every :status), the server's SETTINGS, our ack.
async function h2Open(port, settings = {}) {
  const conn = await connectRaw(port);
  await conn.write(Buffer.concat([PREFACE, settingsFrame({ [SETTING.HEADER_TABLE_SIZE]: 0, ...settings })]));
  const server = await conn.nextFrame((f) => f.type === TYPE.SETTINGS && !(f.flags & FLAG.ACK), {
    what: "the server's SETTINGS",
  });
  await conn.write(settingsAck());
  conn.serverSettings = parseSettings(server);
  return conn;
}

// The end of stream `id`: {status, body, json, rst} once the response ended
// (END_STREAM) or the stream was reset (rst = the RST_STREAM error code).
async function h2Outcome(conn, id, { timeoutMs = 3000 } = {}) {
  const end = await conn.nextFrame(
    (f) =>
      f.streamId === id &&
      (f.type === TYPE.RST_STREAM || ((f.type === TYPE.HEADERS || f.type === TYPE.DATA) && f.flags & FLAG.END_STREAM)),
    { timeoutMs, what: `the end of stream ${id}` },
  );
  const headers = conn.frames.find((f) => f.streamId === id && f.type === TYPE.HEADERS);
  const body = Buffer.concat(conn.frames.filter((f) => f.streamId === id && f.type === TYPE.DATA).map((f) => f.payload)).toString('utf8');
  return {
    status: headers ? responseStatus(headers) : null,
    body,
    json: tryJson(body),
    rst: end.type === TYPE.RST_STREAM ? end.payload.readUInt32BE(0) : null,
    at: end.at,
  };
}

const requestFields = (port, { method = 'GET', path = '/v1/models', key = KEY } = {}) => [
  [':method', method],
  [':scheme', 'http'],
  [':path', path],
  [':authority', `127.0.0.1:${port}`],
  ...(key ? [['authorization', `Bearer ${key}`]] : []),
];

// A GET /v1/models header block whose list size (RFC 7541 §4.1) is exactly
// `size`: the fields of requestFields, then `copies` of one x-pad field (a
// literal with incremental indexing, then indexed references to it), then an
// x-fill field that makes up the rest.
function headerBlockOfListSize(port, size, { copies = 1, padValue = 3000 } = {}) {
  const base = requestFields(port);
  const pad = ['x-pad', 'v'.repeat(padValue)];
  const fill = size - headerListSize(base) - copies * headerListSize([pad]);
  const fillValue = fill - 32 - 'x-fill'.length;
  assert.ok(fillValue >= 0, `no room for x-fill in ${size}`);
  const fields = [...base, pad, ...Array(copies - 1).fill(pad), ['x-fill', 'f'.repeat(fillValue)]];
  assert.equal(headerListSize(fields), size);
  return Buffer.concat([
    encodeFields(base),
    hpackIncrementalLiteral(...pad),
    ...Array.from({ length: copies - 1 }, () => hpackIndexed(62)),
    encodeFields([['x-fill', 'f'.repeat(fillValue)]]),
  ]);
}
const encodeFields = (fields) => headersFrame(0, fields).subarray(9); // the block of a headersFrame

const h2Get = (port, id, extra = {}) => headersFrame(id, requestFields(port, extra), { endStream: true });

describe('HTTP/2 front end', () => {
  const MAX_HEADER = 8192;
  const HEADER_TIMEOUT = 1000;
  const BODY_TIMEOUT = 400;
  const env = {};
  let port;
  before(async () => {
    env.mock = await startMock({ name: 'h2', apiKey: UPSTREAM_KEY });
    env.relay = await startRelay(
      relayConfig({
        server: { max_header_bytes: MAX_HEADER, header_timeout_ms: HEADER_TIMEOUT, body_timeout_ms: BODY_TIMEOUT },
        keys: [{ name: 'edge', key: KEY }],
        upstreams: [{ name: 'h2', url: env.mock.url, apiKey: UPSTREAM_KEY, models: { [MODEL]: MODEL } }],
      }),
    );
    port = portOf(env.relay);
  });
  after(() => stopAll(env));

  // A bystander on its own connection is still served.
  async function assertBystanderServed() {
    const conn = await h2Open(port);
    try {
      await conn.write(h2Get(port, 1));
      const r = await h2Outcome(conn, 1);
      assert.equal(r.status, 200, r.body);
      assert.equal(r.json?.object, 'list');
    } finally {
      conn.destroy();
    }
  }

  test('SETTINGS_MAX_HEADER_LIST_SIZE is max_header_bytes; a header list of exactly it is served, one byte more gets 431', async () => {
    const conn = await h2Open(port);
    try {
      assert.equal(conn.serverSettings[SETTING.MAX_HEADER_LIST_SIZE], MAX_HEADER, JSON.stringify(conn.serverSettings));
      await conn.write(headersFrameRaw(1, headerBlockOfListSize(port, MAX_HEADER), { endStream: true }));
      const ok = await h2Outcome(conn, 1);
      assert.equal(ok.status, 200, ok.body);
      assert.equal(ok.json?.object, 'list');

      const hits = await limitCounter(env.relay, 'max_header_bytes');
      await conn.write(headersFrameRaw(3, headerBlockOfListSize(port, MAX_HEADER + 1), { endStream: true }));
      const refused = await h2Outcome(conn, 3);
      assert.equal(refused.status, 431, refused.body);
      assert.equal(refused.json?.error?.code, 'headers_too_large');
      assert.match(refused.json.error.message, /max_header_bytes/);
      await hits.assertMoved();

      // The connection lives on.
      await conn.write(h2Get(port, 5));
      assert.equal((await h2Outcome(conn, 5)).status, 200);
      assert.ok(!conn.frames.some((f) => f.type === TYPE.GOAWAY), conn.summary());
    } finally {
      conn.destroy();
    }
  });

  test('a header list of exactly 4x max_header_bytes still gets 431; one byte more is reset (RST_STREAM) without a response', async () => {
    const conn = await h2Open(port);
    try {
      await conn.write(headersFrameRaw(1, headerBlockOfListSize(port, 4 * MAX_HEADER, { copies: 10 }), { endStream: true }));
      const at4x = await h2Outcome(conn, 1);
      assert.equal(at4x.status, 431, `4x: ${JSON.stringify(at4x)}`);
      assert.equal(at4x.json?.error?.code, 'headers_too_large');

      const hits = await limitCounter(env.relay, 'max_header_bytes');
      await conn.write(
        headersFrameRaw(3, headerBlockOfListSize(port, 4 * MAX_HEADER + 1, { copies: 10 }), { endStream: true }),
      );
      const over = await h2Outcome(conn, 3);
      assert.notEqual(over.rst, null, `stream 3 was answered instead of reset: ${JSON.stringify(over)}`);
      assert.equal(over.status, null, 'a reset stream got a response HEADERS');
      await conn.write(h2Get(port, 5));
      assert.equal((await h2Outcome(conn, 5)).status, 200, 'the connection was not usable after the reset');
      await hits.assertMoved();
    } finally {
      conn.destroy();
    }
  });

  test('HPACK bomb: 60 streams each decoding to ~16 MB of headers are reset; RSS stays bounded; other callers are served', async (t) => {
    const pid = env.relay.process.pid;
    const rssBefore = rssBytes(pid);
    const hits = await limitCounter(env.relay, 'max_header_bytes');
    const conn = await h2Open(port);
    const STREAMS = 60;
    const REFS = 4000; // each a 1-byte reference to a 4037-byte entry
    try {
      const bomb = (id) =>
        headersFrameRaw(
          id,
          Buffer.concat([
            encodeFields(requestFields(port)),
            hpackIncrementalLiteral('x-bomb', 'b'.repeat(4000)),
            Buffer.alloc(REFS, hpackIndexed(62)[0]),
          ]),
          { endStream: true },
        );
      for (let i = 0; i < STREAMS; i++) await conn.write(bomb(2 * i + 1));
      const outcomes = [];
      for (let i = 0; i < STREAMS; i++) outcomes.push(await h2Outcome(conn, 2 * i + 1, { timeoutMs: 5000 }));
      for (const [i, o] of outcomes.entries()) {
        assert.notEqual(o.rst, null, `bomb stream ${2 * i + 1} was not reset: ${JSON.stringify(o).slice(0, 200)}`);
        assert.equal(o.status, null);
      }
      const growth = rssBytes(pid) - rssBefore;
      t.diagnostic(`RSS growth ${(growth / MiB).toFixed(1)} MiB`);
      assert.ok(growth < 16 * MiB, `RSS grew by ${(growth / MiB).toFixed(1)} MiB for ${STREAMS} header bombs`);
      // The bomber's connection still answers a PING; a bystander is served.
      await conn.write(pingFrame(Buffer.from('bombed!!')));
      await conn.nextFrame((f) => f.type === TYPE.PING && f.flags & FLAG.ACK, { what: 'PING ACK after the bombs' });
      await assertBystanderServed();
      await hits.assertMoved(STREAMS);
    } finally {
      conn.destroy();
    }
  });

  // Sends `frames` on a fresh connection (after `setup`) and expects GOAWAY
  // ENHANCE_YOUR_CALM and the connection closed.
  async function expectCalm(frames, { setup } = {}) {
    const hits = await limitCounter(env.relay, 'http2_flood');
    const conn = await h2Open(port);
    try {
      if (setup) await setup(conn);
      await conn.write(Buffer.concat(frames)).catch(() => {});
      const goaway = await conn.nextFrame((f) => f.type === TYPE.GOAWAY, { timeoutMs: 5000, what: 'GOAWAY' });
      const g = parseGoaway(goaway);
      assert.equal(g.errorName, 'ENHANCE_YOUR_CALM', `GOAWAY ${g.errorName} ${g.debug}`);
      await Promise.race([conn.closed, sleep(3000).then(() => assert.fail('the connection stayed open after GOAWAY'))]);
      await hits.assertMoved();
      return conn;
    } finally {
      conn.destroy();
    }
  }

  test('PING flood: 400 PINGs are all acked; 2000 get GOAWAY ENHANCE_YOUR_CALM and a close', async () => {
    const conn = await h2Open(port);
    try {
      const pings = Array.from({ length: 400 }, (_, i) => pingFrame(Buffer.from(String(i).padStart(8, '0'))));
      await conn.write(Buffer.concat(pings));
      await waitFor(() => conn.frames.filter((f) => f.type === TYPE.PING && f.flags & FLAG.ACK).length === 400, {
        timeoutMs: 3000,
        what: '400 PING ACKs',
      });
      assert.ok(!conn.frames.some((f) => f.type === TYPE.GOAWAY), conn.summary());
      await conn.write(h2Get(port, 1));
      assert.equal((await h2Outcome(conn, 1)).status, 200);
    } finally {
      conn.destroy();
    }
    await expectCalm(Array.from({ length: 2000 }, () => pingFrame(Buffer.alloc(8))));
    await assertBystanderServed();
  });

  test('SETTINGS flood: 2000 SETTINGS frames get GOAWAY ENHANCE_YOUR_CALM', async () => {
    await expectCalm(Array.from({ length: 2000 }, () => settingsFrame()));
  });

  test('PRIORITY flood: 2000 PRIORITY frames get GOAWAY ENHANCE_YOUR_CALM', async () => {
    await expectCalm(Array.from({ length: 2000 }, (_, i) => priorityFrame(2 * (i % 50) + 101)));
  });

  test('empty DATA flood on an open request stream gets GOAWAY ENHANCE_YOUR_CALM', async () => {
    await expectCalm(Array.from({ length: 2000 }, () => dataFrame(1, Buffer.alloc(0))), {
      setup: (conn) =>
        conn.write(
          headersFrame(1, [
            ...requestFields(port, { method: 'POST', path: '/v1/chat/completions' }),
            ['content-type', 'application/json'],
          ]),
        ),
    });
  });

  test('rapid reset: 1000 x (HEADERS GET /v1/models, RST_STREAM CANCEL) gets GOAWAY ENHANCE_YOUR_CALM', async () => {
    const frames = [];
    for (let i = 0; i < 1000; i++) {
      const id = 2 * i + 1;
      frames.push(h2Get(port, id), rstStreamFrame(id, 0x8));
    }
    await expectCalm(frames);
    await assertBystanderServed();
  });

  // Sends `pair(id)` for streams 1, 3, 5, ... in batches of 100 (under
  // max_concurrent_streams, 256: a stream the gateway resets is open until
  // its RST_STREAM is sent), each batch once the one before is reset, until
  // GOAWAY. Resolves to the connection and how many pairs went.
  async function provokeResets(pair, { batches = 15 } = {}) {
    const hits = await limitCounter(env.relay, 'http2_flood');
    const conn = await h2Open(port);
    let sent = 0;
    try {
      for (let b = 0; b < batches && !conn.frames.some((f) => f.type === TYPE.GOAWAY); b++) {
        const ids = Array.from({ length: 100 }, (_, i) => 2 * (sent + i) + 1);
        await conn.write(Buffer.concat(ids.map(pair))).catch(() => {});
        sent += ids.length;
        const last = ids[ids.length - 1];
        await conn.nextFrame((f) => f.type === TYPE.GOAWAY || (f.type === TYPE.RST_STREAM && f.streamId === last), {
          timeoutMs: 5000,
          what: `the reset of stream ${last}`,
        });
      }
      const goaway = await conn.nextFrame((f) => f.type === TYPE.GOAWAY, { timeoutMs: 5000, what: 'GOAWAY' });
      const g = parseGoaway(goaway);
      assert.equal(g.errorName, 'ENHANCE_YOUR_CALM', `GOAWAY ${g.errorName} ${g.debug}`);
      await Promise.race([conn.closed, sleep(3000).then(() => assert.fail('the connection stayed open after GOAWAY'))]);
      await hits.assertMoved();
      return { conn, sent };
    } finally {
      conn.destroy();
    }
  }

  test('resets the gateway sends: (HEADERS GET /v1/models, WINDOW_UPDATE overflowing that stream\'s window) pairs get GOAWAY ENHANCE_YOUR_CALM within the allowance, and none is served', async () => {
    const { conn, sent } = await provokeResets((id) => Buffer.concat([h2Get(port, id), windowUpdateFrame(id, 0x7fffffff)]));
    assert.ok(sent <= 1000, `${sent} pairs before GOAWAY`);
    // Each stream was reset (FLOW_CONTROL_ERROR) before its handler could
    // start: no answer began.
    assert.equal(conn.frames.filter((f) => f.type === TYPE.HEADERS).length, 0, conn.summary());
    await assertBystanderServed();
  });

  test('resets nghttp2 decides alone: (HEADERS with content-length 0, DATA of one byte) pairs get GOAWAY ENHANCE_YOUR_CALM within the allowance', async () => {
    const { sent } = await provokeResets((id) =>
      Buffer.concat([
        headersFrame(id, [...requestFields(port), ['content-length', '0']]),
        dataFrame(id, Buffer.from('x'), { endStream: true }),
      ]),
    );
    assert.ok(sent <= 1000, `${sent} pairs before GOAWAY`);
    await assertBystanderServed();
  });

  test('padded DATA with no data on an open request stream: a flood of them gets GOAWAY ENHANCE_YOUR_CALM', async () => {
    const PADDED = 0x8;
    await expectCalm(Array.from({ length: 2000 }, () => frame(TYPE.DATA, PADDED, 1, Buffer.from([0]))), {
      setup: (conn) =>
        conn.write(
          headersFrame(1, [
            ...requestFields(port, { method: 'POST', path: '/v1/chat/completions' }),
            ['content-type', 'application/json'],
          ]),
        ),
    });
  });

  test('trailers count against max_header_bytes: a trailer block decoding far past it resets the stream; small trailers are dropped and the request served', async () => {
    const hits = await limitCounter(env.relay, 'max_header_bytes');
    const conn = await h2Open(port);
    const body = JSON.stringify(chatRequest({ model: MODEL }));
    const post = (id) =>
      Buffer.concat([
        headersFrame(id, [
          ...requestFields(port, { method: 'POST', path: '/v1/chat/completions' }),
          ['content-type', 'application/json'],
          ['content-length', String(body.length)],
        ]),
        dataFrame(id, body),
      ]);
    try {
      // One 4,037-byte table entry, then 4,000 one-byte references to it:
      // about 16 MB of trailer fields from 8 KB.
      const bomb = Buffer.concat([hpackIncrementalLiteral('x-trailer', 't'.repeat(4000)), Buffer.alloc(4000, hpackIndexed(62)[0])]);
      await conn.write(Buffer.concat([post(1), headersFrameRaw(1, bomb, { endStream: true })]));
      const r1 = await h2Outcome(conn, 1, { timeoutMs: 5000 });
      assert.notEqual(r1.rst, null, `the stream was not reset: ${JSON.stringify(r1).slice(0, 200)}`);
      await hits.assertMoved(1);
      await conn.write(Buffer.concat([post(3), headersFrame(3, [['x-checksum', 'abc']], { endStream: true })]));
      const r3 = await h2Outcome(conn, 3);
      assert.equal(r3.status, 200, r3.body);
    } finally {
      conn.destroy();
    }
  });

  test('body_timeout_ms: a stream whose body stops gets 408 naming body_timeout_ms; the connection serves the next stream', async () => {
    const conn = await h2Open(port);
    try {
      const hits = await limitCounter(env.relay, 'body_timeout');
      const sentAt = performance.now();
      await conn.write(
        Buffer.concat([
          headersFrame(1, [
            ...requestFields(port, { method: 'POST', path: '/v1/chat/completions' }),
            ['content-type', 'application/json'],
            ['content-length', '200'],
          ]),
          dataFrame(1, '{"model":"kimi-k2",'),
        ]),
      );
      const r = await h2Outcome(conn, 1);
      assert.equal(r.status, 408, r.body);
      assert.equal(r.json?.error?.code, 'request_timeout');
      assert.match(r.json.error.message, /body_timeout_ms/);
      const waited = r.at - sentAt;
      assert.ok(waited >= BODY_TIMEOUT - 50 && waited < BODY_TIMEOUT + 1500, `408 after ${waited.toFixed(0)} ms`);
      await hits.assertMoved();
      await conn.write(h2Get(port, 3));
      assert.equal((await h2Outcome(conn, 3)).status, 200);
      assert.ok(!conn.frames.some((f) => f.type === TYPE.GOAWAY), conn.summary());
    } finally {
      conn.destroy();
    }
  });

  test('header_timeout_ms: a header block that never ends (HEADERS without END_HEADERS, no CONTINUATION) is reset', async () => {
    const conn = await h2Open(port);
    try {
      const hits = await limitCounter(env.relay, 'header_timeout');
      const sentAt = performance.now();
      await conn.write(headersFrameRaw(1, encodeFields(requestFields(port)), { endStream: true, endHeaders: false }));
      const end = await conn.nextFrame((f) => (f.type === TYPE.RST_STREAM && f.streamId === 1) || f.type === TYPE.GOAWAY, {
        timeoutMs: HEADER_TIMEOUT * 3 + 2000,
        what: 'RST_STREAM (or GOAWAY) for the unfinished header block',
      });
      assert.equal(end.type, TYPE.RST_STREAM, `the connection was ended instead: ${conn.summary()}`);
      const waited = end.at - sentAt;
      // idleWatch checks once per header_timeout_ms: the reset comes within two of them.
      assert.ok(waited >= HEADER_TIMEOUT - 100 && waited < 2 * HEADER_TIMEOUT + 1000, `reset after ${waited.toFixed(0)} ms`);
      assert.ok(!conn.frames.some((f) => f.type === TYPE.HEADERS && f.streamId === 1), 'a response to a head that never ended');
      await hits.assertMoved();
    } finally {
      conn.destroy();
    }
  });
});

// ---------------------------------------------------------------------------

// Watches a process's RSS every 20 ms until stopped; resolves to the peak.
function rssPeak(pid) {
  let peak = rssBytes(pid);
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssBytes(pid));
    } catch {
      // gone
    }
  }, 20);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, rssBytes(pid));
    },
  };
}

describe('authentication on the request head (default body limits)', () => {
  const env = {};
  let port;
  before(async () => {
    env.mock = await startMock({ name: 'auth', apiKey: UPSTREAM_KEY });
    // Default max_request_bytes (4 MiB), max_connection_body_bytes (8 MiB),
    // body_timeout_ms (30 s) and initial window (1 MiB): a gateway that read
    // bodies before checking the key would wait for them.
    env.relay = await startRelay(
      relayConfig({
        keys: [{ name: 'edge', key: KEY }],
        upstreams: [{ name: 'auth', url: env.mock.url, apiKey: UPSTREAM_KEY, models: { [MODEL]: MODEL } }],
      }),
    );
    port = portOf(env.relay);
  });
  after(() => stopAll(env));

  for (const [what, auth] of [
    ['a wrong key', `authorization: Bearer ${WRONG_KEY}\r\n`],
    ['no key', ''],
  ]) {
    test(`HTTP/1.1: ${what} with content-length 1000000 and no body sent gets 401 at once, with connection: close`, async () => {
      const conn = await rawConnect(port);
      try {
        await conn.write(
          `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n${auth}content-type: application/json\r\n` +
            'content-length: 1000000\r\n\r\n',
        );
        await conn.until((t) => parseResponses(t).length === 1, 2000);
        const [r] = parseResponses(conn.text);
        assert.equal(r?.status, 401, conn.text.slice(0, 300));
        assert.equal(r.json?.error?.type, 'invalid_request_error');
        assert.equal(r.headers.connection, 'close');
        const waited = conn.firstByteAt - conn.connectedAt;
        assert.ok(waited < 1000, `401 after ${waited.toFixed(0)} ms`);
        assert.equal(await conn.closed(2500), true, 'the connection was not closed after the 401');
        assert.equal((await env.mock.requests()).length, 0);
      } finally {
        conn.destroy();
      }
    });
  }

  test('HTTP/2: 128 streams each sending a 4 MiB body under a wrong key all get 401 promptly; RSS grows < 24 MiB', async (t) => {
    const pid = env.relay.process.pid;
    const rssBefore = rssBytes(pid);
    const peak = rssPeak(pid);
    const session = http2.connect(env.relay.url, { maxSessionMemory: 4096 });
    session.on('error', () => {});
    const big = Buffer.alloc(4 * MiB, 0x20);
    const t0 = performance.now();
    try {
      await new Promise((resolve, reject) => {
        session.once('connect', resolve);
        session.once('error', reject);
      });
      const statuses = await Promise.all(
        Array.from({ length: 128 }, (_, i) => {
          const req = session.request({
            ':method': 'POST',
            ':path': '/v1/chat/completions',
            authorization: `Bearer ${WRONG_KEY}`,
            'content-type': 'application/json',
            'content-length': String(big.length),
            'x-request-id': `big-${i}`,
          });
          req.on('error', () => {});
          req.write(big);
          let status = null;
          let text = '';
          req.once('response', (h) => {
            status = h[':status'];
            req.setEncoding('utf8');
            req.on('data', (d) => (text += d));
          });
          return new Promise((resolve) => {
            req.once('close', () => resolve({ status, text, rst: req.rstCode, at: performance.now() }));
          });
        }),
      );
      const elapsed = performance.now() - t0;
      const growth = peak.stop() - rssBefore;
      t.diagnostic(`all answered in ${elapsed.toFixed(0)} ms; RSS peak growth ${(growth / MiB).toFixed(1)} MiB`);
      for (const [i, r] of statuses.entries()) {
        assert.equal(r.status, 401, `stream ${i}: ${JSON.stringify(r).slice(0, 200)}`);
      }
      assert.ok(elapsed < 5000, `128 refusals took ${elapsed.toFixed(0)} ms`);
      assert.ok(growth < 24 * MiB, `RSS grew by ${(growth / MiB).toFixed(1)} MiB`);
      assert.equal((await env.mock.requests()).length, 0);
    } finally {
      peak.stop();
      session.destroy();
    }
  });
});

describe('HTTP/2 request bodies (max_request_bytes, max_connection_body_bytes) and idle connections', () => {
  const MAX_REQUEST = 65536;
  const BUDGET = 2 * MAX_REQUEST;
  const IDLE_TIMEOUT = 1000;
  const env = {};
  before(async () => {
    env.mock = await startMock({ name: 'budget', apiKey: UPSTREAM_KEY });
    env.relay = await startRelay(
      relayConfig({
        server: {
          max_request_bytes: MAX_REQUEST,
          max_connection_body_bytes: BUDGET,
          body_timeout_ms: 4000,
          idle_timeout_ms: IDLE_TIMEOUT,
        },
        keys: [{ name: 'edge', key: KEY }],
        upstreams: [{ name: 'budget', url: env.mock.url, apiKey: UPSTREAM_KEY, models: { [MODEL]: MODEL } }],
      }),
    );
  });
  after(() => stopAll(env));

  test('max_request_bytes: a content-length one over it gets 413 before any DATA; a body without one that grows past it gets 413', async () => {
    const port = portOf(env.relay);
    const conn = await h2Open(port);
    try {
      const hits = await limitCounter(env.relay, 'max_request_bytes');
      const post = (id, extra) =>
        headersFrame(id, [
          ...requestFields(port, { method: 'POST', path: '/v1/chat/completions' }),
          ['content-type', 'application/json'],
          ...extra,
        ]);
      await conn.write(post(1, [['content-length', String(MAX_REQUEST + 1)]])); // no DATA at all
      const declared = await h2Outcome(conn, 1);
      assert.equal(declared.status, 413, declared.body);
      assert.equal(declared.json?.error?.code, 'request_too_large');
      assert.match(declared.json.error.message, /max_request_bytes/);

      // No content-length: MAX_REQUEST bytes are fine so far, the next byte is not.
      await conn.write(post(3, []));
      const body = Buffer.alloc(MAX_REQUEST + 1, 0x20);
      for (let at = 0; at < body.length; at += 16384) await conn.write(dataFrame(3, body.subarray(at, at + 16384)));
      const grown = await h2Outcome(conn, 3);
      assert.equal(grown.status, 413, grown.body);
      assert.equal(grown.json?.error?.code, 'request_too_large');
      await hits.assertMoved(2);
      assert.equal((await env.mock.requests()).length, 0, 'an oversized body reached the upstream');
      assert.ok(!conn.frames.some((f) => f.type === TYPE.GOAWAY), conn.summary());
    } finally {
      conn.destroy();
    }
  });

  test('idle_timeout_ms: an HTTP/2 connection without streams gets GOAWAY NO_ERROR and is closed', async () => {
    const conn = await h2Open(portOf(env.relay));
    try {
      await conn.write(h2Get(portOf(env.relay), 1));
      assert.equal((await h2Outcome(conn, 1)).status, 200);
      const idleSince = performance.now();
      const hits = await limitCounter(env.relay, 'idle_timeout');
      const goaway = await conn.nextFrame((f) => f.type === TYPE.GOAWAY, {
        timeoutMs: 3 * IDLE_TIMEOUT + 1000,
        what: 'GOAWAY of an idle connection',
      });
      const waited = goaway.at - idleSince;
      // Checked once per min(header_timeout_ms, idle_timeout_ms): within two of them.
      assert.ok(waited >= IDLE_TIMEOUT - 100 && waited < 2 * IDLE_TIMEOUT + 500, `GOAWAY after ${waited.toFixed(0)} ms idle`);
      assert.equal(parseGoaway(goaway).errorName, 'NO_ERROR');
      await Promise.race([conn.closed, sleep(2000).then(() => assert.fail('the idle connection stayed open after GOAWAY'))]);
      await hits.assertMoved();
    } finally {
      conn.destroy();
    }
  });

  // A connection whose sends are checked against the connection window the
  // gateway gave: 65535, plus every WINDOW_UPDATE on stream 0, minus the
  // DATA bytes sent.
  async function budgetConnection(port) {
    const conn = await h2Open(port);
    let sent = 0;
    const connectionWindow = () =>
      65535 +
      conn.frames
        .filter((f) => f.type === TYPE.WINDOW_UPDATE && f.streamId === 0)
        .reduce((n, f) => n + (f.payload.readUInt32BE(0) & 0x7fffffff), 0) -
      sent;
    const send = async (id, bytes, { endStream = false } = {}) => {
      const buf = Buffer.from(bytes);
      const frames = [];
      for (let at = 0; at < buf.length || (endStream && at === 0); at += 16384) {
        const piece = buf.subarray(at, at + 16384);
        frames.push(dataFrame(id, piece, { endStream: endStream && at + 16384 >= buf.length }));
        if (buf.length === 0) break;
      }
      sent += buf.length;
      assert.ok(connectionWindow() >= 0, `would overrun the connection window by ${-connectionWindow()} bytes`);
      await conn.write(Buffer.concat(frames));
    };
    const head = (id, length) =>
      headersFrame(id, [
        ...requestFields(port, { method: 'POST', path: '/v1/chat/completions' }),
        ['content-type', 'application/json'],
        ['content-length', String(length)],
      ]);
    await waitFor(() => connectionWindow() === BUDGET, { what: `a connection window of ${BUDGET}` });
    // For DATA written by the caller itself: counted against the window.
    const account = (n) => {
      sent += n;
    };
    return { conn, connectionWindow, send, head, account };
  }

  test('two streams holding the whole budget get no connection window back; a third upload waits until one body leaves memory', async () => {
    const hits = await limitCounter(env.relay, 'max_connection_body_bytes');
    const port = portOf(env.relay);
    const { conn, connectionWindow, send, head } = await budgetConnection(port);
    try {
      assert.ok(conn.serverSettings[SETTING.INITIAL_WINDOW_SIZE] >= MAX_REQUEST, JSON.stringify(conn.serverSettings));
      // Streams 1 and 3: bodies of exactly max_request_bytes, all but their last byte.
      const a = chatBodyOfSize(MAX_REQUEST);
      const b = chatBodyOfSize(MAX_REQUEST);
      await conn.write(Buffer.concat([head(1, a.length), head(3, b.length)]));
      await send(1, a.slice(0, -1));
      await send(3, b.slice(0, -1));
      const small = JSON.stringify(chatRequest({ model: MODEL, messages: [{ role: 'user', content: 'third' }] }));
      await conn.write(head(5, small.length));
      await sleep(400);
      assert.equal(connectionWindow(), 2, 'the gateway gave connection window back for bodies it still holds');
      assert.ok(!conn.frames.some((f) => f.type === TYPE.HEADERS && f.streamId === 5), 'stream 5 answered without its body');

      // Stream 1 completes: answered, its body leaves memory, the window comes back.
      await send(1, a.slice(-1), { endStream: true });
      const r1 = await h2Outcome(conn, 1);
      assert.equal(r1.status, 200, r1.body);
      await waitFor(() => connectionWindow() >= small.length, { what: 'connection window after stream 1 ended' });
      await send(5, small, { endStream: true });
      const r5 = await h2Outcome(conn, 5);
      assert.equal(r5.status, 200, r5.body);
      await send(3, b.slice(-1), { endStream: true });
      assert.equal((await h2Outcome(conn, 3)).status, 200);
      await hits.assertMoved();
    } finally {
      conn.destroy();
    }
  });

  test('a body that left memory gives its connection window back though under half the budget is free: the next upload is not stranded', async () => {
    const port = portOf(env.relay);
    const { conn, connectionWindow, send, head } = await budgetConnection(port);
    try {
      // Stream 1 holds all but the last byte of its body (its answer waits
      // for it); stream 3's whole body, one byte under half the budget,
      // arrives, is answered and leaves memory.
      const a = chatBodyOfSize(MAX_REQUEST);
      const b = chatBodyOfSize(BUDGET / 2 - 1);
      await conn.write(Buffer.concat([head(1, a.length), head(3, b.length)]));
      await send(1, a.slice(0, -1));
      await send(3, b, { endStream: true });
      const r3 = await h2Outcome(conn, 3);
      assert.equal(r3.status, 200, r3.body);
      // Everything not held is given back: the budget less stream 1's bytes.
      await waitFor(() => connectionWindow() === BUDGET - (a.length - 1), {
        what: `a connection window of ${BUDGET - (a.length - 1)} (the budget less what stream 1 holds)`,
      });
      const small = JSON.stringify(chatRequest({ model: MODEL, messages: [{ role: 'user', content: 'next' }] }));
      await conn.write(head(5, small.length));
      await send(5, small, { endStream: true });
      const r5 = await h2Outcome(conn, 5);
      assert.equal(r5.status, 200, r5.body);
      await send(1, a.slice(-1), { endStream: true });
      assert.equal((await h2Outcome(conn, 1)).status, 200);
    } finally {
      conn.destroy();
    }
  });

  test('three uploads that fill the budget together, none whole: the youngest gets 503 and lets its bytes go, the other two finish', async () => {
    const hits = await limitCounter(env.relay, 'max_connection_body_bytes');
    const port = portOf(env.relay);
    const { conn, connectionWindow, send, head } = await budgetConnection(port);
    try {
      // Three bodies of 60,000 bytes (180,000 against a budget of 131,072),
      // sent a frame at a time by turns, as a client multiplexing them does.
      const bodies = [1, 3, 5].map(() => chatBodyOfSize(60000));
      await conn.write(Buffer.concat([1, 3, 5].map((id, i) => head(id, bodies[i].length))));
      const at = [0, 0, 0];
      for (let turn = 0; connectionWindow() > 0; turn = (turn + 1) % 3) {
        const n = Math.min(16384, connectionWindow(), bodies[turn].length - at[turn]);
        await send(2 * turn + 1, bodies[turn].slice(at[turn], at[turn] + n));
        at[turn] += n;
      }
      assert.ok(at.every((n, i) => n < bodies[i].length), `none whole: ${at}`);
      const r5 = await h2Outcome(conn, 5);
      assert.equal(r5.status, 503, r5.body);
      assert.equal(r5.json?.error?.code, 'connection_body_budget_full');
      assert.match(r5.json.error.message, /max_connection_body_bytes \(131072 bytes\)/);
      // Its bytes come back as window; streams 1 and 3 finish.
      for (const turn of [0, 1]) {
        await waitFor(() => connectionWindow() >= bodies[turn].length - at[turn], { what: `window for stream ${2 * turn + 1}` });
        await send(2 * turn + 1, bodies[turn].slice(at[turn]), { endStream: true });
        const r = await h2Outcome(conn, 2 * turn + 1);
        assert.equal(r.status, 200, r.body);
      }
      await hits.assertMoved();
    } finally {
      conn.destroy();
    }
  });

  test('uploads without a content-length that fill the budget are let finish while they send; when the connection goes quiet, the youngest gets 503', async () => {
    const port = portOf(env.relay);
    const { conn, connectionWindow, send, account } = await budgetConnection(port);
    const headNoLength = (id) =>
      headersFrame(id, [...requestFields(port, { method: 'POST', path: '/v1/chat/completions' }), ['content-type', 'application/json']]);
    try {
      // Two bodies of 65,000 bytes: together within 16 KiB of the budget.
      const a = chatBodyOfSize(65000);
      const b = chatBodyOfSize(65000);
      await conn.write(Buffer.concat([headNoLength(1), headNoLength(3)]));
      await send(1, a.slice(0, -1));
      // Stream 3's body and both ends in one write (no quiet tick between):
      // the relay still reads 16 KiB at a time, so one read ends with the
      // budget full and neither whole; END_STREAM needs no window.
      const rest = (id, bytes, endStream) => {
        const frames = [];
        for (let at = 0; at < bytes.length; at += 16384)
          frames.push(dataFrame(id, bytes.subarray(at, at + 16384), { endStream: endStream && at + 16384 >= bytes.length }));
        return frames;
      };
      const bb = Buffer.from(b);
      account(bb.length + 1);
      await conn.write(
        Buffer.concat([
          ...rest(3, bb.subarray(0, -1), false),
          dataFrame(1, Buffer.from(a.slice(-1)), { endStream: true }),
          dataFrame(3, bb.subarray(-1), { endStream: true }),
        ]),
      );
      assert.equal((await h2Outcome(conn, 1)).status, 200);
      assert.equal((await h2Outcome(conn, 3)).status, 200);

      // The same two, and then nothing: after a quiet tick the youngest is refused.
      await waitFor(() => connectionWindow() === BUDGET, { what: 'the whole budget back' });
      await conn.write(Buffer.concat([headNoLength(5), headNoLength(7)]));
      await send(5, a.slice(0, -1));
      await send(7, b.slice(0, -1));
      const r7 = await h2Outcome(conn, 7);
      assert.equal(r7.status, 503, r7.body);
      assert.equal(r7.json?.error?.code, 'connection_body_budget_full');
      await send(5, a.slice(-1), { endStream: true });
      assert.equal((await h2Outcome(conn, 5)).status, 200);
    } finally {
      conn.destroy();
    }
  });

  test('a window opened a byte at a time is no progress: the stream is reset after idle_timeout_ms (write_stall)', async () => {
    const hits = await limitCounter(env.relay, 'write_stall');
    const port = portOf(env.relay);
    const conn = await h2Open(port, { [SETTING.INITIAL_WINDOW_SIZE]: 1 });
    let dribble;
    try {
      const t0 = performance.now();
      await conn.write(h2Get(port, 1));
      // One more byte of window every 200 ms: far under 16 KiB per second.
      dribble = setInterval(() => conn.write(windowUpdateFrame(1, 1)).catch(() => {}), 200);
      const r = await h2Outcome(conn, 1, { timeoutMs: 3 * IDLE_TIMEOUT + 2000 });
      assert.notEqual(r.rst, null, `not reset: ${JSON.stringify(r).slice(0, 200)}`);
      assert.ok(r.at - t0 >= IDLE_TIMEOUT - 100, `reset after ${(r.at - t0).toFixed(0)} ms`);
      assert.ok(r.body.length > 1, 'bytes did go out, one at a time');
      await hits.assertMoved();
    } finally {
      clearInterval(dribble);
      conn.destroy();
    }
  });

  test('less than a step of connection window comes back too when the client has less than a step left: a body still arriving is not stranded', async () => {
    const port = portOf(env.relay);
    const { conn, connectionWindow, send, head } = await budgetConnection(port);
    const STEP = BUDGET / 16;
    try {
      // Stream 1 holds all but one byte of its body; stream 3's small body
      // is answered and leaves memory (less than a step, while the client
      // still has more than a step: nothing comes back yet).
      const a = chatBodyOfSize(MAX_REQUEST);
      const small = chatBodyOfSize(5000);
      await conn.write(Buffer.concat([head(1, a.length), head(3, small.length)]));
      await send(1, a.slice(0, -1));
      await send(3, small, { endStream: true });
      assert.equal((await h2Outcome(conn, 3)).status, 200);
      assert.equal(connectionWindow(), BUDGET - (a.length - 1) - small.length);
      // Stream 5 sends all the window allows: the client has less than a step left.
      const c = chatBodyOfSize(MAX_REQUEST);
      const first = connectionWindow() - 537;
      await conn.write(head(5, c.length));
      await send(5, c.slice(0, first));
      assert.ok(connectionWindow() < STEP);
      // Stream 3's bytes come back: stream 5's rest fits.
      await waitFor(() => connectionWindow() >= c.length - first, {
        what: `a connection window of ${c.length - first} for the rest of stream 5`,
      });
      await send(5, c.slice(first), { endStream: true });
      assert.equal((await h2Outcome(conn, 5)).status, 200);
      await send(1, a.slice(-1), { endStream: true });
      assert.equal((await h2Outcome(conn, 1)).status, 200);
    } finally {
      conn.destroy();
    }
  });
});

// ---------------------------------------------------------------------------

describe('connection caps (max_connections, max_connections_per_ip)', () => {
  const MAX_CONNECTIONS = 20;
  const PER_IP = 5;
  const env = {};
  let port;
  before(async () => {
    env.mock = await startMock({ name: 'caps', apiKey: UPSTREAM_KEY });
    env.relay = await startRelay(
      relayConfig({
        // Long header/idle timeouts: a connection that says nothing stays open.
        server: {
          max_connections: MAX_CONNECTIONS,
          max_connections_per_ip: PER_IP,
          header_timeout_ms: 8000,
          idle_timeout_ms: 8000,
        },
        keys: [{ name: 'edge', key: KEY }],
        upstreams: [{ name: 'caps', url: env.mock.url, apiKey: UPSTREAM_KEY, models: { [MODEL]: MODEL } }],
      }),
    );
    port = portOf(env.relay);
  });
  after(() => stopAll(env));

  const openGauge = async () => metricSum(await scrape(env.relay), 'kimi_relay_open_connections');

  // A connection the gateway admitted answers a request (and then closes).
  async function assertServed(conn) {
    await conn.write(modelsHeadOfSize(300));
    await conn.closed(3000);
    const [r] = parseResponses(conn.text);
    assert.equal(r?.status, 200, `an admitted connection was not served: ${JSON.stringify(conn.text.slice(0, 200))}`);
  }

  // A connection past a cap is closed right at accept: EOF or a reset, no byte of response.
  async function assertRefusedAtAccept(localAddress) {
    let conn;
    try {
      conn = await rawConnect(port, { localAddress });
    } catch (err) {
      assert.match(err.code, /ECONNRESET|ECONNREFUSED/);
      return;
    }
    try {
      await conn.write(modelsHeadOfSize(300));
      assert.equal(await conn.closed(2000), true, `a connection from ${localAddress} past the cap stayed open`);
      assert.equal(conn.text, '', `a connection past the cap got an answer: ${conn.text.slice(0, 100)}`);
      assert.ok(conn.closedAt - conn.connectedAt < 1500);
    } finally {
      conn.destroy();
    }
  }

  test('max_connections_per_ip: 5 connections from one address are served, the 6th is closed at accept; another address is not affected', async () => {
    const hits = await limitCounter(env.relay, 'max_connections_per_ip');
    const held = [];
    try {
      for (let i = 0; i < PER_IP; i++) held.push(await rawConnect(port, { localAddress: '127.0.0.1' }));
      await sleep(100);
      await assertRefusedAtAccept('127.0.0.1');
      await hits.assertMoved();
      // Another address has its own count.
      await assertServed(await rawConnect(port, { localAddress: '127.0.0.2' }));
      // Those already open are served; once one has gone, the address may connect again.
      await assertServed(held[0]);
      await sleep(100);
      await assertServed(await rawConnect(port, { localAddress: '127.0.0.1' }));
      for (const c of held.slice(1)) await assertServed(c);
    } finally {
      held.forEach((c) => c.destroy());
    }
  });

  test('max_connections: 20 open from 4 addresses, the 21st (from a fifth) is closed at accept; admin /healthz still answers; the open ones are served', async () => {
    const hits = await limitCounter(env.relay, 'max_connections');
    const held = [];
    try {
      for (let a = 0; a < MAX_CONNECTIONS / PER_IP; a++) {
        for (let i = 0; i < PER_IP; i++) held.push(await rawConnect(port, { localAddress: `127.0.0.${11 + a}` }));
      }
      await sleep(100);
      await assertRefusedAtAccept('127.0.0.30');
      await hits.assertMoved();
      const health = await new Promise((resolve, reject) => {
        http.get(`${env.relay.adminUrl}/healthz`, { agent: false }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode));
        }).on('error', reject);
      });
      assert.equal(health, 200, 'the admin listener is counted apart');
      const open = await openGauge();
      assert.ok(open >= MAX_CONNECTIONS, `kimi_relay_open_connections is ${open} with ${MAX_CONNECTIONS} open`);
      await assertServed(held[0]);
      await sleep(100);
      await assertServed(await rawConnect(port, { localAddress: '127.0.0.30' })); // room again
      for (const c of held.slice(1)) await assertServed(c);
    } finally {
      held.forEach((c) => c.destroy());
    }
    await waitFor(async () => (await openGauge()) <= 2, { timeoutMs: 3000, what: 'kimi_relay_open_connections to fall back' });
  });

  test('a connection flood (600 connects from 6 addresses, 100 at a time) leaves fds and RSS where they were', async (t) => {
    const pid = env.relay.process.pid;
    await sleep(100);
    const fdsBefore = fdCount(pid);
    const rssBefore = rssBytes(pid);
    const capHits = async () =>
      (await limitHits(env.relay, 'max_connections')) + (await limitHits(env.relay, 'max_connections_per_ip'));
    const hitsBefore = await capHits();
    const ROUNDS = 6;
    const PER_ROUND = 100;
    let refused = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const attempts = await Promise.all(
        Array.from({ length: PER_ROUND }, (_, i) =>
          rawConnect(port, { localAddress: `127.0.0.${40 + (i % 6)}` }).catch(() => null),
        ),
      );
      await Promise.all(attempts.filter(Boolean).map((c) => c.closed(200)));
      refused += attempts.filter((c) => !c || c.closedAt !== null).length;
      attempts.forEach((c) => c?.destroy());
    }
    const total = ROUNDS * PER_ROUND;
    t.diagnostic(`${refused} of ${total} connections closed at accept`);
    assert.ok(refused >= total - ROUNDS * MAX_CONNECTIONS, `only ${refused} of ${total} were refused`);
    await waitFor(async () => (await capHits()) - hitsBefore >= refused, {
      timeoutMs: 1500,
      what: `max_connections + max_connections_per_ip hits to grow by ${refused}`,
    });
    await waitFor(() => fdCount(pid) <= fdsBefore + 2, {
      timeoutMs: 3000,
      what: `the relay's fds to return to ${fdsBefore} (now ${fdCount(pid)})`,
    });
    const growth = rssBytes(pid) - rssBefore;
    t.diagnostic(`RSS growth ${(growth / MiB).toFixed(1)} MiB`);
    assert.ok(growth < 16 * MiB, `RSS grew by ${(growth / MiB).toFixed(1)} MiB`);
    await waitFor(async () => (await openGauge()) <= 2, { timeoutMs: 3000, what: 'kimi_relay_open_connections to fall back' });
    await assertServed(await rawConnect(port, { localAddress: '127.0.0.40' }));
  });
});

// ---------------------------------------------------------------------------

describe('upstream answers (max_response_bytes, max_event_bytes, max_attempts)', () => {
  const MAX_RESPONSE = 1048576;
  const MAX_EVENT = 4096;
  const env = {};
  before(async () => {
    env.mock = await startMock({ name: 'big', apiKey: UPSTREAM_KEY });
    env.relay = await startRelay(
      relayConfig({
        keys: [{ name: 'edge', key: KEY }],
        upstreams: [
          {
            name: 'big',
            url: env.mock.url,
            apiKey: UPSTREAM_KEY,
            models: { [MODEL]: MODEL },
            max_response_bytes: MAX_RESPONSE,
            max_event_bytes: MAX_EVENT,
            health: { eject_after_failures: 0 },
          },
        ],
        retry: { max_attempts: 1 },
      }),
    );
  });
  after(() => stopAll(env));

  const ask = (fault, extra = {}) =>
    postChat(env.relay, chatRequest({ model: MODEL, ...extra }), { key: KEY, headers: { 'x-mock-fault': fault } });

  for (const fault of ['body_bytes', 'body_bytes_chunked']) {
    test(`max_response_bytes (${fault}): a body of exactly the cap is passed on; one byte more gets 502 naming max_response_bytes`, async () => {
      const ok = await ask(`${fault}=${MAX_RESPONSE}`);
      const okText = await ok.text();
      assert.equal(ok.status, 200, okText.slice(0, 200));
      assert.equal(Buffer.byteLength(okText), MAX_RESPONSE);

      const hits = await limitCounter(env.relay, 'upstream_max_response_bytes');
      const over = await ask(`${fault}=${MAX_RESPONSE + 1}`);
      assert.equal(over.status, 502);
      const err = await readOpenAiError(over, assert);
      assert.match(err.message, /max_response_bytes/);
      assert.match(err.message, /'big'/);
      await hits.assertMoved();
    });
  }

  test('max_response_bytes: a 64 MiB upstream body (declared, then chunked) gets 502 quickly and RSS stays bounded', async (t) => {
    const pid = env.relay.process.pid;
    const rssBefore = rssBytes(pid);
    const peak = rssPeak(pid);
    try {
      for (const fault of ['body_bytes', 'body_bytes_chunked']) {
        const hits = await limitCounter(env.relay, 'upstream_max_response_bytes');
        const t0 = performance.now();
        const res = await ask(`${fault}=${64 * MiB}`);
        const err = await readOpenAiError(res, assert);
        const took = performance.now() - t0;
        assert.equal(res.status, 502, err.message);
        assert.match(err.message, /max_response_bytes/);
        assert.ok(took < 3000, `${fault}: 502 after ${took.toFixed(0)} ms`);
        await hits.assertMoved();
      }
    } finally {
      const growth = peak.stop() - rssBefore;
      t.diagnostic(`RSS peak growth ${(growth / MiB).toFixed(1)} MiB`);
      assert.ok(growth < 16 * MiB, `RSS grew by ${(growth / MiB).toFixed(1)} MiB for 64 MiB upstream bodies`);
    }
  });

  test('max_event_bytes: an event of exactly the cap is relayed; one byte more ends the 200 stream with an error event naming max_event_bytes', async () => {
    // The mock's padded event, blank line included, is event_bytes - 6 bytes.
    const atCap = await ask(`event_bytes=${MAX_EVENT + 6}`, { stream: true });
    assert.equal(atCap.status, 200);
    const text = await atCap.text();
    assert.equal(text.indexOf('\n\n') + 2, MAX_EVENT, 'the padded event is not MAX_EVENT bytes: the mock changed');
    assert.ok(text.endsWith('data: [DONE]\n\n'), text.slice(-200));
    assert.doesNotMatch(text, /"error"/);

    const hits = await limitCounter(env.relay, 'sse_event_bytes');
    const over = await ask(`event_bytes=${MAX_EVENT + 7}`, { stream: true });
    assert.equal(over.status, 200);
    const events = await collectSse(over);
    const last = events.at(-1);
    assert.ok(last?.json?.error, `the stream did not end with an error event: ${JSON.stringify(events.map((e) => e.data.slice(0, 80)))}`);
    assert.match(last.json.error.message, /max_event_bytes/);
    assert.ok(!events.some((e) => e.done), 'a cut stream must not end with [DONE]');
    assert.ok(!events.some((e) => e.data.includes('xxxxxxxx')), 'part of the oversized event was relayed');
    await hits.assertMoved();
  });

  test('retry.max_attempts 1: a POST whose pooled upstream connection is reset after the request is sent once (502)', async () => {
    const warm = await postChat(env.relay, chatRequest({ model: MODEL }), { key: KEY });
    assert.equal(warm.status, 200, await warm.text()); // leaves a pooled keep-alive connection
    const marker = `reset-once-${Date.now()}`;
    const res = await postChat(env.relay, chatRequest({ model: MODEL, messages: [{ role: 'user', content: marker }] }), {
      key: KEY,
      headers: { 'x-mock-fault': 'reset' },
    });
    const err = await readOpenAiError(res, assert);
    assert.equal(res.status, 502, err.message);
    const seen = (await env.mock.requests()).filter((r) => r.body.includes(marker));
    assert.equal(seen.length, 1, `the upstream received the POST ${seen.length} times`);
  });
});

// ---------------------------------------------------------------------------

describe("an upstream that refuses the gateway's key", () => {
  const RIGHT_KEY = 'sk-edge-keyed-mock-right-7a9c1e3b5d7f9a1c3e5b';
  const BAD_KEY = 'sk-edge-gateway-wrong-2d4f6a8c0e2b4d6f8a0c';
  const env = {};
  before(async () => {
    env.keyed = await startMock({ name: 'keyed', apiKey: RIGHT_KEY });
    env.good = await startMock({ name: 'good', apiKey: UPSTREAM_KEY });
    const health = { eject_after_failures: 5, base_ejection_ms: 60_000 };
    env.relay = await startRelay(
      relayConfig({
        keys: [{ name: 'edge', key: KEY }],
        upstreams: [
          { name: 'bad-solo', url: env.keyed.url, apiKey: BAD_KEY, models: { 'm-solo': 'm-solo' }, health },
          // Much heavier than 'good': picked first while it is healthy.
          { name: 'bad', url: env.keyed.url, apiKey: BAD_KEY, weight: 1000, models: { 'm-shared': 'm-shared' }, health },
          { name: 'good', url: env.good.url, apiKey: UPSTREAM_KEY, weight: 1, models: { 'm-shared': 'm-shared' }, health },
        ],
      }),
    );
  });
  after(() => stopAll(env));

  // Every 8-character piece of `secret`.
  const pieces = (secret) => Array.from({ length: secret.length - 7 }, (_, i) => secret.slice(i, i + 8));

  test('alone: 502 upstream_auth_failed naming the upstream, x-should-retry false, no part of either key', async () => {
    const res = await postChat(env.relay, chatRequest({ model: 'm-solo' }), { key: KEY });
    const text = await res.text();
    assert.equal(res.status, 502, text);
    assert.equal(res.headers.get('x-should-retry'), 'false');
    const err = JSON.parse(text).error;
    assert.equal(err.code, 'upstream_auth_failed');
    assert.match(err.message, /'bad-solo'/);
    for (const piece of [...pieces(BAD_KEY), ...pieces(RIGHT_KEY), ...pieces(KEY)]) {
      assert.ok(!text.includes(piece), `the answer holds part of a key (${piece}): ${text}`);
    }
    assert.doesNotMatch(text, /Incorrect API key/, "the upstream's own words about the key were passed on");
  });

  test('beside a good upstream: served by it, the refusing one is ejected (credential_refused), the next request goes straight to the good one', async () => {
    const ejections = async () =>
      metricSum(await scrape(env.relay), 'kimi_relay_upstream_ejections_total', { upstream: 'bad', reason: 'credential_refused' });
    const before = await ejections();
    const first = await postChat(env.relay, chatRequest({ model: 'm-shared' }), { key: KEY });
    const firstText = await first.text();
    assert.equal(first.status, 200, firstText);
    assert.equal(first.headers.get('x-relay-upstream'), 'good');
    assert.equal(first.headers.get('x-relay-attempts'), '2', 'the heavy, refusing upstream was not tried first');
    assert.ok((await ejections()) - before >= 1, 'no credential_refused ejection of upstream bad');

    const keyedBefore = (await env.keyed.requests()).length;
    const second = await postChat(env.relay, chatRequest({ model: 'm-shared' }), { key: KEY });
    assert.equal(second.status, 200, await second.text());
    assert.equal(second.headers.get('x-relay-upstream'), 'good');
    assert.equal(second.headers.get('x-relay-attempts'), '1');
    assert.equal((await env.keyed.requests()).length, keyedBefore, 'the ejected upstream was asked again');
  });
});

describe('what reaches an upstream', () => {
  const env = {};
  before(async () => {
    env.mock = await startMock({ name: 'fwd', apiKey: UPSTREAM_KEY });
    const spec = {
      keys: [{ name: 'edge', key: KEY }],
      upstreams: [{ name: 'fwd', url: env.mock.url, apiKey: UPSTREAM_KEY, models: { [MODEL]: MODEL } }],
    };
    env.relay = await startRelay(relayConfig(spec));
    env.proxied = await startRelay(relayConfig({ ...spec, server: { trusted_proxies: ['127.0.0.0/8'] } }));
  });
  after(() => stopAll(env));

  // POSTs with node:http (fetch would refuse or rewrite some of these fields)
  // and returns the request the mock recorded.
  async function sendAndRecord(relay, headers, { bearer = true } = {}) {
    const marker = `fwd-${Math.random().toString(36).slice(2)}`;
    const body = JSON.stringify(chatRequest({ model: MODEL, messages: [{ role: 'user', content: marker }] }));
    const status = await new Promise((resolve, reject) => {
      const req = http.request(
        `${relay.url}/v1/chat/completions`,
        {
          method: 'POST',
          agent: false,
          headers: {
            ...(bearer ? { authorization: `Bearer ${KEY}` } : {}),
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            ...headers,
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    assert.equal(status, 200);
    const recorded = (await env.mock.requests()).filter((r) => r.body.includes(marker));
    assert.equal(recorded.length, 1);
    return recorded[0];
  }

  test('caller fields pass by allow-list: identity and credentials stay, SDK and tracing fields go on', async () => {
    const r = await sendAndRecord(env.relay, {
      'OpenAI-Organization': 'org-edge',
      'OpenAI-Project': 'proj-edge',
      cookie: 'session=edge-cookie',
      'x-custom-thing': 'custom',
      'user-agent': 'edge-agent/1.0',
      'idempotency-key': 'idem-edge-1',
      'x-stainless-retry-count': '0',
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    });
    for (const name of ['openai-organization', 'openai-project', 'cookie', 'x-api-key', 'x-custom-thing']) {
      assert.deepEqual(headerValues(r, name), [], `${name} reached the upstream`);
    }
    assert.equal(headerValue(r, 'user-agent'), 'edge-agent/1.0');
    assert.equal(headerValue(r, 'idempotency-key'), 'idem-edge-1');
    assert.equal(headerValue(r, 'x-stainless-retry-count'), '0');
    // The trace goes on with the gateway's own span as the parent (trace_context.test.mjs).
    assert.match(headerValue(r, 'traceparent'), /^00-4bf92f3577b34da6a3ce929d0e0e4736-(?!00f067aa0ba902b7)[0-9a-f]{16}-01$/);
    assert.equal(headerValue(r, 'authorization'), `Bearer ${UPSTREAM_KEY}`, "the upstream's own key, not the caller's");
    assert.ok(!JSON.stringify(r.headers).includes(KEY), "the caller's key reached the upstream");

    // A caller that authenticates with x-api-key alone: it does not go on either.
    const viaApiKey = await sendAndRecord(env.relay, { 'x-api-key': KEY }, { bearer: false });
    assert.deepEqual(headerValues(viaApiKey, 'x-api-key'), []);
    assert.ok(!JSON.stringify(viaApiKey.headers).includes(KEY), "the caller's key reached the upstream");
  });

  test("X-Forwarded-For from an untrusted peer is replaced by the peer's address; from a trusted proxy the peer is appended", async () => {
    const direct = await sendAndRecord(env.relay, { 'x-forwarded-for': '6.6.6.6' });
    assert.deepEqual(headerValues(direct, 'x-forwarded-for'), ['127.0.0.1']);
    const proxied = await sendAndRecord(env.proxied, { 'x-forwarded-for': '6.6.6.6' });
    assert.deepEqual(headerValues(proxied, 'x-forwarded-for'), ['6.6.6.6, 127.0.0.1']);
    const none = await sendAndRecord(env.proxied, {});
    assert.deepEqual(headerValues(none, 'x-forwarded-for'), ['127.0.0.1']);
  });
});
