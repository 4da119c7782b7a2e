// Idle connections to MCP server instances (mcp.servers[].max_idle_ms): the
// worker's memory tick closes those idle that long, as it does an upstream's
// (upstream_pool.test.mjs), so a server no tool call goes to any more keeps
// no connection of ours open; a reload's new time applies to those kept,
// and a pool a reload replaced keeps nothing its open calls hand back. At
// most max_idle_connections are kept per worker and instance.
//
// The servers keep idle connections a minute themselves: every close seen
// here is the gateway's.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, test } from 'node:test';

import { relayConfig, startRelay, toYaml, waitFor } from '../lib/harness.mjs';
import { startRecordingMcp } from '../lib/mcp_recorder.mjs';

const KEY = 'kr-mcp-idle-3e5a7c9e1b3d5f7a9c2e4a6c8e0b2d4f';
const cleanup = [];
after(async () => Promise.all(cleanup.map((stop) => stop())));

// A recording MCP server and a one-worker gateway in front of it (`extra`:
// more keys of its server entry).
async function setup(maxIdleMs, extra = {}) {
  const mcp = await startRecordingMcp({ name: 'idle', keepAliveTimeoutMs: 60_000 });
  cleanup.push(() => mcp.close());
  const config = (idle, more = [], entry = extra) =>
    relayConfig({
      server: { workers: 1, memory_release_ms: 100 },
      keys: [{ name: 'idle', key: KEY }],
      upstreams: [],
      mcp: { servers: [{ name: 'idle', url: mcp.url, max_idle_ms: idle, ...entry }, ...more] },
    });
  const relay = await startRelay(config(maxIdleMs));
  cleanup.push(() => relay.stop());
  return { mcp, relay, config };
}

// One JSON-RPC request through the gateway (in `session`, if given).
function rpc({ relay }, message, session) {
  return fetch(`${relay.url}/v1/mcp/idle`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${KEY}`,
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      ...(session ? { 'mcp-session-id': session } : {}),
    },
    body: JSON.stringify({ jsonrpc: '2.0', ...message }),
  });
}

// One initialize through the gateway: the gateway keeps its connection.
// Resolves to the session id.
async function initialize(g) {
  const res = await rpc(g, {
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'idle-test', version: '1' } },
  });
  assert.equal(res.status, 200, await res.text());
  assert.equal(g.mcp.openConnections(), 1, 'the gateway keeps its connection for the next call');
  return res.headers.get('mcp-session-id');
}

test('a connection to an MCP server idle for max_idle_ms is closed by the worker\'s tick, with no call', async () => {
  const g = await setup(1000);
  const sent = performance.now();
  await initialize(g);
  await waitFor(() => g.mcp.openConnections() === 0, { what: 'the idle connection closed', timeoutMs: 10_000 });
  const elapsed = performance.now() - sent;
  assert.ok(elapsed >= 900, `closed ${elapsed} ms after the call, before max_idle_ms`);
});

test('a reload that changes max_idle_ms applies it to the connections kept', async () => {
  const g = await setup(3_600_000);
  await initialize(g);
  const reloads = () => g.relay.logs().split('\n').filter((l) => /reloaded /.test(l)).length;
  const before = reloads();
  writeFileSync(g.relay.configPath, toYaml(g.config(200)));
  g.relay.process.kill('SIGHUP');
  await waitFor(() => reloads() > before, { what: 'the reload to be logged', timeoutMs: 5000 });
  // Kept an hour before the reload: only the reloaded time closes it.
  await waitFor(() => g.mcp.openConnections() === 0, { what: 'the idle connection closed', timeoutMs: 10_000 });
});

test('a reload that replaces the MCP pool closes what its open calls hand back', async () => {
  // The tick an hour away (max_idle_ms): only the replaced pool can close one.
  const g = await setup(3_600_000);
  const session = await initialize(g);
  const call = (id, ms) =>
    rpc(g, { id, method: 'tools/call', params: { name: 'sleep', arguments: { ms } } }, session).then(async (r) => [
      r.status,
      await r.text(),
    ]);
  let settled = 0;
  const short = call(2, 1500).then((a) => ((settled += 1), a));
  const long = call(3, 8000).then((a) => ((settled += 1), a));
  await waitFor(() => g.mcp.calls('tools/call').length === 2, { what: 'both calls at the server' });
  assert.equal(g.mcp.openConnections(), 2);

  // A second server: other instance URLs, so the worker makes a new pool.
  const reloads = () => g.relay.logs().split('\n').filter((l) => /reloaded /.test(l)).length;
  const before = reloads();
  writeFileSync(g.relay.configPath, toYaml(g.config(3_600_000, [{ name: 'spare', url: g.mcp.url }])));
  g.relay.process.kill('SIGHUP');
  await waitFor(() => reloads() > before, { what: 'the reload to be logged', timeoutMs: 5000 });
  assert.equal(settled, 0, 'both calls were still open at the reload');

  const [status, text] = await short;
  assert.equal(status, 200, text);
  // The long call still holds the old pool: without its retirement the
  // connection the short one handed back would stay idle in it until then.
  await waitFor(() => g.mcp.openConnections() === 1, {
    what: 'the connection handed back to the replaced pool closed while a call is still on it',
  });
  assert.equal(settled, 1, 'the long call is still open');
  const [longStatus, longText] = await long;
  assert.equal(longStatus, 200, longText);
  await waitFor(() => g.mcp.openConnections() === 0, { what: 'the long call\'s connection closed with its pool' });
});

// Two tools/call at once (two connections, each call 1.5 s: the test sees
// both open), in `session`; resolves when both answered.
async function twoCallsAtOnce(g, session) {
  const answers = await Promise.all(
    [10, 11].map((id) =>
      rpc(g, { id, method: 'tools/call', params: { name: 'sleep', arguments: { ms: 1500 } } }, session).then(
        async (r) => [r.status, await r.text()],
      ),
    ),
  );
  for (const [status, text] of answers) assert.equal(status, 200, text);
}

test('max_idle_connections: one connection more than the cap is closed as it is handed back; a reload that lowers it closes the rest', async () => {
  const g = await setup(3_600_000, { max_idle_connections: 1 });
  const session = await initialize(g);
  const calls = twoCallsAtOnce(g, session);
  await waitFor(() => g.mcp.calls('tools/call').length === 2, { what: 'both calls at the server' });
  assert.equal(g.mcp.openConnections(), 2, 'two calls at once: two connections');
  await calls;
  await waitFor(() => g.mcp.openConnections() === 1, { what: 'the connection past the cap closed' });
  await new Promise((resolve) => setTimeout(resolve, 300)); // a real process: nothing more closes
  assert.equal(g.mcp.openConnections(), 1, 'the one under the cap is kept');

  const reloads = () => g.relay.logs().split('\n').filter((l) => /reloaded /.test(l)).length;
  const before = reloads();
  writeFileSync(g.relay.configPath, toYaml(g.config(3_600_000, [], { max_idle_connections: 0 })));
  g.relay.process.kill('SIGHUP');
  await waitFor(() => reloads() > before, { what: 'the reload to be logged', timeoutMs: 5000 });
  await waitFor(() => g.mcp.openConnections() === 0, { what: 'the kept connection closed by the lower cap' });
});

test('max_idle_connections: at the cap nothing is closed', async () => {
  const g = await setup(3_600_000, { max_idle_connections: 2 });
  const session = await initialize(g);
  await twoCallsAtOnce(g, session);
  await new Promise((resolve) => setTimeout(resolve, 300)); // a real process: closes would show by now
  assert.equal(g.mcp.openConnections(), 2);
});
