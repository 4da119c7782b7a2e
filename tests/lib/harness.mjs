// Test harness for the integration and end-to-end suites.
//
// Starts the real binaries on ephemeral ports and hands back small handles:
//
//   startMock(opts)        kimi-relay-mock, with its /_mock introspection API
//   startRelay(cfg, opts)  kimi-relay, on a config written to a temp file
//   relayConfig(spec)      the YAML for a gateway in front of some mocks
//   readSse(response)      the SSE events of a fetch Response, with arrival times
//   spawnProcess(bin, args) any other server a test needs (e.g. Prometheus),
//                          killed with this process like the binaries above
//
// Binaries come from $RELAY_BIN and $MOCK_BIN (CTest sets both to absolute
// paths); when unset, build/kimi-relay and build/kimi-relay-mock of the repo.
//
// Every process started here is stopped by its handle's stop(); test files call
// it from `after` (fixtures.mjs's useTopology does). As a last resort, anything
// still alive when the Node process exits or is signalled is killed, and where
// setpriv exists children also die with a SIGKILLed parent, so a failing or
// timed-out test never leaves a server behind.
//
// All traffic is to 127.0.0.1. Node's fetch ignores HTTP proxy variables; a
// test that ever spawns curl must pass --noproxy '*'.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export const RELAY_BIN = process.env.RELAY_BIN || join(repoRoot, 'build', 'kimi-relay');
export const MOCK_BIN = process.env.MOCK_BIN || join(repoRoot, 'build', 'kimi-relay-mock');

// How long a binary may take to print its "listening" line(s).
const STARTUP_TIMEOUT_MS = 10_000;
// How long stop() waits after its signal before it sends SIGKILL.
const STOP_GRACE_MS = 5_000;

// ---------------------------------------------------------------------------
// Processes

// Sanitizer builds (scripts/test.sh --sanitize): a binary started here that
// prints a sanitizer report fails the test file, even when the report comes at
// exit (a leak) or from a process whose exit status no test looks at. The
// report is echoed at once; the test process then exits non-zero, which Node's
// test runner counts as a failed test.
const SANITIZER_REPORT = /^(?:==\d+==ERROR: \w+Sanitizer|WARNING: ThreadSanitizer|SUMMARY: \w+Sanitizer)/m;
const REPORT_START = /^(?:=+$|==\d+==ERROR|WARNING: ThreadSanitizer|.*: runtime error: )/m;
const sanitizerReports = [];
function checkSanitizerReport(bin, pid, stderr) {
  if (!SANITIZER_REPORT.test(stderr)) return;
  const report = stderr.slice(Math.max(0, stderr.search(REPORT_START))).slice(0, 20_000);
  sanitizerReports.push({ bin, pid, report });
  process.stderr.write(`\n*** sanitizer report from ${bin} (pid ${pid}) ***\n${report}\n`);
}
process.on('exit', () => {
  if (sanitizerReports.length > 0) process.exitCode = 1;
});

const live = new Set();
function killAll() {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
}
process.on('exit', killAll);
// A test process stopped by a signal skips 'exit' handlers: clean up first.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(signal, () => {
    killAll();
    process.kill(process.pid, signal);
  });
}

// Where util-linux's setpriv exists, children are started through it with a
// parent-death signal, so they die with this process even if it is SIGKILLed
// (say by a CTest timeout). setpriv execs the binary: the pid stays the same.
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));
function spawnChild(bin, args, options) {
  if (!SETPRIV) return spawn(bin, args, options);
  return spawn(SETPRIV, ['--pdeathsig', 'SIGKILL', '--', bin, ...args], options);
}

// Spawns `bin args` as a tracked child (killed with this process, see above)
// and collects its stdout and stderr as text. For servers that a test polls
// for readiness itself (say over HTTP); spawnAndWait below waits for log lines.
//   {child, output: {stdout, stderr}, exited, exitStatus(), stop(signal)}
// `exited` resolves to {code, signal} (plus `error` if the spawn itself
// failed); stop() sends `signal` (SIGTERM by default), then SIGKILL after
// STOP_GRACE_MS, and resolves once the process is gone.
export function spawnProcess(bin, args, { env } = {}) {
  const child = spawnChild(bin, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  const output = { stdout: '', stderr: '' };
  let exitStatus = null;
  const exited = new Promise((resolveExit) => {
    child.once('exit', (code, signal) => {
      live.delete(child);
      exitStatus = { code, signal };
      resolveExit(exitStatus);
    });
    // No 'exit' follows a failed spawn (e.g. ENOENT without setpriv).
    child.once('error', (error) => {
      if (child.pid !== undefined) return;
      live.delete(child);
      exitStatus = { code: null, signal: null, error };
      resolveExit(exitStatus);
    });
  });
  for (const name of ['stdout', 'stderr']) {
    child[name].setEncoding('utf8');
    child[name].on('data', (text) => {
      output[name] += text;
    });
  }
  // 'close' comes after the last output, unlike 'exit'.
  child.once('close', () => checkSanitizerReport(bin, child.pid, output.stderr));

  async function stop(signal = 'SIGTERM') {
    if (exitStatus || child.exitCode !== null || child.signalCode !== null) return exited;
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    const result = await exited;
    clearTimeout(timer);
    return result;
  }

  return { child, output, exited, exitStatus: () => exitStatus, stop };
}

// Spawns `bin args` (spawnProcess) and resolves `ready` once every regex in
// `waitFor` has matched a line of `stream` ('stdout' or 'stderr'), with the
// match objects in the same order. Rejects (with the output so far) if the
// process exits first or nothing matches in time.
function spawnAndWait(bin, args, { env, stream, waitFor, label }) {
  const proc = spawnProcess(bin, args, { env });
  const { child, output } = proc;
  const ready = new Promise((resolveReady, rejectReady) => {
    const matches = new Array(waitFor.length).fill(null);
    let pending = '';
    let settled = false;
    const fail = (why) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      rejectReady(
        new Error(
          `${label}: ${why}\ncommand: ${bin} ${args.join(' ')}\n` +
            `stdout:\n${output.stdout}\nstderr:\n${output.stderr}`,
        ),
      );
    };
    const timer = setTimeout(() => fail(`not ready after ${STARTUP_TIMEOUT_MS} ms`), STARTUP_TIMEOUT_MS);
    child.once('error', (err) => fail(`could not start: ${err.message}`));
    child.once('exit', (code, signal) => fail(`exited early (code ${code}, signal ${signal})`));
    // Registered after spawnProcess's collector, so `output` already holds the text.
    child[stream].on('data', (text) => {
      if (settled) return;
      pending += text;
      const lines = pending.split('\n');
      pending = lines.pop();
      for (const line of lines) {
        waitFor.forEach((re, i) => {
          if (!matches[i]) matches[i] = line.match(re);
        });
      }
      if (matches.every(Boolean)) {
        settled = true;
        clearTimeout(timer);
        resolveReady(matches);
      }
    });
  });

  return { ...proc, ready };
}

// ---------------------------------------------------------------------------
// Mock upstream

// Starts kimi-relay-mock on 127.0.0.1:0.
//   name          reported in x-mock-name and /v1/models (default "mock")
//   apiKey        the Bearer key the mock demands (default "mock-upstream-key")
//   moonshot      true: Moonshot flavour (usage in choices[0].usage, its error shape)
//   chunks        SSE content chunks per stream (mock default otherwise)
//   chunkDelayMs  pause between chunks
//   fault         run-wide fault SPEC, e.g. "status=503;times=2"
//   args          extra command-line arguments
// Returns a handle whose methods drive the mock's /_mock API.
export async function startMock({
  name = 'mock',
  apiKey = 'mock-upstream-key',
  moonshot = false,
  chunks,
  chunkDelayMs,
  fault,
  args = [],
  env,
} = {}) {
  const argv = ['--listen', '127.0.0.1:0', '--name', name, '--api-key', apiKey];
  if (moonshot) argv.push('--moonshot');
  if (chunks !== undefined) argv.push('--chunks', String(chunks));
  if (chunkDelayMs !== undefined) argv.push('--chunk-delay-ms', String(chunkDelayMs));
  if (fault !== undefined) argv.push('--fault', fault);
  argv.push(...args);

  const proc = spawnAndWait(MOCK_BIN, argv, {
    env,
    stream: 'stdout',
    waitFor: [/^kimi-relay-mock listening on 127\.0\.0\.1:(\d+)\s*$/],
    label: `kimi-relay-mock ${name}`,
  });
  const [[, portText]] = await proc.ready;
  const port = Number(portText);
  const url = `http://127.0.0.1:${port}`;

  async function call(method, path, body) {
    const res = await fetch(url + path, { method, body });
    const text = await res.text();
    if (!res.ok) throw new Error(`mock ${name}: ${method} ${path} -> ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }

  return {
    name,
    apiKey,
    url,
    port,
    process: proc.child,
    // Recorded /v1 requests, oldest first: {method, path, query, headers: [[name, value]...], body, protocol, time_ms}.
    requests: () => call('GET', '/_mock/requests'),
    clearRequests: () => call('DELETE', '/_mock/requests'),
    // {requests, in_flight, max_in_flight, cancelled, completed_streams}
    stats: () => call('GET', '/_mock/stats'),
    resetStats: () => call('POST', '/_mock/stats/reset'),
    setFault: (spec) => call('POST', '/_mock/fault', spec),
    clearFault: () => call('DELETE', '/_mock/fault'),
    logs: () => proc.output.stdout + proc.output.stderr,
    // null while running, else {code, signal}
    exitStatus: proc.exitStatus,
    stop: proc.stop,
  };
}

// Every value of header `name` (case-insensitive) in a recorded request.
export function headerValues(recorded, name) {
  const lower = name.toLowerCase();
  return recorded.headers.filter(([n]) => n.toLowerCase() === lower).map(([, v]) => v);
}

// The single value of header `name` in a recorded request (undefined if absent).
export function headerValue(recorded, name) {
  const values = headerValues(recorded, name);
  if (values.length > 1) throw new Error(`header ${name} recorded ${values.length} times: ${values}`);
  return values[0];
}

// ---------------------------------------------------------------------------
// Gateway

// Starts kimi-relay with `config` (YAML text, or an object rendered with toYaml)
// written to a fresh temp directory. Resolves once the main and admin
// listeners are logged. `env` is added to the environment (for ${VAR} secrets).
//   {url, adminUrl, tlsUrl, process, configPath, logs(), stop(signal)}
// `url` is the first plaintext listener, e.g. http://127.0.0.1:PORT (no /v1).
// `tlsUrl` is the first TLS listener (https://127.0.0.1:PORT); startRelay waits
// for it when `expectTls` is true, which is the default for a config object
// whose server.tls_listen is not empty (tls.mjs makes the certificates).
export async function startRelay(config, { env, expectTls = Boolean(config?.server?.tls_listen?.length) } = {}) {
  const yaml = typeof config === 'string' ? config : toYaml(config);
  const dir = mkdtempSync(join(tmpdir(), 'kimi-relay-test-'));
  const configPath = join(dir, 'relay.yaml');
  writeFileSync(configPath, yaml);

  const waitFor = [
    /listening on (http:\/\/127\.0\.0\.1:\d+) \(main\)/,
    /listening on (http:\/\/127\.0\.0\.1:\d+) \(admin\)/,
  ];
  if (expectTls) waitFor.push(/listening on (https:\/\/[^\s]+:\d+) \(tls\)/);
  const proc = spawnAndWait(RELAY_BIN, ['--config', configPath], {
    env,
    stream: 'stderr',
    waitFor,
    label: 'kimi-relay',
  });
  let matches;
  try {
    matches = await proc.ready;
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`${err.message}\nconfig:\n${yaml}`);
  }
  return {
    url: matches[0][1],
    adminUrl: matches[1][1],
    tlsUrl: expectTls ? matches[2][1] : undefined,
    process: proc.child,
    configPath,
    yaml,
    // Everything the gateway printed so far (stderr, then stdout).
    logs: () => proc.output.stderr + proc.output.stdout,
    // null while running, else {code, signal}
    exitStatus: proc.exitStatus,
    // Resolves to null if the gateway still answers its admin /healthz, else to
    // its exit status once the process is gone (a crash shows up here even when
    // the response that triggered it had already been sent).
    async checkAlive() {
      try {
        const res = await fetch(`${matches[1][1]}/healthz`);
        await res.arrayBuffer();
        return null;
      } catch {
        const timer = setTimeout(() => proc.child.kill('SIGKILL'), 2000);
        const status = await proc.exited;
        clearTimeout(timer);
        return status;
      }
    },
    async stop(signal = 'SIGTERM') {
      const result = await proc.stop(signal);
      rmSync(dir, { recursive: true, force: true });
      return result;
    },
  };
}

export function sha256Hex(text) {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

// Builds a gateway config object (render it with toYaml, or pass it straight to
// startRelay):
//   upstreams: [{name, url, apiKey, weight, models, ...more}]
//       url     the mock's root (http://127.0.0.1:PORT); base_url becomes url + "/v1"
//               unless `baseUrl` is given
//       models  {clientId: upstreamId}
//       more    any other upstream keys, already in snake_case
//   keys: [{name, key, models}]  the plain key is hashed here (sha256 hex)
//   server, admin: merged over the test defaults below
//   ...extra: other top-level sections, in snake_case (retry, timeouts, ...)
export function relayConfig({ upstreams = [], keys = [], server = {}, admin = {}, ...extra } = {}) {
  // Test MCP servers listen on loopback over plain HTTP, which the gateway
  // refuses unless a server says allow_insecure_http.
  if (extra.mcp?.servers) {
    extra = {
      ...extra,
      mcp: {
        ...extra.mcp,
        servers: extra.mcp.servers.map((s) => ({ allow_insecure_http: true, ...s })),
      },
    };
  }
  return {
    // The mock's per-request controls (x-mock-fault, x-mock-chunks, ...) ride
    // on the caller's request: forward them past the allow-list.
    forward_headers: ['x-mock-*'],
    server: {
      listen: ['127.0.0.1:0'],
      workers: 2,
      drain_timeout_ms: 2000,
      ...server,
    },
    admin: { listen: '127.0.0.1:0', ...admin },
    keys: keys.map(({ name, key, models, ...more }) => ({
      name,
      sha256: sha256Hex(key),
      ...(models ? { models } : {}),
      ...more,
    })),
    upstreams: upstreams.map(({ name, url, baseUrl, apiKey, weight = 1, models, ...more }) => ({
      name,
      base_url: baseUrl ?? `${url}/v1`,
      api_key: apiKey,
      weight,
      models,
      allow_insecure_http: true,
      ...more,
    })),
    ...extra,
  };
}

// Renders plain objects, arrays, strings, numbers and booleans as block YAML.
// Strings are double-quoted with JSON escapes, which YAML reads the same way;
// arrays of scalars are written in flow style.
export function toYaml(value, indent = '') {
  const scalar = (v) => {
    if (v === null) return 'null';
    if (typeof v === 'string') return JSON.stringify(v);
    if (typeof v === 'number' || typeof v === 'boolean') return String(v);
    throw new Error(`toYaml: cannot render ${typeof v}`);
  };
  const isScalar = (v) => v === null || typeof v !== 'object';
  const lines = [];
  if (Array.isArray(value)) {
    for (const item of value) {
      if (isScalar(item)) {
        lines.push(`${indent}- ${scalar(item)}`);
      } else {
        const body = toYaml(item, `${indent}  `).split('\n');
        lines.push(`${indent}- ${body[0].trimStart()}`, ...body.slice(1));
      }
    }
  } else {
    for (const [key, v] of Object.entries(value)) {
      if (v === undefined) continue;
      const k = /^[A-Za-z_][\w.-]*$/.test(key) ? key : JSON.stringify(key);
      if (isScalar(v)) {
        lines.push(`${indent}${k}: ${scalar(v)}`);
      } else if (Array.isArray(v) && v.every(isScalar)) {
        lines.push(`${indent}${k}: [${v.map(scalar).join(', ')}]`);
      } else if (!Array.isArray(v) && Object.keys(v).length === 0) {
        lines.push(`${indent}${k}: {}`);
      } else {
        lines.push(`${indent}${k}:`, toYaml(v, `${indent}  `));
      }
    }
  }
  return lines.join('\n');
}

// A port on 127.0.0.1 that nothing listens on (bound, then released).
export async function closedPort() {
  const server = createServer();
  await new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', ok);
  });
  const { port } = server.address();
  await new Promise((ok) => server.close(ok));
  return port;
}

// ---------------------------------------------------------------------------
// HTTP helpers

// A minimal valid chat request body (as an object); `extra` overrides fields.
export function chatRequest(extra = {}) {
  return {
    model: 'kimi-k2',
    messages: [{ role: 'user', content: 'hi' }],
    ...extra,
  };
}

// POSTs `body` (an object is JSON-encoded, a string is sent as is) to the
// gateway's /v1/chat/completions. `key` goes in Authorization: Bearer unless
// null; `headers` are added as given.
export function postChat(relay, body, { key, headers = {}, signal } = {}) {
  const h = { 'content-type': 'application/json', ...headers };
  if (key !== undefined && key !== null) h.authorization = `Bearer ${key}`;
  return fetch(`${relay.url}/v1/chat/completions`, {
    method: 'POST',
    headers: h,
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal,
  });
}

// Reads an error response and checks it has OpenAI's shape: a JSON object
// {"error": {message, type, param, code}} with all four keys present, a
// non-empty string message and a string type. Returns the inner error object.
export async function readOpenAiError(response, assert) {
  const text = await response.text();
  let body;
  assert.doesNotThrow(() => {
    body = JSON.parse(text);
  }, `error body is not JSON: ${text}`);
  assert.equal(typeof body.error, 'object', `no "error" object in ${text}`);
  assert.notEqual(body.error, null, `"error" is null in ${text}`);
  for (const key of ['message', 'type', 'param', 'code']) {
    assert.ok(key in body.error, `error.${key} missing in ${text}`);
  }
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0, 'error.message is empty');
  assert.equal(typeof body.error.type, 'string', `error.type is not a string in ${text}`);
  return body.error;
}

// Header value bytes for fetch: fetch takes header values as Latin-1 "byte
// strings", so UTF-8 text (a zero-width space, a BOM) must be spelled byte by byte.
export function utf8HeaderValue(text) {
  return Buffer.from(text, 'utf8').toString('latin1');
}

// Polls `probe` (sync or async) every `intervalMs` until it returns a truthy
// value, which is returned; throws after `timeoutMs` with the last value seen.
export async function waitFor(probe, { timeoutMs = 2000, intervalMs = 20, what = 'condition' } = {}) {
  const deadline = performance.now() + timeoutMs;
  let last;
  for (;;) {
    last = await probe();
    if (last) return last;
    if (performance.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last value: ${JSON.stringify(last)}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

// ---------------------------------------------------------------------------
// Server-sent events

// Yields the SSE events of a fetch Response as they arrive:
//   {data, json, done, comments, fields, at}
//   data     the event's data lines joined with "\n" ("" if it had none)
//   json     data parsed as JSON (undefined for "[DONE]" or non-JSON data)
//   done     true for the "[DONE]" sentinel
//   fields   other fields ({event, id, retry}) when present
//   at       performance.now() when the bytes completing the event arrived
// Events are split on blank lines ("\n", "\r\n" or "\r" line ends); comment
// lines (":" ...) are counted in `comments`, not yielded as events. Leaving the
// loop early cancels the body (and so the HTTP request).
export async function* readSse(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = ''; // decoded text with line ends normalised to "\n"
  let heldCr = false; // a "\r" at the end of a read may be half of "\r\n"
  let finished = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      const at = performance.now();
      let text = (heldCr ? '\r' : '') + (done ? decoder.decode() : decoder.decode(value, { stream: true }));
      heldCr = !done && text.endsWith('\r');
      if (heldCr) text = text.slice(0, -1);
      buffer += text.replace(/\r\n?/g, '\n');
      let blank;
      while ((blank = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, blank);
        buffer = buffer.slice(blank + 2);
        const event = parseSseBlock(block, at);
        if (event) yield event;
      }
      if (done) {
        finished = true;
        if (buffer.trim() !== '') {
          throw new Error(`stream ended inside an event: ${JSON.stringify(buffer)}`);
        }
        return;
      }
    }
  } finally {
    if (!finished) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

function parseSseBlock(block, at) {
  const data = [];
  const fields = {};
  let comments = 0;
  for (const line of block.split('\n')) {
    if (line === '') continue;
    if (line.startsWith(':')) {
      comments += 1;
      continue;
    }
    const colon = line.indexOf(':');
    const name = colon < 0 ? line : line.slice(0, colon);
    let val = colon < 0 ? '' : line.slice(colon + 1);
    if (val.startsWith(' ')) val = val.slice(1);
    if (name === 'data') data.push(val);
    else fields[name] = val;
  }
  if (data.length === 0 && Object.keys(fields).length === 0) return null;
  const text = data.join('\n');
  let json;
  if (text !== '[DONE]') {
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
  }
  return { data: text, json, done: text === '[DONE]', comments, fields, at };
}

// Reads a whole SSE response into an array of events.
export async function collectSse(response) {
  const events = [];
  for await (const event of readSse(response)) events.push(event);
  return events;
}

// The text of the content deltas of chat.completion.chunk events, concatenated.
export function streamedContent(events) {
  return events
    .filter((e) => e.json?.choices?.length)
    .map((e) => e.json.choices[0].delta?.content ?? '')
    .join('');
}
