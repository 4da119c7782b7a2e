// The live tail of /admin/events. EventSource cannot send an Authorization
// header, so the stream is read with fetch() and a ReadableStream reader,
// parsed as Server-Sent Events here, and resumed after a break with
// Last-Event-ID (the gateway replays what the tail missed from its ring).

import { authHeaders, AuthError } from './api.js';
import { el, fill, fmtTime } from './dom.js';

export const MAX_EVENTS = 200; // rows kept on the page, newest first
const RETRY_MS = 2000;

// The fields shown after an event's kind, in this order, when present.
const DETAILS = [
  ['model', (v) => v],
  ['from', (v) => `from ${v}`],
  ['to', (v) => `to ${v}`],
  ['status', (v) => `HTTP ${v}`],
  ['attempt', (v) => `attempt ${v}`],
  ['latency_ms', (v) => `${v} ms`],
  ['ttft_ms', (v) => `ttft ${v} ms`],
  ['delay_ms', (v) => `delay ${v} ms`],
  ['prompt_tokens', (v) => `${v} in`],
  ['completion_tokens', (v) => `${v} out`],
  ['cost_usd', (v) => `$${Number(v).toPrecision(3)}`],
  ['retry_after_ms', (v) => `retry after ${v} ms`],
  ['reason', (v) => v],
  ['count', (v) => `${v} lost`],
  ['message', (v) => v],
];

export class EventTail {
  constructor({ list, status, onAuthError }) {
    this.list = list;
    this.status = status;
    this.onAuthError = onAuthError;
    this.filters = {};
    this.paused = false;
    this.held = []; // events that arrived while paused (bounded like the list)
    this.lastId = null;
    this.controller = null;
    this.running = false;
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.loop();
  }

  stop() {
    this.running = false;
    this.controller?.abort();
  }

  // New filters: a new stream (the gateway filters; nothing is replayed).
  setFilters(filters) {
    this.filters = filters;
    this.lastId = null;
    this.controller?.abort();
  }

  setPaused(paused) {
    this.paused = paused;
    if (!paused) {
      for (const e of this.held) this.show(e);
      this.held = [];
    }
    this.setStatus(paused ? 'paused' : 'live');
  }

  clear() {
    fill(this.list);
    this.held = [];
  }

  setStatus(text) {
    this.status.textContent = text;
    this.status.dataset.state = text.split(' ')[0];
  }

  async loop() {
    while (this.running) {
      try {
        await this.stream();
      } catch (err) {
        if (err instanceof AuthError) {
          this.running = false;
          this.onAuthError(err);
          return;
        }
        if (!this.running) return;
        if (err?.name !== 'AbortError') this.setStatus(`reconnecting (${err.message ?? err})`);
      }
      if (!this.running) return;
      await new Promise((r) => setTimeout(r, this.controller?.signal.aborted ? 0 : RETRY_MS));
    }
  }

  async stream() {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(this.filters)) if (value) query.set(name, value);
    const headers = authHeaders({ accept: 'text/event-stream' });
    if (this.lastId !== null) headers['last-event-id'] = String(this.lastId);
    this.controller = new AbortController();
    const search = query.toString();
    const res = await fetch(`/admin/events${search ? `?${search}` : ''}`, {
      headers,
      signal: this.controller.signal,
      cache: 'no-store',
      credentials: 'omit',
      referrerPolicy: 'no-referrer',
    });
    if (res.status === 401) throw new AuthError('the admin key was refused');
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    this.setStatus(this.paused ? 'paused' : 'live');
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the stream ended');
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      let blank;
      while ((blank = buffer.indexOf('\n\n')) >= 0) {
        this.frame(buffer.slice(0, blank));
        buffer = buffer.slice(blank + 2);
      }
    }
  }

  frame(block) {
    let data = '';
    let id = null;
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue; // a comment: keep-alive
      const colon = line.indexOf(':');
      const name = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (name === 'data') data += (data ? '\n' : '') + value;
      else if (name === 'id') id = Number(value);
    }
    if (!data) return;
    let event;
    try {
      event = JSON.parse(data);
    } catch {
      return;
    }
    if (id !== null && Number.isFinite(id)) this.lastId = id;
    if (this.paused) {
      this.held.push(event);
      if (this.held.length > MAX_EVENTS) this.held.shift();
    } else {
      this.show(event);
    }
  }

  show(e) {
    const details = [];
    for (const [field, format] of DETAILS) {
      if (e[field] !== undefined && e[field] !== null && e[field] !== '') details.push(format(e[field]));
    }
    const family = String(e.kind ?? '').split('.')[0];
    const item = el(
      'li',
      { class: `event ${family}`, 'data-kind': e.kind, 'data-request': e.request_id, 'data-trace': e.trace_id },
      el('time', {}, fmtTime(e.time)),
      el('span', { class: 'kind' }, e.kind ?? '?'),
      e.key ? el('span', { class: 'tag' }, `key ${e.key}`) : null,
      e.node ? el('span', { class: 'tag' }, `node ${e.node}`) : null,
      e.upstream ? el('span', { class: 'tag' }, `upstream ${e.upstream}`) : null,
      el('span', { class: 'details' }, details.join(' · ')),
      e.trace_id ? el('span', { class: 'trace muted', title: `trace ${e.trace_id}` }, e.trace_id.slice(0, 8)) : null,
    );
    this.list.prepend(item);
    while (this.list.children.length > MAX_EVENTS) this.list.lastElementChild.remove();
  }
}
