// The console's entry point: log in, then poll /admin/console/state every
// 2 s and /admin/console/history every 10 s, and tail /admin/events. Nothing
// is shown before the admin key works, and a 401 at any time logs out.

import { AuthError, adminKey, api, clearAdminKey, setAdminKey } from './api.js';
import { $, fmtTime, showError } from './dom.js';
import { EventTail } from './events.js';
import { initKeys, renderKeys } from './keys.js';
import { renderPlots } from './plots.js';
import { renderNodes, renderSummary, renderUpstreams } from './tables.js';

const STATE_EVERY_MS = 2000;
const HISTORY_EVERY_MS = 10_000;

let session = null; // {timers, tail} while logged in

function setStatus(state, text) {
  const status = $('status');
  status.dataset.state = state;
  status.textContent = text;
}

function render(state) {
  $('version').textContent = `v${state.version} · up since ${fmtTime(state.started_at)}${state.draining ? ' · draining' : ''}`;
  renderSummary($('summary'), state);
  renderUpstreams($('upstreams').tBodies[0], state.upstreams);
  renderKeys($('keys').tBodies[0], state.keys, state.keys_total);
  renderNodes($('nodes').tBodies[0], state.nodes);
  setStatus('live', `live · ${fmtTime(state.time)}`);
  document.body.dataset.ready = 'true';
}

async function refreshState() {
  try {
    render(await api('/admin/console/state'));
  } catch (err) {
    if (err instanceof AuthError) return logout('The admin key was refused; log in again.');
    setStatus('error', `cannot reach the gateway (${err.message})`);
  }
}

async function refreshHistory() {
  try {
    const history = await api('/admin/console/history');
    renderPlots($('plots'), history);
    $('history-note').textContent = `(${history.t.length} of ${history.capacity} samples, one per ${history.interval_seconds} s)`;
  } catch (err) {
    if (err instanceof AuthError) logout('The admin key was refused; log in again.');
  }
}

// Polls `run` every `everyMs`, one call at a time.
function every(everyMs, run) {
  const timer = { stopped: false, id: null };
  const tick = async () => {
    await run();
    if (!timer.stopped) timer.id = setTimeout(tick, everyMs);
  };
  tick();
  return timer;
}

function start(firstState) {
  $('login').hidden = true;
  $('console').hidden = false;
  $('logout').hidden = false;
  render(firstState);
  const tail = new EventTail({
    list: $('events'),
    status: $('events-status'),
    onAuthError: () => logout('The admin key was refused; log in again.'),
  });
  tail.start();
  session = { tail, timers: [every(STATE_EVERY_MS, refreshState), every(HISTORY_EVERY_MS, refreshHistory)] };
}

function logout(message) {
  clearAdminKey();
  if (session) {
    session.tail.stop();
    for (const t of session.timers) {
      t.stopped = true;
      clearTimeout(t.id);
    }
    session = null;
  }
  if (message) sessionStorage.setItem('kimi-relay.logout-reason', message);
  // Nothing of the gateway's state stays on the page.
  window.location.reload();
}

async function login(key) {
  setAdminKey(key);
  try {
    start(await api('/admin/console/state'));
    return null;
  } catch (err) {
    clearAdminKey();
    return err instanceof AuthError ? 'That is not the admin key.' : `The gateway answered: ${err.message}`;
  }
}

function init() {
  initKeys({ onChanged: refreshState });
  const reason = sessionStorage.getItem('kimi-relay.logout-reason');
  sessionStorage.removeItem('kimi-relay.logout-reason');
  showError($('login-error'), reason);
  $('login-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const input = $('admin-key');
    const key = input.value.trim();
    input.value = '';
    showError($('login-error'), await login(key));
  });
  $('logout').addEventListener('click', () => logout(''));
  $('event-filters').addEventListener('submit', (event) => {
    event.preventDefault();
    const f = event.target.elements;
    session?.tail.setFilters({ key: f.key.value.trim(), node: f.node.value.trim(), upstream: f.upstream.value.trim(), kind: f.kind.value.trim() });
    session?.tail.clear();
  });
  $('events-pause').addEventListener('click', (event) => {
    if (!session) return;
    const paused = !session.tail.paused;
    session.tail.setPaused(paused);
    event.target.textContent = paused ? 'Resume' : 'Pause';
  });
  $('events-clear').addEventListener('click', () => session?.tail.clear());
  const saved = adminKey();
  if (saved) {
    login(saved).then((error) => showError($('login-error'), error));
  } else {
    setStatus('idle', 'not logged in');
  }
}

init();
