// Runs @modelcontextprotocol/server-everything's own Streamable HTTP transport
// (dist/transports/streamableHttp.js, the one `mcp-server-everything
// streamableHttp` starts) bound to 127.0.0.1 only.
//
// That transport calls `app.listen(PORT)` without a host, which listens on
// every interface, and honours no variable for the host (only PORT). So this
// wrapper patches net.Server.prototype.listen before importing it: a listen
// with a port and no host gets 127.0.0.1. The transport code itself — routes,
// sessions, its in-memory event store for Last-Event-ID resumption — is the
// package's, unchanged.
//
//   PORT=0 node tests/lib/everything_loopback.mjs
//
// prints "everything listening on 127.0.0.1:<port>" once bound, and exits if
// the socket were bound anywhere else.

import net from 'node:net';

const LOOPBACK = '127.0.0.1';
const originalListen = net.Server.prototype.listen;

net.Server.prototype.listen = function listenOnLoopback(...args) {
  const [first] = args;
  if (typeof first === 'object' && first !== null && !Array.isArray(first) && first.path === undefined) {
    args[0] = { ...first, host: LOOPBACK };
  } else if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    args[0] = Number(first);
    if (typeof args[1] === 'string') args[1] = LOOPBACK;
    else args.splice(1, 0, LOOPBACK);
  }
  this.once('listening', () => {
    const address = this.address();
    if (address?.address !== LOOPBACK) {
      console.error(`refusing to serve on ${JSON.stringify(address)}: loopback only`);
      process.exit(3);
    }
    console.log(`everything listening on ${LOOPBACK}:${address.port}`);
  });
  return originalListen.apply(this, args);
};

await import('@modelcontextprotocol/server-everything/dist/transports/streamableHttp.js');
