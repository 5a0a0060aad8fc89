'use strict';
// The maxWait option of the Express middleware, the Fastify plugin and the Koa middleware (#57 part 2), over
// real HTTP, on memory:// and a real redis-server: a request the bucket would refuse waits for its turn
// instead of a 429 when that turn is within maxWait; off by default; beyond maxWait a 429; a bad value named.
const assert = require('node:assert/strict');
const http = require('node:http');
const { test, describe, before, after } = require('node:test');
const floodwall = require('../..');
const { startRedis, request } = require('./helpers');

let redis;
let prefixes = 0;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

const STORES = {
  memory: (policy) => new floodwall.Floodwall({ store: 'memory://', ...policy }),
  redis: (policy) =>
    new floodwall.Floodwall({ store: redis.url, prefix: `mw${process.pid}x${prefixes++}`, redis: { deadline_ms: 2000 }, ...policy }),
};

const key = { keyGenerator: () => 'acme' };

// Each framework: an app answering GET /hello behind floodwall with `options`; resolves { port, close }.
const FRAMEWORKS = {
  express: async (fw, options) => {
    const app = require('express')();
    app.use(floodwall.express(fw, { ...key, ...options }));
    app.get('/hello', (req, res) => res.end('hello'));
    const server = http.createServer(app);
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { port: server.address().port, close: () => new Promise((r) => server.close(r)) };
  },
  fastify: async (fw, options) => {
    const app = require('fastify')();
    await app.register(floodwall.fastify, { client: fw, ...key, ...options });
    app.get('/hello', async () => 'hello');
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { port: app.server.address().port, close: () => app.close() };
  },
  koa: async (fw, options) => {
    const Koa = require('koa');
    const app = new Koa();
    app.use(floodwall.koa(fw, { ...key, ...options }));
    app.use((ctx) => {
      ctx.body = 'hello';
    });
    const server = http.createServer(app.callback());
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { port: server.address().port, close: () => new Promise((r) => server.close(r)) };
  },
};

for (const [framework, serve] of Object.entries(FRAMEWORKS)) {
  for (const [store, make] of Object.entries(STORES)) {
    describe(`${framework} maxWait on ${store}`, () => {
      test('off by default: refused at once', async () => {
        const fw = make({ request_rate: { rate: 5, burst: 1 } });
        const app = await serve(fw, {});
        assert.equal((await request(app.port, '/hello')).status, 200);
        assert.equal((await request(app.port, '/hello')).status, 429);
        await app.close();
        fw.close();
      });

      test('with maxWait the request waits for its turn', async () => {
        const fw = make({ request_rate: { rate: 5, burst: 1 } });
        const app = await serve(fw, { maxWait: 1000 });
        assert.equal((await request(app.port, '/hello')).status, 200);
        const t0 = performance.now();
        const r = await request(app.port, '/hello');
        assert.equal(r.status, 200);
        assert.equal(r.body, 'hello');
        assert.equal(r.headers['ratelimit-limit'], '1');
        assert.ok(performance.now() - t0 >= 150, 'it waited for its token (200 ms at 5/s, less the time since the first)');
        await app.close();
        fw.close();
      });

      test('beyond maxWait it is still a 429', async () => {
        const fw = make({ request_rate: { rate: 1, burst: 1 } });
        const app = await serve(fw, { maxWait: 200 });
        assert.equal((await request(app.port, '/hello')).status, 200);
        const r = await request(app.port, '/hello'); // its turn is a second away
        assert.equal(r.status, 429);
        assert.ok(Number(r.headers['retry-after']) >= 1);
        await app.close();
        fw.close();
      });

      test('a client that disconnects while it waits gives its turn back and never reaches the app', async () => {
        const fw = make({ request_rate: { rate: 1, burst: 1 } });
        let hits = 0;
        const app = await serve(fw, { maxWait: 3000, skip: () => { hits++; return false; } });
        assert.equal((await request(app.port, '/hello')).status, 200);
        const answered = [];
        await new Promise((resolve) => {
          const req = http.get({ port: app.port, host: '127.0.0.1', path: '/hello' }, (res) => answered.push(res.statusCode));
          req.on('error', () => {}); // destroyed below: its own error, expected
          setTimeout(() => {
            req.destroy(); // its turn is a second away: the client gives up
            resolve();
          }, 150);
        });
        assert.equal(hits, 2, 'the second request was waiting in the middleware');
        await new Promise((r) => setTimeout(r, 100));
        // The turn went back: the next one is a second after the first, within 1.5 s (else two: refused).
        const next = await fw.acquire({ tenant: 'acme', maxWait: 1500 });
        assert.ok(next.allowed, 'the disconnected request gave its reservation back');
        fw.release(next);
        await new Promise((r) => setTimeout(r, 100));
        assert.deepEqual(answered, [], 'nothing was answered to the gone client');
        await app.close();
        fw.close();
      });

      test('concurrent requests are all served, in turn', async () => {
        const rate = 20;
        const burst = 10; // maxWait caps at burst / rate: 500 ms
        const fw = make({ request_rate: { rate, burst } });
        const app = await serve(fw, { maxWait: 2000 });
        const went = [];
        const statuses = await Promise.all(Array.from({ length: 16 }, async () => {
          const r = await request(app.port, '/hello');
          went.push(performance.now());
          return r.status;
        }));
        assert.deepEqual(statuses, Array(16).fill(200), 'nothing refused within maxWait');
        went.sort((a, b) => a - b);
        assert.ok(went.at(-1) - went[0] >= ((16 - burst) / rate) * 1000 * 0.8, 'the last six waited a token apart');
        await app.close();
        fw.close();
      });
    });
  }
}

test('a bad maxWait is refused naming it', () => {
  const fw = new floodwall.Floodwall({ request_rate: { rate: 5, burst: 1 } });
  for (const bad of [-1, NaN, Infinity, '10', true]) {
    assert.throws(() => floodwall.express(fw, { maxWait: bad }), /maxWait must be a finite number of milliseconds/);
    assert.throws(() => floodwall.koa(fw, { maxWait: bad }), /maxWait must be a finite number of milliseconds/);
  }
  fw.close();
});
