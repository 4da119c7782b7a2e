// A real redis-server for the shared-state tests (Debian's redis-server
// package, installed by scripts/install-deps.sh), on a free loopback port,
// nothing persisted, plus a minimal RESP client to look inside it.
//
//   const redis = await startRedis();          // {port, url, stop(), kill(), restart()}
//   await redis.command('FLUSHALL');

import { existsSync } from 'node:fs';
import { connect } from 'node:net';

import { closedPort, spawnProcess } from './harness.mjs';

export const REDIS_SERVER = ['/usr/bin/redis-server', '/usr/sbin/redis-server'].find((p) => existsSync(p));

async function launch(port, password) {
  const args = [
    '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
    '--daemonize', 'no', '--protected-mode', 'no',
  ];
  if (password) args.push('--requirepass', password);
  const proc = spawnProcess(REDIS_SERVER, args);
  const deadline = Date.now() + 10_000;
  while (!/Ready to accept connections/.test(proc.output.stdout)) {
    if (proc.exitStatus()) throw new Error(`redis-server exited: ${proc.output.stdout}${proc.output.stderr}`);
    if (Date.now() > deadline) {
      await proc.stop('SIGKILL');
      throw new Error(`redis-server not ready: ${proc.output.stdout}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return proc;
}

export async function startRedis({ password } = {}) {
  if (!REDIS_SERVER) throw new Error('redis-server is not installed (scripts/install-deps.sh installs it)');
  const port = await closedPort();
  let proc = await launch(port, password);
  const auth = password ? `:${encodeURIComponent(password)}@` : '';
  return {
    port,
    url: `redis://${auth}127.0.0.1:${port}/0`,
    // Sends one command and resolves to its reply (strings, numbers, arrays, null).
    command: (...args) => redisCommand(port, password, args),
    stop: () => proc.stop(),
    kill: () => proc.stop('SIGKILL'),
    // Starts again on the same port (after kill/stop), empty.
    async restart() {
      proc = await launch(port, password);
    },
  };
}

function encode(args) {
  let out = `*${args.length}\r\n`;
  for (const a of args) {
    const s = String(a);
    out += `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
  }
  return out;
}

// Parses one reply at `buf[pos]`: [value, next] or null when incomplete.
function parse(buf, pos) {
  const eol = buf.indexOf('\r\n', pos);
  if (eol < 0) return null;
  const type = String.fromCharCode(buf[pos]);
  const line = buf.toString('utf8', pos + 1, eol);
  const next = eol + 2;
  if (type === '+') return [line, next];
  if (type === '-') return [new Error(line), next];
  if (type === ':') return [Number(line), next];
  if (type === '$') {
    const n = Number(line);
    if (n < 0) return [null, next];
    if (buf.length < next + n + 2) return null;
    return [buf.toString('utf8', next, next + n), next + n + 2];
  }
  if (type === '*') {
    const n = Number(line);
    if (n < 0) return [null, next];
    const items = [];
    let at = next;
    for (let i = 0; i < n; i += 1) {
      const r = parse(buf, at);
      if (!r) return null;
      items.push(r[0]);
      at = r[1];
    }
    return [items, at];
  }
  throw new Error(`unexpected RESP type ${type}`);
}

export function redisCommand(port, password, args) {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const expected = password ? 2 : 1;
    const replies = [];
    socket.setTimeout(5000, () => {
      socket.destroy();
      reject(new Error(`redis ${args[0]}: timed out`));
    });
    socket.on('error', reject);
    socket.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const r = parse(buf, 0);
        if (!r) break;
        replies.push(r[0]);
        buf = buf.subarray(r[1]);
      }
      if (replies.length >= expected) {
        socket.end();
        const reply = replies[expected - 1];
        if (reply instanceof Error) reject(reply);
        else resolve(reply);
      }
    });
    socket.write((password ? encode(['AUTH', password]) : '') + encode(args));
  });
}
