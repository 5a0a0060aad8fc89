'use strict';
// One Fastify 5 app behind one limiter (FW_HTTP_LIMITER), for bench/http/run.js, as express_app.js is for
// Express: none, @fastify/rate-limit (the incumbent) with its memory store or with Redis (ioredis,
// auto-pipelined), or floodwall's Fastify plugin on memory:// or Redis with the README's example policy
// (100 requests/s per tenant, bursts to 500, 20 in flight), or on Redis with its request rate alone
// (floodwall-redis-rate); the -ietf variants send the two IETF limit headers alone (policy "headers": "ietf").
// The tenant is the X-API-Key header in every variant (floodwall's: through a verify hook that looks the key
// up among the 1,000 issued); no limit is ever reached at the load the benchmark offers. Both limiters are
// registered app-wide, before the route. floodwall-memory-ietf-key is the like-for-like setup for
// @fastify/rate-limit: the same key source (a keyGenerator reading X-API-Key), no concurrency limit.
// Prints "listening on PORT" once it serves; bench/http/inject.js builds the same apps in process (build()).
const Fastify = require('fastify');
const { floodwallVariant } = require('./common');

async function register(app, limiter, redisUrl, floodwallModule) {
  if (limiter === 'none') return null;
  if (limiter.startsWith('floodwall-')) {
    const { Floodwall, fastify: floodwall } = floodwallModule;
    const { fw, options } = floodwallVariant(limiter, redisUrl, Floodwall, (request) => request.headers['x-api-key']);
    await app.register(floodwall, { client: fw, ...options });
    return fw;
  }
  const options = {
    global: true,
    max: 30_000, // per tenant and minute: never reached here
    timeWindow: 60_000,
    enableDraftSpec: true, // the IETF draft's RateLimit-* fields, as express-rate-limit's standardHeaders
    keyGenerator: (req) => req.headers['x-api-key'] || 'anonymous',
  };
  if (limiter === 'frl-redis') {
    const Redis = require('ioredis');
    options.redis = new Redis(redisUrl, { enableAutoPipelining: true });
    options.nameSpace = 'frlhttp:';
  } else if (limiter !== 'frl-memory') {
    throw new Error(`FW_HTTP_LIMITER: unknown limiter ${limiter}`);
  }
  await app.register(require('@fastify/rate-limit'), options);
  return null;
}

// The app behind `limiter`; floodwallModule: the floodwall package to take the plugin from.
async function build(limiter, { redisUrl, floodwallModule } = {}) {
  const app = Fastify({ logger: false });
  let fw = null; // floodwall's client: its metrics say where each decision came from
  // Where floodwall's decisions came from; outside the limiter (registered in a context of its own first).
  app.get('/__sources', { config: { rateLimit: false, floodwall: { skip: true } } }, async () => (fw ? fw.metrics().sources : null));
  fw = await register(app, limiter, redisUrl, floodwallModule || (limiter.startsWith('floodwall-') ? require('../..') : null));
  app.get('/', async () => ({ ok: true }));
  return app;
}

if (require.main === module) {
  process.on('SIGINT', () => process.exit(0));
  (async () => {
    const app = await build(process.env.FW_HTTP_LIMITER || 'none', { redisUrl: process.env.FW_BENCH_REDIS });
    await app.listen({ port: 0, host: '127.0.0.1' });
    console.log(`listening on ${app.server.address().port}`);
  })().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}

module.exports = { build };
