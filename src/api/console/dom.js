// Small DOM and formatting helpers. Everything the server sends (names, event
// messages, node ids a caller chose) reaches the page as text nodes only:
// nothing is ever parsed as HTML.

export const $ = (id) => document.getElementById(id);

// el('td', {class: 'num', 'data-field': 'rpm'}, 'text', childNode, ...)
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'class') node.className = value;
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) append(node, child);
  return node;
}

export function append(node, child) {
  if (child === undefined || child === null || child === false) return;
  if (Array.isArray(child)) child.forEach((c) => append(node, c));
  else node.append(child instanceof Node ? child : document.createTextNode(String(child)));
}

export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
}

// Replaces a node's content with `children` (text or nodes).
export function fill(node, ...children) {
  clear(node);
  for (const child of children) append(node, child);
}

// Keeps one row per item in `tbody`, in the order of `items`: rows are found
// by key (data-row), made once with create(item) and refreshed with
// update(row, item), so buttons and focus survive a refresh.
export function syncRows(tbody, items, keyOf, create, update) {
  const existing = new Map();
  for (const row of tbody.rows) existing.set(row.dataset.row, row);
  let before = tbody.firstElementChild;
  for (const item of items) {
    const key = keyOf(item);
    let row = existing.get(key);
    if (row) existing.delete(key);
    else {
      row = create(item);
      row.dataset.row = key;
    }
    update(row, item);
    if (row !== before) tbody.insertBefore(row, before);
    else before = before.nextElementSibling;
  }
  for (const row of existing.values()) row.remove();
}

// The cell of a row made with cells(): row.querySelector by data-field.
export const cell = (row, field) => row.querySelector(`[data-field="${field}"]`);

export function fmtInt(n) {
  if (n === null || n === undefined) return '–';
  return Number(n).toLocaleString('en-US');
}

export function fmtMs(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  if (v >= 10_000) return `${(v / 1000).toFixed(1)} s`;
  if (v >= 100) return `${Math.round(v)} ms`;
  return `${v.toFixed(1)} ms`;
}

export const fmtTriple = (p) => (p ? `${fmtMs(p.p50)} / ${fmtMs(p.p95)} / ${fmtMs(p.p99)}` : '–');

export function fmtUsd(v) {
  if (v === null || v === undefined) return '–';
  if (v === 0) return '$0';
  if (Math.abs(v) < 0.01) return `$${v.toPrecision(2)}`;
  return `$${v.toFixed(2)}`;
}

export function fmtPercent(v) {
  if (v === null || v === undefined) return '–';
  return `${(v * 100).toFixed(v < 0.1 ? 1 : 0)} %`;
}

// "14:03:07" (local time) for an ISO time today, else "2026-12-02 14:03".
export function fmtTime(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const pad = (n) => String(n).padStart(2, '0');
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return time;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time.slice(0, 5)}`;
}

// "used / limit" with a bar; limit 0 or absent = unlimited.
export function gauge(used, limit, format = fmtInt) {
  const wrap = el('span', { class: 'gauge' });
  const text = limit ? `${format(used)} / ${format(limit)}` : `${format(used)}`;
  append(wrap, el('span', { class: 'gauge-text' }, text));
  if (limit) {
    const share = Math.min(1, used / limit);
    const meter = el('meter', { min: 0, max: 1, low: 0.6, high: 0.85, optimum: 0, value: share.toFixed(3) });
    append(wrap, meter);
  } else {
    append(wrap, el('span', { class: 'muted' }, ' (no limit)'));
  }
  return wrap;
}

export function showError(node, message) {
  node.textContent = message || '';
  node.hidden = !message;
}
