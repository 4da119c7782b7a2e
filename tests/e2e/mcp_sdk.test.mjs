// The official MCP TypeScript SDK (Client + StreamableHTTPClientTransport)
// against the gateway's /v1/mcp, in front of the reference server
// @modelcontextprotocol/server-everything (its Streamable HTTP transport, bound
// to 127.0.0.1 by lib/everything_loopback.mjs). The client is the one that
// works against the server directly; only its URL and credential change.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import { startEverything } from '../lib/everything.mjs';
import { relayConfig, startRelay, waitFor } from '../lib/harness.mjs';

const KEY = 'kr-mcp-e2e-2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c0e';
const SERVER_KEY = 'sk-everything-does-not-check-this-9b7d5f3a1c';
const SECRET = 'mcp-e2e-session-secret-0123456789abcdef-xyz';
const LIMITED_KEY = 'kr-mcp-e2e-limited-7b9d1f3a5c7e9b1d3f5a7c9e';
const ECHO_KEY = 'kr-mcp-e2e-echo-only-4d6f8a0c2e4a6c8e0b2d4f6a';

const env = {};

before(async () => {
  env.everything = await startEverything();
  env.relay = await startRelay(
    relayConfig({
      keys: [
        { name: 'agents', key: KEY },
        { name: 'limited', key: LIMITED_KEY, limits: { rpm: 4 } },
        { name: 'echo-only', key: ECHO_KEY, mcp_tools: { everything: ['echo'] } },
      ],
      upstreams: [],
      mcp: {
        servers: [{ name: 'everything', url: env.everything.url, api_key: SERVER_KEY, region: 'loopback' }],
        session_secret: SECRET,
      },
    }),
  );
});

after(async () => {
  await env.relay?.stop();
  await env.everything?.stop();
});

function gatewayTransport(options = {}) {
  return new StreamableHTTPClientTransport(new URL(`${env.relay.url}/v1/mcp/everything`), {
    requestInit: { headers: { authorization: `Bearer ${KEY}` } },
    ...options,
  });
}

async function connect(url, requestInit) {
  const transport = new StreamableHTTPClientTransport(new URL(url), requestInit ? { requestInit } : undefined);
  const client = new Client({ name: 'kimi-relay-e2e', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

async function openStreams() {
  const text = await (await fetch(`${env.relay.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('kimi_relay_mcp_open_streams{') && l.includes('server="everything"'));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : undefined;
}

describe('MCP SDK client through the gateway to server-everything', () => {
  let client;
  let transport;
  const logs = [];
  const resumptionTokens = [];

  test('initialize: a gateway session id, the server’s own identity', async () => {
    ({ client, transport } = await connect(`${env.relay.url}/v1/mcp/everything`, {
      headers: { authorization: `Bearer ${KEY}` },
    }));
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
    assert.match(transport.sessionId, /^kr1\.[A-Za-z0-9_-]+$/);
    assert.equal(client.getServerVersion().name, 'mcp-servers/everything');
    assert.ok(['2025-03-26', '2025-06-18', '2025-11-25'].includes(transport.protocolVersion));
  });

  test('tools/list matches what the server lists directly', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    assert.ok(names.includes('echo'));
    assert.ok(names.includes('trigger-long-running-operation'));
    const direct = await connect(env.everything.url);
    try {
      assert.deepEqual(names, (await direct.client.listTools()).tools.map((t) => t.name));
    } finally {
      await direct.transport.terminateSession();
      await direct.client.close();
    }
  });

  test('tools/call echo', async () => {
    const result = await client.callTool({ name: 'echo', arguments: { message: 'through the relay' } });
    assert.deepEqual(result.content, [{ type: 'text', text: 'Echo: through the relay' }]);
  });

  test('a tool that streams progress notifications before its result', async () => {
    const progress = [];
    const result = await client.callTool(
      { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 4 } },
      undefined,
      {
        onprogress: (p) => progress.push(p),
        // Called for each event id before the event's message is handled:
        // `seen` is how many progress notifications preceded it.
        onresumptiontoken: (token) => resumptionTokens.push({ token, seen: progress.length }),
      },
    );
    assert.match(result.content[0].text, /Long running operation completed/);
    assert.deepEqual(
      progress.map((p) => p.progress),
      [1, 2, 3, 4],
    );
    // Event ids come through unchanged: the server's own (UUIDs here).
    assert.ok(resumptionTokens.length >= 4, `tokens: ${JSON.stringify(resumptionTokens)}`);
    for (const { token } of resumptionTokens) {
      assert.match(token, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    }
    assert.equal(new Set(resumptionTokens.map((t) => t.token)).size, resumptionTokens.length);
  });

  test('resources: list and read', async () => {
    const { resources } = await client.listResources();
    assert.ok(resources.length > 0);
    const read = await client.readResource({ uri: resources[0].uri });
    assert.equal(read.contents[0].uri, resources[0].uri);
    assert.ok((read.contents[0].text ?? read.contents[0].blob).length > 0);
  });

  test('the GET stream is open and carries server notifications', async () => {
    await waitFor(async () => (await openStreams()) === 1, { what: 'the GET stream to be open', timeoutMs: 5000 });
    const before = logs.length;
    await client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
    try {
      await waitFor(() => logs.length > before, { what: 'a log notification on the GET stream', timeoutMs: 8000 });
    } finally {
      await client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
    }
    assert.match(String(logs[logs.length - 1].data), /message/i);
  });

  test('resumption: GET with Last-Event-ID replays what followed that event', async () => {
    // A second transport on the same session, as a client that lost its
    // stream after the first progress event would resume: from the id of the
    // event that carried progress 1 (the last id seen before any progress,
    // after a priming event if the server sent one).
    const afterFirst = resumptionTokens.filter((t) => t.seen === 0).pop().token;
    const resumed = gatewayTransport({ sessionId: transport.sessionId });
    const messages = [];
    resumed.onmessage = (m) => messages.push(m);
    resumed.onerror = () => {};
    await resumed.start();
    resumed.setProtocolVersion(transport.protocolVersion);
    try {
      await resumed.resumeStream(afterFirst);
      await waitFor(() => messages.some((m) => m.result?.content?.[0]?.text?.startsWith('Long running')), {
        what: 'the replayed tool result',
        timeoutMs: 5000,
      });
      const replayed = messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress);
      assert.deepEqual(replayed, [2, 3, 4]);
    } finally {
      await resumed.close();
    }
  });

  test('DELETE ends the session; the old id then gets 404 from the gateway', async () => {
    const old = transport.sessionId;
    const version = transport.protocolVersion;
    await transport.terminateSession();
    assert.equal(transport.sessionId, undefined);
    await client.close();
    const res = await fetch(`${env.relay.url}/v1/mcp/everything`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEY}`,
        accept: 'application/json, text/event-stream',
        'content-type': 'application/json',
        'mcp-session-id': old,
        'mcp-protocol-version': version,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'tools/list' }),
    });
    const body = await res.json();
    assert.equal(res.status, 404, JSON.stringify(body));
    assert.equal(body.id, 99);
    assert.equal(body.error.code, -32001);
    await waitFor(async () => (await openStreams()) === 0, { what: 'the GET stream to close' });
  });
});

describe('MCP SDK client under the key\'s limits', () => {
  test('rpm counts MCP requests: past it the SDK gets the 429 the gateway gave', async () => {
    // initialize and its notification take 2 of the 4; tools/list the third.
    const { client } = await connect(`${env.relay.url}/v1/mcp/everything`, { headers: { authorization: `Bearer ${LIMITED_KEY}` } });
    await client.listTools();
    await client.callTool({ name: 'echo', arguments: { message: 'fourth' } }).catch(() => {});
    await assert.rejects(client.callTool({ name: 'echo', arguments: { message: 'over' } }), (err) => {
      assert.match(String(err?.message), /429|Rate limit reached/);
      return true;
    });
    await client.close().catch(() => {});
  });

  test('a tool outside the key\'s mcp_tools is refused with an error naming it', async () => {
    const { client } = await connect(`${env.relay.url}/v1/mcp/everything`, { headers: { authorization: `Bearer ${ECHO_KEY}` } });
    const ok = await client.callTool({ name: 'echo', arguments: { message: 'hi' } });
    assert.match(ok.content[0].text, /hi/);
    await assert.rejects(client.callTool({ name: 'add', arguments: { a: 1, b: 2 } }), (err) => {
      assert.match(String(err?.message), /may not call the tool 'add'/);
      return true;
    });
    await client.close();
  });
});
