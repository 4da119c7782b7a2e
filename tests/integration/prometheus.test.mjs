// The real Prometheus server (Debian package `prometheus`) scrapes the
// gateway's admin /metrics every second while traffic flows, and answers the
// quantile queries of docs/metrics.md with numbers; `promtool check metrics`
// accepts the exposition.
//
// Prometheus runs on a loopback port with a temporary config and storage, and
// is stopped at the end. scripts/install-deps.sh installs the package.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { KEYS, useTopology } from '../lib/fixtures.mjs';
import { chatRequest, closedPort, collectSse, postChat, spawnProcess, waitFor } from '../lib/harness.mjs';

const PROMETHEUS = '/usr/bin/prometheus';
const PROMTOOL = '/usr/bin/promtool';
const MODEL = 'kimi-agent-swarm';

const env = useTopology();

// Starts Prometheus scraping `target` (host:port) every second; resolves once
// /-/ready answers 200. A port taken between closedPort() and the bind makes
// Prometheus exit: then another port is tried.
async function startPrometheus(dir, target) {
  const configPath = join(dir, 'prometheus.yml');
  writeFileSync(
    configPath,
    [
      'global:',
      '  scrape_interval: 1s',
      '  scrape_timeout: 1s',
      '  evaluation_interval: 1s',
      'scrape_configs:',
      '  - job_name: kimi-relay',
      '    static_configs:',
      `      - targets: ["${target}"]`,
      '',
    ].join('\n'),
  );
  for (let attempt = 1; ; attempt++) {
    const port = await closedPort();
    const proc = spawnProcess(PROMETHEUS, [
      `--config.file=${configPath}`,
      `--storage.tsdb.path=${join(dir, `data-${attempt}`)}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ]);
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitFor(
        async () => {
          if (proc.exitStatus()) return 'exited';
          try {
            const res = await fetch(`${url}/-/ready`);
            await res.arrayBuffer();
            return res.status === 200 && 'ready';
          } catch {
            return false;
          }
        },
        { timeoutMs: 20_000, intervalMs: 100, what: 'Prometheus /-/ready' },
      ).then((state) => {
        if (state === 'exited') throw new Error(`Prometheus exited: ${JSON.stringify(proc.exitStatus())}`);
      });
      return { url, proc };
    } catch (err) {
      await proc.stop('SIGKILL');
      if (!proc.exitStatus()?.code || attempt >= 3) {
        throw new Error(`${err.message}\nPrometheus output:\n${proc.output.stdout}${proc.output.stderr}`);
      }
    }
  }
}

// Requests in a loop, streamed and whole, until stop(); stop() resolves to the
// number sent and rethrows the first failure.
function startTraffic() {
  let stopping = false;
  const done = (async () => {
    let sent = 0;
    while (!stopping) {
      const stream = sent % 2 === 0;
      const res = await postChat(env.relay, chatRequest({ model: MODEL, stream }), {
        key: KEYS.full,
        headers: { 'x-mock-chunks': '3', 'x-mock-chunk-delay-ms': String(sent % 4) },
      });
      if (res.status !== 200) throw new Error(`traffic: ${res.status} ${await res.text()}`);
      if (stream) await collectSse(res);
      else await res.arrayBuffer();
      sent += 1;
      await new Promise((r) => setTimeout(r, 50)); // pacing, about 15 requests a second
    }
    return sent;
  })();
  done.catch(() => {}); // reported by stop()
  return {
    stop: async () => {
      stopping = true;
      return done;
    },
  };
}

describe('Prometheus scraping the gateway', () => {
  const prom = {};
  let dir;
  let traffic;

  before(async () => {
    assert.ok(existsSync(PROMETHEUS), `${PROMETHEUS} is missing: apt-get install prometheus (scripts/install-deps.sh)`);
    dir = mkdtempSync(join(tmpdir(), 'kimi-relay-prometheus-'));
    Object.assign(prom, await startPrometheus(dir, new URL(env.relay.adminUrl).host));
    traffic = startTraffic();
  });

  after(async () => {
    const failures = [];
    if (traffic) await traffic.stop().catch((err) => failures.push(err));
    await prom.proc?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    if (failures.length) throw failures[0];
  });

  async function query(q) {
    const res = await fetch(`${prom.url}/api/v1/query?query=${encodeURIComponent(q)}`);
    const body = await res.json();
    assert.equal(body.status, 'success', `${q}: ${JSON.stringify(body)}`);
    assert.equal(body.data.resultType, 'vector', q);
    return body.data.result; // [{metric, value: [time, "text"]}]
  }

  // Polls `q` until it returns at least one sample and all are finite numbers
  // (not NaN, not ±Inf); resolves to the results with their values parsed.
  async function numbers(q, timeoutMs = 30_000) {
    let last;
    try {
      return await waitFor(
        async () => {
          last = await query(q);
          const values = last.map((r) => Number(r.value[1]));
          if (last.length === 0 || !values.every(Number.isFinite)) return false;
          return last.map((r, i) => ({ metric: r.metric, value: values[i] }));
        },
        { timeoutMs, intervalMs: 250, what: q },
      );
    } catch (err) {
      throw new Error(`${q} never gave a number; last result ${JSON.stringify(last)}\n${err.message}`);
    }
  }

  test('scrapes the admin listener', async () => {
    const [up] = await numbers('up{job="kimi-relay"}');
    assert.equal(up.value, 1);
  });

  test('histogram_quantile(0.99, …) of request duration is a number', async () => {
    const [p99] = await numbers(
      'histogram_quantile(0.99, sum by (le) (rate(kimi_relay_request_duration_seconds_bucket[1m])))',
    );
    assert.ok(p99.value > 0 && p99.value < 10, `p99 request duration ${p99.value} s`);
    // The per-model form from docs/metrics.md.
    const perModel = await numbers(
      'histogram_quantile(0.95, sum by (model, le) (rate(kimi_relay_request_duration_seconds_bucket[1m])))',
    );
    assert.ok(perModel.some((r) => r.metric.model === MODEL), JSON.stringify(perModel));
  });

  test('histogram_quantile(0.5, …) of time to first token is a number', async () => {
    const [p50] = await numbers(
      'histogram_quantile(0.5, sum by (le) (rate(kimi_relay_time_to_first_token_seconds_bucket[1m])))',
    );
    assert.ok(p50.value > 0 && p50.value < 10, `p50 time to first token ${p50.value} s`);
  });

  test('the precomputed window quantiles (summaries) are numbers in order', async () => {
    const summaries = ['kimi_relay_request_duration_window_seconds', 'kimi_relay_time_to_first_token_window_seconds'];
    for (const metric of summaries) {
      const results = await numbers(`${metric}{model="${MODEL}"}`);
      const byQuantile = Object.fromEntries(results.map((r) => [r.metric.quantile, r.value]));
      const seen = `${metric}: ${JSON.stringify(byQuantile)}`;
      assert.deepEqual(Object.keys(byQuantile).sort(), ['0.5', '0.95', '0.99'], seen);
      assert.ok(byQuantile['0.5'] > 0, seen);
      assert.ok(byQuantile['0.5'] <= byQuantile['0.95'] && byQuantile['0.95'] <= byQuantile['0.99'], seen);
    }
  });

  test('promtool check metrics accepts the exposition', async () => {
    assert.ok(existsSync(PROMTOOL), `${PROMTOOL} is missing`);
    const res = await fetch(`${env.relay.adminUrl}/metrics`);
    const text = await res.text();
    assert.equal(res.status, 200);
    // After traffic, so histograms, summaries and labelled series all appear.
    for (const type of ['counter', 'gauge', 'histogram', 'summary']) {
      assert.match(text, new RegExp(`^# TYPE kimi_relay_\\w+ ${type}$`, 'm'), `no ${type} in the exposition`);
    }
    const check = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 20_000 });
    const why = `promtool check metrics exited ${check.status} ${check.error?.message ?? ''}`;
    assert.equal(check.status, 0, `${why}:\n${check.stdout}${check.stderr}`);
  });
});
