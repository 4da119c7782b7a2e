// server.busy_poll_us: workers that poll for a while after their last work
// before they sleep still answer everything, JSON and streamed, from every
// worker; and once the work stops they do sleep: an idle gateway's CPU time
// stops growing after the window (a worker that polled on would burn its
// core the whole time).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { test } from 'node:test';

import { KEYS, useTopology } from '../lib/fixtures.mjs';
import { chatRequest, collectSse, postChat, streamedContent } from '../lib/harness.mjs';

// The window at its ceiling, so a loop that never slept would show at once.
const env = useTopology({ server: { workers: 2, busy_poll_us: 1000 } });

// User plus system CPU time of a process, in clock ticks (/proc/PID/stat
// fields 14 and 15; the command name before them may hold spaces).
function cpuTicks(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

test('polling workers answer JSON and streamed requests on both workers', async () => {
  const answers = await Promise.all(
    Array.from({ length: 40 }, async (_, i) => {
      const streamed = i % 2 === 1;
      const res = await postChat(env.relay, chatRequest({ stream: streamed }), { key: KEYS.full });
      assert.equal(res.status, 200);
      if (!streamed) return (await res.json()).choices[0].message.content.length > 0;
      const events = await collectSse(res);
      assert.equal(events.at(-1).done, true, 'the stream ends with [DONE]');
      return streamedContent(events).length > 0;
    }),
  );
  assert.ok(answers.every(Boolean), 'every answer carries content');
});

test('an idle gateway sleeps after the window: its CPU time stops growing', async () => {
  // Work first, so that the workers have just polled.
  for (let i = 0; i < 20; i += 1) {
    const res = await postChat(env.relay, chatRequest(), { key: KEYS.full });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
  }
  const pid = env.relay.process.pid;
  const before = cpuTicks(pid);
  // A wall-clock second of a real process: no clock to inject here. Two
  // workers polling on would spend about 200 ticks in it (100 per second
  // each); asleep they spend next to nothing (the telemetry's own timers).
  await delay(1000);
  const spent = cpuTicks(pid) - before;
  assert.ok(spent <= 10, `the idle gateway spent ${spent} ticks of CPU in one second`);
});
