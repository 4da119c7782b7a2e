// Small line plots of the last hour, drawn as SVG from
// /admin/console/history (one sample per 10 s, at most 360). Colours come
// from app.css classes: no inline style (the page's CSP forbids it).

import { el, fill, fmtMs, fmtUsd } from './dom.js';

const SVG = 'http://www.w3.org/2000/svg';
const W = 320;
const H = 120;
const PAD = { left: 44, right: 8, top: 10, bottom: 18 };
const HOUR_MS = 3600_000;
const MIN_SPAN_MS = 300_000; // a process younger than this still gets 5 minutes of axis

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

// A path through the points; a null value breaks the line.
function pathOf(xs, ys, x, y) {
  let d = '';
  let pen = false;
  for (let i = 0; i < xs.length; ++i) {
    const v = ys[i];
    if (v === null || v === undefined || !Number.isFinite(v)) {
      pen = false;
      continue;
    }
    d += `${pen ? 'L' : 'M'}${x(xs[i]).toFixed(1)},${y(v).toFixed(1)}`;
    pen = true;
  }
  return d;
}

// One plot: series [{name, cls, values}] over times `t` (unix ms). The axis
// spans the last hour, or less when the history is younger (at least 5 min).
function plot(id, title, t, series, format) {
  const now = t.length ? Math.max(Date.now(), t[t.length - 1]) : Date.now();
  const span = t.length ? Math.min(HOUR_MS, Math.max(MIN_SPAN_MS, now - t[0])) : HOUR_MS;
  const from = now - span;
  let max = 0;
  for (const s of series) for (const v of s.values) if (Number.isFinite(v) && v > max) max = v;
  const top = max > 0 ? max * 1.1 : 1;
  const x = (ms) => PAD.left + ((ms - from) / span) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (v / top) * (H - PAD.top - PAD.bottom);

  const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title, class: 'plot-svg' });
  chart.append(svg('rect', { x: PAD.left, y: PAD.top, width: W - PAD.left - PAD.right, height: H - PAD.top - PAD.bottom, class: 'plot-area' }));
  for (const frac of [0.5, 1]) {
    const gy = y(top * frac);
    chart.append(svg('line', { x1: PAD.left, x2: W - PAD.right, y1: gy, y2: gy, class: 'grid' }));
    chart.append(svg('text', { x: PAD.left - 4, y: gy + 3, class: 'axis', 'text-anchor': 'end' }, format(top * frac)));
  }
  chart.append(svg('text', { x: PAD.left - 4, y: H - PAD.bottom + 3, class: 'axis', 'text-anchor': 'end' }, format(0)));
  const minutes = Math.round(span / 60_000);
  for (const [label, ms] of [[`-${minutes} min`, from], [`-${minutes / 2}`, from + span / 2], ['now', now]]) {
    chart.append(svg('text', { x: x(ms), y: H - 4, class: 'axis', 'text-anchor': ms === from ? 'start' : ms === now ? 'end' : 'middle' }, label));
  }
  for (const s of series) {
    const d = pathOf(t, s.values, x, y);
    if (d) chart.append(svg('path', { d, class: `line ${s.cls}` }));
    // The latest point as a dot: visible even when it is the only one.
    const i = s.values.findLastIndex((v) => Number.isFinite(v));
    if (i >= 0) chart.append(svg('circle', { cx: x(t[i]).toFixed(1), cy: y(s.values[i]).toFixed(1), r: 2.2, class: `dot ${s.cls}` }));
  }
  const legend = el('div', { class: 'legend' });
  for (const s of series) {
    const last = [...s.values].reverse().find((v) => Number.isFinite(v));
    legend.append(el('span', { class: `key ${s.cls}` }, `${s.name} ${last === undefined ? '–' : format(last)}`));
  }
  return el('figure', { class: 'plot', 'data-plot': id, 'data-points': t.length }, el('figcaption', {}, title), chart, legend);
}

// Per-interval amounts from cumulative counters (a restart of the process
// resets them: a negative step counts as zero).
function steps(values, perMinuteOf = 1) {
  return values.map((v, i) => (i === 0 ? null : Math.max(0, v - values[i - 1]) * perMinuteOf));
}

export function renderPlots(container, history) {
  const t = history.t ?? [];
  const interval = history.interval_seconds || 10;
  const spend0 = history.spend_usd?.[0] ?? 0;
  const trio = (p) => [
    { name: 'p50', cls: 's-p50', values: p?.p50 ?? [] },
    { name: 'p95', cls: 's-p95', values: p?.p95 ?? [] },
    { name: 'p99', cls: 's-p99', values: p?.p99 ?? [] },
  ];
  const fmtRate = (v) => (v >= 100 ? Math.round(v).toString() : v.toFixed(1));
  fill(
    container,
    plot('latency', 'Request latency (ms, over the minute before each point)', t, trio(history.latency_ms), fmtMs),
    plot('ttft', 'Time to first token (ms)', t, trio(history.ttft_ms), fmtMs),
    plot('requests', 'Requests per minute', t, [
      { name: 'all', cls: 's-req', values: steps(history.requests ?? [], 60 / interval) },
      { name: '5xx', cls: 's-err', values: steps(history.errors ?? [], 60 / interval) },
    ], fmtRate),
    plot('spend', 'Spend this hour (USD)', t, [
      { name: 'spend', cls: 's-spend', values: (history.spend_usd ?? []).map((v) => v - spend0) },
    ], fmtUsd),
  );
}
