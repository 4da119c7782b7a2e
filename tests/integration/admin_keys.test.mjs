// The runtime key API (admin listener) and its CLI: keys created, changed,
// rotated and revoked take effect on every worker at once, survive a restart
// (state_dir/keys.json) and a reload, and leave an audit line without secrets.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

import { RELAY_BIN, chatRequest, postChat, relayConfig, sha256Hex, startMock, startRelay, toYaml, waitFor } from '../lib/harness.mjs';

const run = promisify(execFile);
const ADMIN_KEY = 'kr-admin-keys-test-0f1e2d3c4b5a69788796a5b4c3d2e1f0';
const FILE_KEY = 'kr-file-key-test-1a2b3c4d5e6f70819203a4b5c6d7e8f9';
const UPSTREAM_KEY = 'sk-admin-keys-upstream-4c6e8a0b2d4f';

const env = { dirs: [] };

function configFor(dir, extraKeys = []) {
  return relayConfig({
    admin: { key_sha256: sha256Hex(ADMIN_KEY) },
    keys: [{ name: 'from-file', key: FILE_KEY, limits: { rpm: 1000 } }, ...extraKeys],
    upstreams: [{ name: 'up', url: env.mock.url, apiKey: UPSTREAM_KEY, models: { 'kimi-k2': 'kimi-k2', other: 'other' } }],
    state_dir: dir,
    log: { access_log: join(dir, 'access.log') },
  });
}

function stateDir() {
  const dir = mkdtempSync(join(tmpdir(), 'kimi-relay-keys-'));
  env.dirs.push(dir);
  return dir;
}

before(async () => {
  env.mock = await startMock({ name: 'up', apiKey: UPSTREAM_KEY });
});
after(async () => {
  await env.mock?.stop();
  for (const d of env.dirs) rmSync(d, { recursive: true, force: true });
});

async function admin(relay, method, path, body, key = ADMIN_KEY) {
  const res = await fetch(`${relay.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, text };
}

// Several requests, so that both workers (and their snapshots) are asked.
async function statuses(relay, key, n = 6, body = chatRequest({ model: 'kimi-k2' })) {
  const out = [];
  for (let i = 0; i < n; ++i) {
    const res = await postChat(relay, body, { key });
    out.push(res.status);
    await res.text();
  }
  return out;
}

describe('runtime keys', () => {
  before(async () => {
    env.dir = stateDir();
    env.relay = await startRelay(configFor(env.dir));
  });
  after(async () => env.relay?.stop());

  test('a key created over the API works at once, on every worker; its secret is shown once and never listed', async () => {
    const created = await admin(env.relay, 'POST', '/admin/keys', { name: 'planner', limits: { rpm: 600 }, models: ['kimi-k2'] });
    assert.equal(created.status, 201, created.text);
    assert.match(created.body.key, /^kr-[A-Za-z0-9_-]{43}$/);
    assert.equal(created.body.persisted, true);
    env.planner = created.body.key;
    assert.deepEqual(await statuses(env.relay, env.planner), [200, 200, 200, 200, 200, 200]);
    const list = await admin(env.relay, 'GET', '/admin/keys');
    const mine = list.body.data.find((k) => k.name === 'planner');
    assert.equal(mine.source, 'api');
    assert.equal(mine.limits.rpm, 600);
    assert.ok(mine.rate.requests_remaining < 600);
    assert.ok(!list.text.includes(env.planner), 'the secret is never listed');
    assert.ok(!list.text.includes(sha256Hex(env.planner)), 'nor its digest');
    // The allow-list holds: another model is refused.
    const other = await postChat(env.relay, chatRequest({ model: 'other' }), { key: env.planner });
    assert.equal(other.status, 403);
  });

  test('changing a limit takes effect at once', async () => {
    const changed = await admin(env.relay, 'PATCH', '/admin/keys/planner', { limits: { rpm: 2 } });
    assert.equal(changed.status, 200, changed.text);
    const seen = await statuses(env.relay, env.planner, 4);
    assert.deepEqual(seen, [200, 200, 429, 429]);
    await admin(env.relay, 'PATCH', '/admin/keys/planner', { limits: { rpm: 600 } });
  });

  test('an invalid change is refused with a message that says what to fix, and nothing changes', async () => {
    const badModel = await admin(env.relay, 'PATCH', '/admin/keys/planner', { models: ['kimi-k9'] });
    assert.equal(badModel.status, 400);
    assert.match(badModel.body.error.message, /no upstream serves model 'kimi-k9'/);
    const badField = await admin(env.relay, 'PATCH', '/admin/keys/planner', { sha256: 'ab'.repeat(32) });
    assert.equal(badField.status, 400);
    assert.match(badField.body.error.message, /cannot be set/);
    const dup = await admin(env.relay, 'POST', '/admin/keys', { name: 'from-file' });
    assert.equal(dup.status, 409);
    assert.equal((await statuses(env.relay, env.planner, 1))[0], 200);
  });

  test('rotation: old and new secret both work for the grace period, then only the new one', async () => {
    // 3 s of grace: the four requests below must fit in it even on a loaded
    // machine under ASan (1 s did not, once).
    const rotated = await admin(env.relay, 'POST', '/admin/keys/planner/rotate', { grace_seconds: 3 });
    assert.equal(rotated.status, 200, rotated.text);
    const fresh = rotated.body.key;
    assert.notEqual(fresh, env.planner);
    assert.equal((await statuses(env.relay, env.planner, 2)).join(), '200,200');
    assert.equal((await statuses(env.relay, fresh, 2)).join(), '200,200');
    await sleep(3100);
    assert.equal((await statuses(env.relay, env.planner, 2)).join(), '401,401');
    assert.equal((await statuses(env.relay, fresh, 2)).join(), '200,200');
    env.planner = fresh;
  });

  test('a file key can be changed over the API, and a reload of the file keeps the change', async () => {
    await admin(env.relay, 'PATCH', '/admin/keys/from-file', { limits: { rpm: 1 } });
    assert.deepEqual(await statuses(env.relay, FILE_KEY, 2), [200, 429]);
    const reloaded = await admin(env.relay, 'POST', '/admin/reload');
    assert.equal(reloaded.status, 200, reloaded.text);
    const shown = await admin(env.relay, 'GET', '/admin/keys/from-file');
    assert.equal(shown.body.limits.rpm, 1);
    assert.equal(shown.body.changed_by_api, true);
    // null gives the field back to the file.
    await admin(env.relay, 'PATCH', '/admin/keys/from-file', { limits: null });
    assert.equal((await admin(env.relay, 'GET', '/admin/keys/from-file')).body.limits.rpm, 1000);
  });

  test('a revoked key fails at once; a revoked file key can be restored', async () => {
    const revoked = await admin(env.relay, 'DELETE', '/admin/keys/planner');
    assert.equal(revoked.status, 200);
    assert.equal((await statuses(env.relay, env.planner, 3)).join(), '401,401,401');
    await admin(env.relay, 'DELETE', '/admin/keys/from-file');
    assert.equal((await statuses(env.relay, FILE_KEY, 1))[0], 401);
    const listed = (await admin(env.relay, 'GET', '/admin/keys')).body.data.find((k) => k.name === 'from-file');
    assert.equal(listed.revoked, true);
    await admin(env.relay, 'PATCH', '/admin/keys/from-file', { revoked: false });
    assert.equal((await statuses(env.relay, FILE_KEY, 1))[0], 200);
  });

  test('every change leaves an audit line in the access log, without any secret', async () => {
    const log = join(env.dir, 'access.log');
    await waitFor(() => readFileSync(log, 'utf8').includes('"audit":"key.revoked"'), { timeoutMs: 3000, what: 'the audit lines' });
    const lines = readFileSync(log, 'utf8').split('\n').filter((l) => l.includes('"audit"')).map((l) => JSON.parse(l));
    const actions = lines.map((l) => `${l.audit} ${l.key}`);
    for (const a of ['key.created planner', 'key.updated planner', 'key.rotated planner', 'key.revoked planner', 'key.updated from-file']) {
      assert.ok(actions.includes(a), `${a} in ${actions}`);
    }
    const text = readFileSync(log, 'utf8');
    assert.ok(!text.includes(env.planner) && !text.includes(FILE_KEY) && !text.includes(ADMIN_KEY));
  });

  test('the API needs the admin key', async () => {
    const noKey = await admin(env.relay, 'GET', '/admin/keys', undefined, FILE_KEY);
    assert.equal(noKey.status, 401);
    const create = await admin(env.relay, 'POST', '/admin/keys', { name: 'sneaky' }, FILE_KEY);
    assert.equal(create.status, 401);
  });
});

describe('runtime keys across a restart', () => {
  test('a key created over the API works after a restart; a revoked one stays revoked', async () => {
    const dir = stateDir();
    const first = await startRelay(configFor(dir));
    const keep = (await admin(first, 'POST', '/admin/keys', { name: 'keeper', limits: { rpm: 100 } })).body.key;
    const gone = (await admin(first, 'POST', '/admin/keys', { name: 'goner' })).body.key;
    await admin(first, 'DELETE', '/admin/keys/goner');
    await first.stop('SIGTERM');
    const keys = JSON.parse(readFileSync(join(dir, 'keys.json'), 'utf8'));
    assert.ok(keys.keys.keeper);
    assert.ok(!JSON.stringify(keys).includes(keep), 'only the digest is stored');

    const second = await startRelay(configFor(dir));
    try {
      assert.equal((await statuses(second, keep, 2)).join(), '200,200');
      assert.equal((await statuses(second, gone, 1))[0], 401);
      assert.equal((await admin(second, 'GET', '/admin/keys/keeper')).body.limits.rpm, 100);
    } finally {
      await second.stop();
    }
  });

  test('a damaged keys.json stops the start with an error naming it', async () => {
    const dir = stateDir();
    writeFileSync(join(dir, 'keys.json'), '{"version": 1, "keys": ');
    await assert.rejects(startRelay(configFor(dir)), (err) => {
      assert.match(err.message, /keys\.json/);
      return true;
    });
  });
});

describe('the CLI', () => {
  test('kimi-relay keys create / list / revoke talk to the admin API', async () => {
    const dir = stateDir();
    const relay = await startRelay(configFor(dir));
    try {
      const cli = (...args) =>
        run(RELAY_BIN, ['keys', ...args, '--admin-url', relay.adminUrl, '--admin-key', ADMIN_KEY]);
      const { stdout: made } = await cli('create', '--name', 'cli-node', '--rpm', '30', '--models', 'kimi-k2', '--budget-usd', '2');
      const secret = JSON.parse(made).key;
      assert.match(secret, /^kr-/);
      assert.equal((await statuses(relay, secret, 1))[0], 200);
      const { stdout: listed } = await cli('list');
      const row = JSON.parse(listed).data.find((k) => k.name === 'cli-node');
      assert.equal(row.limits.rpm, 30);
      assert.equal(row.budget.usd, 2);
      await cli('revoke', 'cli-node');
      assert.equal((await statuses(relay, secret, 1))[0], 401);
      await assert.rejects(cli('revoke', 'cli-node'), (err) => {
        assert.match(err.stderr, /HTTP 404/);
        return true;
      });
    } finally {
      await relay.stop();
    }
  });
});
