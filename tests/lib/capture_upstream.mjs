// A bare HTTP/1.1 upstream on raw TCP that records every request exactly as it
// arrived — request line, every header field in order and spelling, body —
// and answers a fixed chat.completion.
//
// kimi-relay-mock cannot show connection-specific fields: its own HTTP layer
// drops them (and any `:authority`-like name would not even parse) before it
// records a request. A test that checks such fields never cross the gateway
// needs to see the raw bytes, hence this server.
//
// Its answers carry connection-specific fields of their own (Connection naming
// x-upstream-hop, Keep-Alive, Proxy-Connection, chunked Transfer-Encoding), so
// a test can also check that none of them reaches the caller.
//
//   startCaptureUpstream({interim, errorWithTrailer, headBytes, endlessHead, noBodyLength, contentLength, codingOver, sseUntilClose, sseSplitChunks})
//     -> {url, port, hostPort, requests, closedByPeer(), close()}
//     requests  [{requestLine, method, target, headers: [[name, value]], body}]
//     interim           how many "103 Early Hints" heads come first (true = 1);
//                       the real answer follows 30 ms later in a write of its own
//     errorWithTrailer  a trailer field line (e.g. "Retry-After: 77"): the
//                       answer is then a 400 OpenAI error whose chunked body
//                       ends with that trailer field
//     headBytes         the answer's head (status line through the blank line
//                       that ends it) padded with an X-Padding field to
//                       exactly this many bytes
//     endlessHead       the answer is a status line followed by header field
//                       lines that never end, written for as long as the
//                       connection stays open
//     noBodyLength      the answer is a 204 No Content whose Content-Length
//                       declares this many bytes (allowed: no body belongs
//                       to a 204, whatever the fields say)
//     contentLength     the answer's body is exactly this many bytes (the
//                       completion, then spaces), framed by Content-Length,
//                       not chunked, and leaves with its head in one write
//     codingOver        with contentLength: the head also names a
//                       Transfer-Encoding other than chunked (gzip), which
//                       frames the body to the connection's end instead,
//                       and this many more bytes follow in the same write
//     sseUntilClose     {events, cut}: the answer is an SSE stream framed by
//                       the connection's close (no Content-Length, not
//                       chunked): `events` content events, a usage event
//                       and [DONE], each in a write of its own 5 ms apart,
//                       then the close. With `cut`, the close comes after
//                       the content events and half of one more instead
//     sseSplitChunks    {events, gapMs}: the answer is a chunked SSE stream of
//                       `events` content events and [DONE], each chunk's size
//                       line in a write of its own ahead of its data, gapMs
//                       between writes: never silent for longer than gapMs,
//                       though each event takes twice that
//     closedByPeer()    resolves once a connection the upstream wrote to was
//                       closed by the other side, with the bytes written to it

import { createServer } from 'node:net';

export const CAPTURE_REPLY_CONTENT = 'captured by the raw upstream';

function completion(model) {
  return JSON.stringify({
    id: 'chatcmpl-capture',
    object: 'chat.completion',
    created: 1_700_000_000,
    model,
    choices: [
      { index: 0, message: { role: 'assistant', content: CAPTURE_REPLY_CONTENT }, logprobs: null, finish_reason: 'stop' },
    ],
    usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 },
  });
}

// Parses one request from the front of `buf`; null while it is incomplete.
function parseRequest(buf) {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
  const requestLine = lines[0];
  const [method, target] = requestLine.split(' ');
  const headers = lines.slice(1).map((line) => {
    const colon = line.indexOf(':');
    return [line.slice(0, colon), line.slice(colon + 1).trim()];
  });
  const find = (name) => headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
  let rest = buf.subarray(end + 4);
  let body;
  if (find('transfer-encoding').some((v) => /chunked/i.test(v))) {
    const parts = [];
    for (;;) {
      const lineEnd = rest.indexOf('\r\n');
      if (lineEnd < 0) return null;
      const size = parseInt(rest.subarray(0, lineEnd).toString('latin1'), 16);
      if (rest.length < lineEnd + 2 + size + 2) return null;
      if (size === 0) {
        const trailerEnd = rest.indexOf('\r\n\r\n', lineEnd);
        const bare = rest.subarray(lineEnd + 2, lineEnd + 4).toString('latin1') === '\r\n';
        if (bare) rest = rest.subarray(lineEnd + 4);
        else if (trailerEnd >= 0) rest = rest.subarray(trailerEnd + 4);
        else return null;
        break;
      }
      parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      rest = rest.subarray(lineEnd + 2 + size + 2);
    }
    body = Buffer.concat(parts);
  } else {
    const length = Number(find('content-length')[0] ?? 0);
    if (rest.length < length) return null;
    body = rest.subarray(0, length);
    rest = rest.subarray(length);
  }
  return { request: { requestLine, method, target, headers, body: body.toString('utf8') }, rest };
}

// The head of `text` (which ends in "\r\n\r\n") padded to exactly `bytes`.
function padHead(text, bytes) {
  const padding = bytes - Buffer.byteLength(text, 'latin1') - 'X-Padding: \r\n'.length;
  if (padding < 0) throw new Error(`a head of ${bytes} bytes cannot hold the answer's fields`);
  return text.slice(0, -2) + `X-Padding: ${'p'.repeat(padding)}\r\n\r\n`;
}

// An SSE stream whose end is the connection's close: each event in a write
// of its own, so that the gateway reads them one at a time.
function writeSseUntilClose(socket, model, { events, cut = false }, written) {
  const event = (fields) =>
    `data: ${JSON.stringify({ id: 'chatcmpl-close', object: 'chat.completion.chunk', created: 1_700_000_000, model, ...fields })}\n\n`;
  const content = (text) => event({ choices: [{ index: 0, delta: { content: text }, logprobs: null, finish_reason: null }] });
  const parts = ['HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n'];
  for (let i = 0; i < events; ++i) parts.push(content(`part${i} `));
  if (cut) {
    const next = content('never whole');
    parts.push(next.slice(0, next.length >> 1));
  } else {
    parts.push(
      event({ choices: [], usage: { prompt_tokens: 3, completion_tokens: events, total_tokens: 3 + events } }),
      'data: [DONE]\n\n',
    );
  }
  let i = 0;
  const next = () => {
    if (socket.destroyed) return;
    if (i === parts.length) {
      socket.end();
      return;
    }
    written.bytes += parts[i].length;
    socket.write(parts[i++]);
    setTimeout(next, 5);
  };
  next();
}

function writeSseSplitChunks(socket, model, { events, gapMs }, written) {
  const event = (text) =>
    `data: ${JSON.stringify({ id: 'chatcmpl-split', object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [{ index: 0, delta: { content: text }, logprobs: null, finish_reason: null }] })}\n\n`;
  const bodies = Array.from({ length: events }, (_, i) => event(`split${i} `));
  bodies.push('data: [DONE]\n\n');
  const parts = [];
  for (const b of bodies) parts.push(`${Buffer.byteLength(b).toString(16)}\r\n`, `${b}\r\n`);
  parts.push('0\r\n\r\n');
  socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n');
  let i = 0;
  const next = () => {
    if (socket.destroyed || i === parts.length) return;
    written.bytes += parts[i].length;
    socket.write(parts[i++]);
    setTimeout(next, gapMs);
  };
  setTimeout(next, gapMs);
}

// Writes header field lines to `socket` until it closes, respecting its
// backpressure; returns the count of bytes written so far through `written`.
function writeEndlessHead(socket, written) {
  const line = Buffer.from(`X-Endless: ${'e'.repeat(1000)}\r\n`, 'latin1');
  const pump = () => {
    while (!socket.destroyed && socket.writable) {
      written.bytes += line.length;
      if (!socket.write(line)) {
        socket.once('drain', pump);
        return;
      }
    }
  };
  socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n');
  pump();
}

export async function startCaptureUpstream({
  interim = false,
  errorWithTrailer = '',
  headBytes = 0,
  endlessHead = false,
  noBodyLength = 0,
  contentLength = 0,
  codingOver = 0,
  sseUntilClose = null,
  sseSplitChunks = null,
} = {}) {
  const requests = [];
  const sockets = new Set();
  let peerClosed;
  const closedByPeer = new Promise((resolve) => {
    peerClosed = resolve;
  });
  const server = createServer((socket) => {
    sockets.add(socket);
    const written = { bytes: 0 };
    let closing = false;
    socket.on('close', () => {
      sockets.delete(socket);
      if (!closing && written.bytes > 0) peerClosed(written.bytes);
    });
    socket.on('error', () => {});
    socket.on('end', () => {
      if (written.bytes > 0) peerClosed(written.bytes);
    });
    socket.closeFromHere = () => {
      closing = true;
      socket.destroy();
    };
    let buf = Buffer.alloc(0);
    // Reads are kept as they come and joined once enough has arrived for the
    // request's declared length (joining at every read copies a 24 MB body
    // hundreds of times).
    let pending = [];
    let pendingBytes = 0;
    let need = 0;
    socket.on('data', (data) => {
      pending.push(data);
      pendingBytes += data.length;
      if (buf.length + pendingBytes < need) return;
      buf = Buffer.concat([buf, ...pending]);
      pending = [];
      pendingBytes = 0;
      need = 0;
      for (let parsed; (parsed = parseRequest(buf)); ) {
        buf = parsed.rest;
        const { request } = parsed;
        requests.push(request);
        let model = 'unknown';
        try {
          model = JSON.parse(request.body).model ?? model;
        } catch {
          // not JSON: answer anyway, the test looks at what was recorded
        }
        const body = Buffer.from(
          errorWithTrailer
            ? JSON.stringify({ error: { message: 'refused by the raw upstream', type: 'invalid_request_error', code: 'bad_request' } })
            : completion(model),
        );
        if (endlessHead) {
          writeEndlessHead(socket, written);
          continue;
        }
        if (sseUntilClose) {
          writeSseUntilClose(socket, model, sseUntilClose, written);
          continue;
        }
        if (sseSplitChunks) {
          writeSseSplitChunks(socket, model, sseSplitChunks, written);
          continue;
        }
        const id = request.headers.find(([n]) => n.toLowerCase() === 'x-request-id')?.[1];
        if (noBodyLength) {
          socket.write(
            `HTTP/1.1 204 No Content\r\nContent-Length: ${noBodyLength}\r\n` +
              (id ? `X-Request-Id: ${id}\r\n` : '') +
              '\r\n',
          );
          continue;
        }
        if (contentLength) {
          const padded = Buffer.alloc(Math.max(contentLength, body.length) + codingOver, ' ');
          body.copy(padded);
          socket.write(
            Buffer.concat([
              Buffer.from(
                'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n' +
                  (codingOver ? 'Transfer-Encoding: gzip\r\n' : '') +
                  `Content-Length: ${padded.length - codingOver}\r\n` +
                  (id ? `X-Request-Id: ${id}\r\n` : '') +
                  '\r\n',
                'latin1',
              ),
              padded,
            ]),
          );
          continue;
        }
        const half = Math.floor(body.length / 2);
        const chunk = (b) => Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n')]);
        const head =
          (errorWithTrailer ? 'HTTP/1.1 400 Bad Request\r\n' : 'HTTP/1.1 200 OK\r\n') +
          'Content-Type: application/json\r\n' +
          'Connection: keep-alive, X-Upstream-Hop\r\n' +
          'X-Upstream-Hop: named-in-connection\r\n' +
          'Keep-Alive: timeout=17, max=99\r\n' +
          'Proxy-Connection: keep-alive\r\n' +
          'Transfer-Encoding: chunked\r\n' +
          (id ? `X-Request-Id: ${id}\r\n` : '') +
          '\r\n';
        const answer = Buffer.concat([
          Buffer.from(headBytes ? padHead(head, headBytes) : head, 'latin1'),
          chunk(body.subarray(0, half)),
          chunk(body.subarray(half)),
          Buffer.from(errorWithTrailer ? `0\r\n${errorWithTrailer}\r\n\r\n` : '0\r\n\r\n', 'latin1'),
        ]);
        if (interim) {
          socket.write('HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n'.repeat(Number(interim)));
          setTimeout(() => socket.writable && socket.write(answer), 30);
        } else {
          socket.write(answer);
        }
      }
      // The request still arriving: how much it needs before joining again.
      const headEnd = buf.indexOf('\r\n\r\n');
      if (headEnd >= 0) {
        const length = /\r\ncontent-length:[ \t]*(\d+)/i.exec(buf.subarray(0, headEnd).toString('latin1'))?.[1];
        if (length !== undefined) need = headEnd + 4 + Number(length);
      }
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    hostPort: `127.0.0.1:${port}`,
    requests,
    closedByPeer: () => closedByPeer,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.closeFromHere();
        server.close(() => resolve());
      }),
  };
}
