// The official `openai` package (6.x) over https to the gateway's TLS listener,
// trusting a CA made at test time the way a deployment would: through
// NODE_EXTRA_CA_CERTS. Node reads that variable only at start-up, so each case
// runs in a child `node` process (lib/openai_https_child.mjs) and reports what
// it saw as one JSON line.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';

import { KEYS, useTopology } from '../lib/fixtures.mjs';
import { waitFor } from '../lib/harness.mjs';

const env = useTopology({ tls: true });

const testsDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const CHILD = join(testsDir, 'lib', 'openai_https_child.mjs');

// Runs one case of the child script. `trustCa` false leaves the test CA out.
// Resolves to the child's result; `onExit` is called when it has exited.
function sdk(caseName, { apiKey = KEYS.full, content, trustCa = true, host = 'localhost', holdMs, onExit } = {}) {
  const childEnv = { ...process.env };
  // Nothing inherited may loosen or replace the trust under test.
  delete childEnv.NODE_TLS_REJECT_UNAUTHORIZED;
  delete childEnv.NODE_EXTRA_CA_CERTS;
  delete childEnv.NODE_OPTIONS;
  if (trustCa) childEnv.NODE_EXTRA_CA_CERTS = env.tls.caCert;
  const baseURL = `${env.relay.tlsUrl.replace('127.0.0.1', host)}/v1`;
  const job = JSON.stringify({ baseURL, apiKey, case: caseName, content, holdMs });
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [CHILD, job],
      { cwd: testsDir, env: childEnv, timeout: 30_000, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        onExit?.();
        const line = stdout.trim().split('\n').at(-1);
        try {
          resolve(JSON.parse(line));
        } catch {
          const why = err?.message ?? 'exit 0';
          reject(new Error(`child ${caseName} printed no result (${why})\nstdout: ${stdout}\nstderr: ${stderr}`));
        }
      },
    );
  });
}

const okResult = (r) => {
  assert.equal(r.ok, true, `the SDK call failed: ${JSON.stringify(r.error)}`);
  return r;
};

describe('openai SDK over https with NODE_EXTRA_CA_CERTS', () => {
  test('chat.completions.create without streaming', async () => {
    const r = okResult(await sdk('create', { content: 'https plain' }));
    assert.equal(r.object, 'chat.completion');
    assert.match(r.content, /^https plain 1 2 3/);
    assert.equal(r.finishReason, 'stop');
    assert.ok(r.totalTokens > 0);
    assert.equal(r.upstream, 'holysheep');
    assert.ok(r.requestId);
  });

  test('chat.completions.create with stream: true and include_usage', async () => {
    const r = okResult(await sdk('stream', { content: 'https sse' }));
    assert.deepEqual(r.pieces, ['https sse', ' 1', ' 2', ' 3', ' 4', ' 5', ' 6', ' 7', ' 8']);
    assert.equal(r.finishReason, 'stop');
    assert.equal(r.usage?.completion_tokens, 9);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  });

  test('leaving a stream early cancels the upstream request', async () => {
    let exited = false;
    const pending = sdk('streamAbort', { holdMs: 3000, onExit: () => (exited = true) });
    await waitFor(async () => (await env.holysheep.stats()).cancelled === 1, {
      timeoutMs: 10_000,
      what: 'the upstream to see the stream cancelled',
    });
    assert.equal(exited, false, 'the upstream saw the cancel only when the client process exited');
    await waitFor(async () => (await env.holysheep.stats()).in_flight === 0, { what: 'in_flight 0' });
    assert.equal((await env.holysheep.stats()).completed_streams, 0);
    assert.equal(okResult(await pending).chunks, 2);
  });

  test('models.list', async () => {
    const r = okResult(await sdk('models', { apiKey: KEYS.limited }));
    assert.deepEqual(r.ids, ['kimi-k2']);
  });

  test('the base URL may name the IP address (the certificate carries it)', async () => {
    const r = okResult(await sdk('models', { host: '127.0.0.1' }));
    assert.deepEqual(r.ids, ['kimi-agent-swarm', 'kimi-k2', 'moonshot-v1-8k']);
  });

  test('a wrong key raises AuthenticationError with the code and request id', async () => {
    const r = await sdk('create', { apiKey: 'kr-test-wrong-key-000000000000000000000000' });
    assert.equal(r.ok, false);
    assert.equal(r.error.name, 'AuthenticationError', JSON.stringify(r.error));
    assert.equal(r.error.status, 401);
    assert.equal(r.error.code, 'invalid_api_key');
    assert.ok(r.error.requestId);
  });

  test('without the CA the SDK refuses the connection (the trust is what makes it work)', async () => {
    const r = await sdk('create', { trustCa: false });
    assert.equal(r.ok, false, 'an untrusted certificate was accepted');
    assert.equal(r.error.name, 'APIConnectionError', JSON.stringify(r.error));
    assert.match(r.error.cause ?? '', /certificate|UNABLE_TO_VERIFY|SELF_SIGNED|CERT_/i, JSON.stringify(r.error));
    assert.equal((await env.holysheep.stats()).requests, 0, 'nothing may reach the upstream');
  });
});
