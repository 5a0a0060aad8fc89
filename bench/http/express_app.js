'use strict';
// One Express app behind one limiter (FW_HTTP_LIMITER), for bench/http/run.js: none, express-rate-limit
// with its memory store or with rate-limit-redis (ioredis, auto-pipelined), or floodwall's Express
// middleware on memory:// or Redis with the README's example policy (100 requests/s per tenant, bursts to
// 500, 20 in flight), and on Redis with its request rate alone (floodwall-redis-rate); the -ietf variants
// send the two IETF limit headers alone (policy "headers": "ietf") instead of the default five. The tenant is the
// X-API-Key header in every variant (floodwall's: through a verify hook that looks the key up among the 1,000
// issued, as an app keying on API keys does); no limit is ever reached at the load the benchmark offers
// (1,000 tenants). Two floors, which decide nothing: floor-next, a middleware that only calls next(), and
// floor-headers, one that only sets the limit headers every response carries (ARCHITECTURE.md: the five
// of a floodwall decision on this policy, names and values as floodwall sends them) before next(). Prints
// "listening on PORT" once it serves; bench/http/inject.js builds the same apps in process (build()).
// floodwall-memory-ietf-key is the like-for-like setup for express-rate-limit: the same key source (a
// keyGenerator reading X-API-Key), no concurrency limit.
const express = require('express');
const { floodwallVariant, serve } = require('./common');

// The limiter's middleware (null for none) and floodwall's client (its metrics say where each decision
// came from); floodwallModule: the floodwall package to take the middleware from.
async function middleware(limiter, redisUrl, floodwallModule) {
  if (limiter === 'none') return { mw: null, fw: null };
  if (limiter === 'floor-next') return { mw: (req, res, next) => next(), fw: null };
  if (limiter === 'floor-headers') {
    const { Floodwall } = floodwallModule;
    const probe = new Floodwall({ store: 'memory://', request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 } });
    const decision = await probe.admit({ tenant: 'tenant-1' });
    const headers = { ...decision.headers };
    probe.release(decision);
    probe.close();
    // As the floodwall middleware sets them (express.js, answer()).
    const mw = (req, res, next) => {
      for (const name in headers) res.setHeader(name, headers[name]);
      next();
    };
    return { mw, fw: null };
  }
  if (limiter.startsWith('floodwall-')) {
    const { Floodwall, express: floodwall } = floodwallModule;
    const { fw, options } = floodwallVariant(limiter, redisUrl, Floodwall, (req) => req.headers['x-api-key']);
    return { mw: floodwall(fw, options), fw };
  }
  const { rateLimit } = require('express-rate-limit');
  const options = {
    windowMs: 60_000,
    limit: 30_000, // per tenant and minute: never reached here
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    keyGenerator: (req) => req.get('x-api-key') || 'anonymous',
    validate: false,
  };
  if (limiter === 'erl-redis') {
    const { RedisStore } = require('rate-limit-redis');
    const Redis = require('ioredis');
    const client = new Redis(redisUrl, { enableAutoPipelining: true });
    options.store = new RedisStore({ sendCommand: (command, ...args) => client.call(command, ...args), prefix: 'erlhttp:' });
  } else if (limiter !== 'erl-memory') {
    throw new Error(`FW_HTTP_LIMITER: unknown limiter ${limiter}`);
  }
  return { mw: rateLimit(options), fw: null };
}

// The app behind `limiter`, with close() for what the limiter holds.
async function build(limiter, { redisUrl, floodwallModule } = {}) {
  const pkg = floodwallModule || (limiter.startsWith('floodwall-') || limiter === 'floor-headers' ? require('../..') : null);
  const { mw, fw } = await middleware(limiter, redisUrl, pkg);
  const app = express();
  app.set('etag', false);
  // Where floodwall's decisions came from (the store, or the fallback when the store did not answer in time).
  app.get('/__sources', (req, res) => res.json(fw ? fw.metrics().sources : null));
  if (mw) app.use(mw);
  app.get('/', (req, res) => res.json({ ok: true }));
  app.close = async () => fw?.close();
  return app;
}

if (require.main === module) serve(build);

module.exports = { build };
