'use strict';
// Floodwall#admin: tenants' overrides, tiers, blocks and resets kept in the store and applied to the next
// request, on the memory store and on a real redis-server started for this file (there also from another
// client than the one that admits, as an admin endpoint of another process would); promises settled off the
// event loop; and a blocked tenant's 403 through the Express middleware over real HTTP, with an admin
// endpoint that lifts it.
const assert = require('node:assert/strict');
const http = require('node:http');
const { test, describe, before, after } = require('node:test');
const floodwall = require('../..');
const { Floodwall, Admin, InvalidArgumentError, StoreError, ClosedError } = floodwall;
const { startRedis, freePort, request } = require('./helpers');

let redis;
let prefixes = 0;

before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

const TIERS = {
  request_rate: { rate: 0.001, burst: 2 },
  tiers: { pro: { rate: 0.001, burst: 10, limits: [{ name: 'search', routes: ['/search'], rate: 0.001, burst: 3 }] } },
};

const STORES = {
  memory: () => ({ store: 'memory://' }),
  redis: () => ({ store: redis.url, prefix: `adm${process.pid}x${prefixes++}`, redis: { deadline_ms: 2000 } }),
};

async function allowed(fw, tenant, n, request = {}) {
  let ok = 0;
  for (let i = 0; i < n; i++) ok += (await fw.admit({ tenant, ...request })).allowed ? 1 : 0;
  return ok;
}

for (const [store, storePolicy] of Object.entries(STORES)) {
  describe(`admin on ${store}`, () => {
    const made = [];
    const client = (policy = TIERS, shared) => {
      const fw = new Floodwall({ ...(shared || storePolicy()), ...policy });
      made.push(fw);
      return fw;
    };
    after(() => made.forEach((fw) => fw.close()));

    test('admin is one Admin per client', () => {
      const fw = client();
      assert.ok(fw.admin instanceof Admin);
      assert.equal(fw.admin, fw.admin);
    });

    test('an override raises the tenant\'s limit on its next request, and goes away', async () => {
      const fw = client();
      assert.equal(await allowed(fw, 'acct', 3), 2);
      assert.equal(await fw.admin.setOverride('acct', { rate: 0.001, burst: 6 }), undefined);
      const d = await fw.admit({ tenant: 'acct' });
      assert.deepEqual([d.allowed, d.limit, d.remaining], [true, 6, 3]); // 2 of the 6 spent already
      assert.equal(await allowed(fw, 'acct', 5), 3);
      await fw.admin.removeOverride('acct');
      const back = await fw.admit({ tenant: 'acct' });
      assert.deepEqual([back.allowed, back.limit], [false, 2]);
      assert.equal(await allowed(fw, 'other', 3), 2);
    });

    test('a tier gives its bucket and its limits; null takes the tenant out', async () => {
      const fw = client();
      await fw.admin.setTier('acct', 'pro');
      assert.equal(await allowed(fw, 'acct', 5, { route: '/search' }), 3);
      assert.equal(await allowed(fw, 'acct', 10, { route: '/other' }), 7);
      const shown = await fw.admin.show('acct');
      assert.equal(shown.tier, 'pro');
      assert.equal(shown.blocked, false);
      assert.deepEqual([shown.request_rate.limit, shown.request_rate.remaining], [10, 0]);
      assert.deepEqual(shown.limits.map((l) => [l.name, l.remaining]), [['search', 0]]);
      await fw.admin.setTier('acct', null);
      const d = await fw.admit({ tenant: 'acct', route: '/search' });
      assert.deepEqual([d.allowed, d.limit, d.rules], [false, 2, []]);
      assert.equal((await fw.admin.show('acct')).tier, null);
    });

    test('a block answers 403 with the core\'s body, consumes nothing, and unblock lifts it', async () => {
      const fw = client();
      const plain = await fw.admit({ tenant: 'acct' });
      assert.deepEqual([plain.blocked, plain.blockedUntil], [false, null]);
      await fw.admin.block('acct');
      let d = await fw.admit({ tenant: 'acct' });
      assert.deepEqual([d.allowed, d.status, d.limiter, d.blocked, d.blockedUntil, d.ticket], [false, 403, null, true, null, 0]);
      assert.deepEqual(d.headers, {}); // until unblocked: no Retry-After
      assert.equal(d.contentType, 'application/json');
      let error = JSON.parse(d.body).error;
      assert.deepEqual([error.type, error.limit_type, error.until], ['forbidden', 'blocked', undefined]);
      assert.equal(JSON.parse(JSON.stringify(d)).blocked, true);
      assert.equal((await fw.admin.show('acct')).blocked, true);

      const before = Math.floor(Date.now() / 1000);
      await fw.admin.block('acct', { seconds: 120 });
      d = await fw.admit({ tenant: 'acct' });
      assert.equal(d.status, 403);
      assert.ok(d.blockedUntil >= before + 119 && d.blockedUntil <= Date.now() / 1000 + 121, String(d.blockedUntil));
      const retryAfter = Number(d.headers['Retry-After']);
      assert.ok(retryAfter >= 119 && retryAfter <= 121, String(retryAfter));
      error = JSON.parse(d.body).error;
      assert.deepEqual([error.limit_type, error.retry_after], ['blocked', retryAfter]);
      assert.equal((await fw.admin.show('acct')).blocked_until, error.until);

      await fw.admin.unblock('acct');
      assert.equal((await fw.admin.show('acct')).blocked, false);
      assert.equal(await allowed(fw, 'acct', 3), 1); // the plain admit spent 1 of 2; the 403s nothing
    });

    test('show names the tier, the block, the request rate and the concurrency', async () => {
      const fw = client({ ...TIERS, concurrency: { limit: 3 } });
      const d = await fw.admit({ tenant: 'acct' });
      const shown = await fw.admin.show(Buffer.from('acct'));
      fw.release(d);
      assert.deepEqual([shown.tenant, shown.tier, shown.override, shown.blocked, shown.blocked_until], ['acct', null, null, false, null]);
      assert.deepEqual(Object.keys(shown.request_rate).sort(), ['full_in_s', 'limit', 'rate', 'remaining']);
      assert.deepEqual([shown.request_rate.limit, shown.request_rate.remaining, shown.request_rate.rate], [2, 1, 0.001]);
      assert.deepEqual(shown.concurrency, { limit: 3, in_flight: 1 });
      assert.deepEqual([shown.limits, shown.quotas], [[], []]);
      assert.match(shown.store_time, /Z$/);
    });

    test('reset fills the buckets and keeps the record; list names the tenants with one', async () => {
      const fw = client();
      await fw.admin.setOverride('big', { rate: 5, burst: 50 });
      await fw.admin.setTier('paid', 'pro');
      await fw.admin.block('bad', { seconds: 60 });
      await fw.admit({ tenant: 'plain' });
      assert.equal(await allowed(fw, 'paid', 11), 10);
      await fw.admin.reset('paid');
      assert.equal((await fw.admin.show('paid')).tier, 'pro');
      assert.equal(await allowed(fw, 'paid', 11), 10);
      const listed = Object.fromEntries((await fw.admin.list()).map((t) => [t.tenant, t]));
      assert.deepEqual(Object.keys(listed).sort(), ['bad', 'big', 'paid']);
      assert.deepEqual(listed.big, { tenant: 'big', tier: null, override: { rate: 5, burst: 50 }, blocked: false, blocked_until: null });
      assert.equal(listed.paid.tier, 'pro');
      assert.equal(listed.bad.blocked, true);
      assert.match(listed.bad.blocked_until, /Z$/);
      assert.equal((await fw.admin.list({ limit: 2 })).length, 2);
    });

    test('a fleet-wide mode, and back to each client\'s own', async () => {
      const fw = client();
      await fw.admin.setMode('request_rate', 'dark');
      assert.equal(fw.getMode('request_rate'), 'dark');
      assert.equal(await allowed(fw, 'acct', 4), 4);
      await fw.admin.setMode('request_rate', null);
      assert.equal(fw.getMode('request_rate'), 'enforce');
    });

    test('bad arguments reject with InvalidArgumentError naming them; nothing throws', async () => {
      const fw = client();
      const cases = [
        [() => fw.admin.setTier('acct', 'gold'), 'tier', /^tier: the policy has no tier named "gold" \(it has: pro\)$/],
        [() => fw.admin.setOverride('acct', { rate: -1, burst: 5 }), 'rate', /^rate: /],
        [() => fw.admin.setOverride('acct', { rate: 1, burst: 0 }), 'burst', /^burst: /],
        [() => fw.admin.setOverride('acct', { rate: NaN, burst: 5 }), 'rate', /^rate: /],
        [() => fw.admin.setOverride('acct', { rate: '1', burst: 5 }), 'rate', /^rate: must be a number/],
        [() => fw.admin.setOverride('acct'), 'rate', /^rate: /],
        [() => fw.admin.block('acct', { seconds: 0 }), 'seconds', /^seconds: /],
        [() => fw.admin.block('acct', { seconds: -1 }), 'seconds', /^seconds: /],
        [() => fw.admin.block('acct', { seconds: Infinity }), 'seconds', /^seconds: /],
        [() => fw.admin.block('acct', { seconds: 20 * 365 * 86400 }), 'seconds', /^seconds: /],
        [() => fw.admin.show(''), 'tenant', /^tenant: /],
        [() => fw.admin.show(42), 'tenant', /^tenant: /],
        [() => fw.admin.unblock('a\nb'), 'tenant', /^tenant: contains a control character$/],
        [() => fw.admin.setMode('bogus', 'dark'), 'limiter', /^limiter: /],
        [() => fw.admin.setMode('fleet', 'loud'), 'mode', /^mode: /],
        [() => fw.admin.list({ limit: 0 }), 'limit', /^limit: /],
      ];
      for (const [call, field, message] of cases) {
        const p = call(); // a promise in every case, never a throw
        assert.ok(p instanceof Promise, String(call));
        await assert.rejects(p, (e) => e instanceof InvalidArgumentError && e.field === field && message.test(e.message));
      }
      assert.deepEqual(await fw.admin.list(), []); // nothing above wrote a record
      const untiered = client({ request_rate: { rate: 1, burst: 2 } });
      await assert.rejects(untiered.admin.setTier('acct', 'pro'), /^InvalidArgumentError: tier: .*it has no tiers/);
    });

    test('a closed client rejects admin calls with ClosedError', async () => {
      const fw = client();
      fw.close();
      await assert.rejects(fw.admin.block('acct'), ClosedError);
      await assert.rejects(fw.admin.list(), ClosedError);
    });
  });
}

describe('admin on Redis, from another client', () => {
  const policy = () => ({ ...STORES.redis(), ...TIERS });

  test('a change made by another client applies to the next request', async () => {
    const shared = policy();
    const app = new Floodwall(shared);
    const ops = new Floodwall(shared);
    try {
      assert.equal(await allowed(app, 'acct', 3), 2);
      await ops.admin.setOverride('acct', { rate: 0.001, burst: 5 });
      assert.equal(await allowed(app, 'acct', 5), 3);
      await ops.admin.block('acct', { seconds: 30 });
      const d = await app.admit({ tenant: 'acct' });
      assert.deepEqual([d.status, d.blocked, typeof d.blockedUntil], [403, true, 'number']);
      await ops.admin.unblock('acct');
      await ops.admin.setTier('acct', 'pro');
      assert.deepEqual((await app.admit({ tenant: 'acct', route: '/search' })).rules, ['search']);
      assert.deepEqual((await app.admin.list()).map((t) => t.tenant), ['acct']);
    } finally {
      app.close();
      ops.close();
    }
  });

  test('an admin call waiting on Redis leaves the event loop running', async () => {
    const fw = new Floodwall(policy());
    try {
      await fw.admin.show('warm-up'); // connected
      let ticks = 0;
      const timer = setInterval(() => ticks++, 5);
      process.kill(redis.pid, 'SIGSTOP');
      let settled;
      try {
        const pending = fw.admin.block('acct', { seconds: 60 }).then(() => (settled = true));
        await new Promise((r) => setTimeout(r, 300));
        assert.equal(settled, undefined, 'the block waits for the stopped Redis');
        assert.ok(ticks >= 10, `the event loop ran meanwhile (${ticks} ticks of 5 ms in 300 ms)`);
        process.kill(redis.pid, 'SIGCONT');
        await pending;
      } finally {
        process.kill(redis.pid, 'SIGCONT');
        clearInterval(timer);
      }
      assert.equal((await fw.admin.show('acct')).blocked, true);
    } finally {
      fw.close();
    }
  });

  test('an unreachable store rejects with StoreError naming it, within a bound', async () => {
    const port = await freePort(); // nothing listens there
    const fw = new Floodwall({ store: `redis://127.0.0.1:${port}/0`, request_rate: { rate: 1, burst: 1 }, redis: { deadline_ms: 50, connect_timeout_ms: 50 } });
    try {
      const start = Date.now();
      await assert.rejects(fw.admin.block('acct'), (e) => e instanceof StoreError && e.field === 'store' && e.message.includes(String(port)));
      assert.ok(Date.now() - start < 5000, 'at most the store\'s deadline (a second here)');
    } finally {
      fw.close();
    }
  });
});

const EXPRESSES = [
  ['Express 4', require('express4')],
  ['Express 5', require('express')],
];

for (const [name, expressLib] of EXPRESSES) {
  test(`${name}: a blocked tenant gets the core's 403; an admin endpoint blocks and lifts it`, async () => {
    const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 20 } });
    const app = expressLib();
    app.set('env', 'test');
    const issued = new Set(['k-blocked']); // the app's own API keys: verify vouches for them
    app.use(floodwall.express(fw, { skip: (req) => req.path.startsWith('/admin/'), verify: (key) => issued.has(key) }));
    app.get('/hello', (req, res) => res.json({ hello: 'world' }));
    app.post('/admin/tenants/:tenant/block', async (req, res, next) => {
      try {
        const seconds = req.query.seconds === undefined ? undefined : Number(req.query.seconds);
        await fw.admin.block(req.params.tenant, { seconds });
        res.json(await fw.admin.show(req.params.tenant));
      } catch (err) {
        next(err);
      }
    });
    app.delete('/admin/tenants/:tenant/block', async (req, res, next) => {
      try {
        await fw.admin.unblock(req.params.tenant);
        res.json(await fw.admin.show(req.params.tenant));
      } catch (err) {
        next(err);
      }
    });
    const server = http.createServer(app);
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address();
    const key = { 'X-API-Key': 'k-blocked' };
    const tenant = fw.tenantKey({ headers: ['x-api-key', 'k-blocked'], verified: true }); // the tenant the middleware derives
    const limitHeaders = (r) => Object.keys(r.headers).filter((h) => /^(ratelimit|retry-after)/.test(h));
    try {
      assert.equal((await request(port, '/hello', { headers: key })).status, 200);
      const blocked = await request(port, `/admin/tenants/${tenant}/block`, { method: 'POST' });
      assert.equal(blocked.status, 200);
      assert.equal(JSON.parse(blocked.body).blocked, true);

      let r = await request(port, '/hello', { headers: key });
      assert.equal(r.status, 403);
      assert.equal(r.headers['content-type'], 'application/json');
      assert.equal(r.headers['content-length'], String(Buffer.byteLength(r.body)));
      assert.deepEqual(limitHeaders(r), []); // blocked until unblocked: no Retry-After
      let error = JSON.parse(r.body).error;
      assert.deepEqual([error.type, error.limit_type], ['forbidden', 'blocked']);
      assert.equal((await request(port, '/hello', { headers: { 'X-API-Key': 'someone-else' } })).status, 200);

      const timed = await request(port, `/admin/tenants/${tenant}/block?seconds=90`, { method: 'POST' });
      assert.match(JSON.parse(timed.body).blocked_until, /Z$/);
      r = await request(port, '/hello', { headers: key });
      assert.equal(r.status, 403);
      assert.deepEqual(limitHeaders(r), ['retry-after']);
      const retryAfter = Number(r.headers['retry-after']);
      assert.ok(retryAfter >= 89 && retryAfter <= 91, String(retryAfter));
      error = JSON.parse(r.body).error;
      assert.deepEqual([error.limit_type, error.retry_after], ['blocked', retryAfter]);

      const lifted = await request(port, `/admin/tenants/${tenant}/block`, { method: 'DELETE' });
      assert.equal(JSON.parse(lifted.body).blocked, false);
      r = await request(port, '/hello', { headers: key });
      assert.equal(r.status, 200);
      assert.equal(r.headers['ratelimit-remaining'], '18'); // the 403s spent nothing
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      fw.close();
    }
  });
}
