// One client interface over the four ways to reach the gateway, so a suite can
// run the same cases over each (habit 9):
//
//   PROTOCOLS            [{name, tls, h2}] — HTTP/1.1, HTTP/1.1+TLS,
//                        HTTP/2+TLS (ALPN) and h2c (prior knowledge)
//   openClient(p, opts)  a client that keeps ONE connection to the gateway
//
// HTTP/1.1 goes through node:http / node:https with a keep-alive Agent limited
// to one socket; HTTP/2 through node:http2 `connect` (one session). Replies
// look alike whatever the protocol:
//
//   {status, headers, headerNames, httpVersion, stream, body, text(), json(), cancel()}
//     headers      lower-case names -> value (HTTP/2 pseudo-headers included)
//     headerNames  every field name as received, in order
//     stream       the Node Readable of the body
//     body         the same body as a web ReadableStream, so readSse() and
//                  collectSse() of harness.mjs take a reply as they take a fetch Response
//     cancel()     HTTP/2: RST_STREAM(CANCEL) on this stream only;
//                  HTTP/1.1: the connection is closed (the only way h1 can cancel)

import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';

export const PROTOCOLS = [
  { name: 'HTTP/1.1', tls: false, h2: false },
  { name: 'HTTP/1.1+TLS', tls: true, h2: false },
  { name: 'HTTP/2+TLS (ALPN)', tls: true, h2: true },
  { name: 'h2c (prior knowledge)', tls: false, h2: true },
];

// `relay` is a startRelay handle (its tlsUrl is used when protocol.tls);
// `ca` the PEM text of the CA to trust; `h2Settings` the local SETTINGS an
// HTTP/2 client announces (e.g. {initialWindowSize: 16}).
export async function openClient(protocol, { relay, ca, h2Settings } = {}) {
  const base = protocol.tls ? relay.tlsUrl : relay.url;
  if (!base) throw new Error(`${protocol.name}: the gateway has no ${protocol.tls ? 'TLS' : 'plaintext'} listener`);
  return protocol.h2 ? openH2(base, { ca, settings: h2Settings }) : openH1(base, { tls: protocol.tls, ca });
}

function makeReply({ status, headers, headerNames, httpVersion, stream, cancel }) {
  let web;
  return {
    status,
    headers,
    headerNames,
    httpVersion,
    stream,
    get body() {
      // Pull-based, from the stream's async iterator: Readable.toWeb() on
      // Node 20 can throw "Controller is already closed" when an HTTP/2 stream
      // ends while data is still being pushed, under load.
      web ??= (() => {
        let iterator;
        return new ReadableStream({
          start() {
            iterator = stream[Symbol.asyncIterator]();
          },
          async pull(controller) {
            const { value, done } = await iterator.next();
            if (done) {
              controller.close();
            } else {
              controller.enqueue(typeof value === 'string' ? new TextEncoder().encode(value) : new Uint8Array(value));
            }
          },
          cancel() {
            stream.destroy();
          },
        });
      })();
      return web;
    },
    async text() {
      stream.setEncoding('utf8');
      let text = '';
      for await (const piece of stream) text += piece;
      return text;
    },
    async json() {
      return JSON.parse(await this.text());
    },
    cancel,
  };
}

// Request bodies: an object is sent as JSON, a string or Buffer as is.
function encodeBody(body) {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string' || Buffer.isBuffer(body)) return body;
  return JSON.stringify(body);
}

// ---------------------------------------------------------------------------
// HTTP/1.1 and HTTP/1.1 over TLS

function openH1(base, { tls, ca }) {
  const lib = tls ? https : http;
  // ALPN http/1.1 is offered explicitly: node:https offers nothing by default,
  // and a client that names its protocol is the case worth checking.
  const agent = tls
    ? new https.Agent({ keepAlive: true, maxSockets: 1, ca, ALPNProtocols: ['http/1.1'] })
    : new http.Agent({ keepAlive: true, maxSockets: 1 });
  let lastSocket = null;

  function request({ method = 'POST', path, headers = {}, body } = {}) {
    const payload = encodeBody(body);
    const h = { ...headers };
    if (payload !== undefined && !Object.keys(h).some((k) => k.toLowerCase() === 'content-length')) {
      h['content-length'] = Buffer.byteLength(payload);
    }
    return new Promise((resolve, reject) => {
      const req = lib.request(`${base}${path}`, { method, agent, headers: h }, (res) => {
        lastSocket = res.socket;
        resolve(
          makeReply({
            status: res.statusCode,
            headers: res.headers,
            headerNames: res.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase()),
            httpVersion: res.httpVersion,
            stream: res,
            cancel: () => req.destroy(),
          }),
        );
      });
      req.on('error', reject);
      req.end(payload);
    });
  }

  return {
    protocol: tls ? 'HTTP/1.1+TLS' : 'HTTP/1.1',
    request,
    // What the last response's connection negotiated.
    negotiated: () => ({
      encrypted: Boolean(lastSocket?.encrypted),
      alpn: lastSocket?.alpnProtocol,
      authorized: lastSocket?.authorized,
      http2: false,
    }),
    close: async () => agent.destroy(),
  };
}

// ---------------------------------------------------------------------------
// HTTP/2 over TLS (ALPN h2) and h2c with prior knowledge

async function openH2(base, { ca, settings }) {
  const session = http2.connect(base, { ca, settings });
  const errors = [];
  session.on('error', (err) => errors.push(err));
  await new Promise((resolve, reject) => {
    session.once('connect', resolve);
    session.once('error', reject);
  });
  // The gateway's SETTINGS are what prove an HTTP/2 server answered.
  if (!session.remoteSettings || Object.keys(session.remoteSettings).length === 0) {
    await new Promise((resolve) => session.once('remoteSettings', resolve));
  }

  function request({ method = 'POST', path, headers = {}, body } = {}) {
    const payload = encodeBody(body);
    const h = { ':method': method, ':path': path, ...headers };
    if (payload !== undefined && !('content-length' in h)) h['content-length'] = Buffer.byteLength(payload);
    const req = session.request(h, { endStream: payload === undefined });
    if (payload !== undefined) req.end(payload);
    return new Promise((resolve, reject) => {
      req.once('error', reject);
      req.once('response', (responseHeaders) => {
        req.off('error', reject);
        // After the response an error belongs to the body: make it visible to
        // whoever reads the stream, not an uncaught exception.
        req.on('error', () => {});
        resolve(
          makeReply({
            status: responseHeaders[':status'],
            headers: { ...responseHeaders },
            headerNames: Object.keys(responseHeaders),
            httpVersion: '2.0',
            stream: req,
            cancel: () => req.close(http2.constants.NGHTTP2_CANCEL),
          }),
        );
      });
    });
  }

  return {
    protocol: base.startsWith('https:') ? 'h2' : 'h2c',
    session,
    errors,
    request,
    negotiated: () => ({
      encrypted: session.encrypted,
      // node names a cleartext session's protocol 'h2c'
      alpn: session.encrypted ? session.socket.alpnProtocol : session.alpnProtocol,
      authorized: session.encrypted ? session.socket.authorized : undefined,
      http2: true,
      remoteSettings: session.remoteSettings,
    }),
    close: () =>
      new Promise((resolve) => {
        if (session.destroyed) return resolve();
        const timer = setTimeout(() => {
          session.destroy();
          resolve();
        }, 2000);
        session.close(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}
