// server.send_buffer_bytes: the send buffer of the callers' sockets. By
// default the kernel grows it with the connection, up to net.ipv4.tcp_wmem's
// last figure (4 MiB here): a caller that reads nothing can make the kernel
// hold that much of its answer. Set, every accepted socket has that buffer
// (the kernel doubles the figure for its bookkeeping) and keeps it however
// much is queued; what does not fit waits in the gateway (one upstream read
// per stream), which stops reading its upstream until the caller catches up.
//
// The socket's buffer is read with ss (iproute2): skmem's tb is the kernel's
// sk_sndbuf for that socket.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';

import { relayConfig, startMock, startRelay, waitFor } from '../lib/harness.mjs';

const KEY = 'kr-test-sndbuf-5b7d9f1a3c5e7a9b1d3f5a7c9e1b3d5f';
const SEND_BUFFER = 16384;

// The gateway-side socket of the connection from local port `callerPort`:
// its send queue and send buffer (tb); null when there is none.
function gatewaySide(relayPort, callerPort) {
  const out = execFileSync(
    'ss',
    // No state filter: a gateway done with its answer has closed its side
    // (FIN-WAIT), which `state established` would leave out.
    ['-tmnH', `( sport = :${relayPort} and dport = :${callerPort} )`],
    { encoding: 'utf8' },
  );
  const queue = /^[A-Z0-9-]+\s+\d+\s+(\d+)\s/m.exec(out); // State Recv-Q Send-Q ...
  const tb = /\btb(\d+)\b/.exec(out);
  if (!queue || !tb) return null;
  return { sendQueue: Number(queue[1]), sendBuffer: Number(tb[1]) };
}

// The kernel's cap on a socket's send buffer as a process may set it.
const WMEM_MAX = Number(readFileSync('/proc/sys/net/core/wmem_max', 'utf8'));

// The send buffer of the gateway's side of one new connection to `url`.
async function acceptedBuffer(url) {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  try {
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    let seen = null;
    await waitFor(() => (seen = gatewaySide(Number(port), socket.localPort)) !== null, {
      what: 'the connection in ss',
    });
    return seen.sendBuffer;
  } finally {
    socket.destroy();
  }
}

// A raw HTTP/1.1 caller that does not read until told to.
async function pausedStream(relay, chunks) {
  const { hostname, port } = new URL(relay.url);
  const socket = net.connect(Number(port), hostname);
  const received = [];
  socket.on('data', (d) => received.push(d));
  const closed = new Promise((resolve) => socket.on('close', resolve));
  socket.pause();
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const body = JSON.stringify({ model: 'kimi-k2', stream: true, messages: [{ role: 'user', content: 'long' }] });
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${KEY}\r\n` +
      `content-type: application/json\r\nconnection: close\r\nx-mock-chunks: ${chunks}\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  return { socket, callerPort: socket.localPort, relayPort: Number(port), received, closed };
}

describe('server.send_buffer_bytes', () => {
  let mock;
  const relays = [];
  before(async () => {
    mock = await startMock({ name: 'sndbuf', chunkDelayMs: 0 });
  });
  after(async () => Promise.all([...relays.map((r) => r.stop()), mock?.stop()]));

  const gateway = async (server) => {
    const relay = await startRelay(
      relayConfig({
        server: { workers: 1, ...server },
        keys: [{ name: 'sndbuf', key: KEY }],
        upstreams: [{ name: 'mock', url: mock.url, apiKey: mock.apiKey, models: { 'kimi-k2': 'kimi-k2' } }],
      }),
    );
    relays.push(relay);
    return relay;
  };

  test('a caller that reads nothing: its socket holds the set buffer, the rest waits; then the stream arrives whole', async () => {
    const relay = await gateway({ send_buffer_bytes: SEND_BUFFER });
    const CHUNKS = 5000; // about 1 MB of events, far more than the buffers hold
    const s = await pausedStream(relay, CHUNKS);
    try {
      // The gateway fills the socket; the kernel keeps the buffer as set.
      let seen = null;
      await waitFor(() => (seen = gatewaySide(s.relayPort, s.callerPort)) && seen.sendQueue > 0, {
        what: 'the gateway to queue bytes for the caller',
        timeoutMs: 5000,
      });
      seen = gatewaySide(s.relayPort, s.callerPort);
      assert.equal(seen.sendBuffer, 2 * SEND_BUFFER, 'the kernel doubles SO_SNDBUF; it does not grow');
      // The kernel checks the buffer before it starts a packet, not before it
      // appends to the last unsent one: the queue may pass the buffer by
      // part of one write (a stream's write is at most one 16 KiB read).
      assert.ok(seen.sendQueue < 2 * SEND_BUFFER + 64 * 1024, `send queue ${seen.sendQueue}`);
      s.socket.resume();
      let timer;
      await Promise.race([
        s.closed,
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('the stream did not end')), 30_000))),
      ]).finally(() => clearTimeout(timer));
    } finally {
      s.socket.destroy();
    }
    const text = Buffer.concat(s.received).toString('latin1');
    assert.match(text, /^HTTP\/1\.1 200 /);
    const contents = text.match(/"content":"[^"]*"/g) ?? [];
    assert.ok(contents.length >= CHUNKS, `${contents.length} content deltas of ${CHUNKS}`);
    assert.ok(text.includes('data: [DONE]'), 'the stream ended with [DONE]');
    assert.ok(text.endsWith('0\r\n\r\n'), 'the chunked body ended');
  });

  test('the admin listener keeps the kernel\'s buffer: a large scrape is not held to the callers\' one', async () => {
    const relay = relays[0] ?? (await gateway({ send_buffer_bytes: SEND_BUFFER }));
    const admin = await acceptedBuffer(relay.adminUrl);
    assert.notEqual(admin, 2 * SEND_BUFFER, `tb ${admin}`);
    // ... while the main listener's sockets of that gateway have it.
    assert.equal(await acceptedBuffer(relay.url), 2 * SEND_BUFFER);
  });

  test('by default the kernel grows the buffer of a caller that reads nothing far past it', async () => {
    // What the setting bounds: without it, the same caller's socket grows.
    const relay = await gateway({});
    const s = await pausedStream(relay, 5000);
    try {
      let seen = null;
      await waitFor(() => (seen = gatewaySide(s.relayPort, s.callerPort)) && seen.sendQueue > 256 * 1024, {
        what: 'the send queue to pass 256 KiB',
        timeoutMs: 5000,
      });
      assert.ok(seen.sendBuffer > 256 * 1024, `tb ${seen.sendBuffer}`);
    } finally {
      s.socket.destroy();
    }
  });

  test(
    'a value one byte over net.core.wmem_max is logged at startup with the buffer the kernel gives instead; at it, nothing',
    // The setting's own ceiling is 64 MiB: a host whose cap is at or past it
    // cannot be asked for more.
    { skip: WMEM_MAX + 1 > 64 * 1024 * 1024 && `net.core.wmem_max is ${WMEM_MAX}, past the setting's range` },
    async () => {
      const over = await gateway({ send_buffer_bytes: WMEM_MAX + 1 });
      const line = over
        .logs()
        .split('\n')
        .find((l) => l.includes('net.core.wmem_max'));
      assert.ok(line, 'a line names net.core.wmem_max');
      assert.match(line, /\bwarn/);
      assert.ok(
        line.includes(
          `server.send_buffer_bytes ${WMEM_MAX + 1} is over net.core.wmem_max (${WMEM_MAX}): ` +
            `the kernel gives each caller's socket ${2 * WMEM_MAX} bytes (twice the cap) instead`,
        ),
        line,
      );
      // ... and that is what the socket has.
      assert.equal(await acceptedBuffer(over.url), 2 * WMEM_MAX);

      const at = await gateway({ send_buffer_bytes: WMEM_MAX });
      assert.doesNotMatch(at.logs(), /wmem_max/);
      assert.equal(await acceptedBuffer(at.url), 2 * WMEM_MAX);
    },
  );

  test('a value under 4096 (but 0) is refused at startup, naming the key', async () => {
    await assert.rejects(
      gateway({ send_buffer_bytes: 4095 }),
      /server\.send_buffer_bytes: must be 0 \(the kernel's own, growing with the connection\) or between 4096 and 67108864, got '4095'/,
    );
  });
});
