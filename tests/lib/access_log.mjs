// Reading the gateway's JSON access log (log.access_log, docs/metrics.md) in
// tests. Lines are written in batches, up to ~0.5 s after a request settles,
// so a test polls for the lines it expects instead of sleeping.
//
//   const lines = await waitForAccessLines(path, requestIds);  // Map id -> object
//   accessLogLines(path)                                       // every complete line, raw

import { existsSync, readFileSync } from 'node:fs';

import { waitFor } from './harness.mjs';

// The complete lines of the log (a trailing line without its "\n" is still
// being written and left out); [] while the file does not exist.
export function accessLogLines(path) {
  if (!existsSync(path)) return [];
  const text = readFileSync(path, 'utf8');
  const lines = text.split('\n');
  lines.pop();
  return lines;
}

// Each complete line parsed as JSON; a line that does not parse throws, naming it.
export function parseAccessLog(path) {
  return accessLogLines(path).map((line, i) => {
    try {
      return JSON.parse(line);
    } catch (err) {
      throw new Error(`access log line ${i + 1} is not JSON (${err.message}): ${JSON.stringify(line)}`);
    }
  });
}

// Polls the log until it holds a line for every id in `requestIds`; resolves to
// a Map request_id -> parsed line. Throws after `timeoutMs` naming the missing
// ids, or at once if some id has more than one line (one line per request).
export async function waitForAccessLines(path, requestIds, { timeoutMs = 5000 } = {}) {
  const wanted = new Set(requestIds);
  let found;
  try {
    await waitFor(
      () => {
        found = new Map();
        for (const entry of parseAccessLog(path)) {
          if (!wanted.has(entry.request_id)) continue;
          if (found.has(entry.request_id)) {
            throw new Error(`request ${entry.request_id} has more than one access log line`);
          }
          found.set(entry.request_id, entry);
        }
        return found.size === wanted.size;
      },
      { timeoutMs, intervalMs: 50, what: 'the access log lines' },
    );
  } catch (err) {
    if (!/^timed out/.test(err.message)) throw err;
    const missing = [...wanted].filter((id) => !found?.has(id));
    throw new Error(`no access log line after ${timeoutMs} ms for ${missing.join(', ')} (log: ${path})`);
  }
  return found;
}
