'use strict';
// The Express middleware over real HTTP, on Express 4 and Express 5: headers on every response, the core's
// 429 and 503 bodies, req.floodwall, a ticket released exactly once on every path, the tenant derived by
// the core from the request (or given by keyGenerator), and the skip and handler hooks.
const assert = require('node:assert/strict');
const http = require('node:http');
const { test, describe } = require('node:test');
const floodwall = require('../..');
const { Floodwall } = floodwall;
const { request, eventually } = require('./helpers');
const { integrationSuite } = require('./integration_suite');

const EXPRESSES = [
  ['Express 4', require('express4')],
  ['Express 5', require('express')],
];

// A Floodwall whose release() counts the calls per ticket, to prove "exactly once".
function counted(fw) {
  const releases = new Map();
  return {
    releases,
    admit: (r) => fw.admit(r),
    release(decision) {
      releases.set(decision.ticket, (releases.get(decision.ticket) || 0) + 1);
      fw.release(decision);
    },
  };
}

async function serve(expressLib, fw, options = {}) {
  const app = expressLib();
  app.set('env', 'test'); // the default error handler stays quiet
  const held = [];
  // No x-tenant header: undefined, so the core derives the tenant from the request.
  app.use(floodwall.express(fw, { keyGenerator: (req) => req.get('x-tenant'), ...options }));
  app.get('/ok', (req, res) => res.json({ decided: Boolean(req.floodwall), remaining: req.floodwall?.remaining }));
  app.get('/held', (req, res) => held.push(res)); // answers only when the test says so
  app.get('/boom', () => {
    throw new Error('boom');
  });
  app.get('/next-error', (req, res, next) => next(new Error('passed on')));
  app.get('/stream-abort', (req, res) => {
    res.write('partial');
    held.push(res);
  });
  const server = http.createServer(app);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    held,
    app,
    close: () => new Promise((resolve) => {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      server.close(resolve);
    }),
  };
}

// The app integration_suite.js describes, on Express.
async function serveForSuite(expressLib, fw, options) {
  const app = expressLib();
  app.set('env', 'test');
  const entered = new Map();
  const enter = (name) => entered.set(name, (entered.get(name) || 0) + 1);
  const held = [];
  let inFlight = 0;
  let most = 0;
  let openGate;
  const gate = new Promise((resolve) => (openGate = resolve));
  app.use(floodwall.express(fw, { keyGenerator: (req) => req.get('x-tenant'), critical: (req) => req.get('x-critical') === '1', ...options }));
  app.get('/ok', (req, res) => res.json({ decided: Boolean(req.floodwall), remaining: req.floodwall?.remaining }));
  const orders = expressLib.Router(); // a mounted router: its mount path is part of the family
  orders.get('/:id', (req, res) => res.json({ rules: req.floodwall.rules }));
  app.use('/orders', orders);
  app.get('/held', (req, res) => {
    enter('held');
    held.push(res);
  });
  app.get('/boom', () => {
    throw new Error('boom');
  });
  app.get('/slow/:id', async (req, res) => {
    enter('slow');
    inFlight++;
    most = Math.max(most, inFlight);
    await gate;
    await new Promise((r) => setTimeout(r, 2));
    inFlight--;
    res.json({ ok: true });
  });
  const server = http.createServer(app);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    entered: (name) => entered.get(name) || 0,
    open: () => openGate(),
    maxInFlight: () => most,
    close: () => new Promise((resolve) => {
      openGate();
      for (const res of held) res.destroy();
      server.closeAllConnections();
      server.close(resolve);
    }),
  };
}

for (const [name, expressLib] of EXPRESSES) integrationSuite(name, (fw, options) => serveForSuite(expressLib, fw, options));

function headerNames(rawHeaders) {
  return rawHeaders.filter((_, i) => i % 2 === 0);
}

for (const [name, expressLib] of EXPRESSES) {
  describe(name, () => {
    test('app-wide: the family is the pattern the router would match, by method, mounts in front; else a glob on the path', async () => {
      const fw = new Floodwall({ request_rate: { rate: 100, burst: 100, limits: [{ name: 'g', routes: ['/re/*', '/b/*'], rate: 100, burst: 100 }] } });
      const app = expressLib();
      app.use(floodwall.express(fw, { keyGenerator: () => 't' }));
      app.get('/a/:x', (req, res) => res.end('a'));
      app.post('/b/:y', (req, res) => res.end('b'));
      const api = expressLib.Router();
      api.get('/c/:z', (req, res) => res.end('c'));
      app.use('/api', api);
      app.get(/^\/re\/\d+$/, (req, res) => res.end('re'));
      const server = http.createServer(app);
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const { port } = server.address();
        assert.equal((await request(port, '/a/1')).status, 200);
        assert.equal((await request(port, '/api/c/2?q=1')).status, 200);
        assert.equal((await request(port, '/b/3')).status, 404); // a POST route: not GET's family
        assert.equal((await request(port, '/re/4')).status, 200); // a RegExp route: no pattern, the path
        assert.deepEqual(Object.keys(fw.metrics().routes).filter((r) => r !== 'default').sort(), ['/a/:x', '/api/c/:z', '/b/*', '/re/*']);
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        fw.close();
      }
    });

    test('a 200 carries the core headers and the decision is on req.floodwall', async () => {
      const fw = new Floodwall({ request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 } });
      const srv = await serve(expressLib, fw);
      try {
        const res = await request(srv.port, '/ok', { headers: { 'x-tenant': 'acme' } });
        assert.equal(res.status, 200);
        assert.equal(res.headers['ratelimit-policy'], '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"');
        assert.equal(res.headers.ratelimit, '"concurrency";r=19');
        assert.equal(res.headers['ratelimit-limit'], '500');
        assert.equal(res.headers['ratelimit-remaining'], '499');
        assert.equal(res.headers['ratelimit-reset'], '1');
        assert.equal(res.headers['retry-after'], undefined);
        assert.equal(JSON.parse(res.body).remaining, 499);
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('a 429 has the exact headers, in order, and the core body', async () => {
      const fw = new Floodwall({ request_rate: { rate: 0.5, burst: 2 } });
      const srv = await serve(expressLib, fw);
      try {
        for (let i = 0; i < 2; i++) assert.equal((await request(srv.port, '/ok', { headers: { 'x-tenant': 't' } })).status, 200);
        const res = await request(srv.port, '/ok', { headers: { 'x-tenant': 't' } });
        assert.equal(res.status, 429);
        const retry = Number(res.headers['retry-after']);
        assert.ok(Number.isInteger(retry) && retry >= 1, res.headers['retry-after']);
        assert.deepEqual(headerNames(res.rawHeaders).filter((h) => /^(ratelimit|retry-after|content-)/i.test(h)), [
          'RateLimit-Policy', 'RateLimit', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After',
          'Content-Type', 'Content-Length',
        ]);
        assert.equal(res.headers['content-type'], 'application/json');
        assert.equal(res.headers['ratelimit-policy'], '"request_rate";q=2;w=4');
        assert.equal(res.headers['ratelimit-remaining'], '0');
        assert.equal(res.body, JSON.stringify({
          error: {
            type: 'rate_limit_error',
            limit_type: 'request_rate',
            message: `Request rate limit exceeded: 0.5 requests/second sustained (bursts to 2). Retry after ${retry}s.`,
            limit: 2,
            rate: 0.5,
            retry_after: retry,
          },
        }));
        assert.equal(Number(res.headers['content-length']), Buffer.byteLength(res.body));
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('a 503 from the fleet shedder has Retry-After and the core body; critical traffic passes', async () => {
      const fw = new Floodwall({ fleet: { capacity: 1 } });
      const srv = await serve(expressLib, fw, { critical: (req) => req.get('x-critical') === '1' });
      try {
        const first = request(srv.port, '/held', { headers: { 'x-tenant': 'a' } });
        await eventually(() => srv.held.length === 1);
        const shed = await request(srv.port, '/ok', { headers: { 'x-tenant': 'b' } });
        assert.equal(shed.status, 503);
        assert.equal(shed.headers['retry-after'], '1');
        assert.equal(shed.headers['content-type'], 'application/json');
        assert.deepEqual(JSON.parse(shed.body).error, {
          type: 'service_unavailable',
          limit_type: 'fleet',
          message: 'Service degraded: non-critical traffic is being shed to keep capacity for critical requests. Retry with backoff after 1s.',
          retry_after: 1,
        });
        const critical = await request(srv.port, '/ok', { headers: { 'x-tenant': 'b', 'x-critical': '1' } });
        assert.equal(critical.status, 200);
        srv.held.shift().end('done');
        assert.equal((await first).status, 200);
        assert.equal((await request(srv.port, '/ok', { headers: { 'x-tenant': 'b' } })).status, 200, 'the slot came back');
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('a client that aborts mid-request frees its slot, released exactly once', async () => {
      const fw = new Floodwall({ concurrency: { limit: 1 } });
      const spy = counted(fw);
      const srv = await serve(expressLib, spy);
      try {
        const aborted = request(srv.port, '/held', { headers: { 'x-tenant': 't' }, abortAfterMs: 100 });
        await eventually(() => srv.held.length === 1);
        assert.equal((await request(srv.port, '/ok', { headers: { 'x-tenant': 't' } })).status, 429, 'the slot is held');
        assert.deepEqual(await aborted, { aborted: true });
        await eventually(() => spy.releases.size === 1);
        const ok = await request(srv.port, '/ok', { headers: { 'x-tenant': 't' } });
        assert.equal(ok.status, 200);
        assert.equal(ok.headers.ratelimit, '"concurrency";r=0');
        await eventually(() => spy.releases.size === 2);
        assert.deepEqual([...spy.releases.values()], [1, 1]);
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('a streamed response whose client leaves half-way frees its slot', async () => {
      const fw = new Floodwall({ concurrency: { limit: 1 } });
      const srv = await serve(expressLib, fw);
      try {
        const aborted = request(srv.port, '/stream-abort', { headers: { 'x-tenant': 't' }, abortAfterMs: 100 });
        await eventually(() => srv.held.length === 1);
        await aborted;
        await eventually(async () => (await request(srv.port, '/ok', { headers: { 'x-tenant': 't' } })).status === 200);
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('a route that throws answers 500 and frees its slot', async () => {
      const fw = new Floodwall({ concurrency: { limit: 1 } });
      const spy = counted(fw);
      const srv = await serve(expressLib, spy);
      try {
        for (const path of ['/boom', '/next-error', '/boom']) {
          const res = await request(srv.port, path, { headers: { 'x-tenant': 't' } });
          assert.equal(res.status, 500);
          assert.equal(res.headers.ratelimit, '"concurrency";r=0', 'headers even on errors');
        }
        assert.equal((await request(srv.port, '/ok', { headers: { 'x-tenant': 't' } })).status, 200);
        await eventually(() => spy.releases.size === 4);
        assert.ok([...spy.releases.values()].every((n) => n === 1));
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('skip, keyGenerator, route and cost options', async () => {
      const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 10 }, concurrency: { limit: 5, routes: ['/ok'] } });
      const srv = await serve(expressLib, fw, {
        skip: async (req) => req.get('x-skip') === '1',
        cost: (req) => Number(req.get('x-cost') || 1),
        route: (req) => req.path,
      });
      try {
        const skipped = await request(srv.port, '/ok', { headers: { 'x-tenant': 't', 'x-skip': '1' } });
        assert.equal(skipped.status, 200);
        assert.deepEqual(JSON.parse(skipped.body), { decided: false }, 'no decision on req.floodwall when skipped');
        assert.equal(skipped.headers['ratelimit-limit'], undefined);
        const heavy = await request(srv.port, '/ok', { headers: { 'x-tenant': 't', 'x-cost': '4' } });
        assert.equal(heavy.headers['ratelimit-remaining'], '6');
        assert.equal(heavy.headers.ratelimit, '"request_rate";r=6;t=4000');
        const other = await request(srv.port, '/boom', { headers: { 'x-tenant': 't' } });
        assert.equal(other.headers['ratelimit-policy'], '"request_rate";q=10;w=10000', 'concurrency counts /ok only');
        const tooHeavy = await request(srv.port, '/ok', { headers: { 'x-tenant': 't', 'x-cost': '11' } });
        assert.equal(tooHeavy.status, 500, 'a cost above the burst is an error passed to next()');
        const other2 = await request(srv.port, '/ok', { headers: { 'x-tenant': 'u' } });
        assert.equal(other2.headers['ratelimit-remaining'], '9', 'keyGenerator separates tenants');
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('each hook runs once per request, synchronous or not', async () => {
      const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 10 } });
      const calls = { keyGenerator: 0, route: 0, cost: 0 };
      const srv = await serve(expressLib, fw, {
        keyGenerator: async (req) => { calls.keyGenerator++; return req.get('x-tenant'); },
        route: (req) => { calls.route++; return req.path; },
        cost: () => { calls.cost++; return 1; },
      });
      try {
        for (let i = 0; i < 3; i++) {
          assert.equal((await request(srv.port, '/ok', { headers: { 'x-tenant': 'once' } })).status, 200);
        }
        assert.deepEqual(calls, { keyGenerator: 3, route: 3, cost: 3 });
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('without a keyGenerator one vouched-for Bearer token is one bucket, whichever peer it comes from', async () => {
      const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 5 } });
      const issued = new Set(['s3cr3t-token', 'another']);
      const srv = await serve(expressLib, fw, { keyGenerator: undefined, verify: (token) => issued.has(token) });
      const bearer = { authorization: 'Bearer s3cr3t-token' };
      const remaining = async (localAddress, headers = {}) => {
        const res = await request(srv.port, '/ok', { headers, localAddress });
        assert.equal(res.status, 200);
        return res.headers['ratelimit-remaining'];
      };
      try {
        assert.equal(await remaining('127.0.0.2', bearer), '4');
        assert.equal(await remaining('127.0.0.3', bearer), '3', 'the same token from another peer: the same bucket');
        assert.equal(await remaining('127.0.0.3', { authorization: 'Bearer another' }), '4', 'another token: another bucket');
        // Without a credential the peer is the tenant: the two peers really were two clients.
        assert.equal(await remaining('127.0.0.2'), '4');
        assert.equal(await remaining('127.0.0.3'), '4');
        assert.equal(await remaining('127.0.0.2'), '3');
        assert.equal(fw.tenantKey({ headers: Object.entries(bearer), peer: '127.0.0.9', verified: true }),
          fw.tenantKey({ headers: ['Authorization', 'Bearer s3cr3t-token'], verified: true }));
        assert.ok(!JSON.stringify(fw.metrics()).includes('s3cr3t'), 'the token is hashed, never kept');
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('behind a trusted proxy the client is the X-Forwarded-For entry, from anywhere else the peer', async () => {
      const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 5 }, tenant: { trusted_proxies: ['127.0.0.1/32'] } });
      const srv = await serve(expressLib, fw, { keyGenerator: undefined });
      const remaining = async (localAddress, forwardedFor) => {
        const res = await request(srv.port, '/ok', { headers: { 'x-forwarded-for': forwardedFor }, localAddress });
        return res.headers['ratelimit-remaining'];
      };
      try {
        assert.equal(await remaining('127.0.0.1', '203.0.113.5'), '4');
        assert.equal(await remaining('127.0.0.1', '198.51.100.9, 203.0.113.5'), '3', 'the right-most entry');
        assert.equal(await remaining('127.0.0.1', '203.0.113.6'), '4', 'another client behind the proxy');
        assert.equal(await remaining('127.0.0.2', '203.0.113.5'), '4', 'an untrusted peer is the client itself');
        assert.equal(fw.tenantKey({ headers: ['X-Forwarded-For', '203.0.113.5'], peer: '127.0.0.1' }), 'ip:203.0.113.5');
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('keyGenerator returning undefined derives the tenant; returning \'\' is one anonymous tenant, limited', async () => {
      const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 2 } });
      const srv = await serve(expressLib, fw, { keyGenerator: (req) => (req.get('x-anonymous') ? '' : undefined) });
      try {
        const anonymous = (localAddress) => request(srv.port, '/ok', { headers: { 'x-anonymous': '1' }, localAddress });
        assert.equal((await anonymous('127.0.0.2')).status, 200);
        assert.equal((await anonymous('127.0.0.3')).status, 200);
        const third = await anonymous('127.0.0.4');
        assert.equal(third.status, 429, 'an empty key is limited as one tenant, never skipped');
        assert.equal(third.headers['ratelimit-remaining'], '0');
        const derived = await request(srv.port, '/ok', { localAddress: '127.0.0.2' });
        assert.equal(derived.status, 200, 'undefined: the peer\'s own bucket');
        assert.equal(derived.headers['ratelimit-remaining'], '1');
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('the policy\'s headers: "ietf" sends the two IETF fields alone, "none" only Retry-After on a rejection', async () => {
      const ietf = new Floodwall({ request_rate: { rate: 0.001, burst: 1 }, concurrency: { limit: 5 }, headers: 'ietf' });
      const none = new Floodwall({ request_rate: { rate: 0.001, burst: 1 }, headers: 'none' });
      const a = await serve(expressLib, ietf);
      const b = await serve(expressLib, none);
      try {
        const limitHeaders = (res) => Object.keys(res.headers).filter((h) => h.startsWith('ratelimit') || h === 'retry-after').sort();
        const ok = await request(a.port, '/ok');
        assert.equal(ok.status, 200);
        assert.deepEqual(limitHeaders(ok), ['ratelimit', 'ratelimit-policy']);
        assert.equal(ok.headers.ratelimit, '"request_rate";r=0;t=1000');
        const refused = await request(a.port, '/ok');
        assert.equal(refused.status, 429);
        assert.deepEqual(limitHeaders(refused), ['ratelimit', 'ratelimit-policy', 'retry-after']);

        const plain = await request(b.port, '/ok');
        assert.equal(plain.status, 200);
        assert.deepEqual(limitHeaders(plain), []);
        const shut = await request(b.port, '/ok');
        assert.equal(shut.status, 429);
        assert.deepEqual(limitHeaders(shut), ['retry-after']);
        assert.equal(JSON.parse(shut.body).error.limit_type, 'request_rate', 'the body is unchanged');
      } finally {
        await a.close();
        await b.close();
        ietf.close();
        none.close();
      }
    });

    test('the default handler sends the core\'s content type: problem+json when the policy asks', async () => {
      const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 1 }, body_format: 'problem+json' });
      const srv = await serve(expressLib, fw);
      try {
        await request(srv.port, '/ok');
        const res = await request(srv.port, '/ok');
        assert.equal(res.status, 429);
        assert.equal(res.headers['content-type'], 'application/problem+json');
        const problem = JSON.parse(res.body);
        assert.equal(problem.status, 429);
        assert.equal(typeof problem.type, 'string');
        assert.equal(Number(res.headers['content-length']), Buffer.byteLength(res.body));
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('a 429 from a named limit names it in the body; RateLimit-Policy lists the limits and quotas', async () => {
      const fw = new Floodwall({
        store: 'memory://',
        request_rate: { rate: 0.001, burst: 10, limits: [{ name: 'writes', routes: ['/*'], methods: ['POST'], rate: 0.001, burst: 1 }] },
        quotas: [{ name: 'daily', limit: 100, period: 'day' }],
      });
      // At app level: the route the app's router matches is the route the limit's glob sees.
      const srv = await serve(expressLib, fw);
      srv.app.post('/orders', (req, res) => res.json({ rules: req.floodwall.rules }));
      try {
        const first = await request(srv.port, '/orders', { method: 'POST', headers: { 'x-tenant': 't' } });
        assert.equal(first.status, 200);
        assert.deepEqual(JSON.parse(first.body).rules, ['writes', 'daily']);
        const res = await request(srv.port, '/orders', { method: 'POST', headers: { 'x-tenant': 't' } });
        assert.equal(res.status, 429);
        assert.match(res.headers['ratelimit-policy'], /"writes";q=1;.*"daily";q=100;w=86400/);
        const { error } = JSON.parse(res.body);
        assert.equal(error.policy, 'writes');
        assert.equal(error.limit_type, 'request_rate');
        const read = await request(srv.port, '/ok', { headers: { 'x-tenant': 't' } });
        assert.equal(read.status, 200);
        assert.doesNotMatch(read.headers['ratelimit-policy'], /"writes"/);
        assert.match(read.headers['ratelimit-policy'], /"daily"/);
      } finally {
        await srv.close();
        fw.close();
      }
    });

    test('a custom handler sends the rejection and gets the decision', async () => {
      const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 1 } });
      const srv = await serve(expressLib, fw, {
        handler: (req, res, next, decision) => {
          res.setHeader('Retry-After', '60'); // its own value wins over the decision's
          res.status(418).send(`slow down: ${decision.limiter} ${req.floodwall === decision} ${decision.contentType}`);
        },
      });
      try {
        await request(srv.port, '/ok', { headers: { 'x-tenant': 't' } });
        const res = await request(srv.port, '/ok', { headers: { 'x-tenant': 't' } });
        assert.equal(res.status, 418);
        assert.equal(res.body, 'slow down: request_rate true application/json');
        assert.equal(res.headers['retry-after'], '60');
        assert.equal(res.headers['ratelimit-remaining'], '0', 'the limit headers are set before the handler runs');
        assert.equal(res.headers['ratelimit-policy'], '"request_rate";q=1;w=1000');
      } finally {
        await srv.close();
        fw.close();
      }
    });
  });
}

describe('Express 5 only', () => {
  test('an async route that rejects answers 500 and frees its slot', async () => {
    const fw = new Floodwall({ concurrency: { limit: 1 } });
    const expressLib = require('express');
    const app = expressLib();
    app.set('env', 'test');
    app.use(floodwall.express(fw));
    app.get('/async-boom', async () => {
      await new Promise((r) => setTimeout(r, 5));
      throw new Error('async boom');
    });
    const server = http.createServer(app);
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      for (let i = 0; i < 3; i++) assert.equal((await request(server.address().port, '/async-boom')).status, 500);
      const d = await fw.admit({ peer: '127.0.0.1' }); // the tenant the middleware's requests derived
      assert.equal(d.allowed, true, 'no slot was leaked');
      assert.equal(d.concurrencyRemaining, 0);
      fw.release(d);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      fw.close();
    }
  });
});
