// A real browser for end-to-end tests: Debian's headless Chromium driven
// through chromedriver's W3C WebDriver HTTP API with Node's fetch (no npm
// package). scripts/install-deps.sh installs `chromium` and `chromium-driver`.
//
//   const driver = await startChromeDriver();        // chromedriver on a free port
//   const browser = await openBrowser(driver);       // one headless session
//   await browser.go(url); await browser.click('#id'); await browser.screenshot(file)
//   await browser.close(); await driver.stop();
//
// The session keeps Chromium's performance log (the DevTools Network events
// of the page), so a test can list every request the page made
// (browser.requests()), and its console (browser.consoleMessages()),
// where a Content-Security-Policy violation would show.

import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import { closedPort, spawnProcess, waitFor } from './harness.mjs';

const ELEMENT = 'element-6066-11e4-a52e-4f735466cecf';
const CHROMEDRIVER = ['/usr/bin/chromedriver', '/usr/lib/chromium/chromedriver'].find((p) => existsSync(p));
const CHROMIUM = ['/usr/lib/chromium/chromium', '/usr/bin/chromium'].find((p) => existsSync(p));

export function browserMissing() {
  if (!CHROMEDRIVER || !CHROMIUM) {
    return 'headless Chromium is not installed: run scripts/install-deps.sh (Debian packages chromium and chromium-driver)';
  }
  return null;
}

export async function startChromeDriver() {
  const missing = browserMissing();
  if (missing) throw new Error(missing);
  const port = await closedPort();
  const proc = spawnProcess(CHROMEDRIVER, [`--port=${port}`, '--allowed-ips=127.0.0.1', '--log-level=WARNING']);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    async () => {
      if (proc.exitStatus()) throw new Error(`chromedriver exited: ${proc.output.stderr}${proc.output.stdout}`);
      try {
        const res = await fetch(`${url}/status`);
        const body = await res.json();
        return body.value?.ready;
      } catch {
        return false;
      }
    },
    { timeoutMs: 10_000, intervalMs: 100, what: 'chromedriver to be ready' },
  );
  return { url, stop: () => proc.stop(), logs: () => proc.output.stdout + proc.output.stderr };
}

async function call(base, method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  if (!res.ok || json.value?.error) {
    const e = json.value ?? {};
    throw new Error(`WebDriver ${method} ${path}: ${e.error ?? res.status}: ${e.message ?? JSON.stringify(json)}`);
  }
  return json.value;
}

export async function openBrowser(driver, { width = 1440, height = 1900 } = {}) {
  const profile = mkdtempSync(join(tmpdir(), 'kimi-relay-chromium-'));
  const args = [
    '--headless=new',
    '--no-sandbox', // tests may run as root (CI containers)
    '--disable-gpu',
    '--disable-dev-shm-usage',
    '--no-first-run',
    '--no-default-browser-check',
    '--disable-extensions',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-proxy-server',
    '--lang=en-US',
    `--window-size=${width},${height}`,
    `--user-data-dir=${profile}`,
  ];
  const session = await call(driver.url, 'POST', '/session', {
    capabilities: {
      alwaysMatch: {
        browserName: 'chrome',
        'goog:chromeOptions': { binary: CHROMIUM, args },
        'goog:loggingPrefs': { performance: 'ALL', browser: 'ALL' },
      },
    },
  });
  const base = `${driver.url}/session/${session.sessionId}`;
  const network = []; // performance-log entries drained so far
  const consoleLog = [];
  const s = (method, path, body) => call(base, method, path, body);

  const browser = {
    async go(url) {
      await s('POST', '/url', { url });
    },
    // Runs `script` (a function body; `arguments` are `args`) in the page.
    exec(script, ...args) {
      return s('POST', '/execute/sync', { script, args });
    },
    async find(css) {
      const found = await s('POST', '/element', { using: 'css selector', value: css });
      return found[ELEMENT];
    },
    async click(css) {
      const id = await browser.find(css);
      await s('POST', `/element/${id}/click`, {});
    },
    async type(css, text) {
      const id = await browser.find(css);
      await s('POST', `/element/${id}/clear`, {});
      await s('POST', `/element/${id}/value`, { text });
    },
    // The text of the first element matching `css`, or null.
    text(css) {
      return browser.exec('const e = document.querySelector(arguments[0]); return e ? e.textContent : null;', css);
    },
    // Waits until `script` (run in the page) returns something truthy.
    until(script, args = [], { timeoutMs = 15_000, what = script } = {}) {
      return waitFor(() => browser.exec(script, ...args), { timeoutMs, intervalMs: 100, what });
    },
    async screenshot(file) {
      const png = await s('GET', '/screenshot');
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, Buffer.from(png, 'base64'));
      return file;
    },
    // Every request made so far (DevTools Network.requestWillBeSent):
    // [{url, document}], `document` being the URL of the page that made it.
    // Chromium's own pages (its new-tab page) appear with theirs.
    async requests() {
      const entries = await s('POST', '/se/log', { type: 'performance' });
      for (const entry of entries) {
        const { message } = JSON.parse(entry.message);
        if (message.method === 'Network.requestWillBeSent') {
          network.push({ url: message.params.request.url, document: message.params.documentURL });
        }
      }
      return [...network];
    },
    async consoleMessages() {
      consoleLog.push(...(await s('POST', '/se/log', { type: 'browser' })));
      return [...consoleLog];
    },
    async close() {
      try {
        await call(base, 'DELETE', '');
      } finally {
        rmSync(profile, { recursive: true, force: true });
      }
    },
  };
  return browser;
}
