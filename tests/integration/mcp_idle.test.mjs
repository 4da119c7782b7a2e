// Idle connections to MCP server instances (mcp.servers[].max_idle_ms): the
// worker's memory tick closes those idle that long, as it does an upstream's
// (upstream_pool.test.mjs), so a server no tool call goes to any more keeps
// no connection of ours open.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { relayConfig, startRelay, waitFor } from '../lib/harness.mjs';
import { startRecordingMcp } from '../lib/mcp_recorder.mjs';

const KEY = 'kr-mcp-idle-3e5a7c9e1b3d5f7a9c2e4a6c8e0b2d4f';

const mcp = await startRecordingMcp({ name: 'idle' });
const relay = await startRelay(
  relayConfig({
    server: { workers: 1, memory_release_ms: 100 },
    keys: [{ name: 'idle', key: KEY }],
    upstreams: [],
    mcp: { servers: [{ name: 'idle', url: mcp.url, max_idle_ms: 1000 }] },
  }),
);
after(async () => Promise.all([relay.stop(), mcp.close()]));

test('a connection to an MCP server idle for max_idle_ms is closed by the worker\'s tick, with no call', async () => {
  const sent = performance.now();
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
  // Node closes an idle connection itself after 5 s: the gateway must have
  // closed it well before that.
  await waitFor(() => mcp.openConnections() === 0, { what: 'the idle connection closed', timeoutMs: 3500 });
  const elapsed = performance.now() - sent;
  assert.ok(elapsed >= 900, `closed ${elapsed} ms after the call, before max_idle_ms`);
});
