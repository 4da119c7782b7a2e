// W3C Trace Context end to end (docs/tracing.md): the gateway continues a
// caller's trace (or starts one) as a span of its own, sends upstreams and MCP
// servers a traceparent whose parent is that span — never the caller's copied
// through — and puts the trace id in the response's traceparent, in error
// bodies (error.trace_id, as the OpenAI SDK exposes it), in the access log
// (trace_id, span_id) and in the event stream.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';

import OpenAI from 'openai';

import { waitForAccessLines } from '../lib/access_log.mjs';
import {
  chatRequest,
  headerValue,
  headerValues,
  postChat,
  readOpenAiError,
  readSse,
  relayConfig,
  sha256Hex,
  startMock,
  startRelay,
  waitFor,
} from '../lib/harness.mjs';
import { startRecordingMcp } from '../lib/mcp_recorder.mjs';

const KEY = 'kr-trace-caller-5e7a9c1b3d5f7a9c1e3b5d7f9a1c3e5b';
const ADMIN_KEY = 'kr-trace-admin-0d2f4b6a8c0e2a4c6e8b0d2f4a6c8e0b';
const UPSTREAM_KEY = 'sk-trace-upstream-1b3d5f7a9c1e3b5d';
const MCP_KEY = 'sk-trace-mcp-9c1e3b5d7f9a1c3e';

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const CALLER_PARENT = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`;
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

const env = {};

before(async () => {
  env.dir = mkdtempSync(join(tmpdir(), 'kimi-relay-trace-'));
  env.accessLog = join(env.dir, 'access.log');
  [env.primary, env.secondary] = await Promise.all([
    startMock({ name: 'primary', apiKey: UPSTREAM_KEY }),
    startMock({ name: 'secondary', apiKey: UPSTREAM_KEY }),
  ]);
  env.mcp = await startRecordingMcp({ name: 'rec', apiKey: MCP_KEY });
  env.relay = await startRelay(
    relayConfig({
      keys: [{ name: 'tracer', key: KEY }],
      admin: { key_sha256: sha256Hex(ADMIN_KEY) },
      upstreams: [
        { name: 'primary', url: env.primary.url, apiKey: UPSTREAM_KEY, weight: 1_000_000, models: { 'kimi-k2': 'kimi-k2' }, health: { eject_after_failures: 0 } },
        { name: 'secondary', url: env.secondary.url, apiKey: UPSTREAM_KEY, weight: 1, models: { 'kimi-k2': 'kimi-k2' }, health: { eject_after_failures: 0 } },
      ],
      retry: { max_attempts: 3, backoff: { base_ms: 5, max_ms: 10 }, budget: { ratio: 1, min_per_second: 100 } },
      log: { access_log: env.accessLog },
      mcp: {
        servers: [{ name: 'rec', url: env.mcp.url, api_key: MCP_KEY }],
        session_secret: 'trace-test-session-secret-0123456789abcdef',
      },
    }),
  );
});

after(async () => {
  await Promise.all([env.relay, env.primary, env.secondary].filter(Boolean).map((p) => p.stop()));
  await env.mcp?.close();
  if (env.dir) rmSync(env.dir, { recursive: true, force: true });
});

beforeEach(async () => {
  await Promise.all([env.primary, env.secondary].map(async (m) => {
    await m.clearFault();
    await m.clearRequests();
  }));
});

// One chat request; the upstream requests it caused, and the answer's traceparent.
async function traced(headers = {}) {
  const marker = `trace-${Math.random().toString(36).slice(2)}`;
  const res = await postChat(env.relay, chatRequest({ messages: [{ role: 'user', content: marker }] }), { key: KEY, headers });
  const text = await res.text();
  const seen = [];
  for (const mock of [env.primary, env.secondary]) {
    for (const r of await mock.requests()) if (r.body.includes(marker)) seen.push(r);
  }
  const answered = res.headers.get('traceparent');
  return { res, text, seen, answered, id: res.headers.get('x-request-id') };
}

describe('upstreams get the gateway as their parent span', () => {
  test("a valid traceparent: the caller's trace id and flags, a new parent id (the gateway's span); tracestate passed on", async () => {
    const r = await traced({ traceparent: CALLER_PARENT, tracestate: 'rojo=00f067aa0ba902b7, congo=t61rcWkgMzE' });
    assert.equal(r.res.status, 200, r.text);
    assert.equal(r.seen.length, 1);
    const sent = headerValues(r.seen[0], 'traceparent');
    assert.equal(sent.length, 1, 'one traceparent');
    const m = sent[0].match(TRACEPARENT);
    assert.ok(m, `a valid traceparent: ${sent[0]}`);
    assert.equal(m[1], CALLER_TRACE, "the caller's trace id");
    assert.notEqual(m[2], CALLER_SPAN, "not the caller's span id: the gateway's own");
    assert.notEqual(m[2], '0000000000000000');
    assert.equal(m[3], '01', 'the sampled flag is kept');
    assert.equal(headerValue(r.seen[0], 'tracestate'), 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE');
    // The caller sees the same span in the answer: it can join its trace to ours.
    assert.equal(r.answered, sent[0]);
  });

  test('no traceparent: a new trace; upstream, answer and access log agree on it', async () => {
    const r = await traced();
    assert.equal(r.res.status, 200, r.text);
    const sent = headerValue(r.seen[0], 'traceparent');
    const m = sent.match(TRACEPARENT);
    assert.ok(m, sent);
    assert.notEqual(m[1], '0'.repeat(32));
    assert.equal(r.answered, sent);
    assert.equal(headerValues(r.seen[0], 'tracestate').length, 0);
    const lines = await waitForAccessLines(env.accessLog, [r.id]);
    assert.equal(lines.get(r.id).trace_id, m[1]);
    assert.equal(lines.get(r.id).span_id, m[2], "the access log's span is the upstream's parent");
  });

  test('an invalid traceparent (or two) starts a new trace, and its tracestate is dropped', async () => {
    const invalid = [
      `00-${CALLER_TRACE.toUpperCase()}-${CALLER_SPAN}-01`,
      `00-${'0'.repeat(32)}-${CALLER_SPAN}-01`,
      `00-${CALLER_TRACE}-${'0'.repeat(16)}-01`,
      `ff-${CALLER_TRACE}-${CALLER_SPAN}-01`,
      `00-${CALLER_TRACE}-${CALLER_SPAN}-01-extra`,
      `${CALLER_PARENT}, ${CALLER_PARENT}`, // sent twice, joined by a proxy
      'garbage',
    ];
    for (const value of invalid) {
      const r = await traced({ traceparent: value, tracestate: 'rojo=1' });
      assert.equal(r.res.status, 200, r.text);
      const sent = headerValue(r.seen[0], 'traceparent');
      const m = sent.match(TRACEPARENT);
      assert.ok(m, `${value}: ${sent}`);
      assert.notEqual(m[1], CALLER_TRACE, `${value}: a new trace id`);
      assert.equal(headerValues(r.seen[0], 'tracestate').length, 0, `${value}: tracestate dropped`);
    }
  });

  test('a later version is read by its first fields; only version 00 goes on', async () => {
    const r = await traced({ traceparent: `cc-${CALLER_TRACE}-${CALLER_SPAN}-01-more` });
    const m = headerValue(r.seen[0], 'traceparent').match(TRACEPARENT);
    assert.ok(m);
    assert.equal(m[1], CALLER_TRACE);
  });

  test('every attempt of a retried request carries the same gateway span', async () => {
    await env.primary.setFault('status=503;times=1');
    const r = await traced({ traceparent: CALLER_PARENT });
    assert.equal(r.res.status, 200, r.text);
    assert.equal(r.seen.length, 2, 'primary failed, secondary answered');
    const values = r.seen.map((s) => headerValue(s, 'traceparent'));
    assert.equal(values[0], values[1]);
    assert.equal(values[0].match(TRACEPARENT)[1], CALLER_TRACE);
  });
});

describe('the trace id where clients and operators look', () => {
  test("error bodies carry error.trace_id, the answer's traceparent the same trace (gateway and upstream errors)", async () => {
    // The gateway's own error (no key).
    const refused = await postChat(env.relay, chatRequest(), { headers: { traceparent: CALLER_PARENT } });
    assert.equal(refused.status, 401);
    const tp = refused.headers.get('traceparent');
    assert.equal(tp.match(TRACEPARENT)?.[1], CALLER_TRACE);
    const err = await readOpenAiError(refused, assert);
    assert.equal(err.trace_id, CALLER_TRACE);

    // An upstream's error passed on (400 is not retried).
    await env.primary.setFault('status=400');
    const passed = await postChat(env.relay, chatRequest(), { key: KEY });
    assert.equal(passed.status, 400);
    const passedErr = await readOpenAiError(passed, assert);
    assert.match(passedErr.trace_id, /^[0-9a-f]{32}$/);
    assert.equal(passedErr.trace_id, passed.headers.get('traceparent').match(TRACEPARENT)[1]);
  });

  test('the OpenAI SDK shows the trace id of a failed call (err.error.trace_id)', async () => {
    const client = new OpenAI({ baseURL: `${env.relay.url}/v1`, apiKey: 'kr-not-a-key', maxRetries: 0, defaultHeaders: { traceparent: CALLER_PARENT } });
    const err = await client.chat.completions.create(chatRequest()).catch((e) => e);
    assert.ok(err instanceof OpenAI.AuthenticationError, String(err));
    assert.equal(err.error.trace_id, CALLER_TRACE);
    assert.equal(err.headers.get('traceparent').match(TRACEPARENT)[1], CALLER_TRACE);
  });

  test('events of a request carry its trace id', async () => {
    const controller = new AbortController();
    const res = await fetch(`${env.relay.adminUrl}/admin/events?kind=request.`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}`, accept: 'text/event-stream' },
      signal: controller.signal,
    });
    assert.equal(res.status, 200);
    const events = [];
    const reading = (async () => {
      try {
        for await (const e of readSse(res)) if (e.json) events.push(e.json);
      } catch {
        // aborted below
      }
    })();
    try {
      await new Promise((r) => setTimeout(r, 100));
      const r = await traced({ traceparent: CALLER_PARENT });
      assert.equal(r.res.status, 200);
      const finished = await waitFor(() => events.find((e) => e.request_id === r.id && e.kind === 'request.finished'), {
        timeoutMs: 3000,
        what: 'request.finished',
      });
      assert.equal(finished.trace_id, CALLER_TRACE);
      for (const e of events.filter((x) => x.request_id === r.id)) assert.equal(e.trace_id, CALLER_TRACE, e.kind);
    } finally {
      controller.abort();
      await reading;
    }
  });
});

describe('MCP', () => {
  test('an MCP server gets the gateway as parent span, and the answer says so', async () => {
    const before = env.mcp.requests.length;
    const res = await fetch(`${env.relay.url}/v1/mcp/rec`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEY}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        traceparent: CALLER_PARENT,
        tracestate: 'rojo=1',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'trace-test', version: '1' } },
      }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    await res.text();
    const got = env.mcp.requests.slice(before).find((r) => r.method === 'POST');
    assert.ok(got, 'the MCP server was asked');
    const sent = headerValues(got, 'traceparent');
    assert.equal(sent.length, 1);
    const m = sent[0].match(TRACEPARENT);
    assert.ok(m, sent[0]);
    assert.equal(m[1], CALLER_TRACE);
    assert.notEqual(m[2], CALLER_SPAN);
    assert.equal(headerValue(got, 'tracestate'), 'rojo=1');
    assert.equal(res.headers.get('traceparent'), sent[0]);
  });
});
