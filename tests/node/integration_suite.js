'use strict';
// The behaviour every Node framework integration owes, over real HTTP, run by fastify.test.js and
// koa.test.js against each framework (and version): the route rules with the middleware mounted app-wide,
// the core's 429, 503 and 403 with their bodies and headers, the ticket released exactly once on every path,
// a concurrency limit never exceeded, on memory:// and on Redis.
//
// `serve(fw, options)` starts the framework on a free port with the integration mounted app-wide
// (keyGenerator: the x-tenant header, critical: x-critical: 1, then `options`) and these routes:
//   GET /ok              {decided, remaining} from the decision
//   GET /orders/:id      {rules} from the decision
//   GET /held            never answers (the test's client leaves); counts srv.entered('held'); close() ends it
//   GET /boom            throws
//   GET /slow/:id        waits for srv.open() (counts srv.entered('slow'), the most in flight in srv.maxInFlight())
// and resolves { port, close(), entered(name), open(), maxInFlight() }.
const assert = require('node:assert/strict');
const http = require('node:http');
const { test, describe, before, after } = require('node:test');
const { Floodwall } = require('../..');
const { request, eventually, startRedis } = require('./helpers');

// A Floodwall whose release() counts the calls per ticket, to prove "exactly once".
function counted(fw) {
  const releases = new Map();
  return {
    releases,
    get closed() {
      return fw.closed;
    },
    admit: (r) => fw.admit(r),
    release(decision) {
      releases.set(decision.ticket, (releases.get(decision.ticket) || 0) + 1);
      fw.release(decision);
    },
  };
}

// A request the test's client leaves mid-way (leave()), its handler still running.
function open(port, path, headers) {
  const req = http.request({ host: '127.0.0.1', port, path, headers, agent: false });
  req.on('error', () => {});
  req.end();
  return { leave: () => req.destroy() };
}

const ORDERS = { name: 'orders', routes: ['/orders', '/orders/*'], rate: 0.001, burst: 2 };

function integrationSuite(name, serve) {
  describe(`${name}: the integration contract`, () => {
    let redis;
    before(async () => {
      redis = await startRedis();
    });
    after(async () => {
      if (redis) await redis.stop();
    });
    const stores = [['memory://', () => 'memory://'], ['Redis', () => redis.url]];

    for (const [storeName, store] of stores) {
      describe(storeName, () => {
        async function withApp(policy, options, fn) {
          const fw = new Floodwall({ store: store(), ...policy });
          const srv = await serve(fw, options);
          try {
            await fn(srv, fw);
          } finally {
            await srv.close();
            fw.close();
          }
        }

        test('a 200 carries the core headers and the decision reaches the handler', async () => {
          await withApp({ request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 } }, {}, async (srv) => {
            const res = await request(srv.port, '/ok', { headers: { 'x-tenant': 'acme' } });
            assert.equal(res.status, 200);
            assert.equal(res.headers['ratelimit-policy'], '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"');
            assert.equal(res.headers['ratelimit-limit'], '500');
            assert.equal(res.headers['ratelimit-remaining'], '499');
            assert.equal(res.headers['retry-after'], undefined);
            assert.deepEqual(JSON.parse(res.body), { decided: true, remaining: 499 });
          });
        });

        test('a policy limit on /orders and /orders/* limits GET /orders/42 at app level, naming the rule', async () => {
          await withApp({ request_rate: { rate: 100, burst: 100, limits: [ORDERS] } }, {}, async (srv) => {
            for (let i = 0; i < 2; i++) {
              const res = await request(srv.port, '/orders/42', { headers: { 'x-tenant': 't' } });
              assert.equal(res.status, 200, `request ${i}`);
              assert.deepEqual(JSON.parse(res.body).rules, ['orders']);
            }
            const res = await request(srv.port, '/orders/42', { headers: { 'x-tenant': 't' } });
            assert.equal(res.status, 429);
            assert.match(res.headers['ratelimit-policy'], /"orders";q=2;/);
            assert.equal(res.headers['content-type'], 'application/json');
            const { error } = JSON.parse(res.body);
            assert.equal(error.policy, 'orders');
            assert.equal(error.limit_type, 'request_rate');
            assert.equal(error.retry_after, Number(res.headers['retry-after']));
            assert.ok(error.retry_after >= 1);
            assert.equal(Number(res.headers['content-length']), Buffer.byteLength(res.body));
            // Another route is not the orders rule's; another order is.
            assert.equal((await request(srv.port, '/ok', { headers: { 'x-tenant': 't' } })).status, 200);
            assert.equal((await request(srv.port, '/orders/43?x=1', { headers: { 'x-tenant': 't' } })).status, 429);
          });
        });

        test('the metrics count the route families by pattern and glob, not one per URL', async () => {
          await withApp({ request_rate: { rate: 100, burst: 100, limits: [ORDERS] } }, {}, async (srv, fw) => {
            for (const path of ['/orders/1', '/orders/2', '/orders/3', '/nowhere/1', '/nowhere/2']) {
              await request(srv.port, path, { headers: { 'x-tenant': 'm' } });
            }
            const routes = Object.keys(fw.metrics().routes);
            assert.ok(routes.includes('/orders/:id'), routes.join(' '));
            for (const r of routes) assert.doesNotMatch(r, /\/(orders|nowhere)\/\d/, routes.join(' '));
          });
        });

        test('a 404 (no route) is limited by the glob that matches its path', async () => {
          const policy = { request_rate: { rate: 100, burst: 100, limits: [{ name: 'probe', routes: ['/wp-*'], rate: 0.001, burst: 1 }] } };
          await withApp(policy, {}, async (srv) => {
            assert.equal((await request(srv.port, '/wp-login.php', { headers: { 'x-tenant': 's' } })).status, 404);
            const res = await request(srv.port, '/wp-admin', { headers: { 'x-tenant': 's' } });
            assert.equal(res.status, 429);
            assert.equal(JSON.parse(res.body).error.policy, 'probe');
          });
        });

        test('a 503 from the fleet shedder has Retry-After and the core body; critical traffic passes', async () => {
          await withApp({ fleet: { capacity: 1 } }, {}, async (srv) => {
            const held = open(srv.port, '/held', {});
            await eventually(() => srv.entered('held') === 1);
            const res = await request(srv.port, '/ok');
            assert.equal(res.status, 503);
            assert.ok(Number(res.headers['retry-after']) >= 1);
            assert.equal(JSON.parse(res.body).error.type, 'service_unavailable');
            assert.equal((await request(srv.port, '/ok', { headers: { 'x-critical': '1' } })).status, 200);
            held.leave();
          });
        });

        test('a tenant blocked through the admin API gets 403 with the core body', async () => {
          await withApp({ request_rate: { rate: 100, burst: 100 } }, {}, async (srv, fw) => {
            await fw.admin.block('blocked');
            const res = await request(srv.port, '/ok', { headers: { 'x-tenant': 'blocked' } });
            assert.equal(res.status, 403);
            assert.equal(res.headers['content-type'], 'application/json');
            assert.equal(JSON.parse(res.body).error.limit_type, 'blocked');
            assert.equal((await request(srv.port, '/ok', { headers: { 'x-tenant': 'free' } })).status, 200);
          });
        });

        test('the ticket is released exactly once: reply sent, handler thrown, client gone', async () => {
          const fw = new Floodwall({ store: store(), concurrency: { limit: 1 } });
          const client = counted(fw);
          const srv = await serve(client, {});
          try {
            const released = (n) => eventually(() => client.releases.size === n);
            const ok = async (why) => {
              const res = await request(srv.port, '/ok', { headers: { 'x-tenant': 'r' } });
              assert.equal(res.status, 200, why);
            };
            await ok('the first request');
            await released(1);
            await ok('after a reply');
            await released(2);
            assert.equal((await request(srv.port, '/boom', { headers: { 'x-tenant': 'r' } })).status, 500);
            await released(3);
            await ok('after a handler that threw');
            await released(4);
            const gone = open(srv.port, '/held', { 'x-tenant': 'r' });
            await eventually(() => srv.entered('held') === 1);
            assert.equal((await request(srv.port, '/ok', { headers: { 'x-tenant': 'r' } })).status, 429, 'the held request holds the slot');
            gone.leave();
            await released(5);
            await ok('after the client went away');
            await released(6);
            for (const [ticket, n] of client.releases) assert.equal(n, 1, `ticket ${ticket} released ${n} times`);
          } finally {
            await srv.close();
            fw.close();
          }
        });

        test('many concurrent requests at a concurrency limit: never more in flight than the limit', async () => {
          await withApp({ concurrency: { limit: 3 } }, {}, async (srv) => {
            const all = Array.from({ length: 40 }, (_, i) => request(srv.port, `/slow/${i}`, { headers: { 'x-tenant': 'c' } }));
            await eventually(() => srv.entered('slow') >= 3);
            srv.open();
            const statuses = (await Promise.all(all)).map((r) => r.status);
            assert.ok(statuses.every((s) => s === 200 || s === 429), statuses.join(','));
            assert.ok(statuses.filter((s) => s === 200).length >= 3);
            assert.ok(statuses.includes(429));
            assert.ok(srv.maxInFlight() <= 3, `at most 3 in flight, saw ${srv.maxInFlight()}`);
            // Every slot was given back.
            await eventually(async () => (await request(srv.port, '/ok', { headers: { 'x-tenant': 'c' } })).headers.ratelimit === '"concurrency";r=2');
          });
        });

        test('concurrency.routes with a glob holds a slot on the routes it names only', async () => {
          await withApp({ concurrency: { limit: 1, routes: ['/slow/*'] } }, {}, async (srv) => {
            const first = request(srv.port, '/slow/1', { headers: { 'x-tenant': 'g' } });
            await eventually(() => srv.entered('slow') === 1);
            assert.equal((await request(srv.port, '/slow/2', { headers: { 'x-tenant': 'g' } })).status, 429);
            assert.equal((await request(srv.port, '/ok', { headers: { 'x-tenant': 'g' } })).status, 200);
            srv.open();
            assert.equal((await first).status, 200);
          });
        });
      });
    }
  });
}

module.exports = { integrationSuite, counted };
