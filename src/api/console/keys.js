// The key table and the key actions, all through the runtime key API
// (/admin/keys): create (the secret shown once, here, and kept nowhere),
// change limits and budget, rotate, revoke, restore a revoked file key.

import { keysApi } from './api.js';
import { $, el, fill, fmtInt, fmtTime, fmtUsd, gauge, showError, syncRows } from './dom.js';

const CONFIRM_MS = 5000;
const ROTATE_GRACE_SECONDS = 3600;
const current = new Map(); // name -> the key as last listed
let changed = () => {};
let editing = null; // the name in the limits editor

const field = (tr, name) => tr.querySelector(`[data-field="${name}"]`);
const num = (form, name) => {
  const v = form.elements[name].value.trim();
  return v === '' ? null : Number(v);
};

function showSecret(title, secret, note) {
  $('secret-title').textContent = title;
  $('secret-value').textContent = secret;
  $('secret-note').textContent = note ?? '';
  $('secret').hidden = false;
}

function hideSecret() {
  $('secret-value').textContent = '';
  $('secret').hidden = true;
}

// Runs a key action; a failure is shown above the table, a success refreshes.
async function act(what, run) {
  showError($('key-error'), '');
  try {
    const answer = await run();
    changed();
    return answer;
  } catch (err) {
    showError($('key-error'), `${what}: ${err.message}`);
    return null;
  }
}

// A button that asks for a second click within CONFIRM_MS before it acts.
function confirmButton(label, action, run) {
  const button = el('button', { type: 'button', 'data-action': action }, label);
  let timer = null;
  button.addEventListener('click', async () => {
    if (!button.dataset.confirm) {
      button.dataset.confirm = 'yes';
      button.textContent = `Confirm ${label.toLowerCase()}`;
      timer = setTimeout(() => {
        delete button.dataset.confirm;
        button.textContent = label;
      }, CONFIRM_MS);
      return;
    }
    clearTimeout(timer);
    delete button.dataset.confirm;
    button.textContent = label;
    await run(button.closest('tr').dataset.key);
  });
  return button;
}

function createRow() {
  const limits = el('button', { type: 'button', 'data-action': 'limits' }, 'Limits');
  limits.addEventListener('click', () => openEditor(limits.closest('tr').dataset.key));
  const rotate = confirmButton('Rotate', 'rotate', async (name) => {
    const answer = await act(`rotating '${name}'`, () => keysApi.rotate(name, ROTATE_GRACE_SECONDS));
    if (answer?.key) {
      showSecret(`New secret of '${name}'.`, answer.key, `The old secret keeps working for ${ROTATE_GRACE_SECONDS / 60} minutes.`);
    }
  });
  const revoke = confirmButton('Revoke', 'revoke', (name) => act(`revoking '${name}'`, () => keysApi.revoke(name)));
  const restore = el('button', { type: 'button', 'data-action': 'restore' }, 'Restore');
  restore.addEventListener('click', () => {
    const name = restore.closest('tr').dataset.key;
    act(`restoring '${name}'`, () => keysApi.restore(name));
  });
  const cells = ['name', 'requests', 'tokens', 'in_flight', 'spend', 'resets'].map((f) => el('td', { 'data-field': f }));
  return el('tr', {}, ...cells, el('td', { class: 'actions' }, limits, rotate, revoke, restore));
}

function updateRow(tr, k) {
  tr.dataset.key = k.name;
  tr.dataset.revoked = k.revoked ? 'true' : 'false';
  const badges = [el('span', { class: 'badge source' }, k.source ?? 'file')];
  if (k.revoked) badges.push(el('span', { class: 'badge ejected' }, 'revoked'));
  const notes = [];
  if (k.models?.length) notes.push(`models: ${k.models.join(', ')}`);
  if (k.previous_secret_valid_until) notes.push(`old secret valid until ${fmtTime(k.previous_secret_valid_until)}`);
  fill(field(tr, 'name'), el('strong', {}, k.name), ' ', ...badges, el('div', { class: 'muted small' }, notes.join(' · ')));
  for (const button of tr.querySelectorAll('button')) {
    button.hidden = k.revoked ? button.dataset.action !== 'restore' : button.dataset.action === 'restore';
  }
  if (k.revoked) {
    for (const f of ['requests', 'tokens', 'in_flight', 'spend', 'resets']) fill(field(tr, f), '–');
    return;
  }
  const lm = k.last_minute ?? { requests: 0, tokens: 0 };
  fill(field(tr, 'requests'), gauge(lm.requests, k.limits?.rpm));
  fill(field(tr, 'tokens'), gauge(lm.tokens, k.limits?.tpm));
  fill(field(tr, 'in_flight'), gauge(k.rate?.in_flight ?? 0, k.limits?.concurrency));
  const spent = k.usage?.spent_usd ?? 0;
  const budget = k.budget?.usd;
  const spend = gauge(spent, budget, fmtUsd);
  if (k.budget && budget === undefined) spend.append(el('span', { class: 'muted' }, ' (token budget)'));
  fill(field(tr, 'spend'), spend);
  const period = k.budget?.period ?? 'month';
  fill(field(tr, 'resets'), k.usage?.resets_at ? `${fmtTime(k.usage.resets_at)} (${period})` : period === 'total' ? 'never' : '–');
}

export function renderKeys(tbody, keys, total) {
  current.clear();
  for (const k of keys) current.set(k.name, k);
  syncRows(tbody, keys, (k) => k.name, createRow, updateRow);
  $('keys-note').textContent = total > keys.length ? `Showing ${keys.length} of ${total} keys (GET /admin/keys lists all).` : '';
  if (editing && !current.has(editing)) closeEditor();
}

function openEditor(name) {
  const k = current.get(name);
  if (!k) return;
  editing = name;
  const form = $('key-editor');
  $('editor-title').textContent = `Limits of '${name}'`;
  form.elements.rpm.value = k.limits?.rpm || '';
  form.elements.tpm.value = k.limits?.tpm || '';
  form.elements.concurrency.value = k.limits?.concurrency || '';
  form.elements.usd.value = k.budget?.usd ?? '';
  form.elements.period.value = k.budget?.period ?? 'month';
  form.hidden = false;
  form.elements.rpm.focus();
}

function closeEditor() {
  editing = null;
  $('key-editor').hidden = true;
}

// The PATCH of the editor: a whole limits object (bursts kept where their
// rate stays), and the budget's USD cap and period.
function editorPatch(form, k) {
  const rpm = num(form, 'rpm') ?? 0;
  const tpm = num(form, 'tpm') ?? 0;
  const patch = {
    limits: {
      rpm,
      rpm_burst: rpm ? (k.limits?.rpm_burst ?? 0) : 0,
      tpm,
      tpm_burst: tpm ? (k.limits?.tpm_burst ?? 0) : 0,
      concurrency: num(form, 'concurrency') ?? 0,
    },
  };
  const usd = num(form, 'usd');
  const tokens = {};
  if (k.budget?.max_input_tokens !== undefined) tokens.max_input_tokens = k.budget.max_input_tokens;
  if (k.budget?.max_output_tokens !== undefined) tokens.max_output_tokens = k.budget.max_output_tokens;
  if (usd !== null) patch.budget = { usd, period: form.elements.period.value, ...tokens };
  else if (Object.keys(tokens).length) patch.budget = { period: form.elements.period.value, ...tokens };
  else if (k.budget) patch.budget = null;
  return patch;
}

export function initKeys({ onChanged }) {
  changed = onChanged;
  $('secret-done').addEventListener('click', hideSecret);
  $('secret-copy').addEventListener('click', () => navigator.clipboard?.writeText($('secret-value').textContent));
  $('editor-cancel').addEventListener('click', closeEditor);
  $('key-editor').addEventListener('submit', async (event) => {
    event.preventDefault();
    const k = current.get(editing);
    if (!k) return closeEditor();
    const name = editing;
    const done = await act(`changing '${name}'`, () => keysApi.update(name, editorPatch(event.target, k)));
    if (done) closeEditor();
  });
  $('new-key').addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.target;
    const settings = { name: form.elements.name.value.trim() };
    const [rpm, tpm, concurrency, usd] = ['rpm', 'tpm', 'concurrency', 'usd'].map((n) => num(form, n));
    if (rpm !== null || tpm !== null || concurrency !== null) {
      settings.limits = { rpm: rpm ?? 0, tpm: tpm ?? 0, concurrency: concurrency ?? 0 };
    }
    if (usd !== null) settings.budget = { usd, period: form.elements.period.value };
    const models = form.elements.models.value.split(',').map((m) => m.trim()).filter(Boolean);
    if (models.length) settings.models = models;
    const answer = await act(`creating '${settings.name}'`, () => keysApi.create(settings));
    if (answer?.key) {
      form.reset();
      showSecret(`Key '${answer.name}' created.`, answer.key, answer.persisted ? '' : 'Not persisted: the gateway has no state_dir.');
    }
  });
}
