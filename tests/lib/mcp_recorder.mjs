// A small MCP Streamable HTTP server (node:http, 127.0.0.1 only) that records
// every request it receives — method, every header as sent, body — so that a
// test can see exactly what the gateway forwards (credentials, Host, session
// ids, Last-Event-ID). Start several to play the instances of one server.
//
//   startRecordingMcp({name, apiKey, unknownSessionStatus}) ->
//     {name, url, hostPort, requests, sessions, calls(), openStreams(), push(), close()}
//
//   name                  the instance's name: in its session ids ("<name>-<uuid>"),
//                         in the answer of the `whoami` tool and in event ids
//   apiKey                when set, a request without `Authorization: Bearer
//                         <apiKey>` gets 401 (the gateway must inject it)
//   unknownSessionStatus  what an unknown session gets: 400 by default, like
//                         server-everything (the gateway must turn it into 404)
//
// JSON-RPC served: initialize (a new session, JSON answer), ping, tools/list,
// tools/call `whoami` (JSON), `sleep` (JSON after arguments.ms) and `stream`
// (an SSE answer: a progress notification then the result, each with an
// event id), notifications and
// client responses (202). GET opens an SSE stream that sends one event naming
// the Last-Event-ID it was given and stays open; DELETE ends the session.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

export const RECORDER_TOOLS = [
  { name: 'whoami', description: 'Names the instance that answers', inputSchema: { type: 'object' } },
  { name: 'stream', description: 'Answers as an SSE stream', inputSchema: { type: 'object' } },
  { name: 'sleep', description: 'Answers after arguments.ms milliseconds', inputSchema: { type: 'object' } },
];

// `keepAliveTimeoutMs`: how long it keeps an idle connection itself (Node's
// default, 5 s, when absent).
export async function startRecordingMcp({ name = 'recorder', apiKey, unknownSessionStatus = 400, keepAliveTimeoutMs } = {}) {
  const requests = [];
  const sessions = new Set();
  const streams = new Set();
  const sockets = new Set();

  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks).toString('utf8');
    const headers = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) headers.push([req.rawHeaders[i], req.rawHeaders[i + 1]]);
    const record = { method: req.method, path: req.url, headers, body, json: undefined };
    requests.push(record);

    const json = (status, value, extra = {}) => {
      const text = JSON.stringify(value);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...extra });
      res.end(text);
    };
    const rpcError = (status, id, code, message) => json(status, { jsonrpc: '2.0', id: id ?? null, error: { code, message } });

    if (apiKey !== undefined && req.headers.authorization !== `Bearer ${apiKey}`) {
      res.writeHead(401, { 'www-authenticate': 'Bearer realm="recorder"', 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'unauthorized' }));
      return;
    }
    const sid = req.headers['mcp-session-id'];
    const knownSession = sid !== undefined && sessions.has(sid);

    if (req.method === 'GET') {
      if (!knownSession) return rpcError(unknownSessionStatus, null, -32000, 'Bad Request: No valid session ID provided');
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'mcp-session-id': sid });
      const last = req.headers['last-event-id'] ?? null;
      const note = { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: { from: name, lastEventId: last } } };
      res.write(`id: ${name}-get-1\nevent: message\ndata: ${JSON.stringify(note)}\n\n`);
      streams.add(res);
      res.on('close', () => streams.delete(res));
      return;
    }
    if (req.method === 'DELETE') {
      if (!knownSession) return rpcError(unknownSessionStatus, null, -32000, 'Bad Request: No valid session ID provided');
      sessions.delete(sid);
      res.writeHead(200, { 'content-length': 0 });
      res.end();
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'GET, POST, DELETE' });
      res.end();
      return;
    }

    let message;
    try {
      message = JSON.parse(body);
    } catch {
      return rpcError(400, null, -32700, 'Parse error');
    }
    record.json = message;
    if (message.method === 'initialize') {
      const newSid = `${name}-${randomUUID()}`;
      sessions.add(newSid);
      return json(
        200,
        {
          jsonrpc: '2.0',
          id: message.id,
          result: {
            protocolVersion: message.params?.protocolVersion ?? '2025-06-18',
            capabilities: { tools: {} },
            serverInfo: { name, version: '1.0.0' },
          },
        },
        { 'mcp-session-id': newSid },
      );
    }
    if (!knownSession) return rpcError(unknownSessionStatus, message.id, -32000, 'Bad Request: No valid session ID provided');
    if (message.id === undefined) {
      res.writeHead(202, { 'content-length': 0 });
      res.end();
      return;
    }
    const result = (value) => json(200, { jsonrpc: '2.0', id: message.id, result: value }, { 'mcp-session-id': sid });
    switch (message.method) {
      case 'ping':
        return result({});
      case 'tools/list':
        return result({ tools: RECORDER_TOOLS });
      case 'tools/call': {
        const tool = message.params?.name;
        if (tool === 'whoami') return result({ content: [{ type: 'text', text: name }] });
        if (tool === 'sleep') {
          await new Promise((r) => setTimeout(r, Number(message.params?.arguments?.ms ?? 100)));
          return result({ content: [{ type: 'text', text: 'slept' }] });
        }
        if (tool === 'stream') {
          res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'mcp-session-id': sid });
          const progress = { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1, total: 1 } };
          res.write(`id: ${name}-ev-1\nevent: message\ndata: ${JSON.stringify(progress)}\n\n`);
          await new Promise((r) => setTimeout(r, 50));
          const done = { jsonrpc: '2.0', id: message.id, result: { content: [{ type: 'text', text: `streamed by ${name}` }] } };
          res.end(`id: ${name}-ev-2\nevent: message\ndata: ${JSON.stringify(done)}\n\n`);
          return;
        }
        return rpcError(200, message.id, -32602, `Unknown tool: ${tool}`);
      }
      default:
        return rpcError(200, message.id, -32601, `Method not found: ${message.method}`);
    }
  });
  if (keepAliveTimeoutMs !== undefined) server.keepAliveTimeout = keepAliveTimeoutMs;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  return {
    name,
    url: `http://127.0.0.1:${port}/mcp`,
    hostPort: `127.0.0.1:${port}`,
    port,
    requests,
    sessions,
    openStreams: () => streams.size,
    // TCP connections open to it now (a gateway's kept ones included).
    openConnections: () => sockets.size,
    // Sends one SSE event with `id` and JSON `message` on every open GET stream.
    push: (id, message) => {
      for (const res of streams) res.write(`id: ${id}\nevent: message\ndata: ${JSON.stringify(message)}\n\n`);
    },
    // Recorded requests of a method ("initialize", "tools/call", "GET", ...).
    calls: (what) => requests.filter((r) => r.method === what || r.json?.method === what),
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

// Every value of header `name` (case-insensitive) in a recorded request.
export function recordedHeader(record, name) {
  const lower = name.toLowerCase();
  return record.headers.filter(([n]) => n.toLowerCase() === lower).map(([, v]) => v);
}
