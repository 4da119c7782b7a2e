// The idle upstream connections a worker keeps for the next requests
// (upstreams[].max_idle_connections). A connection handed back beyond them
// is closed; those kept are reused. Reconnecting costs a TLS handshake to a
// real provider — tens of milliseconds before the first token — so a swarm
// whose concurrency drops and rises again should find its connections open.
//
// The upstream here counts the TCP connections it accepts and the ones the
// gateway closes, and holds each answer until the whole round has arrived,
// so that a round of requests sent together needs a connection each.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { after, describe, test } from 'node:test';

import { relayConfig, startRelay, toYaml, waitFor } from '../lib/harness.mjs';

const KEY = 'kr-test-pool-2f4e6a8c0b1d3f5a7c9e1b3d5f7a9c0e';
// A round this large is never reached: the test answers with releaseOne(),
// and no timer answers for it.
const MANUAL = 1000;

async function countingUpstream() {
  const counts = { opened: 0, closed: 0 };
  // The answers held until `round` requests are in (or 5 s, for the test to
  // fail on its counts rather than hang).
  let held = [];
  let round = 1;
  let generation = 0; // a late timer must not release a later round's answers
  const release = () => {
    const now = held;
    held = [];
    generation += 1;
    for (const answer of now) answer();
  };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      held.push(() => {
        const body = JSON.stringify({
          id: 'chatcmpl-pool',
          object: 'chat.completion',
          created: 1_700_000_000,
          model: 'pool-up',
          choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      });
      if (held.length >= round) {
        release();
      } else if (round < MANUAL) {
        const mine = generation;
        setTimeout(() => mine === generation && release(), 5000).unref();
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (socket) => {
    counts.opened += 1;
    socket.on('close', () => (counts.closed += 1));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    counts,
    expectRound: (n) => (round = n),
    heldCount: () => held.length,
    // Answers the oldest request held.
    releaseOne: () => held.shift()?.(),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}

// `n` requests at once; resolves when all have their answer.
async function round({ relay, upstream }, n) {
  upstream.expectRound(n);
  const answers = await Promise.all(
    Array.from({ length: n }, () =>
      fetch(`${relay.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'pool', messages: [{ role: 'user', content: 'hi' }] }),
      }).then(async (r) => [r.status, await r.text()]),
    ),
  );
  for (const [status, text] of answers) assert.equal(status, 200, text);
}

// One request, not awaited: resolves to [status, body text].
function ask({ relay }) {
  return fetch(`${relay.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'pool', messages: [{ role: 'user', content: 'hi' }] }),
  }).then(async (r) => [r.status, await r.text()]);
}

// Reloads with a second upstream beside the counted one (other endpoints:
// the worker makes a new pool) and waits for the reload. Both have the
// default caps; `server` is the server section's extra keys.
async function reloadWithANewPool(g, server) {
  const reloaded = configFor(g.upstream, undefined, { server });
  reloaded.upstreams.push({ ...reloaded.upstreams[0], name: 'spare', models: { spare: 'spare-up' } });
  const reloads = () => g.relay.logs().split('\n').filter((l) => /reloaded /.test(l)).length;
  const before = reloads();
  writeFileSync(g.relay.configPath, toYaml(reloaded));
  g.relay.process.kill('SIGHUP');
  await waitFor(() => reloads() > before, { what: 'the reload to be logged', timeoutMs: 5000 });
}

// One worker (one pool) in front of `upstream`, with that cap (and `extra`
// upstream keys; `server` merged into the server section).
function configFor(upstream, maxIdle, { extra = {}, server = {} } = {}) {
  return relayConfig({
    server: { workers: 1, ...server },
    keys: [{ name: 'pool', key: KEY }],
    upstreams: [
      {
        name: 'counted',
        url: upstream.url,
        apiKey: 'sk-pool-upstream-secret',
        models: { pool: 'pool-up' },
        ...(maxIdle === undefined ? {} : { max_idle_connections: maxIdle }),
        ...extra,
      },
    ],
  });
}

// A gateway in front of a fresh counting upstream.
async function gateway(maxIdle, options) {
  const upstream = await countingUpstream();
  const relay = await startRelay(configFor(upstream, maxIdle, options));
  return { upstream, relay, stop: async () => Promise.all([relay.stop(), upstream.close()]) };
}

// Connections the gateway closed settle within a moment of the last answer;
// none closing is checked after the same moment.
const SETTLE_MS = 300;
const settle = () => new Promise((resolve) => setTimeout(resolve, SETTLE_MS));

describe('idle upstream connections (upstreams[].max_idle_connections, max_idle_ms)', () => {
  const gateways = [];
  after(async () => Promise.all(gateways.map((g) => g.stop())));

  test('one connection more than the cap is closed when handed back; the kept ones carry the next round', async () => {
    const g = await gateway(2);
    gateways.push(g);
    await round(g, 3);
    assert.equal(g.upstream.counts.opened, 3, 'three requests at once: three connections');
    await waitFor(() => g.upstream.counts.closed === 1, { what: 'the third connection closed' });
    await settle();
    assert.equal(g.upstream.counts.closed, 1, 'only the one past the cap is closed');
    await round(g, 3);
    assert.equal(g.upstream.counts.opened, 4, 'the next round reuses the two kept and opens one');
  });

  test('at the cap nothing is closed', async () => {
    const g = await gateway(3);
    gateways.push(g);
    await round(g, 3);
    await settle();
    assert.equal(g.upstream.counts.closed, 0);
    await round(g, 3);
    assert.equal(g.upstream.counts.opened, 3, 'the second round opened no connection');
  });

  test('by default a swarm of 100 concurrent requests keeps its connections', async () => {
    // The pool kept 64 before the cap could be set: 36 reconnects per round.
    const g = await gateway(undefined);
    gateways.push(g);
    await round(g, 100);
    assert.equal(g.upstream.counts.opened, 100);
    await settle();
    assert.equal(g.upstream.counts.closed, 0, 'connections closed after the round');
    await round(g, 100);
    assert.equal(g.upstream.counts.opened, 100, 'the second round opened connections');
  });

  test('a reload that lowers the cap closes the idle connections past it and keeps the rest', async () => {
    const g = await gateway(3);
    gateways.push(g);
    await round(g, 3);
    await settle();
    assert.equal(g.upstream.counts.closed, 0);
    const reloads = () => g.relay.logs().split('\n').filter((l) => /reloaded /.test(l)).length;
    const before = reloads();
    writeFileSync(g.relay.configPath, toYaml(configFor(g.upstream, 1)));
    g.relay.process.kill('SIGHUP');
    await waitFor(() => reloads() > before, { what: 'the reload to be logged', timeoutMs: 5000 });
    await waitFor(() => g.upstream.counts.closed === 2, { what: 'the two idle past the new cap closed' });
    await settle();
    // A pool built anew would have closed all three.
    assert.equal(g.upstream.counts.closed, 2, 'the one under the new cap is kept');
    await round(g, 1);
    assert.equal(g.upstream.counts.opened, 3, 'the kept connection carried the next request');
  });

  test('0 keeps none: every request connects', async () => {
    const g = await gateway(0);
    gateways.push(g);
    await round(g, 2);
    await round(g, 2);
    assert.equal(g.upstream.counts.opened, 4);
    await waitFor(() => g.upstream.counts.closed === 4, { what: 'every connection closed' });
  });

  test('connections idle for max_idle_ms are closed by the worker\'s tick, with no request', async () => {
    // An upstream that no request goes to any more: without the tick its
    // idle connections would stay open (in CLOSE_WAIT once a provider's own
    // keep-alive timeout closed its side) until traffic came back.
    const g = await gateway(undefined, { extra: { max_idle_ms: 1000 }, server: { memory_release_ms: 100 } });
    gateways.push(g);
    const sent = performance.now();
    await round(g, 3);
    await settle();
    assert.equal(g.upstream.counts.closed, 0, 'none closed before max_idle_ms');
    await waitFor(() => g.upstream.counts.closed === 3, { what: 'the three idle connections closed', timeoutMs: 5000 });
    // Handed back after the requests were sent; the pool's clock may run a
    // few milliseconds behind, never ahead.
    const elapsed = performance.now() - sent;
    assert.ok(elapsed >= 900, `closed ${elapsed} ms after the requests`);
  });

  test('a request after max_idle_ms does not take a connection idle that long, tick or not', async () => {
    // The tick is an hour away: the request itself must not reuse them.
    const g = await gateway(undefined, { extra: { max_idle_ms: 200 }, server: { memory_release_ms: 3_600_000 } });
    gateways.push(g);
    await round(g, 2);
    await new Promise((resolve) => setTimeout(resolve, 500)); // past max_idle_ms: a real process, no clock to move
    assert.equal(g.upstream.counts.closed, 0, 'nothing closes them before a request');
    await round(g, 1);
    assert.equal(g.upstream.counts.opened, 3, 'the request connected anew');
    await waitFor(() => g.upstream.counts.closed === 2, { what: 'the two stale connections closed' });
  });

  test('a reload that changes max_idle_ms applies it to the connections kept', async () => {
    const g = await gateway(undefined, { extra: { max_idle_ms: 3_600_000 }, server: { memory_release_ms: 100 } });
    gateways.push(g);
    await round(g, 2);
    await settle();
    assert.equal(g.upstream.counts.closed, 0);
    const reloads = () => g.relay.logs().split('\n').filter((l) => /reloaded /.test(l)).length;
    const before = reloads();
    writeFileSync(
      g.relay.configPath,
      toYaml(configFor(g.upstream, undefined, { extra: { max_idle_ms: 200 }, server: { memory_release_ms: 100 } })),
    );
    g.relay.process.kill('SIGHUP');
    await waitFor(() => reloads() > before, { what: 'the reload to be logged', timeoutMs: 5000 });
    // Kept an hour before it: only the reloaded time closes them.
    await waitFor(() => g.upstream.counts.closed === 2, { what: 'the two idle connections closed after the reload', timeoutMs: 5000 });
  });

  test('a reload that replaces the pool closes what its open requests hand back, not only what was idle', async () => {
    // The tick an hour away: only the replaced pool can close a connection here.
    const server = { memory_release_ms: 3_600_000 };
    const g = await gateway(undefined, { server });
    gateways.push(g);
    g.upstream.expectRound(MANUAL); // answered one by one below
    let settled = 0;
    const both = [ask(g), ask(g)].map((p) => p.then((answer) => ((settled += 1), answer)));
    await waitFor(() => g.upstream.heldCount() === 2, { what: 'both requests at the upstream' });
    assert.equal(g.upstream.counts.opened, 2);

    await reloadWithANewPool(g, server);

    g.upstream.releaseOne();
    await waitFor(() => settled === 1, { what: 'one answer' });
    // The other request still holds the old pool: without its retirement the
    // connection just handed back would stay idle in it until that ended.
    await waitFor(() => g.upstream.counts.closed === 1, {
      what: 'the connection handed back to the replaced pool closed while a request is still on it',
    });
    assert.equal(settled, 1, 'the second request is still open');
    g.upstream.releaseOne();
    for (const [status, text] of await Promise.all(both)) assert.equal(status, 200, text);
    await waitFor(() => g.upstream.counts.closed === 2, { what: 'the second connection closed' });

    // The new pool keeps its connections as before.
    await round(g, 1);
    await settle();
    assert.equal(g.upstream.counts.opened, 3);
    assert.equal(g.upstream.counts.closed, 2, 'the new pool closed its connection');
  });

  test('a reload that replaces the pool closes its idle connections at once, with a request still on it', async () => {
    const server = { memory_release_ms: 3_600_000 };
    const g = await gateway(undefined, { server });
    gateways.push(g);
    await round(g, 2); // two idle connections
    await settle();
    assert.equal(g.upstream.counts.closed, 0);
    g.upstream.expectRound(MANUAL); // the next request is held
    const held = ask(g);
    await waitFor(() => g.upstream.heldCount() === 1, { what: 'the request at the upstream' });
    assert.equal(g.upstream.counts.opened, 2, 'it took one of the idle connections');

    await reloadWithANewPool(g, server);
    // The request still holds the old pool: without the retirement its idle
    // connection would stay open in it until the request ended.
    await waitFor(() => g.upstream.counts.closed === 1, { what: 'the idle connection of the replaced pool closed' });
    assert.equal(g.upstream.heldCount(), 1, 'the request is still open');
    g.upstream.releaseOne();
    const [status, text] = await held;
    assert.equal(status, 200, text);
    await waitFor(() => g.upstream.counts.closed === 2, { what: 'the request\'s connection closed as it ended' });
  });

  test('max_idle_ms below 100 is refused at startup, naming the key', async () => {
    const upstream = await countingUpstream();
    try {
      await assert.rejects(startRelay(configFor(upstream, undefined, { extra: { max_idle_ms: 99 } })),
        /upstreams\[0\]\.max_idle_ms: must be an integer between 100 and 3600000, got '99'/,
      );
    } finally {
      await upstream.close();
    }
  });
});
