// The standard test topology: one kimi-relay in front of two mocks playing the
// upstreams of the demo, "holysheep" (OpenAI flavour, weight 70) and "moonshot"
// (Moonshot flavour, weight 30), with two caller keys.
//
//   client model       holysheep            moonshot
//   kimi-k2            kimi-k2              kimi-k2-0905-preview
//   kimi-agent-swarm   kimi-agent-swarm     -
//   moonshot-v1-8k     -                    moonshot-v1-8k
//
// Keys: KEYS.full may use every model; KEYS.limited only kimi-k2.
// The secrets are long and distinctive so that a test can search logs and
// bodies for them.

import { after, afterEach, before, beforeEach } from 'node:test';

import { relayConfig, startMock, startRelay } from './harness.mjs';
import { createTestCa } from './tls.mjs';

export const KEYS = {
  full: 'kr-test-full-7d1e0c53a9b24f6e8c1a5b3d9e2f4a6c',
  limited: 'kr-test-limited-4b8f2a6d0c9e1f3a5b7d9c2e4f6a8b0d',
};

export const UPSTREAM_KEYS = {
  holysheep: 'sk-holysheep-upstream-secret-3f9a7c1e5b2d8a4c6e0f',
  moonshot: 'sk-moonshot-upstream-secret-8e2c4a6f0b1d3e5a7c9f',
};

export const MODELS = {
  holysheep: { 'kimi-k2': 'kimi-k2', 'kimi-agent-swarm': 'kimi-agent-swarm' },
  moonshot: { 'kimi-k2': 'kimi-k2-0905-preview', 'moonshot-v1-8k': 'moonshot-v1-8k' },
};

export const ALL_MODELS = ['kimi-agent-swarm', 'kimi-k2', 'moonshot-v1-8k'];

// Every secret the gateway holds: none may appear in its logs or error bodies.
export const SECRETS = [...Object.values(KEYS), ...Object.values(UPSTREAM_KEYS)];

// Starts both mocks and the gateway. `server` is merged into the server
// section; `upstreams` are appended (for extra upstreams a test needs);
// `extra` adds top-level config sections. Returns
// {relay, holysheep, moonshot, mocks, config, restartRelay(), stop()};
// stop() ends all three.
// `tls: true` also makes a test CA (tls.mjs) and a TLS listener on
// 127.0.0.1:0 with its server certificate: env.tls is the CA
// ({caCert, caPem, cert, key, ...}) and env.relay.tlsUrl the listener's URL;
// stop() deletes the certificates.
// `env` is the object to fill (a fresh one by default).
export async function startTopology({ server = {}, upstreams = [], extra = {}, mockArgs = {}, tls = false } = {}, env = {}) {
  const started = [];
  const stop = async () => {
    await Promise.all([...started, env.relay].filter(Boolean).map((p) => p.stop()));
    env.tls?.cleanup();
  };
  try {
    if (tls) {
      env.tls = createTestCa();
      server = {
        ...server,
        tls_listen: [...(server.tls_listen ?? []), { address: '127.0.0.1:0', cert: env.tls.cert, key: env.tls.key }],
      };
    }
    const [holysheep, moonshot] = await Promise.all([
      startMock({ name: 'holysheep', apiKey: UPSTREAM_KEYS.holysheep, ...mockArgs.holysheep }),
      startMock({ name: 'moonshot', apiKey: UPSTREAM_KEYS.moonshot, moonshot: true, ...mockArgs.moonshot }),
    ]);
    started.push(holysheep, moonshot);
    const config = relayConfig({
      server,
      keys: [
        { name: 'full', key: KEYS.full },
        { name: 'limited', key: KEYS.limited, models: ['kimi-k2'] },
      ],
      upstreams: [
        {
          name: 'holysheep',
          url: holysheep.url,
          apiKey: UPSTREAM_KEYS.holysheep,
          weight: 70,
          models: MODELS.holysheep,
        },
        {
          name: 'moonshot',
          url: moonshot.url,
          apiKey: UPSTREAM_KEYS.moonshot,
          weight: 30,
          models: MODELS.moonshot,
        },
        ...upstreams,
      ],
      ...extra,
    });
    Object.assign(env, { holysheep, moonshot, mocks: { holysheep, moonshot }, config, stop });
    env.relay = await startRelay(config);
    // A fresh gateway on the same config (new ports), e.g. after a crash.
    env.restartRelay = async () => {
      await env.relay.stop('SIGKILL');
      env.relay = await startRelay(config);
    };
    return env;
  } catch (err) {
    await stop();
    throw err;
  }
}

// Clears the recorded requests and counters of every mock.
export async function resetMocks(mocks) {
  await Promise.all(
    Object.values(mocks).flatMap((m) => [m.clearRequests(), m.resetStats(), m.clearFault()]),
  );
}

// Recorded requests of every mock, as [{upstream, ...record}].
export async function allRecorded(mocks) {
  const lists = await Promise.all(
    Object.entries(mocks).map(async ([name, m]) => (await m.requests()).map((r) => ({ upstream: name, ...r }))),
  );
  return lists.flat();
}

// Registers the hooks of a test file that uses one topology for all its tests:
// started before the first test, stopped after the last; before each test the
// mocks are reset. After each test the gateway must still be alive: a test
// during which it crashed fails with the exit signal and the end of its log,
// and the next test gets a fresh gateway, so one crash does not fail the rest.
// Returns the env object, filled in once `before` has run.
export function useTopology(options) {
  const env = {};
  before(async () => {
    await startTopology(options, env);
  });
  after(async () => {
    await env.stop?.();
  });
  beforeEach(async () => {
    if (env.relay.exitStatus()) await env.restartRelay();
    await resetMocks(env.mocks);
  });
  afterEach(async () => {
    const status = await env.relay.checkAlive();
    if (status) {
      const tail = env.relay.logs().split('\n').slice(-15).join('\n');
      throw new Error(
        `kimi-relay died during this test (exit code ${status.code}, signal ${status.signal}); last log lines:\n${tail}`,
      );
    }
  });
  return env;
}
