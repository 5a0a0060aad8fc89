'use strict';
// The Express middleware against made-up credentials, over real HTTP, on memory:// and on a real Redis
// (a redis-server started for this file). With the defaults (no keyGenerator, no verify) a client that
// sends a new API key or Bearer token with every request gets one address's allowance and no more; with
// verify, the app's real keys keep buckets of their own behind that same address; a verify hook that throws,
// rejects or is too slow counts as "not vouched for" (the address), is reported once, and is never a 500.
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const http = require('node:http');
const { performance } = require('node:perf_hooks');
const { test, describe, before, after } = require('node:test');
const express = require('express');
const floodwall = require('../..');
const { Floodwall } = floodwall;
const { request, startRedis, eventually } = require('./helpers');

let redis;
let prefixes = 0;

before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

// Each Redis client gets its own key prefix, and time to answer: these tests are about tenants, not about
// the fallback (the default deadline fails over when this 2-core machine is busy with builds).
const STORES = [
  ['memory://', (policy) => new Floodwall(policy)],
  ['Redis', (policy) => new Floodwall({ store: redis.url, prefix: `v${process.pid}x${prefixes++}`, redis: { deadline_ms: 2000 }, ...policy })],
];

const FLOOD = { request_rate: { rate: 1, burst: 3 } };
const SPENT = { request_rate: { rate: 0.001, burst: 3 } }; // nothing comes back during a test

// A key nobody issued: a new one every call.
const madeUp = () => crypto.randomBytes(12).toString('hex');

// An Express 5 app with the middleware (and `options`) in front of one route that answers after `holdMs`
// with what decided the request: whether the store did (not the fallback), and whether the middleware went
// on synchronously (next() called before it returned).
async function serve(fw, options = {}, { holdMs = 0 } = {}) {
  const app = express();
  app.set('env', 'test');
  const limiter = floodwall.express(fw, options);
  app.use((req, res, next) => {
    let returned = false;
    limiter(req, res, (err) => {
      req.inline = !returned;
      next(err);
    });
    returned = true;
  });
  app.get('/', async (req, res) => {
    if (holdMs) await new Promise((r) => setTimeout(r, holdMs));
    res.json({ store: !req.floodwall.degraded && !req.floodwall.failedOpen, inline: req.inline });
  });
  const server = http.createServer(app);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(resolve);
    }),
  };
}

// One request; a 200 must have been decided by the store itself, and nothing else than 200 or 429 comes.
async function get(port, headers = {}) {
  const res = await request(port, '/', { headers });
  assert.ok(res.status === 200 || res.status === 429, `status ${res.status}: ${res.body}`);
  if (res.status === 200) assert.equal(JSON.parse(res.body).store, true, 'decided by the store, not a fallback');
  return res;
}

// Process warnings with the middleware's code, collected while `fn` runs.
async function warningsDuring(fn) {
  const seen = [];
  const listener = (w) => {
    if (w.code === 'FLOODWALL_VERIFY') seen.push(w);
  };
  process.on('warning', listener);
  try {
    await fn();
    await new Promise((r) => setImmediate(r)); // emitWarning delivers on the next tick
  } finally {
    process.off('warning', listener);
  }
  return seen;
}

for (const [storeName, client] of STORES) {
  describe(`${storeName}: made-up credentials`, () => {
    for (const [label, policy] of [['no tenant section', FLOOD],
      ['a tenant section', { ...FLOOD, tenant: { from: ['x-api-key', 'authorization', 'ip'] } }]]) {
      test(`defaults, ${label}: 40 new API keys then 40 new Bearer tokens from one address get one address's allowance`, async () => {
        const fw = client(policy);
        const srv = await serve(fw);
        try {
          const started = performance.now();
          const statuses = [];
          for (let i = 0; i < 40; i++) statuses.push((await get(srv.port, { 'X-API-Key': madeUp() })).status);
          for (let i = 0; i < 40; i++) statuses.push((await get(srv.port, { Authorization: `Bearer ${madeUp()}` })).status);
          const elapsed = (performance.now() - started) / 1000;
          const allowed = statuses.filter((s) => s === 200).length;
          // burst + rate x time, and one for rounding: the bound of one tenant, whatever the keys.
          assert.ok(allowed <= 3 + Math.ceil(1 * elapsed) + 1, `${allowed} allowed in ${elapsed.toFixed(2)} s`);
          assert.ok(allowed >= 3, 'the address has its burst');
          assert.deepEqual(statuses.slice(0, 3), [200, 200, 200]);
        } finally {
          await srv.close();
          fw.close();
        }
      });
    }

    for (const kind of ['synchronous', 'async']) {
      test(`${kind === 'async' ? 'an' : 'a'} ${kind} verify: behind one spent address each of 5 real keys has its own 3; made-up keys stay 429`, async () => {
        const fw = client(SPENT);
        const issued = ['k-alpha', 'k-beta', 'k-gamma', 'k-delta', 'k-epsilon'];
        const asked = [];
        const verify = (credential, req) => {
          asked.push([credential, typeof req.get === 'function' && req.path === '/']);
          const ok = issued.includes(credential);
          return kind === 'async' ? new Promise((resolve) => setImmediate(() => resolve(ok))) : ok;
        };
        const srv = await serve(fw, { verify });
        try {
          const spent = [];
          for (let i = 0; i < 5; i++) spent.push((await get(srv.port, { 'X-API-Key': madeUp() })).status);
          assert.deepEqual(spent, [200, 200, 200, 429, 429], 'made-up keys spend the address\'s bucket');
          for (const [i, key] of issued.entries()) {
            // The same keys as API keys and as Bearer tokens: the credential, not its header, is the tenant.
            const headers = i % 2 ? { Authorization: `Bearer ${key}` } : { 'X-API-Key': key };
            const remaining = [];
            for (let n = 0; n < 3; n++) {
              const res = await get(srv.port, headers);
              assert.equal(res.status, 200, `${key}, request ${n}`);
              remaining.push(res.headers['ratelimit-remaining']);
            }
            assert.deepEqual(remaining, ['2', '1', '0'], `${key}: a bucket of its own`);
            assert.equal((await get(srv.port, headers)).status, 429, `${key} is limited too`);
          }
          assert.equal((await get(srv.port, { 'X-API-Key': madeUp() })).status, 429);
          assert.equal((await get(srv.port, { Authorization: `Bearer ${madeUp()}` })).status, 429);
          assert.equal((await get(srv.port)).status, 429, 'no credential: the address');
          assert.equal(asked.length, 5 + 5 * 4 + 2, 'asked once per request that carries a credential');
          assert.ok(asked.every(([, isReq]) => isReq), 'with the Express request');
          assert.deepEqual(asked.slice(5, 9).map(([c]) => c), ['k-alpha', 'k-alpha', 'k-alpha', 'k-alpha']);
          assert.deepEqual(asked[9][0], 'k-beta', 'a Bearer token without its scheme');
        } finally {
          await srv.close();
          fw.close();
        }
      });
    }

    test('concurrency: 8 simultaneous requests with made-up keys hold at most 2 slots, and every slot comes back', async () => {
      const fw = client({ concurrency: { limit: 2 } });
      // Held long enough that all 8 arrive while the first 2 are in flight, even on a loaded machine.
      const srv = await serve(fw, {}, { holdMs: 2000 });
      try {
        const all = await Promise.all(Array.from({ length: 8 }, () => get(srv.port, { 'X-API-Key': madeUp() })));
        const statuses = all.map((r) => r.status);
        const ok = statuses.filter((s) => s === 200).length;
        assert.ok(ok >= 1 && ok <= 2, `${ok} answered 200`);
        assert.equal(statuses.filter((s) => s === 429).length, 8 - ok);
        // The slots are given back when each response ends (a Redis release rides the next write).
        await eventually(async () => {
          const again = await Promise.all([0, 1].map(() => get(srv.port, { Authorization: `Bearer ${madeUp()}` })));
          return again.every((r) => r.status === 200);
        });
      } finally {
        await srv.close();
        fw.close();
      }
    });

    for (const [what, verify] of [
      ['throws', () => {
        throw new TypeError('key store unreachable');
      }],
      ['rejects', async () => {
        throw new RangeError('key store unreachable');
      }],
    ]) {
      test(`a verify hook that ${what}: keyed by the address, never a 500, reported once`, async () => {
        const fw = client(SPENT);
        const srv = await serve(fw, { verify });
        try {
          const statuses = [];
          const warnings = await warningsDuring(async () => {
            for (let i = 0; i < 6; i++) statuses.push((await get(srv.port, { 'X-API-Key': 'k-real' })).status);
          });
          assert.deepEqual(statuses, [200, 200, 200, 429, 429, 429]);
          assert.equal(warnings.length, 1, 'once per middleware');
          assert.match(warnings[0].message, what === 'throws' ? /TypeError: key store unreachable/ : /RangeError: key store unreachable/);
          assert.equal((await get(srv.port, { 'X-API-Key': madeUp() })).status, 429, 'the same address\'s bucket');
        } finally {
          await srv.close();
          fw.close();
        }
      });
    }

    for (const [what, verify] of [
      ['an async hook whose answer comes after verifyTimeout', () => new Promise((resolve) => setTimeout(() => resolve(true), 500))],
      ['a synchronous hook that answers after verifyTimeout', () => {
        const until = performance.now() + 60;
        while (performance.now() < until); // a blocking lookup
        return true;
      }],
    ]) {
      test(`${what}: keyed by the address, reported once`, async () => {
        const fw = client(SPENT);
        const srv = await serve(fw, { verify, verifyTimeout: 20 });
        try {
          const statuses = [];
          const warnings = await warningsDuring(async () => {
            for (let i = 0; i < 5; i++) statuses.push((await get(srv.port, { Authorization: 'Bearer k-real' })).status);
          });
          assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
          assert.equal(warnings.length, 1, 'once per middleware');
          assert.match(warnings[0].message, /verifyTimeout \(20 ms\)/);
        } finally {
          await srv.close();
          fw.close();
        }
      });
    }
  });
}

describe('memory://: the synchronous path, keyGenerator and verify together, the options', () => {
  test('memory://: without verify, and with a verify that answers at once, next() runs before the middleware returns', async () => {
    const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 100 } });
    const plain = await serve(fw);
    const vouching = await serve(fw, { verify: (key) => key === 'k-1' });
    const later = await serve(fw, { verify: async (key) => key === 'k-1' });
    try {
      for (const headers of [{}, { 'X-API-Key': 'k-1' }]) {
        assert.equal(JSON.parse((await get(plain.port, headers)).body).inline, true);
        assert.equal(JSON.parse((await get(vouching.port, headers)).body).inline, true);
      }
      assert.equal(JSON.parse((await get(later.port, { 'X-API-Key': 'k-1' })).body).inline, false, 'a promise is awaited');
      assert.equal(JSON.parse((await get(later.port)).body).inline, true, 'no credential: the hook is not asked');
    } finally {
      await plain.close();
      await vouching.close();
      await later.close();
      fw.close();
    }
  });

  test('without verifyTimeout a hook gets the store\'s deadline (redis.deadline_ms)', async () => {
    const fw = new Floodwall({ ...SPENT, redis: { deadline_ms: 20 } });
    const srv = await serve(fw, {
      verify: () => {
        const until = performance.now() + 60;
        while (performance.now() < until);
        return true;
      },
    });
    try {
      const statuses = [];
      const warnings = await warningsDuring(async () => {
        for (let i = 0; i < 4; i++) statuses.push((await get(srv.port, { 'X-API-Key': 'k-real' })).status);
      });
      assert.deepEqual(statuses, [200, 200, 200, 429]);
      assert.equal(warnings.length, 1);
      assert.match(warnings[0].message, /verifyTimeout \(20 ms\)/);
    } finally {
      await srv.close();
      fw.close();
    }
  });

  test('an async keyGenerator that answers undefined leaves the tenant to verify; a tenant it names is never verified', async () => {
    const fw = new Floodwall(SPENT);
    const asked = [];
    const srv = await serve(fw, {
      keyGenerator: async (req) => req.get('x-tenant'),
      verify: (key) => {
        asked.push(key);
        return key === 'k-1';
      },
    });
    try {
      for (let i = 0; i < 3; i++) await get(srv.port, { 'X-API-Key': madeUp() });
      assert.equal((await get(srv.port, { 'X-API-Key': madeUp() })).status, 429, 'the address is spent');
      assert.equal((await get(srv.port, { 'X-API-Key': 'k-1' })).status, 200, 'vouched for: its own bucket');
      assert.equal(asked.length, 5);
      assert.equal((await get(srv.port, { 'X-API-Key': 'k-1', 'X-Tenant': 'acme' })).status, 200, 'the named tenant');
      assert.equal(asked.length, 5, 'not asked when the keyGenerator names the tenant');
    } finally {
      await srv.close();
      fw.close();
    }
  });

  test('options are checked when the middleware is made', () => {
    const fw = new Floodwall();
    try {
      assert.throws(() => floodwall.express(fw, { verify: 'yes' }), /verify must be a function/);
      assert.throws(() => floodwall.express(fw, { verifyTimeout: 10 }), /verifyTimeout needs a verify hook/);
      for (const bad of [0, -1, NaN, Infinity, '10']) {
        assert.throws(() => floodwall.express(fw, { verify: () => true, verifyTimeout: bad }), /verifyTimeout/, String(bad));
      }
      assert.throws(() => floodwall.express({ admit: fw.admit.bind(fw), release() {} }, { verify: () => true }),
        /requestCredential/);
      assert.equal(typeof floodwall.express(fw, { verify: () => true }), 'function');
    } finally {
      fw.close();
    }
  });
});
