// Operating the gateway: graceful drain on SIGTERM/SIGINT, hot reload on SIGHUP
// and POST /admin/reload, the `healthcheck` subcommand, `--check-config`, and
// start-up failures that name the file at fault (docs/operations.md).
//
// Each group starts its own gateway and mocks: a drain ends the process, and a
// reload rewrites the config file the gateway was started on.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { connect as tlsConnect } from 'node:tls';
import { after, before, describe, test } from 'node:test';

import { KEYS, startTopology } from '../lib/fixtures.mjs';
import {
  RELAY_BIN,
  chatRequest,
  closedPort,
  postChat,
  readOpenAiError,
  readSse,
  relayConfig,
  sha256Hex,
  streamedContent,
  toYaml,
  waitFor,
} from '../lib/harness.mjs';
import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';
import { PROTOCOLS, openClient } from '../lib/clients.mjs';
import { createTestCa } from '../lib/tls.mjs';


// Resolves to {code, signal, at} when the gateway process exits (at once if it
// already has). Registered before a signal is sent, so the exit is never missed.
function exitOf(relay) {
  const status = relay.exitStatus();
  if (status) return Promise.resolve({ ...status, at: performance.now() });
  return new Promise((resolve) => {
    relay.process.once('exit', (code, signal) => resolve({ code, signal, at: performance.now() }));
  });
}

// Runs the gateway binary with `args`; resolves to {code, signal, stdout, stderr}.
// `env` is added to the environment; a variable set to undefined is removed.
function runRelay(args, { env = {}, timeoutMs = 15_000 } = {}) {
  const childEnv = { ...process.env, ...env };
  for (const [name, value] of Object.entries(env)) if (value === undefined) delete childEnv[name];
  return new Promise((resolve) => {
    execFile(
      RELAY_BIN,
      args,
      { env: childEnv, timeout: timeoutMs, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
        resolve({ code, signal: err?.signal ?? null, stdout, stderr });
      },
    );
  });
}

// The expected content of a mock stream: the prompt echoed, then " 1" .. " N-1".
function mockContent(prompt, chunks) {
  let text = prompt;
  for (let i = 1; i < chunks; i += 1) text += ` ${i}`;
  return text;
}

// Opens a streamed chat completion and reads it in the background.
//   first  resolves once the first event arrived (the stream is open end to end)
//   done   resolves to {status, events, endedAt, error}; `error` is set when the
//          body ended in a way readSse refuses (inside an event, or a reset)
//   count  events read so far
function openStream(relay, { key = KEYS.full, prompt, chunks, delayMs, model = 'kimi-k2' } = {}) {
  let markFirst;
  const first = new Promise((resolve) => {
    markFirst = resolve;
  });
  const state = { events: [] };
  const done = (async () => {
    let res;
    try {
      res = await postChat(relay, chatRequest({ model, stream: true, messages: [{ role: 'user', content: prompt }] }), {
        key,
        headers: { 'x-mock-chunks': String(chunks), 'x-mock-chunk-delay-ms': String(delayMs) },
      });
    } catch (error) {
      markFirst();
      return { status: 0, events: state.events, endedAt: performance.now(), error };
    }
    if (res.status !== 200) {
      markFirst();
      return { status: res.status, events: state.events, body: await res.text(), endedAt: performance.now() };
    }
    try {
      for await (const event of readSse(res)) {
        state.events.push(event);
        markFirst();
      }
    } catch (error) {
      markFirst();
      return { status: res.status, events: state.events, endedAt: performance.now(), error };
    }
    markFirst();
    return { status: res.status, events: state.events, endedAt: performance.now() };
  })();
  return { first, done, count: () => state.events.length };
}

function assertComplete(result, prompt, chunks, what) {
  assert.equal(result.status, 200, `${what}: status ${result.status} ${result.body ?? ''}`);
  assert.equal(result.error, undefined, `${what}: the stream broke: ${result.error?.message}`);
  const last = result.events.at(-1);
  assert.ok(last?.done, `${what}: ends with ${last?.data}, not [DONE]`);
  assert.equal(streamedContent(result.events), mockContent(prompt, chunks), `${what}: content`);
}

// Which upstream answered each of `n` non-streamed requests (10 at a time).
async function upstreamSplit(relay, n = 100, key = KEYS.full) {
  const counts = {};
  for (let i = 0; i < n; i += 10) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(10, n - i) }, async () => {
        const res = await postChat(relay, chatRequest(), { key });
        const body = await res.text();
        assert.equal(res.status, 200, body);
        return res.headers.get('x-relay-upstream');
      }),
    );
    for (const name of batch) counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

async function adminGet(relay, path) {
  const res = await fetch(`${relay.adminUrl}${path}`);
  return { status: res.status, body: await res.text() };
}

async function reloadCounts(relay) {
  const m = await scrapeMetrics(relay);
  return {
    success: metricSum(m, 'kimi_relay_config_reloads_total', { outcome: 'success' }),
    failure: metricSum(m, 'kimi_relay_config_reloads_total', { outcome: 'failure' }),
  };
}

// Number of lines of the gateway's log matching `re`.
function logCount(relay, re) {
  return relay.logs().split('\n').filter((line) => re.test(line)).length;
}

// Sends SIGHUP and waits for the gateway to log the outcome; returns 'reloaded' or 'refused'.
async function sighup(relay) {
  const ok = logCount(relay, /reloaded /);
  const refused = logCount(relay, /reload refused/);
  relay.process.kill('SIGHUP');
  return waitFor(
    () =>
      (logCount(relay, /reloaded /) > ok && 'reloaded') || (logCount(relay, /reload refused/) > refused && 'refused'),
    { timeoutMs: 5000, what: 'the reload to be logged' },
  );
}

const NEW_KEY = 'kr-test-reloaded-5c2e9a7b1d3f4e6a8c0b2d4f6a8c0e1b';
const ADMIN_KEY = 'kr-test-admin-0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d';

// ---------------------------------------------------------------------------

describe('graceful drain (SIGTERM, SIGINT)', () => {
  test('SIGTERM during 20 open streams: every stream finishes with [DONE] within drain_timeout_ms, exit code 0', async () => {
    const drainMs = 10_000;
    const t = await startTopology({ server: { drain_timeout_ms: drainMs } });
    try {
      const streams = Array.from({ length: 20 }, (_, i) =>
        openStream(t.relay, { prompt: `drain-${i}`, chunks: 15, delayMs: 200 }),
      );
      await Promise.all(streams.map((s) => s.first));
      assert.ok(
        streams.every((s) => s.count() > 0 && s.count() < 15),
        `every stream is open and mid-way at SIGTERM: ${streams.map((s) => s.count())}`,
      );

      const exited = exitOf(t.relay);
      const sigtermAt = performance.now();
      t.relay.process.kill('SIGTERM');

      // New connections are refused on the main listener while the streams
      // are still being drained (not merely once the process has gone).
      let refusedWhileDraining = false;
      await waitFor(
        async () => {
          // A fresh connection each time: a pooled keep-alive one that the
          // drain is closing can race with the probe and only time out.
          try {
            const res = await postChat(t.relay, chatRequest(), {
              key: KEYS.full,
              headers: { connection: 'close' },
            });
            await res.text();
            return false;
          } catch (err) {
            // A connection the kernel queued just before the close may be
            // reset instead: probe again until a refusal is seen.
            const code = err.cause?.code ?? err.code;
            refusedWhileDraining =
              code === 'ECONNREFUSED' && t.relay.exitStatus() === null && streams.some((s) => s.count() < 15);
            return refusedWhileDraining;
          }
        },
        { timeoutMs: 5000, what: 'the main listener to stop accepting' },
      );
      assert.ok(refusedWhileDraining, 'the listener refused new connections while streams were still open');

      const results = await Promise.all(streams.map((s) => s.done));
      results.forEach((r, i) => {
        assertComplete(r, `drain-${i}`, 15, `stream ${i}`);
        assert.ok(r.endedAt > sigtermAt, `stream ${i} ended before SIGTERM: it was not in flight`);
      });
      const status = await exited;
      assert.deepEqual({ code: status.code, signal: status.signal }, { code: 0, signal: null }, t.relay.logs());
      assert.ok(
        status.at - sigtermAt < drainMs,
        `the gateway exited ${Math.round(status.at - sigtermAt)} ms after SIGTERM, more than drain_timeout_ms`,
      );
      assert.ok(
        status.at >= Math.max(...results.map((r) => r.endedAt)) - 50,
        'the gateway exited before its streams ended',
      );
      assert.match(t.relay.logs(), /drained: no exchange left open/);
    } finally {
      await t.stop();
    }
  });

  test('/readyz answers 503 while draining, /healthz stays 200', async () => {
    const t = await startTopology({ server: { drain_timeout_ms: 10_000 } });
    try {
      assert.equal((await adminGet(t.relay, '/readyz')).status, 200);
      const stream = openStream(t.relay, { prompt: 'hold', chunks: 20, delayMs: 200 });
      await stream.first;
      const exited = exitOf(t.relay);
      t.relay.process.kill('SIGTERM');
      // The drain has begun once the gateway says so (it flips /readyz, then
      // logs the line): wait for that event, not for a length of time.
      await waitFor(() => /received [^;]*; draining/.test(t.relay.logs()), {
        timeoutMs: 5000,
        what: 'the gateway to log the start of its drain',
      });

      // An orchestrator polls with a new connection each time.
      let ready;
      try {
        ready = await adminGet(t.relay, '/readyz');
      } catch (err) {
        assert.fail(
          `GET /readyz during the drain could not connect (${err.cause?.code ?? err.message}): ` +
            'the admin listener must keep answering while the drain runs, with 503',
        );
      }
      assert.equal(ready.status, 503, ready.body);
      assert.match(ready.body, /draining/);
      const live = await adminGet(t.relay, '/healthz');
      assert.equal(live.status, 200, 'a draining gateway is alive: a failing liveness probe would kill it mid-drain');

      assertComplete(await stream.done, 'hold', 20, 'the open stream');
      assert.equal((await exited).code, 0);
    } finally {
      await t.stop();
    }
  });

  test('streams longer than the drain deadline end with an SSE error event, and the exit code is still 0', async () => {
    const drainMs = 1500;
    const t = await startTopology({ server: { drain_timeout_ms: drainMs } });
    try {
      const streams = Array.from({ length: 5 }, (_, i) =>
        openStream(t.relay, { prompt: `long-${i}`, chunks: 60, delayMs: 200 }),
      );
      await Promise.all(streams.map((s) => s.first));
      const exited = exitOf(t.relay);
      const sigtermAt = performance.now();
      t.relay.process.kill('SIGTERM');

      const results = await Promise.all(streams.map((s) => s.done));
      results.forEach((r, i) => {
        assert.equal(r.status, 200);
        assert.equal(r.error, undefined, `stream ${i} was cut, not ended: ${r.error?.message}`);
        const last = r.events.at(-1);
        assert.ok(!r.events.some((e) => e.done), `stream ${i} claims completion with [DONE]`);
        assert.ok(last?.json?.error, `stream ${i} ends with ${last?.data}, not an error event`);
        assert.equal(typeof last.json.error.message, 'string');
        assert.match(last.json.error.message, /shutting down|drain/i);
        assert.ok(r.events.length > 1 && r.events.length < 60, `stream ${i}: ${r.events.length} events`);
        assert.ok(
          r.endedAt - sigtermAt >= drainMs - 100,
          `stream ${i} ended ${Math.round(r.endedAt - sigtermAt)} ms after SIGTERM, before the deadline`,
        );
      });
      const status = await exited;
      assert.deepEqual({ code: status.code, signal: status.signal }, { code: 0, signal: null });
      assert.ok(status.at - sigtermAt < drainMs + 3000, `exit ${Math.round(status.at - sigtermAt)} ms after SIGTERM`);
      assert.match(t.relay.logs(), /drain timeout: ending \d+ exchanges still open/);
    } finally {
      await t.stop();
    }
  });

  test('an HTTP/1.1 response in progress at SIGTERM is answered with connection: close', async () => {
    const t = await startTopology({ server: { drain_timeout_ms: 10_000 } });
    try {
      const { port } = new URL(t.relay.url);
      const response = new Promise((resolve, reject) => {
        const req = httpRequest(
          {
            host: '127.0.0.1',
            port,
            method: 'POST',
            path: '/v1/chat/completions',
            headers: {
              authorization: `Bearer ${KEYS.full}`,
              'content-type': 'application/json',
              connection: 'keep-alive',
              'x-mock-fault': 'first_byte_delay_ms=1500',
            },
          },
          (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (c) => {
              body += c;
            });
            res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify(chatRequest()));
      });
      await waitFor(async () => (await t.holysheep.stats()).in_flight + (await t.moonshot.stats()).in_flight > 0, {
        what: 'the request to reach an upstream',
      });
      const exited = exitOf(t.relay);
      t.relay.process.kill('SIGTERM');
      const res = await response;
      assert.equal(res.status, 200, res.body);
      assert.equal(res.headers.connection, 'close');
      assert.equal(JSON.parse(res.body).object, 'chat.completion');
      assert.equal((await exited).code, 0);
    } finally {
      await t.stop();
    }
  });

  test('SIGINT drains like SIGTERM: an idle gateway exits 0 at once', async () => {
    const t = await startTopology({ server: { drain_timeout_ms: 10_000 } });
    try {
      const exited = exitOf(t.relay);
      const at = performance.now();
      t.relay.process.kill('SIGINT');
      const status = await exited;
      assert.deepEqual({ code: status.code, signal: status.signal }, { code: 0, signal: null });
      assert.ok(status.at - at < 3000, `exit took ${Math.round(status.at - at)} ms with nothing open`);
    } finally {
      await t.stop();
    }
  });
});

// ---------------------------------------------------------------------------

describe('hot reload (SIGHUP)', () => {
  const env = {};
  before(async () => {
    await startTopology({ server: { drain_timeout_ms: 5000 } }, env);
  });
  after(async () => {
    await env.stop?.();
  });

  // The topology's config with holysheep/moonshot weights and optional extra keys.
  function configWith({ weights = [70, 30], keys = [] } = {}) {
    const cfg = structuredClone(env.config);
    cfg.upstreams[0].weight = weights[0];
    cfg.upstreams[1].weight = weights[1];
    cfg.keys.push(...keys.map(({ name, key }) => ({ name, sha256: sha256Hex(key) })));
    return toYaml(cfg);
  }

  test('a new weight and a new key take effect; a stream open across the reload completes', async () => {
    const { relay } = env;
    const before = await upstreamSplit(relay);
    assert.ok(before.holysheep >= 55 && before.holysheep <= 85, `70/30 split before: ${JSON.stringify(before)}`);
    assert.equal((await postChat(relay, chatRequest(), { key: NEW_KEY })).status, 401);
    const counts = await reloadCounts(relay);

    const open = openStream(relay, { prompt: 'across-reload', chunks: 20, delayMs: 150 });
    await open.first;
    writeFileSync(relay.configPath, configWith({ weights: [5, 95], keys: [{ name: 'reloaded', key: NEW_KEY }] }));
    assert.equal(await sighup(relay), 'reloaded', relay.logs());
    assert.ok(open.count() < 20, 'the stream had already finished at the reload: make it longer');

    const res = await postChat(relay, chatRequest(), { key: NEW_KEY });
    assert.equal(res.status, 200, await res.text());
    const afterSplit = await upstreamSplit(relay);
    assert.ok(afterSplit.moonshot >= 85, `5/95 split after: ${JSON.stringify(afterSplit)}`);

    assertComplete(await open.done, 'across-reload', 20, 'the stream open across the reload');
    const now = await reloadCounts(relay);
    assert.equal(now.success, counts.success + 1);
    assert.equal(now.failure, counts.failure);
  });

  for (const [what, broken, expect] of [
    [
      'an out-of-range weight',
      () => configWith({ weights: [0, 30], keys: [{ name: 'refused', key: NEW_KEY + 'x' }] }),
      /:\d+:\d+: upstreams\[0\]\.weight: must be an integer/,
    ],
    [
      'broken YAML',
      () => `${configWith({ keys: [{ name: 'refused', key: NEW_KEY + 'x' }] })}\nserver: [unclosed\n`,
      /:\d+:\d+: invalid YAML/,
    ],
  ]) {
    test(`an invalid config (${what}) is refused and logged; the running config keeps serving`, async () => {
      const { relay } = env;
      const good = configWith({ weights: [70, 30] });
      writeFileSync(relay.configPath, good);
      assert.equal(await sighup(relay), 'reloaded');
      const counts = await reloadCounts(relay);
      const open = openStream(relay, { prompt: 'across-refusal', chunks: 12, delayMs: 100 });
      await open.first;

      writeFileSync(relay.configPath, broken());
      try {
        assert.equal(await sighup(relay), 'refused', relay.logs());
        const line = relay.logs().split('\n').findLast((l) => /reload refused/.test(l));
        assert.ok(line.includes(relay.configPath), `the error names the file: ${line}`);
        assert.match(line, expect);

        const split = await upstreamSplit(relay, 50);
        assert.ok(split.holysheep >= 25, `the old 70/30 weights still apply: ${JSON.stringify(split)}`);
        assert.equal(
          (await postChat(relay, chatRequest(), { key: NEW_KEY + 'x' })).status,
          401,
          'a key only in the refused config was admitted',
        );
        assertComplete(await open.done, 'across-refusal', 12, 'the stream open across the refused reload');
        const now = await reloadCounts(relay);
        assert.equal(now.failure, counts.failure + 1, 'kimi_relay_config_reloads_total{outcome="failure"}');
        assert.equal(now.success, counts.success);
        assert.equal((await adminGet(relay, '/readyz')).status, 200);
      } finally {
        writeFileSync(relay.configPath, good);
      }
    });
  }

  // Reloads the topology's config changed by `change` plus a new key: the
  // reload applies (the key works) and names exactly the restart-only keys
  // changed (`named`), once per reload, against what the process started
  // with: the same file again warns again, and the file put back does not.
  async function reloadWithRestartOnlyChange(change, key, named) {
    const { relay } = env;
    const good = configWith();
    const cfg = structuredClone(env.config);
    change(cfg.server);
    cfg.keys.push({ name: 'with-restart-only-changes', sha256: sha256Hex(key) });
    const anyWarning = /only on restart/;
    const expected = `reload: ${named.join(', ')} ${named.length === 1 ? 'changes' : 'change'} only on restart; the running values stay`;
    const warned = logCount(relay, anyWarning);
    writeFileSync(relay.configPath, toYaml(cfg));
    try {
      assert.equal(await sighup(relay), 'reloaded', relay.logs());
      assert.equal(logCount(relay, anyWarning), warned + 1, 'the restart-only change was not named once');
      const line = relay.logs().split('\n').findLast((l) => anyWarning.test(l));
      assert.ok(line.endsWith(expected), `${line}\nnot ending in\n${expected}`);
      const res = await postChat(relay, chatRequest(), { key });
      assert.equal(res.status, 200, 'the rest of the file was not applied');
      await res.arrayBuffer();
      // What runs is still the old value: the same file again says so again.
      assert.equal(await sighup(relay), 'reloaded', relay.logs());
      assert.equal(logCount(relay, anyWarning), warned + 2, 'a second reload with the same change did not name it');
    } finally {
      writeFileSync(relay.configPath, good);
      await sighup(relay);
    }
    assert.equal(logCount(relay, anyWarning), warned + 2, 'the file put back (what runs) was named as a change');
  }

  test('a reload that changes workers or listeners applies the rest and says those need a restart', async () => {
    await reloadWithRestartOnlyChange(
      (server) => {
        server.workers = 1;
        server.listen = ['127.0.0.1:0', '127.0.0.1:0'];
      },
      NEW_KEY + 'r',
      ['server.listen', 'server.workers'],
    );
  });

  test('a reload that changes only server.memory_release_ms applies the rest and names it as restart-only', async () => {
    await reloadWithRestartOnlyChange((server) => {
      server.memory_release_ms = 1000;
    }, NEW_KEY + 'm', ['server.memory_release_ms']);
  });

  test('a reload that changes only server.send_buffer_bytes applies the rest and names it as restart-only', async () => {
    await reloadWithRestartOnlyChange((server) => {
      server.send_buffer_bytes = 65536;
    }, NEW_KEY + 's', ['server.send_buffer_bytes']);
  });

  test('a reload that changes only server.max_connection_body_bytes names it (it was left unsaid)', async () => {
    await reloadWithRestartOnlyChange((server) => {
      server.max_connection_body_bytes = 16 << 20;
    }, NEW_KEY + 'b', ['server.max_connection_body_bytes']);
  });

  test('POST /admin/reload without admin.key_sha256 is refused with 403', async () => {
    const res = await fetch(`${env.relay.adminUrl}/admin/reload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
    });
    assert.equal(res.status, 403);
    assert.equal((await readOpenAiError(res, assert)).code, 'admin_disabled');
  });
});

// ---------------------------------------------------------------------------

describe('POST /admin/reload', () => {
  const env = {};
  before(async () => {
    await startTopology({ extra: { admin: { key_sha256: sha256Hex(ADMIN_KEY) } } }, env);
  });
  after(async () => {
    await env.stop?.();
  });

  function reload(headers = {}, { method = 'POST', base = env.relay.adminUrl } = {}) {
    return fetch(`${base}/admin/reload`, { method, headers });
  }

  test('without the admin key: 401, OpenAI-shaped, nothing reloaded', async () => {
    const counts = await reloadCounts(env.relay);
    for (const headers of [
      {},
      { authorization: `Bearer ${KEYS.full}` },
      { authorization: `Bearer ${ADMIN_KEY}x` },
      { authorization: `Basic ${Buffer.from(`admin:${ADMIN_KEY}`).toString('base64')}` },
    ]) {
      const res = await reload(headers);
      assert.equal(res.status, 401, JSON.stringify(headers));
      const error = await readOpenAiError(res, assert);
      assert.ok(!JSON.stringify(error).includes(ADMIN_KEY), 'the admin key is echoed');
    }
    const res = await reload({ authorization: `Bearer ${ADMIN_KEY}` }, { method: 'GET' });
    assert.equal(res.status, 405);
    assert.equal(res.headers.get('allow'), 'POST');
    await res.arrayBuffer();
    assert.deepEqual(await reloadCounts(env.relay), counts);
  });

  test('is not served on the main listener', async () => {
    const res = await reload({ authorization: `Bearer ${ADMIN_KEY}` }, { base: env.relay.url });
    await res.arrayBuffer();
    assert.notEqual(res.status, 200);
  });

  test('with the admin key: 200, the new config serves (a new key works)', async () => {
    const counts = await reloadCounts(env.relay);
    const cfg = structuredClone(env.config);
    cfg.keys.push({ name: 'via-admin', sha256: sha256Hex(NEW_KEY) });
    writeFileSync(env.relay.configPath, toYaml(cfg));
    assert.equal((await postChat(env.relay, chatRequest(), { key: NEW_KEY })).status, 401);

    const res = await reload({ authorization: `Bearer ${ADMIN_KEY}` });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { status: 'reloaded' });
    const chat = await postChat(env.relay, chatRequest(), { key: NEW_KEY });
    assert.equal(chat.status, 200, await chat.text());
    assert.equal((await reloadCounts(env.relay)).success, counts.success + 1);
    // x-api-key carries the admin key as well as Authorization does.
    const viaHeader = await reload({ 'x-api-key': ADMIN_KEY });
    assert.equal(viaHeader.status, 200);
    await viaHeader.arrayBuffer();
  });

  test('with the admin key and an invalid file: 422 naming file:line:column, the old config stays', async () => {
    const counts = await reloadCounts(env.relay);
    const good = toYaml(env.config);
    writeFileSync(env.relay.configPath, good.replace(/weight: 70/, 'weight: -1'));
    try {
      const res = await reload({ authorization: `Bearer ${ADMIN_KEY}` });
      assert.equal(res.status, 422);
      const error = await readOpenAiError(res, assert);
      assert.ok(error.message.includes(`${env.relay.configPath}:`), error.message);
      assert.match(error.message, /:\d+:\d+: upstreams\[0\]\.weight/);
      const chat = await postChat(env.relay, chatRequest(), { key: KEYS.full });
      assert.equal(chat.status, 200);
      await chat.arrayBuffer();
      const now = await reloadCounts(env.relay);
      assert.equal(now.failure, counts.failure + 1);
      assert.equal(now.success, counts.success);
    } finally {
      writeFileSync(env.relay.configPath, good);
    }
  });
});

// ---------------------------------------------------------------------------

describe('TLS certificates on reload', () => {
  const env = {};
  before(async () => {
    await startTopology({ tls: true }, env);
  });
  after(async () => {
    await env.stop?.();
  });

  // SHA-256 fingerprint of the certificate a new TLS connection to the gateway gets.
  function servedFingerprint() {
    return new Promise((resolve, reject) => {
      const { port } = new URL(env.relay.tlsUrl);
      const socket = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false });
      socket.once('secureConnect', () => {
        const fp = socket.getPeerCertificate().fingerprint256;
        socket.end();
        resolve(fp);
      });
      socket.once('error', reject);
    });
  }
  const fingerprintOf = (pem) => new X509Certificate(pem).fingerprint256;

  test('SIGHUP serves a renewed certificate at the same paths to new connections; an open HTTP/2+TLS connection and its stream survive', async () => {
    const { relay, tls } = env;
    assert.equal(await servedFingerprint(), fingerprintOf(tls.certPem));
    const client = await openClient(PROTOCOLS.find((p) => p.tls && p.h2), { relay, ca: tls.caPem });
    const renewed = createTestCa();
    try {
      const headers = {
        authorization: `Bearer ${KEYS.full}`,
        'content-type': 'application/json',
        'x-mock-chunks': '20',
        'x-mock-chunk-delay-ms': '100',
      };
      const prompt = 'tls-across-reload';
      const reply = await client.request({
        path: '/v1/chat/completions',
        headers,
        body: chatRequest({ stream: true, messages: [{ role: 'user', content: prompt }] }),
      });
      assert.equal(reply.status, 200);
      const events = [];
      let markFirst;
      const first = new Promise((r) => {
        markFirst = r;
      });
      const done = (async () => {
        for await (const e of readSse(reply)) {
          events.push(e);
          markFirst();
        }
      })();
      await first;

      // A renewal as certbot or cert-manager do it: new files at the same paths.
      writeFileSync(tls.cert, renewed.certPem);
      writeFileSync(tls.key, readFileSync(renewed.key));
      assert.equal(await sighup(relay), 'reloaded', relay.logs());
      assert.ok(events.length < 20, 'the stream had already finished at the reload: make it longer');
      await done;
      assertComplete({ status: 200, events }, prompt, 20, 'the HTTP/2+TLS stream open across the reload');

      const again = await client.request({ path: '/v1/chat/completions', headers, body: chatRequest() });
      assert.equal(again.status, 200, 'the connection opened before the reload still serves');
      await again.text();
      assert.equal(
        await servedFingerprint(),
        fingerprintOf(renewed.certPem),
        'after SIGHUP a new TLS connection still gets the old certificate: certificates are not reloaded',
      );
    } finally {
      await client.close();
      renewed.cleanup();
    }
  });

  test('a reload naming a TLS certificate that does not exist is refused, naming the file; the current one keeps serving', async () => {
    const { relay } = env;
    const served = await servedFingerprint();
    const good = readFileSync(relay.configPath, 'utf8');
    const missing = join(tmpdir(), `kimi-relay-absent-${process.pid}`, 'fullchain.pem');
    const cfg = structuredClone(env.config);
    cfg.server.tls_listen[0].cert = missing;
    writeFileSync(relay.configPath, toYaml(cfg));
    try {
      assert.equal(await sighup(relay), 'refused', relay.logs());
      const line = relay.logs().split('\n').findLast((l) => /reload refused/.test(l));
      assert.ok(line.includes(missing), `the refusal does not name ${missing}: ${line}`);
      assert.equal(await servedFingerprint(), served);
    } finally {
      writeFileSync(relay.configPath, good);
    }
  });
});

// ---------------------------------------------------------------------------

describe('kimi-relay healthcheck', () => {
  test('exit 0 while the admin listener answers, non-zero once it is gone', async () => {
    const t = await startTopology();
    try {
      const up = await runRelay(['healthcheck', '--url', `${t.relay.adminUrl}/healthz`]);
      assert.equal(up.code, 0, up.stderr);
      assert.match(up.stdout, /healthy/);
      // --config reads admin.listen: the bound port, since the test config asks for port 0.
      const bound = structuredClone(t.config);
      bound.admin.listen = new URL(t.relay.adminUrl).host;
      const configPath = join(mkdtempSync(join(tmpdir(), 'kimi-relay-hc-')), 'relay.yaml');
      writeFileSync(configPath, toYaml(bound));
      const ready = await runRelay(['healthcheck', '--url', `${t.relay.adminUrl}/readyz`]);
      assert.equal(ready.code, 0, ready.stderr);
      // The main listener has no /healthz: that is not healthy.
      const wrongPort = await runRelay(['healthcheck', '--url', `${t.relay.url}/healthz`]);
      assert.notEqual(wrongPort.code, 0);

      try {
        const viaConfig = await runRelay(['healthcheck', '--config', configPath]);
        assert.equal(viaConfig.code, 0, viaConfig.stderr);
        await t.relay.stop('SIGTERM');
        const down = await runRelay(['healthcheck', '--config', configPath]);
        assert.notEqual(down.code, 0, down.stdout);
        assert.equal(down.signal, null, 'healthcheck hung until killed');
      } finally {
        rmSync(join(configPath, '..'), { recursive: true, force: true });
      }
    } finally {
      await t.stop();
    }
  });

  test('non-zero for a closed port, and 2 for a malformed --url', async () => {
    const port = await closedPort();
    const down = await runRelay(['healthcheck', '--url', `http://127.0.0.1:${port}/healthz`]);
    assert.notEqual(down.code, 0);
    assert.equal(down.signal, null);
    const bad = await runRelay(['healthcheck', '--url', 'https://127.0.0.1:9090/healthz']);
    assert.equal(bad.code, 2, bad.stderr);
  });
});

// ---------------------------------------------------------------------------

describe('--check-config and start-up failures', () => {
  let dir;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kimi-relay-ops-'));
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const file = (name, text) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  const base = [
    'server:',
    '  listen: ["127.0.0.1:0"]',
    'upstreams:',
    '  - name: local',
    '    base_url: "http://127.0.0.1:9/v1"',
    '    allow_insecure_http: true',
    '    weight: 2',
    '    models: [kimi-k2]',
    '',
  ];

  test('a good file: exit 0 and a summary', async () => {
    const path = file('good.yaml', base.join('\n'));
    const r = await runRelay(['--check-config', path]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^${escapeRe(path)}: OK \\(1 upstreams, 1 models, 0 keys\\)`));
  });

  test('a bad file: exit 1 and FILE:LINE:COLUMN of the offending value or key', async () => {
    const cases = [
      [base.map((l) => l.replace('weight: 2', 'weight: 0')), '7:13: upstreams[0].weight: must be an integer'],
      [base.map((l) => l.replace('weight: 2', 'wieght: 2')), "7:5: upstreams[0]: unknown key 'wieght' (did you mean 'weight'?)"],
      [
        base.map((l) => l.replace('weight: 2', 'api_key: ${KR_OPS_TEST_UNSET}')),
        "7:14: upstreams[0].api_key: environment variable 'KR_OPS_TEST_UNSET' is not set",
      ],
    ];
    for (const [lines, expected] of cases) {
      const path = file('bad.yaml', lines.join('\n'));
      const r = await runRelay(['--check-config', path], { env: { KR_OPS_TEST_UNSET: undefined } });
      assert.equal(r.code, 1, r.stdout);
      assert.ok(r.stderr.startsWith(`kimi-relay: ${path}:${expected}`), `expected ${path}:${expected}, got ${r.stderr}`);
    }
    const missing = await runRelay(['--check-config', join(dir, 'absent.yaml')]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, new RegExp(`${escapeRe(join(dir, 'absent.yaml'))}: cannot open`));
  });

  test('a TLS certificate or key that does not exist stops start-up, naming the file', async () => {
    const ca = createTestCa();
    try {
      for (const [cert, key, named] of [
        [join(dir, 'no-such-dir', 'fullchain.pem'), ca.key, join(dir, 'no-such-dir', 'fullchain.pem')],
        [ca.cert, join(dir, 'absent-privkey.pem'), join(dir, 'absent-privkey.pem')],
      ]) {
        const cfg = relayConfig({
          server: { tls_listen: [{ address: '127.0.0.1:0', cert, key }] },
          upstreams: [{ name: 'local', url: 'http://127.0.0.1:9', apiKey: 'x', models: { 'kimi-k2': 'kimi-k2' } }],
        });
        const path = file('tls.yaml', toYaml(cfg));
        const started = performance.now();
        const run = await runRelay(['--config', path], { timeoutMs: 10_000 });
        assert.equal(run.signal, null, `the gateway kept running with a missing TLS file:\n${run.stderr}`);
        assert.notEqual(run.code, 0);
        assert.ok(run.stderr.includes(named), `start-up error does not name ${named}:\n${run.stderr}`);
        assert.ok(performance.now() - started < 10_000);
        const check = await runRelay(['--check-config', path]);
        assert.equal(check.code, 1);
        assert.ok(check.stderr.includes(named), `--check-config does not name ${named}:\n${check.stderr}`);
      }
    } finally {
      ca.cleanup();
    }
  });
});

function escapeRe(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
