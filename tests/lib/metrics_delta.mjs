// What changed in the gateway's metrics between two scrapes (metrics.mjs's
// parseMetrics / scrapeMetrics samples), so a test can assert exact counts
// without depending on running first or alone.
//
//   metricDelta(after, before, 'kimi_relay_requests_total', ['key', 'code'])
//     -> {'full|200': 3, 'none|401': 1}

// {"value1|value2|...": after - before} of metric `name`, summed over the labels
// not listed in `labelNames` (an empty list gives the key ""), for the series
// whose value changed. A series present before and missing after is reported
// as a string, so an exact comparison fails on it.
export function metricDelta(afterSamples, beforeSamples, name, labelNames) {
  const sums = (samples) => {
    const m = new Map();
    for (const s of samples) {
      if (s.name !== name) continue;
      const k = labelNames.map((l) => s.labels[l]).join('|');
      m.set(k, (m.get(k) ?? 0) + s.value);
    }
    return m;
  };
  const a = sums(afterSamples);
  const b = sums(beforeSamples);
  const out = {};
  for (const [k, v] of a) {
    const d = v - (b.get(k) ?? 0);
    if (d !== 0) out[k] = d;
  }
  for (const [k, v] of b) {
    if (!a.has(k)) out[k] = `series disappeared (was ${v})`;
  }
  return out;
}
