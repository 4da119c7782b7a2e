// The operator console in a real browser: headless Chromium (Debian's
// chromium + chromium-driver, driven over W3C WebDriver by tests/lib/webdriver.mjs)
// against a running gateway and two mock upstreams.
//
//   1. Without the admin key every data endpoint is 401, and the page shows a
//      login form and nothing else; a wrong key is refused.
//   2. Logged in, the page shows both upstreams healthy and events arriving
//      live from requests made with the openai SDK.
//   3. The preferred mock starts failing: the page shows it ejected (with the
//      end of its ejection) and the upstream.ejected event.
//   4. A key created in the page works with the openai SDK; revoked in the
//      page, the SDK's next call fails with 401.
//   5. The page made no request to any other origin, and the browser reported
//      no Content-Security-Policy violation.
//
// Screenshots go to <build>/test-artifacts/console-*.png (the build directory
// is the one holding $RELAY_BIN); docs/console.png is one of them.

import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';

import OpenAI from 'openai';

import { RELAY_BIN, relayConfig, sha256Hex, startMock, startRelay, waitFor } from '../lib/harness.mjs';
import { openBrowser, startChromeDriver } from '../lib/webdriver.mjs';

const ADMIN_KEY = 'kr-console-e2e-admin-5b7d9f1a3c5e7b9d1f3a5c7e9b1d3f5a';
const SWARM_KEY = 'kr-console-e2e-swarm-2c4e6a8b0d2f4a6c8e0b2d4f6a8c0e2b';
const UPSTREAM_KEY = 'sk-console-e2e-upstream-7a9c1e3b5d7f';
const ARTIFACTS = join(dirname(RELAY_BIN), 'test-artifacts');

const env = {};
const shot = (name) => env.browser.screenshot(join(ARTIFACTS, `console-${name}.png`));

before(async () => {
  [env.primary, env.backup] = await Promise.all([
    startMock({ name: 'primary', apiKey: UPSTREAM_KEY, chunkDelayMs: 5 }),
    startMock({ name: 'backup', apiKey: UPSTREAM_KEY }),
  ]);
  env.relay = await startRelay(
    relayConfig({
      admin: { key_sha256: sha256Hex(ADMIN_KEY) },
      keys: [{ name: 'swarm', key: SWARM_KEY, limits: { rpm: 600, tpm: 200000, concurrency: 8 }, budget: { usd: 5, period: 'day' } }],
      upstreams: [
        {
          name: 'primary',
          url: env.primary.url,
          apiKey: UPSTREAM_KEY,
          weight: 1_000_000,
          region: 'eu-fra',
          models: { 'kimi-k2': 'kimi-k2' },
          health: { eject_after_failures: 2, base_ejection_ms: 120_000, max_ejection_ms: 120_000 },
        },
        { name: 'backup', url: env.backup.url, apiKey: UPSTREAM_KEY, weight: 1, region: 'us-east', max_concurrency: 20, models: { 'kimi-k2': 'kimi-k2' } },
      ],
      prices: [{ model: 'kimi-k2', input: 0.6, output: 2.5 }],
      metrics: { node_ids: ['planner-1', 'coder-2'] },
      retry: { max_attempts: 3, backoff: { base_ms: 5, max_ms: 10 }, budget: { ratio: 1, min_per_second: 100 } },
    }),
  );
  env.driver = await startChromeDriver();
  env.browser = await openBrowser(env.driver);
  await env.browser.go('about:blank');
});

after(async () => {
  await env.browser?.close().catch(() => {});
  await env.driver?.stop();
  await Promise.all([env.relay, env.primary, env.backup].filter(Boolean).map((p) => p.stop()));
});

function sdk(apiKey, node) {
  return new OpenAI({ baseURL: `${env.relay.url}/v1`, apiKey, maxRetries: 0, defaultHeaders: { 'x-node-id': node } });
}

async function chatWith(client, content = 'hello') {
  const reply = await client.chat.completions.create({ model: 'kimi-k2', messages: [{ role: 'user', content }] });
  return reply;
}

// Text of a cell of a table row, as the page shows it.
const cellText = (table, attr, value, field) =>
  env.browser.exec(
    `const row = document.querySelector('#${table} tr[${attr}="' + arguments[0] + '"]');
     const cell = row && row.querySelector('[data-field="' + arguments[1] + '"]');
     return cell ? cell.textContent : null;`,
    value,
    field,
  );

test('without the admin key: 401 from every data endpoint, and a page that shows nothing', async () => {
  for (const [method, path] of [
    ['GET', '/admin/console/state'],
    ['GET', '/admin/console/history'],
    ['GET', '/admin/keys'],
    ['POST', '/admin/keys'],
    ['GET', '/admin/events'],
  ]) {
    const res = await fetch(`${env.relay.adminUrl}${path}`, { method });
    assert.equal(res.status, 401, `${method} ${path}`);
    await res.arrayBuffer();
  }
  await env.browser.go(`${env.relay.adminUrl}/`);
  await env.browser.until("return document.getElementById('status').textContent === 'not logged in'");
  assert.equal(await env.browser.exec("return document.getElementById('console').hidden"), true);
  assert.equal(await env.browser.exec("return document.querySelectorAll('#upstreams tbody tr, #keys tbody tr').length"), 0);
  await env.browser.type('#admin-key', 'kr-not-the-admin-key');
  await env.browser.click('#login-form button[type="submit"]');
  await env.browser.until("return !document.getElementById('login-error').hidden");
  assert.match(await env.browser.text('#login-error'), /not the admin key/);
  assert.equal(await env.browser.exec("return document.getElementById('console').hidden"), true);
  assert.equal(await env.browser.exec("return sessionStorage.length"), 0, 'a refused key is not kept');
  await shot('login');
});

test('logged in: upstreams healthy, events arriving live from openai SDK calls', async () => {
  await env.browser.type('#admin-key', ADMIN_KEY);
  await env.browser.click('#login-form button[type="submit"]');
  await env.browser.until("return document.body.dataset.ready === 'true'");
  assert.equal(await env.browser.exec("return document.getElementById('login').hidden"), true);
  assert.equal(await env.browser.exec("return document.cookie"), '', 'no cookie');
  assert.equal(await env.browser.exec("return Object.keys(sessionStorage).join()"), 'kimi-relay.admin-key');
  for (const name of ['primary', 'backup']) {
    assert.equal(await env.browser.exec(`return document.querySelector('#upstreams tr[data-upstream="${name}"]').dataset.health`), 'healthy');
  }
  assert.match(await cellText('upstreams', 'data-upstream', 'primary', 'region'), /eu-fra/);
  await env.browser.until("return document.getElementById('events-status').textContent === 'live'", [], { what: 'the live tail' });

  const planner = sdk(SWARM_KEY, 'planner-1');
  const coder = sdk(SWARM_KEY, 'coder-2');
  for (let i = 0; i < 4; ++i) await chatWith(i % 2 ? coder : planner, `request ${i}`);
  const stream = await planner.chat.completions.create({ model: 'kimi-k2', stream: true, messages: [{ role: 'user', content: 'stream' }] });
  for await (const chunk of stream) assert.ok(chunk);
  // Live: the events show up without reloading the page.
  await env.browser.until(
    "return document.querySelectorAll('#events li[data-kind=\"request.finished\"]').length >= 5",
    [],
    { what: 'five request.finished events in the tail' },
  );
  const first = await env.browser.text('#events li[data-kind="request.finished"]');
  assert.match(first, /key swarm/);
  assert.match(first, /upstream primary/);
  assert.match(first, /HTTP 200/);
  // The next state poll counts them per key, upstream and node.
  await env.browser.until(
    `const row = document.querySelector('#nodes tr[data-node="planner-1"]');
     return row && row.querySelector('[data-field="total"]').textContent === '3';`,
    [],
    { what: 'planner-1 with 3 requests in the node table' },
  );
  assert.match(await cellText('keys', 'data-key', 'swarm', 'requests'), /^5 \/ 600/);
  assert.match(await cellText('keys', 'data-key', 'swarm', 'spend'), /\$.* \/ \$5\.00/);
  assert.match(await cellText('upstreams', 'data-upstream', 'primary', 'latency'), /ms/);
  await shot('live');
});

test('an upstream that starts failing is shown ejected, with when the ejection ends', async () => {
  await env.primary.setFault('status=503');
  const planner = sdk(SWARM_KEY, 'planner-1');
  for (let i = 0; i < 2; ++i) {
    const { data, response } = await planner.chat.completions
      .create({ model: 'kimi-k2', messages: [{ role: 'user', content: `failover ${i}` }] })
      .withResponse();
    assert.ok(data.choices.length);
    assert.equal(response.headers.get('x-relay-upstream'), 'backup', 'answered by the backup');
  }
  await env.browser.until(
    "return document.querySelector('#upstreams tr[data-upstream=\"primary\"]').dataset.health === 'ejected'",
    [],
    { what: 'primary shown as ejected' },
  );
  assert.match(await cellText('upstreams', 'data-upstream', 'primary', 'health'), /^ejected until .*\d\d:\d\d/);
  assert.match(await cellText('upstreams', 'data-upstream', 'primary', 'errors'), /%/);
  await env.browser.until("return !!document.querySelector('#events li[data-kind=\"upstream.ejected\"]')", [], {
    what: 'the upstream.ejected event in the tail',
  });
  assert.match(await env.browser.text('#events li[data-kind="upstream.ejected"]'), /upstream primary/);
  await env.primary.clearFault();
  await shot('ejected');
});

test('a key created in the page works with the openai SDK; revoked in the page, the next call is 401', async () => {
  await env.browser.type('#new-key input[name="name"]', 'browser-agent');
  await env.browser.type('#new-key input[name="rpm"]', '120');
  await env.browser.type('#new-key input[name="usd"]', '2.5');
  await env.browser.click('#new-key button[type="submit"]');
  await env.browser.until("return !document.getElementById('secret').hidden", [], { what: 'the new secret' });
  const secret = await env.browser.text('#secret-value');
  assert.match(secret, /^kr-[A-Za-z0-9_-]{43}$/);
  await shot('key-created');

  const agent = sdk(secret, 'coder-2');
  const reply = await chatWith(agent, 'from the new key');
  assert.ok(reply.choices[0].message.content);
  await env.browser.until(
    `const row = document.querySelector('#keys tr[data-key="browser-agent"]');
     return row && row.querySelector('[data-field="requests"]').textContent.startsWith('1 / 120');`,
    [],
    { what: 'the new key with one request of 120' },
  );
  assert.match(await cellText('keys', 'data-key', 'browser-agent', 'spend'), /\/ \$2\.50/);
  // The secret was shown once: it is not in the page's data.
  await env.browser.click('#secret-done');
  assert.equal(await env.browser.exec('return document.body.textContent.includes(arguments[0])', secret), false);

  // Revoke asks for a second click.
  await env.browser.click('#keys tr[data-key="browser-agent"] button[data-action="revoke"]');
  assert.match(await env.browser.text('#keys tr[data-key="browser-agent"] button[data-action="revoke"]'), /Confirm revoke/);
  await env.browser.click('#keys tr[data-key="browser-agent"] button[data-action="revoke"]');
  await env.browser.until("return !document.querySelector('#keys tr[data-key=\"browser-agent\"]')", [], {
    what: 'the revoked key gone from the table',
  });
  const err = await chatWith(agent, 'after the revoke').catch((e) => e);
  assert.ok(err instanceof OpenAI.AuthenticationError, `expected a 401, got ${err}`);
  assert.equal(err.status, 401);
  await shot('revoked');
});

test('plots of the last hour are drawn', async () => {
  // The history is polled every 10 s; its first sample is taken at start.
  await env.browser.until("return document.querySelectorAll('#plots figure[data-plot]').length === 4", [], {
    what: 'four plots',
  });
  const points = await env.browser.exec(
    "return [...document.querySelectorAll('#plots figure')].map((f) => Number(f.dataset.points))",
  );
  assert.ok(points.every((n) => n >= 1 && n <= 360), String(points));
  await shot('overview');
});

test('the page talked to its own origin only, and nothing broke its CSP', async () => {
  const origin = new URL(env.relay.adminUrl).origin;
  // Every request made by the console's page (Chromium's own start page aside).
  const mine = (await env.browser.requests()).filter((r) => r.document?.startsWith(`${origin}/`));
  const urls = mine.map((r) => r.url);
  assert.ok(urls.length > 10, `requests seen: ${urls.length}`);
  const foreign = urls.filter((u) => !u.startsWith(`${origin}/`) && !u.startsWith('data:'));
  assert.deepEqual(foreign, [], 'requests to another origin');
  for (const file of ['/', '/console/app.js', '/console/app.css', '/console/events.js', '/console/plots.js']) {
    assert.ok(urls.includes(`${origin}${file}`), `${file} was loaded from the gateway`);
  }
  assert.ok(urls.some((u) => u.endsWith('/admin/console/state')));
  assert.ok(urls.some((u) => u.includes('/admin/events')));
  const messages = await env.browser.consoleMessages();
  const violations = messages.filter((m) => /Content Security Policy|Refused to/i.test(m.message));
  assert.deepEqual(violations, [], 'CSP violations');
  const errors = messages.filter((m) => m.level === 'SEVERE' && !/status of 401/.test(m.message));
  assert.deepEqual(errors, [], 'errors in the browser console (the 401 of the wrong key aside)');
});

test('logging out forgets the key and shows nothing', async () => {
  await env.browser.click('#logout');
  await waitFor(async () => {
    try {
      return await env.browser.exec("return document.getElementById('status').textContent === 'not logged in'");
    } catch {
      return false; // the page is reloading
    }
  }, { timeoutMs: 10_000, what: 'the login form again' });
  assert.equal(await env.browser.exec('return sessionStorage.length'), 0);
  assert.equal(await env.browser.exec("return document.getElementById('console').hidden"), true);
});
