'use strict';
// One Koa app behind one limiter (FW_HTTP_LIMITER), for bench/http/run.js and inject.js, as express_app.js is
// for Express: none, koa-ratelimit (the incumbent: the Koa organisation's limiter) with its memory driver or
// with Redis (ioredis), or floodwall's Koa middleware on memory:// or Redis with the README's example policy
// (100 requests/s per tenant, bursts to 500, 20 in flight); the -ietf variants send the two IETF limit headers
// alone (policy "headers": "ietf"). The tenant is the X-API-Key header in every variant (floodwall's: through a
// verify hook that looks the key up among the 1,000 issued); no limit is ever reached at the load the
// benchmark offers. floodwall-memory-ietf-key is the like-for-like setup for koa-ratelimit: the same key
// source (a keyGenerator reading X-API-Key), no concurrency limit. The route is @koa/router's, registered
// after the limiter, as an app mounts a limiter app-wide. Prints "listening on PORT" once it serves.
const Koa = require('koa');
const Router = require('@koa/router');
const { floodwallVariant, serve } = require('./common');

async function middleware(limiter, redisUrl, floodwallModule) {
  if (limiter === 'none') return { mw: null, fw: null };
  if (limiter.startsWith('floodwall-')) {
    const { Floodwall, koa: floodwall } = floodwallModule;
    const { fw, options } = floodwallVariant(limiter, redisUrl, Floodwall, (ctx) => ctx.get('x-api-key'));
    return { mw: floodwall(fw, options), fw };
  }
  const ratelimit = require('koa-ratelimit');
  const options = {
    duration: 60_000,
    max: 30_000, // per tenant and minute: never reached here
    id: (ctx) => ctx.get('x-api-key') || 'anonymous',
  };
  if (limiter === 'krl-redis') {
    const Redis = require('ioredis');
    Object.assign(options, { driver: 'redis', db: new Redis(redisUrl, { enableAutoPipelining: true }), namespace: 'krlhttp' });
  } else if (limiter === 'krl-memory') {
    Object.assign(options, { driver: 'memory', db: new Map() });
  } else {
    throw new Error(`FW_HTTP_LIMITER: unknown limiter ${limiter}`);
  }
  return { mw: ratelimit(options), fw: null, db: options.db };
}

// The app behind `limiter` (a Koa app), with close() for what the limiter holds.
async function build(limiter, { redisUrl, floodwallModule } = {}) {
  const pkg = floodwallModule || (limiter.startsWith('floodwall-') ? require('../..') : null);
  const { mw, fw, db } = await middleware(limiter, redisUrl, pkg);
  const app = new Koa();
  const router = new Router();
  // Where floodwall's decisions came from; registered before the limiter, so that it is never limited.
  const sources = new Router();
  sources.get('/__sources', (ctx) => {
    ctx.type = 'application/json';
    ctx.body = JSON.stringify(fw ? fw.metrics().sources : null); // Koa answers a null body with an empty 204
  });
  app.use(sources.routes());
  if (mw) app.use(mw);
  router.get('/', (ctx) => {
    ctx.body = { ok: true };
  });
  app.use(router.routes());
  app.close = async () => {
    fw?.close();
    if (db && typeof db.quit === 'function') await db.quit();
  };
  return app;
}

if (require.main === module) serve(build);

module.exports = { build };
