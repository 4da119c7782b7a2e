// Reading the gateway's Prometheus metrics (docs/metrics.md) in tests.
//
//   const m = await scrapeMetrics(relay);     // from the admin listener's /metrics
//   metricSum(m, 'kimi_relay_retries_total', { upstream: 'primary' })
//
// Only what the tests need of the text exposition format 0.0.4: one sample per
// line, `name{label="value",...} value`, `#` lines skipped. Label values may
// hold escaped quotes, backslashes and newlines.

// [{name, labels: {label: value}, value}] of every sample in `text`.
export function parseMetrics(text) {
  const samples = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = line.match(/^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/);
    if (!match) throw new Error(`not a metrics sample line: ${JSON.stringify(line)}`);
    const [, name, labelText = '', valueText] = match;
    const labels = {};
    const labelRe = /([A-Za-z_]\w*)="((?:[^"\\]|\\.)*)"\s*,?\s*/gy;
    let consumed = 0;
    for (let m; (m = labelRe.exec(labelText)) !== null; consumed = labelRe.lastIndex) {
      labels[m[1]] = m[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    }
    if (consumed !== labelText.length) throw new Error(`cannot read the labels of ${JSON.stringify(line)}`);
    samples.push({ name, labels, value: Number(valueText) });
  }
  return samples;
}

// The samples of the gateway's admin /metrics.
export async function scrapeMetrics(relay) {
  const res = await fetch(`${relay.adminUrl}/metrics`);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET /metrics -> ${res.status}: ${text}`);
  return parseMetrics(text);
}

// Sum of the samples named `name` whose labels include every pair of `labels`
// (0 when there is none).
export function metricSum(samples, name, labels = {}) {
  let sum = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(labels).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  }
  return sum;
}
