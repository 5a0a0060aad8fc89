'use strict';
// The Fastify plugin over real HTTP on Fastify 4 and Fastify 5: the integration contract
// (integration_suite.js) on memory:// and Redis, then what is Fastify's own: registration (a missing or
// closed client, a bad option, an unknown key in a route's config.floodwall), per-route config.floodwall,
// fastify-plugin's conventions (app-wide), and the ticket released on connectionTimeout.
const assert = require('node:assert/strict');
const { test, describe } = require('node:test');
const floodwall = require('../..');
const { Floodwall } = floodwall;
const { request, eventually } = require('./helpers');
const { integrationSuite, counted } = require('./integration_suite');

const FASTIFIES = [
  ['Fastify 4', require('fastify4')],
  ['Fastify 5', require('fastify')],
];

async function serve(fastifyLib, fw, options = {}, { appOptions = {}, routes } = {}) {
  const app = fastifyLib({ logger: false, ...appOptions });
  const entered = new Map();
  const enter = (name) => entered.set(name, (entered.get(name) || 0) + 1);
  const held = [];
  let inFlight = 0;
  let most = 0;
  let openGate;
  const gate = new Promise((resolve) => (openGate = resolve));
  await app.register(floodwall.fastify, {
    client: fw,
    keyGenerator: (req) => req.headers['x-tenant'],
    critical: (req) => req.headers['x-critical'] === '1',
    ...options,
  });
  app.get('/ok', async (req) => ({ decided: Boolean(req.floodwall), remaining: req.floodwall?.remaining }));
  app.get('/orders/:id', async (req) => ({ rules: req.floodwall.rules }));
  app.get('/held', (req, reply) => {
    enter('held');
    held.push(reply);
  });
  app.get('/boom', async () => {
    throw new Error('boom');
  });
  app.get('/slow/:id', async () => {
    enter('slow');
    inFlight++;
    most = Math.max(most, inFlight);
    await gate;
    await new Promise((r) => setTimeout(r, 2));
    inFlight--;
    return { ok: true };
  });
  if (routes) routes(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    app,
    port: app.server.address().port,
    entered: (name) => entered.get(name) || 0,
    open: () => openGate(),
    maxInFlight: () => most,
    async close() {
      openGate();
      for (const reply of held) reply.raw.destroy();
      app.server.closeAllConnections();
      await app.close();
    },
  };
}

for (const [name, fastifyLib] of FASTIFIES) {
  integrationSuite(name, (fw, options) => serve(fastifyLib, fw, options));

  describe(`${name}: the plugin`, () => {
    async function registrationError(options, routes) {
      const app = fastifyLib({ logger: false });
      try {
        app.register(floodwall.fastify, options);
        if (routes) app.register(async (child) => routes(child));
        await app.ready();
      } catch (err) {
        return err;
      } finally {
        await app.close().catch(() => {});
      }
      return assert.fail('registration succeeded');
    }

    test('registered without a client, it fails at registration and says so', async () => {
      assert.match((await registrationError({})).message, /floodwall\.fastify: the client option is required/);
      assert.match((await registrationError({ client: {} })).message, /floodwall\.fastify: the client must be a Floodwall/);
    });

    test('registered with a closed client, it fails at registration and says so', async () => {
      const fw = new Floodwall();
      fw.close();
      assert.match((await registrationError({ client: fw })).message, /floodwall\.fastify: the client is closed/);
    });

    test('an option of the wrong type or an unknown option is named at registration', async () => {
      const fw = new Floodwall();
      try {
        assert.match((await registrationError({ client: fw, cost: 'two' })).message, /cost must be a non-negative integer or a function/);
        assert.match((await registrationError({ client: fw, skip: 'yes' })).message, /skip must be a boolean or a function/);
        assert.match((await registrationError({ client: fw, keygenerator: () => 'x' })).message, /unknown option "keygenerator"/);
      } finally {
        fw.close();
      }
    });

    test('an unknown key or a wrong type in a route\'s config.floodwall is refused at the route\'s registration', async () => {
      const fw = new Floodwall();
      try {
        const unknown = await registrationError({ client: fw }, (app) => {
          app.get('/x', { config: { floodwall: { cots: 2 } } }, async () => 'x');
        });
        assert.match(unknown.message, /route GET \/x: config\.floodwall: unknown option "cots"/);
        const wrong = await registrationError({ client: fw }, (app) => {
          app.get('/y', { config: { floodwall: { critical: 'yes' } } }, async () => 'y');
        });
        assert.match(wrong.message, /route GET \/y: config\.floodwall: critical must be a boolean or a function/);
      } finally {
        fw.close();
      }
    });

    test('config.floodwall: a route\'s cost, skip and critical', async () => {
      const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 10 }, fleet: { capacity: 1 } });
      const srv = await serve(fastifyLib, fw, {}, {
        routes(app) {
          app.get('/dear', { config: { floodwall: { cost: 3 } } }, async (req) => ({ remaining: req.floodwall.remaining }));
          app.get('/free', { config: { floodwall: { skip: true } } }, async (req) => ({ decided: Boolean(req.floodwall) }));
          app.get('/vip', { config: { floodwall: { critical: (req) => req.headers['x-vip'] === '1' } } }, async () => 'vip');
        },
      });
      try {
        const dear = await request(srv.port, '/dear', { headers: { 'x-tenant': 'p' } });
        assert.equal(JSON.parse(dear.body).remaining, 7);
        const free = await request(srv.port, '/free', { headers: { 'x-tenant': 'p' } });
        assert.deepEqual(JSON.parse(free.body), { decided: false });
        assert.equal(free.headers['ratelimit-remaining'], undefined);
        assert.equal(JSON.parse((await request(srv.port, '/ok', { headers: { 'x-tenant': 'p' } })).body).remaining, 6);
        // The fleet's one slot taken by a held request: only the route's critical requests pass.
        const held = request(srv.port, '/held', { headers: { 'x-tenant': 'q' }, abortAfterMs: 60_000 });
        await eventually(() => srv.entered('held') === 1);
        assert.equal((await request(srv.port, '/vip', { headers: { 'x-tenant': 'q' } })).status, 503);
        assert.equal((await request(srv.port, '/vip', { headers: { 'x-tenant': 'q', 'x-vip': '1' } })).status, 200);
        void held;
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('app-wide as fastify-plugin makes it: routes of other plugins are limited too', async () => {
      assert.equal(floodwall.fastify[Symbol.for('skip-override')], true);
      assert.equal(floodwall.fastify[Symbol.for('plugin-meta')].name, 'floodwall');
      const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 1 } });
      const srv = await serve(fastifyLib, fw, {}, {
        routes(app) {
          app.register(async (child) => {
            child.get('/inner', async (req) => ({ decided: Boolean(req.floodwall) }));
          }, { prefix: '/child' });
        },
      });
      try {
        assert.equal(srv.app.hasPlugin('floodwall'), true);
        const first = await request(srv.port, '/child/inner', { headers: { 'x-tenant': 'w' } });
        assert.deepEqual(JSON.parse(first.body), { decided: true });
        assert.equal((await request(srv.port, '/child/inner', { headers: { 'x-tenant': 'w' } })).status, 429);
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('the route family is the route\'s pattern, request.routeOptions.url', async () => {
      const fw = new Floodwall({ request_rate: { rate: 100, burst: 100, limits: [{ name: 'one', routes: ['/orders/:id'], rate: 0.001, burst: 1 }] } });
      const srv = await serve(fastifyLib, fw);
      try {
        assert.equal((await request(srv.port, '/orders/1', { headers: { 'x-tenant': 'f' } })).status, 200);
        assert.equal((await request(srv.port, '/orders/2', { headers: { 'x-tenant': 'f' } })).status, 429);
        assert.ok(Object.keys(fw.metrics().routes).includes('/orders/:id'));
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('a request cut off by connectionTimeout releases its ticket once', async () => {
      const fw = new Floodwall({ concurrency: { limit: 1 } });
      const client = counted(fw);
      const srv = await serve(fastifyLib, client, {}, { appOptions: { connectionTimeout: 300 } });
      try {
        const res = await request(srv.port, '/held', { headers: { 'x-tenant': 'to' }, abortAfterMs: 30_000 });
        assert.equal(srv.entered('held'), 1);
        void res;
        await eventually(() => client.releases.size === 1);
        assert.equal((await request(srv.port, '/ok', { headers: { 'x-tenant': 'to' } })).status, 200);
        await eventually(() => client.releases.size === 2);
        for (const n of client.releases.values()) assert.equal(n, 1);
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('registered twice (two clients), each releases its own ticket', async () => {
      const app = fastifyLib({ logger: false });
      const fws = [new Floodwall({ concurrency: { limit: 1 } }), new Floodwall({ concurrency: { limit: 1 } })];
      const [a, b] = fws.map(counted);
      await app.register(floodwall.fastify, { client: a, keyGenerator: () => 't' });
      await app.register(floodwall.fastify, { client: b, keyGenerator: () => 't' });
      app.get('/ok', async () => 'ok');
      await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        const { port } = app.server.address();
        for (let i = 1; i <= 3; i++) {
          assert.equal((await request(port, '/ok')).status, 200, `request ${i}`);
          await eventually(() => a.releases.size === i && b.releases.size === i);
        }
      } finally {
        app.server.closeAllConnections();
        await app.close();
        fws.forEach((fw) => fw.close());
      }
    });

    test('a custom handler answers the rejection', async () => {
      const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 1 } });
      const srv = await serve(fastifyLib, fw, {
        handler: (req, reply, decision) => reply.code(decision.status).send({ custom: decision.limiter }),
      });
      try {
        await request(srv.port, '/ok', { headers: { 'x-tenant': 'h' } });
        const res = await request(srv.port, '/ok', { headers: { 'x-tenant': 'h' } });
        assert.equal(res.status, 429);
        assert.deepEqual(JSON.parse(res.body), { custom: 'request_rate' });
        assert.equal(res.headers['ratelimit-remaining'], '0');
      } finally {
        await srv.close();
        fw.close();
      }
    });
  });
}
