// Idle connections to MCP server instances (mcp.servers[].max_idle_ms): the
// worker's memory tick closes those idle that long, as it does an upstream's
// (upstream_pool.test.mjs), so a server no tool call goes to any more keeps
// no connection of ours open; a reload's new time applies to those kept.
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

// A recording MCP server and a one-worker gateway in front of it.
async function setup(maxIdleMs) {
  const mcp = await startRecordingMcp({ name: 'idle', keepAliveTimeoutMs: 60_000 });
  cleanup.push(() => mcp.close());
  const config = (idle) =>
    relayConfig({
      server: { workers: 1, memory_release_ms: 100 },
      keys: [{ name: 'idle', key: KEY }],
      upstreams: [],
      mcp: { servers: [{ name: 'idle', url: mcp.url, max_idle_ms: idle }] },
    });
  const relay = await startRelay(config(maxIdleMs));
  cleanup.push(() => relay.stop());
  return { mcp, relay, config };
}

// One initialize through the gateway: the gateway keeps its connection.
async function initialize({ relay, mcp }) {
  const res = await fetch(`${relay.url}/v1/mcp/idle`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${KEY}`,
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'idle-test', version: '1' } },
    }),
  });
  assert.equal(res.status, 200, await res.text());
  assert.equal(mcp.openConnections(), 1, 'the gateway keeps its connection for the next call');
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
