// The summary cards, the upstream table and the swarm-node table, from
// /admin/console/state.

import { el, fill, fmtInt, fmtPercent, fmtTime, fmtTriple, fmtUsd, gauge, syncRows } from './dom.js';

// A row of <td data-field=...> cells, filled by the update functions.
function row(fields) {
  return el('tr', {}, ...fields.map((f) => el('td', { 'data-field': f })));
}
const field = (tr, name) => tr.querySelector(`[data-field="${name}"]`);

export function renderSummary(node, state) {
  const ups = state.upstreams;
  const healthy = ups.filter((u) => u.health.state === 'healthy').length;
  const ejected = ups.filter((u) => u.health.state === 'ejected').length;
  const reqMin = ups.reduce((n, u) => n + u.last_minute.requests, 0);
  const inFlight = ups.reduce((n, u) => n + u.in_flight, 0);
  const costHour = ups.reduce((n, u) => n + u.cost_usd_last_hour, 0);
  const attempts = ups.reduce((n, u) => n + u.last_minute.attempts, 0);
  const failed = ups.reduce((n, u) => n + u.last_minute.failed_attempts, 0);
  const card = (id, label, value, cls = '') =>
    el('div', { class: `card ${cls}`, 'data-card': id }, el('div', { class: 'card-value' }, value), el('div', { class: 'card-label' }, label));
  fill(
    node,
    card('upstreams', 'upstreams healthy', `${healthy} / ${ups.length}`, ejected ? 'warn' : ''),
    card('requests', 'requests in the last minute', fmtInt(reqMin)),
    card('in-flight', 'upstream requests in flight', fmtInt(inFlight)),
    card('errors', 'upstream attempts failed (1 min)', attempts ? fmtPercent(failed / attempts) : '–', failed ? 'warn' : ''),
    card('cost', 'spent in the last hour', fmtUsd(costHour)),
    card('keys', 'keys', fmtInt(state.keys_total)),
  );
}

function healthCell(h) {
  const badge = el('span', { class: `badge ${h.state}` }, h.state);
  if (h.state === 'ejected') return [badge, ` until ${fmtTime(h.ejected_until)}`];
  if (h.state === 'probing') return [badge, ' next request tests it'];
  if (h.consecutive_failures > 0) {
    const of = h.eject_after_failures ? ` of ${h.eject_after_failures}` : '';
    return [badge, el('span', { class: 'muted' }, ` ${h.consecutive_failures}${of} failures`)];
  }
  return [badge];
}

const UPSTREAM_FIELDS = ['name', 'health', 'weight', 'region', 'in_flight', 'latency', 'ttft', 'errors', 'rpm', 'cost'];

export function renderUpstreams(tbody, upstreams) {
  syncRows(
    tbody,
    upstreams,
    (u) => u.name,
    () => row(UPSTREAM_FIELDS),
    (tr, u) => {
      tr.dataset.upstream = u.name;
      tr.dataset.health = u.health.state;
      fill(field(tr, 'name'), el('strong', {}, u.name), el('div', { class: 'muted small' }, u.models.join(', ')));
      fill(field(tr, 'health'), ...healthCell(u.health));
      fill(field(tr, 'weight'), fmtInt(u.weight));
      fill(field(tr, 'region'), u.region ?? '–');
      fill(field(tr, 'in_flight'), gauge(u.in_flight, u.max_concurrency));
      fill(field(tr, 'latency'), fmtTriple(u.latency_ms));
      fill(field(tr, 'ttft'), fmtTriple(u.ttft_ms));
      const lm = u.last_minute;
      fill(
        field(tr, 'errors'),
        fmtPercent(lm.error_rate),
        el('span', { class: 'muted small' }, lm.attempts ? ` ${lm.failed_attempts} of ${lm.attempts}` : ''),
      );
      fill(field(tr, 'rpm'), gauge(lm.requests, u.rpm));
      fill(field(tr, 'cost'), `${fmtUsd(u.cost_usd_last_hour)} / ${fmtUsd(u.cost_usd_total)}`);
    },
  );
}

export function renderNodes(tbody, nodes) {
  const sorted = [...nodes].sort((a, b) => b.requests_last_minute - a.requests_last_minute || a.node.localeCompare(b.node));
  syncRows(
    tbody,
    sorted,
    (n) => n.node,
    () => row(['node', 'latency', 'ttft', 'rpm', 'total']),
    (tr, n) => {
      tr.dataset.node = n.node;
      fill(field(tr, 'node'), n.node);
      fill(field(tr, 'latency'), fmtTriple(n.latency_ms));
      fill(field(tr, 'ttft'), fmtTriple(n.ttft_ms));
      fill(field(tr, 'rpm'), fmtInt(n.requests_last_minute));
      fill(field(tr, 'total'), fmtInt(n.requests_total));
    },
  );
}
