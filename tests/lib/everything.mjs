// Starts @modelcontextprotocol/server-everything (its Streamable HTTP
// transport) on 127.0.0.1 with an ephemeral port, through the loopback
// wrapper everything_loopback.mjs (the package itself would listen on every
// interface).
//
//   startEverything() -> {url, port, logs(), stop()}
//     url  http://127.0.0.1:PORT/mcp
//
// Like harness.mjs, the child is started through setpriv with a parent-death
// signal where it exists, and killed when this process exits, so a failing
// test never leaves it behind.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const WRAPPER = join(dirname(fileURLToPath(import.meta.url)), 'everything_loopback.mjs');
const STARTUP_TIMEOUT_MS = 15_000;
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));

const live = new Set();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export async function startEverything() {
  const argv = [process.execPath, WRAPPER];
  const [bin, args] = SETPRIV ? [SETPRIV, ['--pdeathsig', 'SIGKILL', '--', ...argv]] : [argv[0], argv.slice(1)];
  const child = spawn(bin, args, { env: { ...process.env, PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let output = '';
  const exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    }),
  );
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server-everything not ready after ${STARTUP_TIMEOUT_MS} ms:\n${output}`));
    }, STARTUP_TIMEOUT_MS);
    const onData = (text) => {
      output += text;
      const m = output.match(/^everything listening on 127\.0\.0\.1:(\d+)$/m);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.stderr.setEncoding('utf8').on('data', onData);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`server-everything exited early (code ${code}, signal ${signal}):\n${output}`));
    });
  });
  return {
    port,
    url: `http://127.0.0.1:${port}/mcp`,
    logs: () => output,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
      const status = await exited;
      clearTimeout(timer);
      return status;
    },
  };
}
