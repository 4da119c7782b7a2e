// The same cases over the four ways in: HTTP/1.1, HTTP/1.1 over TLS, HTTP/2
// over TLS (ALPN h2) and h2c with prior knowledge. Every protocol must reach
// the same behaviour: JSON relay, incremental SSE relay, cancellation by the
// client, the gateway's own refusals (401/404/413) and no connection-specific
// header crossing between the caller's protocol and the upstream's HTTP/1.1.
// The TLS listener uses a CA made at test time (lib/tls.mjs).

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import https from 'node:https';
import tls from 'node:tls';
import { after, before, beforeEach, describe, test } from 'node:test';

import { CAPTURE_REPLY_CONTENT, startCaptureUpstream } from '../lib/capture_upstream.mjs';
import { PROTOCOLS, openClient } from '../lib/clients.mjs';
import { KEYS, MODELS, UPSTREAM_KEYS, allRecorded, useTopology } from '../lib/fixtures.mjs';
import { chatRequest, headerValues, readSse, waitFor } from '../lib/harness.mjs';

const MAX_REQUEST_BYTES = 2048;
const MAX_CONCURRENT_STREAMS = 150;
const INITIAL_WINDOW_BYTES = 262_144;
const CAPTURE_KEY = 'sk-capture-upstream-secret-1a2b3c4d5e6f7a8b9c0d';

const capture = await startCaptureUpstream();
after(() => capture.close());
beforeEach(() => {
  capture.requests.length = 0;
});

const env = useTopology({
  tls: true,
  server: {
    max_request_bytes: MAX_REQUEST_BYTES,
    http2: { max_concurrent_streams: MAX_CONCURRENT_STREAMS, initial_window_bytes: INITIAL_WINDOW_BYTES },
  },
  upstreams: [
    { name: 'capture', url: capture.url, apiKey: CAPTURE_KEY, weight: 1, models: { 'kimi-capture': 'kimi-capture-up' } },
  ],
});

// Fields that describe one connection, not the message (RFC 9110 §7.6.1,
// RFC 9113 §8.2.2). HTTP/2 forbids them outright.
const CONNECTION_SPECIFIC = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade'];

async function statSum(name) {
  const all = await Promise.all(Object.values(env.mocks).map((m) => m.stats()));
  return all.reduce((n, s) => n + s[name], 0);
}

const auth = (key = KEYS.full) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

// What a response of this protocol may carry for framing: HTTP/2 nothing
// connection-specific at all; HTTP/1.1 one framing only (RFC 9112 §6.3).
function assertResponseFraming(protocol, reply) {
  if (protocol.h2) {
    for (const name of CONNECTION_SPECIFIC) {
      assert.ok(!reply.headerNames.includes(name), `HTTP/2 response carries "${name}"`);
    }
  } else {
    const te = reply.headerNames.includes('transfer-encoding');
    const cl = reply.headerNames.includes('content-length');
    assert.ok(!(te && cl), 'an HTTP/1.1 response with both Transfer-Encoding and Content-Length');
  }
}

for (const protocol of PROTOCOLS) {
  describe(protocol.name, () => {
    let client;
    before(async () => {
      client = await openClient(protocol, { relay: env.relay, ca: env.tls.caPem });
    });
    after(() => client?.close());

    test('negotiates the intended protocol, with the certificate checked', async () => {
      const reply = await client.request({ method: 'GET', path: '/v1/models', headers: auth() });
      const body = await reply.json();
      assert.equal(reply.status, 200);
      assert.equal(body.object, 'list');
      const n = client.negotiated();
      assert.equal(reply.httpVersion, protocol.h2 ? '2.0' : '1.1');
      assert.equal(n.encrypted, protocol.tls, 'TLS or not as intended');
      if (protocol.tls) {
        assert.equal(n.authorized, true, 'the server certificate verified against the test CA');
        assert.equal(n.alpn, protocol.h2 ? 'h2' : 'http/1.1', 'ALPN result');
      }
      if (protocol.h2) {
        // The gateway's own SETTINGS prove HTTP/2 is spoken end to end (for
        // h2c there is no ALPN to ask).
        assert.equal(n.remoteSettings.maxConcurrentStreams, MAX_CONCURRENT_STREAMS);
        assert.equal(n.remoteSettings.initialWindowSize, INITIAL_WINDOW_BYTES);
        if (!protocol.tls) assert.equal(n.alpn, 'h2c');
      }
    });

    test('JSON relay: body, request id, model rewrite and upstream credentials', async () => {
      const id = `proto-${randomUUID()}`;
      // (the mock echoes the start of the last user message)
      const marker = `json ${id.slice(-12)}`;
      const reply = await client.request({
        path: '/v1/chat/completions',
        headers: { ...auth(), 'x-request-id': id },
        body: chatRequest({ model: 'kimi-agent-swarm', messages: [{ role: 'user', content: marker }] }),
      });
      const text = await reply.text();
      assert.equal(reply.status, 200, text);
      assert.match(reply.headers['content-type'] ?? '', /^application\/json/);
      assert.equal(reply.headers['x-request-id'], id);
      assert.equal(reply.headers['x-relay-upstream'], 'holysheep');
      assertResponseFraming(protocol, reply);
      const completion = JSON.parse(text);
      assert.equal(completion.object, 'chat.completion');
      assert.ok(
        completion.choices[0].message.content.startsWith(marker),
        `the answer is not to this request: ${completion.choices[0].message.content}`,
      );

      const [rec] = await env.holysheep.requests();
      assert.ok(rec, 'the request reached the upstream');
      assert.equal(rec.protocol, 'http/1.1', 'upstreams are spoken to over HTTP/1.1');
      assert.deepEqual(headerValues(rec, 'x-request-id'), [id]);
      assert.deepEqual(headerValues(rec, 'authorization'), [`Bearer ${UPSTREAM_KEYS.holysheep}`]);
      assert.deepEqual(headerValues(rec, 'host'), [`127.0.0.1:${env.holysheep.port}`]);
      assert.equal(JSON.parse(rec.body).model, MODELS.holysheep['kimi-agent-swarm']);
    });

    test('SSE relay: every event, in order, as it is produced', async () => {
      const id = `proto-sse-${randomUUID()}`;
      const marker = `sse ${protocol.tls ? 'tls' : 'plain'} ${protocol.h2 ? 'h2' : 'h1'}`;
      const reply = await client.request({
        path: '/v1/chat/completions',
        headers: { ...auth(), 'x-request-id': id, 'x-mock-chunks': '8', 'x-mock-chunk-delay-ms': '60' },
        body: chatRequest({ model: 'kimi-agent-swarm', stream: true, messages: [{ role: 'user', content: marker }] }),
      });
      assert.equal(reply.status, 200);
      assert.match(reply.headers['content-type'] ?? '', /^text\/event-stream/);
      assert.equal(reply.headers['x-request-id'], id);
      assertResponseFraming(protocol, reply);

      const events = [];
      for await (const e of readSse(reply)) events.push(e);
      assert.equal(events.at(-1)?.done, true, 'the stream ends with [DONE]');
      const chunks = events.slice(0, -1);
      const content = chunks.map((e) => e.json?.choices?.[0]?.delta?.content ?? '').join('');
      assert.equal(content, `${marker} 1 2 3 4 5 6 7`, 'content assembled from the deltas');
      for (const e of chunks) assert.equal(e.json.object, 'chat.completion.chunk');

      // Incremental: the 8 content events arrive spread over ~420 ms, most of
      // them on their own, not in one burst at the end.
      const times = chunks.filter((e) => e.json.choices[0].delta.content !== undefined).map((e) => e.at);
      assert.equal(times.length, 8);
      const spread = times.at(-1) - times[0];
      const gaps = times.slice(1).map((t, i) => t - times[i]);
      assert.ok(spread > 300, `all events arrived within ${spread.toFixed(0)} ms: buffered`);
      assert.ok(gaps.filter((g) => g >= 25).length >= 5, `events came in bursts: ${gaps.map((g) => g.toFixed(0))}`);
    });

    test('client cancel mid-stream cancels the upstream request', async () => {
      const reply = await client.request({
        path: '/v1/chat/completions',
        headers: { ...auth(), 'x-mock-chunks': '60', 'x-mock-chunk-delay-ms': '80' },
        body: chatRequest({ model: 'kimi-agent-swarm', stream: true }),
      });
      assert.equal(reply.status, 200);
      let received = 0;
      try {
        for await (const e of readSse(reply)) {
          assert.ok(e.json, e.data);
          received += 1;
          if (received === 2) {
            reply.cancel();
            break;
          }
        }
      } catch {
        // the cancelled body may end in an error: that is the point
      }
      assert.equal(received, 2);
      await waitFor(async () => (await statSum('cancelled')) === 1, {
        timeoutMs: 3000,
        what: 'the upstream to see the request cancelled',
      });
      await waitFor(async () => (await statSum('in_flight')) === 0, { timeoutMs: 2000, what: 'in_flight 0' });
      assert.equal(await statSum('completed_streams'), 0, 'the upstream stream ran to its end anyway');
    });

    if (!protocol.h2) {
      // HTTP/1.1 cancellation closes the connection: reopen for the next tests.
      test('(reconnects after the cancel)', async () => {
        await client.close();
        client = await openClient(protocol, { relay: env.relay, ca: env.tls.caPem });
      });
    } else {
      test('the HTTP/2 connection survives the cancelled stream', async () => {
        const reply = await client.request({ method: 'GET', path: '/v1/models', headers: auth() });
        await reply.text();
        assert.equal(reply.status, 200);
      });
    }

    describe('errors', () => {
      // A refusal: exact status and code, OpenAI shape, x-request-id, and
      // nothing reaching an upstream.
      async function expectRefusal(status, code, request) {
        const reply = await client.request({ path: '/v1/chat/completions', ...request });
        const text = await reply.text();
        assert.equal(reply.status, status, text);
        assert.ok(reply.headers['x-request-id'], 'every response carries x-request-id');
        assertResponseFraming(protocol, reply);
        const body = JSON.parse(text);
        for (const key of ['message', 'type', 'param', 'code']) assert.ok(key in body.error, `error.${key}: ${text}`);
        assert.equal(body.error.type, 'invalid_request_error');
        assert.equal(body.error.code, code);
        assert.equal((await allRecorded(env.mocks)).length, 0, 'a refused request reached an upstream');
        assert.equal(capture.requests.length, 0);
        return body.error;
      }

      test('401 invalid_api_key without a key', async () => {
        await expectRefusal(401, 'invalid_api_key', {
          headers: { 'content-type': 'application/json' },
          body: chatRequest(),
        });
      });

      test('404 model_not_found for an unknown model', async () => {
        const err = await expectRefusal(404, 'model_not_found', {
          headers: auth(),
          body: chatRequest({ model: 'gpt-nope' }),
        });
        assert.match(err.message, /gpt-nope/);
      });

      test('413 request_too_large for a body over max_request_bytes', async () => {
        const body = JSON.stringify(chatRequest({ messages: [{ role: 'user', content: 'x'.repeat(2 * MAX_REQUEST_BYTES) }] }));
        await expectRefusal(413, 'request_too_large', { headers: auth(), body });
      });

      if (!protocol.h2) {
        test('(reconnects: a 413 may close an HTTP/1.1 connection)', async () => {
          await client.close();
          client = await openClient(protocol, { relay: env.relay, ca: env.tls.caPem });
        });
      }
    });

    describe('connection-specific headers never cross', () => {
      test('the upstream gets a clean HTTP/1.1 request with its own Host', async () => {
        const id = `hop-${randomUUID()}`;
        // HTTP/2 clients may not send connection fields at all (node refuses);
        // TE: trailers is the one allowed, and is still hop-by-hop.
        const hopHeaders = protocol.h2
          ? { te: 'trailers' }
          : {
              connection: 'keep-alive, X-Caller-Hop',
              'x-caller-hop': 'named-in-connection',
              'keep-alive': 'timeout=5',
              'proxy-connection': 'keep-alive',
              te: 'trailers',
              'http2-settings': 'AAMAAABkAAQCAAAAAAIAAAAA',
            };
        const body = JSON.stringify(chatRequest({ model: 'kimi-capture' }));
        const reply = await client.request({
          path: '/v1/chat/completions',
          headers: { ...auth(), 'x-request-id': id, ...hopHeaders },
          body,
        });
        const text = await reply.text();
        assert.equal(reply.status, 200, text);
        assert.equal(capture.requests.length, 1, 'one request reached the raw upstream');
        const [rec] = capture.requests;
        assert.equal(rec.requestLine, 'POST /v1/chat/completions HTTP/1.1');
        const names = rec.headers.map(([n]) => n.toLowerCase());
        const values = (name) => rec.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);

        // Every violation at once, so a failure tells the whole story.
        const crossed = rec.headers.filter(
          ([n, v]) =>
            n.startsWith(':') ||
            ['http2-settings', 'te', 'keep-alive', 'proxy-connection', 'upgrade', 'x-caller-hop'].includes(n.toLowerCase()) ||
            (n.toLowerCase() === 'connection' && /x-caller-hop/i.test(v)),
        );
        const head = rec.headers.map(([n, v]) => `${n}: ${v}`).join('\n');
        assert.deepEqual(crossed, [], `connection-specific fields crossed to the upstream:\n${head}`);
        assert.deepEqual(values('host'), [capture.hostPort], "Host names the upstream, not the gateway");
        assert.deepEqual(values('authorization'), [`Bearer ${CAPTURE_KEY}`]);
        assert.deepEqual(values('x-request-id'), [id]);
        // Framed exactly once, and correctly.
        const cl = values('content-length');
        const te = values('transfer-encoding');
        assert.ok(cl.length + te.length === 1, `framing: content-length ${cl}, transfer-encoding ${te}`);
        if (cl.length) assert.equal(Number(cl[0]), Buffer.byteLength(rec.body));
        assert.equal(JSON.parse(rec.body).model, 'kimi-capture-up');
      });

      test("the upstream's connection fields do not reach the caller", async () => {
        const reply = await client.request({
          path: '/v1/chat/completions',
          headers: auth(),
          body: chatRequest({ model: 'kimi-capture' }),
        });
        const text = await reply.text();
        assert.equal(reply.status, 200, text);
        assert.equal(JSON.parse(text).choices[0].message.content, CAPTURE_REPLY_CONTENT, 'body relayed intact');
        assertResponseFraming(protocol, reply);
        assert.equal(reply.headers['x-upstream-hop'], undefined, 'a field the upstream named in Connection crossed');
        assert.equal(reply.headers['proxy-connection'], undefined);
        const keepAlive = reply.headers['keep-alive'];
        assert.ok(!/max=99|timeout=17/.test(keepAlive ?? ''), `the upstream's Keep-Alive crossed: ${keepAlive}`);
        for (const v of [reply.headers.connection ?? ''].flat()) {
          assert.ok(!/x-upstream-hop/i.test(v), `the upstream's Connection crossed: ${v}`);
        }
      });
    });
  });
}

describe('ALPN negotiation on the TLS listener', () => {
  // Handshake only, then close: which protocol does the server pick?
  async function alpnFor(offer) {
    const { port } = new URL(env.relay.tlsUrl);
    const socket = tls.connect({
      host: '127.0.0.1',
      port: Number(port),
      servername: 'localhost',
      ca: env.tls.caPem,
      ...(offer ? { ALPNProtocols: offer } : {}),
    });
    try {
      await new Promise((resolve, reject) => {
        socket.once('secureConnect', resolve);
        socket.once('error', reject);
      });
      assert.equal(socket.authorized, true, String(socket.authorizationError));
      return socket.alpnProtocol;
    } finally {
      socket.destroy();
    }
  }

  test('h2 is preferred when the client offers both, in either order', async () => {
    assert.equal(await alpnFor(['h2', 'http/1.1']), 'h2');
    assert.equal(await alpnFor(['http/1.1', 'h2']), 'h2');
  });

  test('http/1.1 alone gets http/1.1', async () => {
    assert.equal(await alpnFor(['http/1.1']), 'http/1.1');
  });

  test('a client that offers no ALPN is served HTTP/1.1', async () => {
    assert.equal(await alpnFor(undefined), false, 'no ALPN offered, none selected');
    const agent = new https.Agent({ ca: env.tls.caPem, keepAlive: false });
    try {
      const res = await new Promise((resolve, reject) => {
        https.get(`${env.relay.tlsUrl}/v1/models`, { agent, headers: auth() }, resolve).on('error', reject);
      });
      let text = '';
      for await (const piece of res) text += piece;
      assert.equal(res.statusCode, 200, text);
      assert.equal(res.httpVersion, '1.1');
      assert.equal(res.socket.alpnProtocol, false);
      assert.equal(JSON.parse(text).object, 'list');
    } finally {
      agent.destroy();
    }
  });
});
