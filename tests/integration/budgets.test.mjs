// Budgets through the real binary: token and USD caps refuse with
// insufficient_quota once spent, spend is persisted in state_dir and survives
// a restart (clean SIGTERM, and SIGKILL after the periodic flush), and a
// corrupt state file stops start-up instead of resetting spend.
//
// Spend is predictable because the mock's usage is (src/mock/chat.cpp):
// completion tokens = chunks (x-mock-chunks), prompt tokens = ceil(chars / 4).

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';

import { resetMocks } from '../lib/fixtures.mjs';
import { metricSum, scrapeMetrics } from '../lib/metrics.mjs';
import {
  chatRequest,
  collectSse,
  postChat,
  readOpenAiError,
  relayConfig,
  startMock,
  startRelay,
  toYaml,
  waitFor,
} from '../lib/harness.mjs';

const UPSTREAM_KEY = 'sk-budget-upstream-secret-7c9e1a3b5d7f9c1e3a5b';
const keyOf = (name) => `kr-test-budget-${name}-8b0d2f4a6c8e0b2d4f6a`;

const env = { relays: [] };
before(async () => {
  env.mock = await startMock({ name: 'upstream', apiKey: UPSTREAM_KEY });
});
after(async () => {
  await Promise.all([...env.relays, env.mock].map((p) => p.stop()));
});
beforeEach(async () => {
  await resetMocks({ upstream: env.mock });
});

// A gateway config in front of the mock with `keys` ({name: budget}).
function budgetConfig(keys, extra = {}) {
  return relayConfig({
    keys: Object.entries(keys).map(([name, budget]) => ({ name, key: keyOf(name), budget })),
    upstreams: [
      {
        name: 'upstream',
        url: env.mock.url,
        apiKey: UPSTREAM_KEY,
        models: { 'kimi-k2': 'kimi-k2', 'm-priced': 'm-priced' },
      },
    ],
    ...extra,
  });
}

async function relayFor(config) {
  const relay = await startRelay(config);
  env.relays.push(relay);
  return relay;
}

function chat(relay, keyName, body = {}, headers = {}) {
  return postChat(relay, chatRequest(body), { key: keyOf(keyName), headers });
}

async function expectServed(res) {
  const text = await res.text();
  assert.equal(res.status, 200, text);
}

// A budget refusal: 429 insufficient_quota, not worth retrying, with a message
// naming the key and the budget. Returns the message.
async function expectBudgetRefusal(res, keyName, budgetWords) {
  assert.equal(res.status, 429);
  assert.ok(res.headers.get('x-request-id'));
  assert.equal(res.headers.get('x-should-retry'), 'false');
  assert.equal(res.headers.get('retry-after'), null, 'no Retry-After: waiting seconds will not refill a budget');
  const err = await readOpenAiError(res, assert);
  assert.equal(err.type, 'insufficient_quota');
  assert.equal(err.code, 'insufficient_quota');
  assert.ok(err.message.includes(`'${keyName}'`), `the message does not name the key: ${err.message}`);
  assert.match(err.message, budgetWords);
  return err.message;
}

describe('caps', () => {
  before(async () => {
    env.caps = await relayFor(
      budgetConfig(
        {
          'out-cap': { max_output_tokens: 30, period: 'day' },
          'in-cap': { max_input_tokens: 40 },
          'usd-cap': { usd: 0.001, period: 'total' },
          'stream-cap': { max_output_tokens: 5 },
          'cut-cap': { max_output_tokens: 8 },
        },
        // 100 USD per million completion tokens: 10 tokens cost 0.001 USD.
        { prices: [{ model: 'm-priced', input: 0, output: 100 }] },
      ),
    );
  });

  // Budgets are reserved: a request is admitted only if its worst case (the
  // estimated prompt, its max_tokens) fits in what is left.
  test('max_output_tokens: a request whose max_tokens does not fit is refused, naming what is left', async () => {
    await env.mock.resetStats();
    await expectServed(await chat(env.caps, 'out-cap', { max_tokens: 20 }, { 'x-mock-chunks': '20' })); // 20 of 30
    const message = await expectBudgetRefusal(await chat(env.caps, 'out-cap', { max_tokens: 20 }), 'out-cap', /output-token budget/);
    assert.match(message, /\b10 output tokens left\b/);
    assert.match(message, /\b30\b/);
    assert.match(message, /max_tokens/, 'says what to lower');
    assert.match(message, /resets at \d{4}-\d\d-\d\dT00:00:00Z/, 'a daily budget says when it resets');
    await expectServed(await chat(env.caps, 'out-cap', { max_tokens: 10 }, { 'x-mock-chunks': '10' })); // 30 of 30
    await expectBudgetRefusal(await chat(env.caps, 'out-cap', { max_tokens: 1 }), 'out-cap', /\b0 output tokens left/);
    assert.equal((await env.mock.stats()).requests, 2, 'the refused requests never reached the upstream');
  });

  test('max_input_tokens: the prompt is held at its estimate and charged what the upstream reported', async () => {
    // 120 characters: estimated at 37 tokens (fits 40), reported as 30 by the mock.
    await expectServed(await chat(env.caps, 'in-cap', { messages: [{ role: 'user', content: 'x'.repeat(120) }] }));
    // 40 characters: estimated at 17; 40 - 30 = 10 left (the estimate of the first is gone).
    const message = await expectBudgetRefusal(
      await chat(env.caps, 'in-cap', { messages: [{ role: 'user', content: 'x'.repeat(40) }] }),
      'in-cap',
      /input-token budget of 40/,
    );
    assert.match(message, /\b10 input tokens left\b/);
  });

  test('usd: the price table turns usage into spend, and the worst case into a hold', async () => {
    // max_tokens 11 could cost $0.0011 > $0.001: refused before any spend.
    await expectBudgetRefusal(await chat(env.caps, 'usd-cap', { model: 'm-priced', max_tokens: 11 }), 'usd-cap', /\$0\.001\b/);
    await expectServed(await chat(env.caps, 'usd-cap', { model: 'm-priced', max_tokens: 10 }, { 'x-mock-chunks': '10' }));
    const message = await expectBudgetRefusal(await chat(env.caps, 'usd-cap', { model: 'm-priced', max_tokens: 1 }), 'usd-cap', /budget/);
    assert.match(message, /\$0\.00 left/);
    assert.match(message, /\$0\.001\b/);
    assert.match(message, /does not reset/);
  });

  test('a stream is charged its usage', async () => {
    const res = await chat(env.caps, 'stream-cap', { stream: true, max_tokens: 5 }, { 'x-mock-chunks': '8' });
    assert.equal(res.status, 200);
    const events = await collectSse(res);
    assert.ok(events.at(-1).done);
    await expectBudgetRefusal(await chat(env.caps, 'stream-cap', { max_tokens: 1 }), 'stream-cap', /\b0 output tokens left/);
  });

  test('a stream cut short is charged what it produced, not its hold', async () => {
    const res = await chat(env.caps, 'cut-cap', { stream: true, max_tokens: 8 }, { 'x-mock-chunks': '10', 'x-mock-fault': 'reset_after=4' });
    assert.equal(res.status, 200);
    const events = await collectSse(res);
    assert.ok(events.at(-1).json?.error, 'the cut stream ends with an error event');
    const message = await expectBudgetRefusal(await chat(env.caps, 'cut-cap', { max_tokens: 5 }), 'cut-cap', /output-token budget/);
    assert.match(message, /\b4 output tokens left\b/, 'the 4 produced tokens were charged');
    await expectServed(await chat(env.caps, 'cut-cap', { max_tokens: 4 }, { 'x-mock-chunks': '4' }));
  });
});

// A swarm runaway: many requests at once against a nearly spent budget. The
// budget is a ceiling whatever the parallelism.
describe('hard ceilings under parallel load', () => {
  const PARALLEL = 40;
  before(async () => {
    env.parallel = await relayFor(
      budgetConfig(
        {
          'usd-par': { usd: 0.045, period: 'total' },
          'out-par': { max_output_tokens: 40, period: 'total' },
        },
        // $100 per million completion tokens: max_tokens 172 holds $0.0172, 20 tokens cost $0.002.
        { prices: [{ model: 'm-priced', input: 0, output: 100 }] },
      ),
    );
  });

  const metricCost = async (key) =>
    metricSum(await scrapeMetrics(env.parallel), 'kimi_relay_cost_usd_total', { key });
  // A request is settled (its cost counted) when its exchange ends, which may
  // be just after the caller has read the last byte: wait until every one of
  // `count` requests of `key` is counted, rather than read the spend at once.
  const settled = (key, count) =>
    waitFor(
      async () => metricSum(await scrapeMetrics(env.parallel), 'kimi_relay_requests_total', { key }) >= count,
      { timeoutMs: 10_000, what: `${count} requests of ${key} settled` },
    );

  test(`${PARALLEL} parallel requests never spend more than budget.usd`, async () => {
    const results = await Promise.all(
      Array.from({ length: PARALLEL }, () =>
        chat(env.parallel, 'usd-par', { model: 'm-priced', max_tokens: 172 }, { 'x-mock-chunks': '20', 'x-mock-chunk-delay-ms': '20' }).then(
          async (res) => ({ status: res.status, text: await res.text() }),
        ),
      ),
    );
    const served = results.filter((r) => r.status === 200).length;
    const refused = results.filter((r) => r.status === 429);
    assert.equal(served + refused.length, PARALLEL, JSON.stringify(results.map((r) => r.status)));
    assert.ok(served >= 2, `at least two worst cases ($0.0344) fit in $0.045; served ${served}`);
    for (const r of refused) assert.equal(JSON.parse(r.text).error.code, 'insufficient_quota');
    await settled('usd-par', PARALLEL);
    const spent = await metricCost('usd-par');
    assert.ok(spent <= 0.045 + 1e-12, `spent $${spent} of a $0.045 budget`);
    assert.ok(Math.abs(spent - served * 0.002) < 1e-9, `each served request cost $0.002; spent ${spent} for ${served}`);
  });

  test(`${PARALLEL} parallel requests never produce more than max_output_tokens`, async () => {
    const results = await Promise.all(
      Array.from({ length: PARALLEL }, () =>
        chat(env.parallel, 'out-par', { max_tokens: 20 }, { 'x-mock-chunks': '20', 'x-mock-chunk-delay-ms': '20' }).then(
          async (res) => ({ status: res.status, body: await res.text() }),
        ),
      ),
    );
    let produced = 0;
    for (const r of results) {
      if (r.status === 200) produced += JSON.parse(r.body).usage.completion_tokens;
      else assert.equal(r.status, 429);
    }
    assert.ok(produced <= 40, `${produced} output tokens against a budget of 40`);
    assert.ok(produced >= 40, `two requests of 20 fit: ${produced}`);
  });
});

describe('spend across restarts (state_dir)', () => {
  const dirs = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  function stateDir() {
    const dir = mkdtempSync(join(tmpdir(), 'kimi-relay-budget-state-'));
    dirs.push(dir);
    return dir;
  }
  const CAP = 30;
  const configIn = (dir) => budgetConfig({ persist: { max_output_tokens: CAP, period: 'total' } }, { state_dir: dir });
  function savedOutputTokens(dir) {
    const file = join(dir, 'budgets.json');
    if (!existsSync(file)) return undefined;
    return JSON.parse(readFileSync(file, 'utf8')).keys?.persist?.output_tokens;
  }

  test('a stream is charged exactly its usage; a cut stream exactly what it produced', async () => {
    const dir = stateDir();
    const relay = await relayFor(configIn(dir));
    const full = await chat(relay, 'persist', { stream: true, max_tokens: 10 }, { 'x-mock-chunks': '8' });
    assert.equal(full.status, 200);
    assert.ok((await collectSse(full)).at(-1).done);
    await waitFor(() => savedOutputTokens(dir) === 8, {
      timeoutMs: 4000,
      intervalMs: 100,
      what: 'the 8 completion tokens the upstream reported, charged exactly',
    });

    const cut = await chat(relay, 'persist', { stream: true, max_tokens: 10 }, { 'x-mock-chunks': '10', 'x-mock-fault': 'reset_after=4' });
    assert.equal(cut.status, 200);
    assert.ok((await collectSse(cut)).at(-1).json?.error);
    // No usage arrived: the 4 chunks the caller received are charged, not the reservation.
    await waitFor(() => savedOutputTokens(dir) === 12, {
      timeoutMs: 4000,
      intervalMs: 100,
      what: 'the 4 produced tokens added to the 8',
    });
  });

  test('SIGTERM: spend under the cap resumes after a restart and then reaches it', async () => {
    const dir = stateDir();
    const first = await relayFor(configIn(dir));
    await expectServed(await chat(first, 'persist', { max_tokens: 20 }, { 'x-mock-chunks': '20' })); // 20 of 30
    const status = await first.stop('SIGTERM');
    assert.equal(status.code, 0, `clean shutdown, got ${JSON.stringify(status)}`);
    assert.equal(savedOutputTokens(dir), 20, 'a clean shutdown writes the spend');

    const second = await relayFor(configIn(dir));
    // The restored 20 count: max_tokens 20 no longer fits, 10 does.
    await expectBudgetRefusal(await chat(second, 'persist', { max_tokens: 20 }), 'persist', /\b10 output tokens left/);
    await expectServed(await chat(second, 'persist', { max_tokens: 10 }, { 'x-mock-chunks': '10' })); // 30 of 30
    await expectBudgetRefusal(await chat(second, 'persist', { max_tokens: 1 }), 'persist', /output-token budget/);
    await second.stop('SIGTERM');
    assert.equal(savedOutputTokens(dir), 30);
  });

  test('SIGTERM: a restarted gateway refuses a key whose restored spend is at the cap', async () => {
    const dir = stateDir();
    const first = await relayFor(configIn(dir));
    await expectServed(await chat(first, 'persist', { max_tokens: 30 }, { 'x-mock-chunks': '30' }));
    await first.stop('SIGTERM');

    const second = await relayFor(configIn(dir));
    await env.mock.resetStats();
    await expectBudgetRefusal(await chat(second, 'persist'), 'persist', /output-token budget/);
    assert.equal((await env.mock.stats()).requests, 0);
  });

  test('SIGKILL after the periodic flush: the spend survives the crash', async () => {
    const dir = stateDir();
    const first = await relayFor(configIn(dir));
    const t0 = performance.now();
    await expectServed(await chat(first, 'persist', { max_tokens: 30 }, { 'x-mock-chunks': '30' }));
    // The flusher writes every 2 s: the spend must be on disk within that.
    await waitFor(() => savedOutputTokens(dir) === 30, { timeoutMs: 4000, intervalMs: 100, what: 'budgets.json to hold the spend' });
    const flushedAfter = performance.now() - t0;
    assert.ok(flushedAfter < 3000, `flushed after ${flushedAfter.toFixed(0)} ms`);
    const status = await first.stop('SIGKILL');
    assert.equal(status.signal, 'SIGKILL');

    const second = await relayFor(configIn(dir));
    await env.mock.resetStats();
    await expectBudgetRefusal(await chat(second, 'persist'), 'persist', /output-token budget/);
    assert.equal((await env.mock.stats()).requests, 0);
  });

  test('a reload naming another state_dir leaves spend in the directory the process locked, and says so', async () => {
    const dir = stateDir();
    const other = stateDir();
    const relay = await relayFor(configIn(dir));
    writeFileSync(relay.configPath, toYaml(configIn(other)));
    relay.process.kill('SIGHUP');
    await waitFor(() => /reloaded /.test(relay.logs()), { timeoutMs: 5000, what: 'the reload' });
    assert.match(relay.logs(), /reload: state_dir changes only on restart; the running values stay/);
    await expectServed(await chat(relay, 'persist', { max_tokens: 10 }, { 'x-mock-chunks': '10' }));
    await waitFor(() => savedOutputTokens(dir) === 10, {
      timeoutMs: 4000,
      intervalMs: 100,
      what: 'the spend written where the process started, beside the lock',
    });
    await relay.stop('SIGTERM');
    assert.equal(savedOutputTokens(dir), 10);
    assert.equal(existsSync(join(other, 'budgets.json')), false, 'spend written to the unlocked directory');
  });

  test('a second gateway on the same state_dir is refused at start-up instead of overwriting spend', async () => {
    const dir = stateDir();
    const first = await relayFor(configIn(dir));
    await assert.rejects(startRelay(configIn(dir)), (err) => {
      assert.match(err.message, /exited early \(code [1-9]/, err.message);
      assert.match(err.message, /in use by another kimi-relay process \(pid \d+\)/);
      assert.ok(err.message.includes(dir), err.message);
      return true;
    });
    await first.stop('SIGTERM');
    // Once the first is gone the directory is free again.
    const again = await relayFor(configIn(dir));
    await again.stop('SIGTERM');
  });

  for (const [label, contents] of [
    ['truncated JSON', '{"version": 1, "keys": {"persist": {"period": "total", '],
    ['a negative spend', JSON.stringify({
      version: 1,
      keys: { persist: { period: 'total', period_start: '1970-01-01T00:00:00Z', spent_nano_usd: -5, input_tokens: 0, output_tokens: 0 } },
    })],
  ]) {
    test(`a corrupt budgets.json (${label}) stops start-up with an error naming the file`, async () => {
      const dir = stateDir();
      const file = join(dir, 'budgets.json');
      writeFileSync(file, contents);
      let relay;
      await assert.rejects(
        (async () => {
          relay = await startRelay(configIn(dir));
        })(),
        (err) => {
          assert.match(err.message, /exited early \(code [1-9]\d*/, err.message);
          assert.ok(err.message.includes(file), `the error does not name ${file}:\n${err.message}`);
          return true;
        },
      );
      if (relay) env.relays.push(relay);
      assert.equal(readFileSync(file, 'utf8'), contents, 'the corrupt file is left as it was');
    });
  }
});
