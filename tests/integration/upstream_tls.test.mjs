// HTTPS upstreams: the gateway verifies the upstream's certificate chain and
// its name (SNI + hostname check), trusting the system store or an upstream's
// `ca_file`, and never falls back to an unverified connection.

import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, describe, test } from 'node:test';

import {
  chatRequest,
  collectSse,
  postChat,
  readOpenAiError,
  relayConfig,
  startMock,
  startRelay,
  streamedContent,
} from '../lib/harness.mjs';
import { createTestCa } from '../lib/tls.mjs';

const KEY = 'kr-test-upstream-tls-3b9d1f7a5c3e9b1d7f5a3c9e1b7d5f3a';
const UPSTREAM_KEY = 'sk-upstream-tls-secret-6a4c2e0b8d6f4a2c0e8b';

// The mock's introspection endpoints are behind its TLS listener too.
function mockCall(env, method, path) {
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port: env.mock.port, path, method, ca: env.ca.caPem, servername: 'localhost' },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve(text ? JSON.parse(text) : null));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('HTTPS upstreams', () => {
  const env = {};
  const recorded = () => mockCall(env, 'GET', '/_mock/requests');
  before(async () => {
    env.ca = createTestCa({ commonName: 'localhost', altNames: ['DNS:localhost'] });
    env.mock = await startMock({
      name: 'secure',
      apiKey: UPSTREAM_KEY,
      args: ['--tls-cert', env.ca.cert, '--tls-key', env.ca.key],
    });
    const port = env.mock.port;
    const upstream = (name, host, extra = {}) => ({
      name,
      baseUrl: `https://${host}:${port}/v1`,
      apiKey: UPSTREAM_KEY,
      models: { [`m-${name}`]: 'kimi-k2' },
      allow_insecure_http: false,
      ...extra,
    });
    env.relay = await startRelay(
      relayConfig({
        keys: [{ name: 'tls', key: KEY }],
        upstreams: [
          // Trusted through ca_file, reached by the name on its certificate.
          upstream('trusted', 'localhost', { ca_file: env.ca.caCert }),
          // The same server, but only the system store: its CA is unknown.
          upstream('unknown-ca', 'localhost', { health: { eject_after_failures: 0 } }),
          // Trusted CA, but reached by an address the certificate does not name.
          upstream('wrong-name', '127.0.0.1', { ca_file: env.ca.caCert, health: { eject_after_failures: 0 } }),
        ],
        retry: { max_attempts: 1 },
      }),
    );
  });
  after(async () => {
    await Promise.all([env.relay, env.mock].filter(Boolean).map((p) => p.stop()));
    env.ca?.cleanup?.();
  });

  test('a verified upstream answers, JSON and streamed, with its own key injected', async () => {
    const res = await postChat(env.relay, chatRequest({ model: 'm-trusted' }), { key: KEY });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    assert.equal(JSON.parse(text).object, 'chat.completion');

    const stream = await postChat(env.relay, chatRequest({ model: 'm-trusted', stream: true }), { key: KEY });
    const body = await stream.text();
    assert.equal(stream.status, 200);
    assert.match(body, /data: \[DONE\]/);

    const seen = await recorded();
    const auth = seen.at(-1).headers.find(([n]) => n.toLowerCase() === 'authorization');
    assert.equal(auth[1], `Bearer ${UPSTREAM_KEY}`);
  });

  test('a stream whose events arrive one TLS record at a time is relayed whole, usage counted', async () => {
    // 30 events 3 ms apart: each is its own read through the TLS stream.
    const res = await postChat(
      env.relay,
      chatRequest({ model: 'm-trusted', stream: true, stream_options: { include_usage: true } }),
      { key: KEY, headers: { 'x-mock-chunks': '30', 'x-mock-chunk-delay-ms': '3' } },
    );
    assert.equal(res.status, 200);
    const events = await collectSse(res);
    assert.ok(events.at(-1).done, 'the stream ends with [DONE]');
    const tokens = events.filter((e) => e.json?.choices?.[0]?.delta?.content);
    assert.equal(tokens.length, 30, 'every event arrived');
    assert.ok(streamedContent(events).length > 0);
    assert.equal(events.at(-2).json.usage.completion_tokens, 30);
  });

  for (const [model, why] of [
    ['m-unknown-ca', 'a certificate from a CA the gateway does not trust'],
    ['m-wrong-name', 'a certificate that does not name the host the gateway dialled'],
  ]) {
    test(`${why} is refused: 502, and the upstream never sees the request`, async () => {
      await mockCall(env, 'DELETE', '/_mock/requests');
      const res = await postChat(env.relay, chatRequest({ model }), { key: KEY });
      assert.equal(res.status, 502);
      const err = await readOpenAiError(res, assert);
      assert.match(err.message, /TLS handshake failed/);
      assert.ok(!err.message.includes(UPSTREAM_KEY), 'no secret in the error');
      assert.equal((await recorded()).length, 0, 'nothing reached the upstream');
    });
  }
});
