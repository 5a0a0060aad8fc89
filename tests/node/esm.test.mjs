// The package from ESM: every export is a named import (Node detects a CommonJS module's exports only when
// each is a plain name), and the default import is the whole module, as for any CommonJS package.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

import floodwall, {
  Floodwall, Decision, Admin, express, fastify, koa, backoff, backoffDefaults, retry, parseRetryAfter, otel, version,
  FloodwallError, PolicyError, StoreError, InvalidArgumentError, ClosedError,
} from 'floodwall'; // the package by its name, as an app imports it (self-reference through "exports")

const require = createRequire(import.meta.url);

test('every export of the CommonJS module is a named ESM import', () => {
  const cjs = require('floodwall');
  const named = { Floodwall, Decision, Admin, express, fastify, koa, backoff, backoffDefaults, retry, parseRetryAfter, otel, version,
    FloodwallError, PolicyError, StoreError, InvalidArgumentError, ClosedError };
  assert.deepEqual(Object.keys(named).sort(), Object.keys(cjs).sort(), 'a new export must be importable by name');
  for (const [name, value] of Object.entries(named)) assert.equal(value, cjs[name], name);
  assert.equal(floodwall, cjs);
});

test('an ESM app limits with the named imports', async () => {
  const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 1 } });
  try {
    assert.equal((await fw.admit({ tenant: 'esm' })).allowed, true);
    const second = await fw.admit({ tenant: 'esm' });
    assert.equal(second.allowed, false);
    assert.ok(second instanceof Decision);
    assert.throws(() => new Floodwall({ request_rate: { rate: -1, burst: 1 } }), PolicyError);
    assert.equal(typeof express(fw), 'function');
    assert.match(version, /^\d+\.\d+\.\d+$/);
  } finally {
    fw.close();
  }
});
