// Soak run: mixed traffic for a long time against one gateway, with upstream
// faults and hostile callers, checking that every caller gets an answer,
// every stream ends with [DONE] or an error event, and that memory and file
// descriptors stay flat. bench/soak.sh runs it; docs/soak.md has a report.
//
//   SOAK_SECONDS=1800 node bench/soak.mjs      (default 1800: 30 minutes)
//
// Traffic (LANES normal callers, HOSTILE hostile ones, all concurrent):
//   normal   HTTP/1.1 or h2c (one keep-alive connection per lane, reopened
//            after a fault closes it), chat JSON, chat SSE, embeddings, and
//            MCP (initialize + tools/call on a recording MCP server); chat
//            requests carry a random upstream fault for kimi-relay-mock:
//            429, 503, reset, mid-stream reset, hang, slow first byte,
//            oversized body, oversized SSE event
//   hostile  slowloris (a request head trickled a byte every 500 ms),
//            header floods (8,000 fields, over max_header_bytes), an oversized header (64 KiB),
//            invalid UTF-8 in the body, JSON nested 100,000 deep, garbage
//            bytes, a body shorter than its Content-Length (then silence)
// Every answer is classified; a caller left without an answer for 30 s
// counts as "hung". RSS and open file descriptors of the gateway are sampled
// every 10 s.

import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';

import { openClient } from '../tests/lib/clients.mjs';
import { relayConfig, startMock, startRelay } from '../tests/lib/harness.mjs';
import { startRecordingMcp } from '../tests/lib/mcp_recorder.mjs';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 1800);
const LANES = Number(process.env.SOAK_LANES ?? 16);
const HOSTILE = Number(process.env.SOAK_HOSTILE ?? 4);
const HANG_MS = 30_000;
const KEY = 'kr-soak-key-0123456789abcdef0123456789';
const UPSTREAM_KEY = 'sk-soak-upstream-0123456789abcdef';

const counts = new Map();
const bad = [];
function count(what) {
  counts.set(what, (counts.get(what) ?? 0) + 1);
}
function badOutcome(what, detail) {
  count(what);
  if (bad.length < 50) bad.push(`${what}: ${detail}`);
}

const pick = (items) => {
  const total = items.reduce((s, [w]) => s + w, 0);
  let r = Math.random() * total;
  for (const [w, v] of items) {
    if ((r -= w) < 0) return v;
  }
  return items[items.length - 1][1];
};

const FAULTS = [
  [55, ''],
  [5, 'status=429;retry_after=1'],
  [5, 'status=503'],
  [5, 'reset'],
  [5, 'reset_after=3'],
  [3, 'hang'],
  [8, 'first_byte_delay_ms=300'],
  [4, 'body_bytes=3000000'],
  [4, 'event_bytes=200000'],
  [3, 'body_bytes_chunked=3000000'],
  [3, 'status=500'],
];

function withTimeout(promise, ms, onTimeout) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => {
        onTimeout?.();
        reject(new Error('hung'));
      }, ms);
    }),
  ]);
}

// ---------------------------------------------------------------------------
// Normal callers

async function chatOnce(client, { stream, fault, embeddings }) {
  const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  if (fault) headers['x-mock-fault'] = fault;
  const body = embeddings
    ? { model: 'kimi-k2', input: 'soak' }
    : {
        model: 'kimi-k2',
        messages: [{ role: 'user', content: 'soak test: say something short' }],
        max_tokens: 64,
        ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
      };
  let reply;
  await withTimeout(
    (async () => {
      reply = await client.request({ path: embeddings ? '/v1/embeddings' : '/v1/chat/completions', headers, body });
      const text = await reply.text();
      const kind = embeddings ? 'embeddings' : stream ? 'sse' : 'json';
      if (reply.status !== 200) {
        let parsed = null;
        try {
          parsed = JSON.parse(text);
        } catch {
          // fall through
        }
        if (parsed?.error?.message) count(`${kind} ${reply.status} ${parsed.error.code ?? parsed.error.type}`);
        else badOutcome(`${kind} ${reply.status} without an OpenAI error body`, text.slice(0, 200));
        return;
      }
      if (!stream) {
        try {
          JSON.parse(text);
          count(`${kind} 200`);
        } catch {
          badOutcome(`${kind} 200 with a body that is not JSON`, text.slice(0, 200));
        }
        return;
      }
      const events = text.split('\n\n').filter((e) => e.trim() !== '');
      const last = events[events.length - 1] ?? '';
      if (last.trim() === 'data: [DONE]') count('sse 200 [DONE]');
      else if (/"error"\s*:/.test(last)) count(`sse 200 ended by an error event`);
      else badOutcome('sse stream truncated without an error event', `fault ${fault}: ${last.slice(0, 200)}`);
    })(),
    HANG_MS,
    () => reply?.cancel?.(),
  );
}

async function mcpOnce(mcpBase) {
  const headers = {
    authorization: `Bearer ${KEY}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  const controller = new AbortController();
  await withTimeout(
    (async () => {
      const init = await fetch(`${mcpBase}/v1/mcp/rec`, {
        method: 'POST',
        headers,
        signal: controller.signal,
        body: JSON.stringify({
          jsonrpc: '2.0', id: 1, method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'soak', version: '1' } },
        }),
      });
      await init.text();
      if (init.status !== 200) return count(`mcp initialize ${init.status}`);
      const session = init.headers.get('mcp-session-id');
      const call = await fetch(`${mcpBase}/v1/mcp/rec`, {
        method: 'POST',
        headers: { ...headers, 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' },
        signal: controller.signal,
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'stream', arguments: {} } }),
      });
      const text = await call.text();
      if (call.status === 200 && text.includes('"result"')) count('mcp tools/call 200');
      else if (call.status === 200) badOutcome('mcp tools/call 200 without a result', text.slice(0, 200));
      else count(`mcp tools/call ${call.status}`);
      const del = await fetch(`${mcpBase}/v1/mcp/rec`, {
        method: 'DELETE',
        headers: { ...headers, 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' },
        signal: controller.signal,
      });
      await del.text();
    })(),
    HANG_MS,
    () => controller.abort(),
  );
}

async function normalLane(relay, deadline, lane) {
  const protocol = lane % 2 === 0 ? { name: 'HTTP/1.1', tls: false, h2: false } : { name: 'h2c', tls: false, h2: true };
  let client = await openClient(protocol, { relay });
  while (Date.now() < deadline) {
    const what = pick([[40, 'json'], [40, 'sse'], [8, 'embeddings'], [12, 'mcp']]);
    try {
      if (what === 'mcp') {
        await mcpOnce(relay.url);
      } else {
        const fault = what === 'embeddings' ? '' : pick(FAULTS);
        await chatOnce(client, { stream: what === 'sse', fault, embeddings: what === 'embeddings' });
      }
    } catch (err) {
      if (err.message === 'hung') badOutcome('hung', `${protocol.name} ${what}`);
      else count(`connection error (${protocol.name}): ${err.code ?? err.message}`.slice(0, 80));
      client.close?.();
      client = await openClient(protocol, { relay });
    }
  }
  client.close?.();
}

// ---------------------------------------------------------------------------
// Hostile callers: raw sockets

function rawExchange(port, send, { trickleMs, waitMs = HANG_MS } = {}) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    let timer;
    let trickle;
    const done = (outcome) => {
      clearTimeout(timer);
      clearInterval(trickle);
      socket.destroy();
      resolve({ outcome, received });
    };
    socket.on('data', (d) => {
      received += d.toString('latin1');
    });
    socket.on('close', () => done('closed'));
    socket.on('error', () => done('closed'));
    timer = setTimeout(() => done('still open'), waitMs);
    socket.on('connect', () => {
      if (trickleMs) {
        let i = 0;
        trickle = setInterval(() => {
          if (i < send.length) socket.write(send.slice(i, i + 1));
          i += 1;
        }, trickleMs);
      } else {
        socket.write(send);
      }
    });
  });
}

const status = (received) => Number(received.match(/^HTTP\/1\.1 (\d{3})/)?.[1] ?? 0);

async function hostileLane(port, deadline) {
  const head = (extra = '', body = '') =>
    `POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer ${KEY}\r\n` +
    `Content-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body, 'latin1')}\r\n\r\n${body}`;
  while (Date.now() < deadline) {
    const kind = pick([[2, 'slowloris'], [3, 'header flood'], [3, 'oversized header'], [3, 'invalid utf-8'],
      [3, 'deep json'], [2, 'garbage'], [2, 'short body']]);
    let r;
    switch (kind) {
      case 'slowloris':
        r = await rawExchange(port, 'POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nX-Slow: ' + 'a'.repeat(200), {
          trickleMs: 500,
        });
        if (r.outcome === 'closed') count(`hostile slowloris: closed (${status(r.received) || 'no answer'})`);
        else badOutcome('hostile slowloris left open', '');
        break;
      case 'header flood': {
        let extra = '';
        for (let i = 0; i < 8000; i += 1) extra += `X-F${i}: v\r\n`;
        r = await rawExchange(port, head(extra, '{}'));
        count(`hostile header flood: ${status(r.received) || r.outcome}`);
        break;
      }
      case 'oversized header':
        r = await rawExchange(port, head(`X-Big: ${'b'.repeat(65536)}\r\n`, '{}'));
        count(`hostile oversized header: ${status(r.received) || r.outcome}`);
        break;
      case 'invalid utf-8': {
        const body = '{"model":"kimi-k2","messages":[{"role":"user","content":"\xff\xfe\xc0\x80"}]}';
        r = await rawExchange(port, head('Connection: close\r\n', body));
        count(`hostile invalid utf-8: ${status(r.received) || r.outcome}`);
        break;
      }
      case 'deep json': {
        const body = '{"model":"kimi-k2","messages":' + '['.repeat(100000) + ']'.repeat(100000) + '}';
        r = await rawExchange(port, head('Connection: close\r\n', body));
        count(`hostile deep json: ${status(r.received) || r.outcome}`);
        break;
      }
      case 'garbage':
        r = await rawExchange(port, '\x16\x03\x01\x02\x00garbage\r\n\r\n');
        count(`hostile garbage: ${status(r.received) || r.outcome}`);
        break;
      case 'short body':
        r = await rawExchange(port, head('', '').replace('Content-Length: 0', 'Content-Length: 1000') + '{"model"');
        if (r.outcome === 'closed') count(`hostile short body: ${status(r.received) || 'closed'}`);
        else badOutcome('hostile short body left open', '');
        break;
      default:
        break;
    }
    if (r && r.outcome === 'still open') badOutcome(`hostile ${kind}: no answer in ${HANG_MS / 1000} s`, '');
  }
}

// ---------------------------------------------------------------------------

function sample(pid) {
  const statusText = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(statusText.match(/VmRSS:\s+(\d+)/)[1]);
  const fds = readdirSync(`/proc/${pid}/fd`).length;
  return { t: Date.now(), rssKiB: rss, fds };
}

async function main() {
  const mock = await startMock({ name: 'soak', apiKey: UPSTREAM_KEY, chunks: 8, chunkDelayMs: 20, args: ['--no-record'] });
  const rec = await startRecordingMcp({ name: 'rec' });
  const relay = await startRelay(
    relayConfig({
      keys: [{ name: 'soak', key: KEY, limits: { concurrency: 64 } }],
      upstreams: [
        {
          name: 'soak',
          url: mock.url,
          apiKey: UPSTREAM_KEY,
          models: { 'kimi-k2': 'kimi-k2' },
          max_response_bytes: 1048576,
          max_event_bytes: 65536,
        },
      ],
      mcp: { servers: [{ name: 'rec', url: rec.url }], session_idle_ms: 60000 },
      retry: { max_attempts: 2, backoff: { base_ms: 20, max_ms: 200 } },
      timeouts: { connect_ms: 1000, first_byte_ms: 3000, idle_ms: 3000, total_ms: 20000 },
      server: { header_timeout_ms: 3000, body_timeout_ms: 3000, idle_timeout_ms: 10000, drain_timeout_ms: 5000 },
    }),
  );
  const pid = relay.process.pid;
  const port = Number(new URL(relay.url).port);
  console.log(`soak: ${SECONDS} s, ${LANES} normal lanes, ${HOSTILE} hostile lanes, relay pid ${pid}`);

  const samples = [sample(pid)];
  const sampler = setInterval(() => samples.push(sample(pid)), 10_000);
  const started = Date.now();
  const deadline = started + SECONDS * 1000;
  const progress = setInterval(() => {
    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    const s = samples[samples.length - 1];
    console.log(`  ${Math.round((Date.now() - started) / 1000)} s: ${total} outcomes, RSS ${s.rssKiB} KiB, ${s.fds} fds`);
  }, 60_000);
  await Promise.all([
    ...Array.from({ length: LANES }, (_, i) => normalLane(relay, deadline, i)),
    ...Array.from({ length: HOSTILE }, () => hostileLane(port, deadline)),
  ]);
  clearInterval(progress);
  // Idle: connections the run opened are gone once their timeouts pass.
  await new Promise((r) => setTimeout(r, 12_000));
  clearInterval(sampler);
  samples.push(sample(pid));
  const alive = await relay.checkAlive();

  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  const warm = samples[Math.min(6, samples.length - 1)];  // after the first minute
  const maxRss = Math.max(...samples.map((s) => s.rssKiB));
  const maxFds = Math.max(...samples.map((s) => s.fds));
  const end = samples[samples.length - 1];
  console.log(`\n## Soak: ${SECONDS} s, ${LANES} + ${HOSTILE} lanes, ${total} outcomes\n`);
  console.log('| outcome | count |\n|---|---|');
  for (const [k, v] of [...counts.entries()].sort((a, b) => b[1] - a[1])) console.log(`| ${k} | ${v} |`);
  console.log(`\n| gateway | start | after 1 min | max | end (idle) |\n|---|---|---|---|---|`);
  console.log(`| RSS KiB | ${samples[0].rssKiB} | ${warm.rssKiB} | ${maxRss} | ${end.rssKiB} |`);
  console.log(`| open fds | ${samples[0].fds} | ${warm.fds} | ${maxFds} | ${end.fds} |`);
  console.log(`\nalive at the end: ${alive === null ? 'yes' : JSON.stringify(alive)}`);
  console.log(`bad outcomes (hung, truncated, malformed): ${bad.length === 0 ? 'none' : ''}`);
  for (const b of bad) console.log(`  - ${b}`);

  await relay.stop();
  await mock.stop();
  await rec.close();
  process.exit(bad.length === 0 && alive === null ? 0 : 1);
}

main().catch((err) => {
  console.error(err);
  process.exit(2);
});
