// The gateway's memory tick (server.memory_release_ms, src/app/memory_release.hpp)
// as wired into the workers: each worker that goes idle after load returns
// what the load left in its heap to the system, once per idle period; each
// such sweep is counted on /metrics and logged with its worker's index; and
// /metrics reports the process's resident set. The sweep itself (pages,
// batches, RSS falling) is tested in tests/unit/app/memory_release_test.cpp.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import { test } from 'node:test';

import { KEYS, useTopology } from '../lib/fixtures.mjs';
import { chatRequest, waitFor } from '../lib/harness.mjs';
import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';

// A tick short enough for a test, long enough that the gateway's own idle
// work (its timers) stays under the idle threshold, 0.2 % of the tick (800
// us, not a whole number of milliseconds), in a sanitizer build too.
const TICK_MS = 400;
const env = useTopology({
  server: { workers: 2, memory_release_ms: TICK_MS },
  extra: { log: { level: 'debug' } },
});

const SWEEP_LINE = /worker (\d+) idle: heap swept, RSS \d+ -> \d+ KiB/g;

// Worker index -> how many sweep lines the gateway logged after `offset`.
function sweepsLogged(offset) {
  const counts = new Map();
  for (const m of env.relay.logs().slice(offset).matchAll(SWEEP_LINE)) {
    counts.set(Number(m[1]), (counts.get(Number(m[1])) ?? 0) + 1);
  }
  return counts;
}

// A streamed chat request on a connection of its own that closes with the
// answer (no agent: "Connection: close"), so that no client connection is
// left to close later, while the test expects the workers to stay idle.
// Resolves to [status, body].
function streamOnItsOwnConnection() {
  const body = JSON.stringify(chatRequest({ stream: true }));
  const { hostname, port } = new URL(env.relay.url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        hostname,
        port,
        path: '/v1/chat/completions',
        method: 'POST',
        agent: false,
        headers: {
          authorization: `Bearer ${KEYS.full}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => resolve([res.statusCode, text]));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function vmRssBytes(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(status.match(/^VmRSS:\s+(\d+) kB$/m)[1]) * 1024;
}

// Each worker's first tick counts as the end of start-up's work: it sweeps.
async function startUpSwept() {
  await waitFor(() => sweepsLogged(0).size === 2, {
    timeoutMs: 10 * TICK_MS,
    intervalMs: 50,
    what: 'a sweep on each worker after start-up',
  });
}

test('/metrics reports the resident set the kernel reports for the process', async () => {
  await startUpSwept();  // which moves RSS
  const pid = env.relay.process.pid;
  const before = vmRssBytes(pid);
  const reported = metricSum(await scrapeMetrics(env.relay), 'kimi_relay_resident_memory_bytes');
  const after = vmRssBytes(pid);
  assert.ok(reported > 4 * 1024 * 1024, `a resident set of ${reported} bytes`);
  // The kernel's figure read just before and just after the scrape: the
  // gauge lies between them, within a MiB.
  const low = Math.min(before, after) - 1024 * 1024;
  const high = Math.max(before, after) + 1024 * 1024;
  assert.ok(reported > low && reported < high, `/metrics ${reported}, /proc ${before} then ${after}`);
});

test('each worker idle after load returns its memory once, counted on /metrics', async () => {
  await startUpSwept();
  const countedBefore = metricSum(await scrapeMetrics(env.relay), 'kimi_relay_memory_sweeps_total');
  assert.ok(countedBefore >= 2, `${countedBefore} sweeps counted after start-up`);

  // Load on both workers: streamed requests at once, over as many connections
  // (each worker takes the connections its listening socket is handed).
  const offset = env.relay.logs().length;
  const answers = await Promise.all(Array.from({ length: 200 }, streamOnItsOwnConnection));
  for (const [status, text] of answers) {
    assert.equal(status, 200);
    assert.ok(text.trimEnd().endsWith('data: [DONE]'), 'the stream ended with [DONE]');
  }

  // Then nothing. A worker's last busy tick ends within a tick of the load's
  // end and it sweeps on the next one: each worker has swept within three
  // ticks. (One that paused mid-load for a whole tick may have swept then
  // too: that was an idle period of its own.)
  await waitFor(() => sweepsLogged(offset).size === 2, {
    timeoutMs: 10 * TICK_MS,
    intervalMs: 50,
    what: 'a sweep on each worker after the load',
  });
  // A worker that swept mid-load can satisfy that wait before its sweep
  // after the load, which on a loaded machine (a sanitizer build beside
  // other tests) may come more than three ticks after the last answer: the
  // quiet period starts once three ticks have passed without a sweep. A
  // worker that sweeps on every idle tick never gets there, and fails below.
  for (let window = 0; window < 10; window++) {
    const mark = env.relay.logs().length;
    await delay(3 * TICK_MS);
    if (sweepsLogged(mark).size === 0) break;
  }
  // An idle worker does not sweep again: six ticks more, with no request.
  const quiet = env.relay.logs().length;
  await delay(6 * TICK_MS);
  assert.deepEqual([...sweepsLogged(quiet).entries()], [], 'one sweep per worker per idle period');
  const swept = [...sweepsLogged(offset).values()].reduce((a, b) => a + b, 0);
  assert.ok(swept >= 2 && swept <= 4, `${swept} sweeps logged after the load`);
  const counted = metricSum(await scrapeMetrics(env.relay), 'kimi_relay_memory_sweeps_total');
  assert.equal(counted, countedBefore + swept, 'each sweep is counted');
});
