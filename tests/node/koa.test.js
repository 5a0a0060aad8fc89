'use strict';
// The Koa middleware over real HTTP with @koa/router: the integration contract (integration_suite.js) on
// memory:// and Redis, then what is Koa's own: the route @koa/router would match (given as `router`, found
// among the app's middleware, or already matched on a route), headers kept on an error's answer, bad options.
const assert = require('node:assert/strict');
const http = require('node:http');
const { test, describe } = require('node:test');
const Koa = require('koa');
const { Router } = require('@koa/router');
const floodwall = require('../..');
const { Floodwall } = floodwall;
const { request } = require('./helpers');
const { integrationSuite } = require('./integration_suite');

async function serve(fw, options = {}, { routerOption = false, inRouter = false, extra } = {}) {
  const app = new Koa();
  app.silent = true; // the default error handler stays quiet
  const router = new Router();
  const entered = new Map();
  const enter = (name) => entered.set(name, (entered.get(name) || 0) + 1);
  const held = [];
  let inFlight = 0;
  let most = 0;
  let openGate;
  const gate = new Promise((resolve) => (openGate = resolve));
  const middleware = floodwall.koa(fw, {
    keyGenerator: (ctx) => ctx.get('x-tenant') || undefined,
    critical: (ctx) => ctx.get('x-critical') === '1',
    ...(routerOption ? { router } : {}),
    ...options,
  });
  if (inRouter) router.use(middleware);
  else app.use(middleware);
  router.get('/ok', (ctx) => {
    const d = ctx.state.floodwall;
    ctx.body = { decided: Boolean(d), remaining: d?.remaining };
  });
  router.get('/orders/:id', (ctx) => {
    ctx.body = { rules: ctx.state.floodwall.rules };
  });
  router.get('/held', (ctx) => {
    enter('held');
    return new Promise((resolve) => held.push({ ctx, resolve }));
  });
  router.get('/boom', () => {
    throw new Error('boom');
  });
  router.get('/slow/:id', async (ctx) => {
    enter('slow');
    inFlight++;
    most = Math.max(most, inFlight);
    await gate;
    await new Promise((r) => setTimeout(r, 2));
    inFlight--;
    ctx.body = { ok: true };
  });
  if (extra) extra(router);
  app.use(router.routes());
  const server = http.createServer(app.callback());
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    entered: (name) => entered.get(name) || 0,
    open: () => openGate(),
    maxInFlight: () => most,
    close: () => new Promise((resolve) => {
      openGate();
      for (const h of held) h.resolve();
      server.closeAllConnections();
      server.close(resolve);
    }),
  };
}

integrationSuite('Koa', (fw, options) => serve(fw, options));

describe('Koa: the middleware', () => {
  const POLICY = { request_rate: { rate: 100, burst: 100, limits: [{ name: 'one', routes: ['/orders/:id'], rate: 0.001, burst: 1 }] } };

  async function familyOf(setup) {
    const fw = new Floodwall(POLICY);
    const srv = await serve(fw, {}, setup);
    try {
      assert.equal((await request(srv.port, '/orders/1', { headers: { 'x-tenant': 'k' } })).status, 200);
      // The pattern, not the path: another order is the same family.
      assert.equal((await request(srv.port, '/orders/2', { headers: { 'x-tenant': 'k' } })).status, 429);
      return Object.keys(fw.metrics().routes);
    } finally {
      await srv.close();
      fw.close();
    }
  }

  test('the route family: the route of the app\'s router, found among its middleware', async () => {
    assert.ok((await familyOf({})).includes('/orders/:id'));
  });

  test('the route family: the route of the router given as `router`', async () => {
    assert.ok((await familyOf({ routerOption: true })).includes('/orders/:id'));
  });

  test('the route family: ctx._matchedRoute when mounted in the router (router.use)', async () => {
    assert.ok((await familyOf({ inRouter: true })).includes('/orders/:id'));
  });

  test('a handler that throws: the 500 keeps the limit headers', async () => {
    const fw = new Floodwall({ request_rate: { rate: 100, burst: 100 } });
    const srv = await serve(fw);
    try {
      const res = await request(srv.port, '/boom', { headers: { 'x-tenant': 'e' } });
      assert.equal(res.status, 500);
      assert.equal(res.headers['ratelimit-limit'], '100');
    } finally {
      await srv.close();
      fw.close();
    }
  });

  test('a rejection: the core\'s status, content type and body; a custom handler', async () => {
    const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 1 } });
    const srv = await serve(fw);
    const custom = await serve(fw, { handler: (ctx, next, decision) => { ctx.status = decision.status; ctx.body = { custom: decision.limiter }; } });
    try {
      await request(srv.port, '/ok', { headers: { 'x-tenant': 'r' } });
      const res = await request(srv.port, '/ok', { headers: { 'x-tenant': 'r' } });
      assert.equal(res.status, 429);
      assert.equal(res.headers['content-type'], 'application/json');
      assert.equal(JSON.parse(res.body).error.limit_type, 'request_rate');
      const mine = await request(custom.port, '/ok', { headers: { 'x-tenant': 'r' } });
      assert.equal(mine.status, 429);
      assert.deepEqual(JSON.parse(mine.body), { custom: 'request_rate' });
      assert.equal(mine.headers['ratelimit-remaining'], '0');
    } finally {
      await srv.close();
      await custom.close();
      fw.close();
    }
  });

  test('bad options are named when the middleware is made', () => {
    const fw = new Floodwall();
    try {
      assert.throws(() => floodwall.koa(fw, { cost: -1 }), /koa\(fw, options\): cost must be a non-negative integer or a function/);
      assert.throws(() => floodwall.koa(fw, { router: {} }), /router must be a @koa\/router Router/);
      assert.throws(() => floodwall.koa(fw, { routes: [] }), /unknown option "routes"/);
      assert.throws(() => floodwall.koa({}), /the client must be a Floodwall/);
      const closed = new Floodwall();
      closed.close();
      assert.throws(() => floodwall.koa(closed), /the client is closed/);
    } finally {
      fw.close();
    }
  });
});
