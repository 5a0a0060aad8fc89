'use strict';
// What the bench apps (express_app.js, fastify_app.js, koa_app.js) share.

// The floodwall side of every bench app (express_app.js, fastify_app.js, koa_app.js), by limiter name: the
// README's example policy (100 requests/s per tenant, bursts to 500, 20 in flight) on memory:// or Redis;
// floodwall-redis-rate and the -key variants the request rate alone (the one limiter the incumbents have);
// the -ietf variants the two IETF limit headers alone (policy "headers": "ietf"); the tenant through a
// verify hook that looks the X-API-Key up among the 1,000 issued, or, in the -key variants, a keyGenerator
// reading it (`keyOf(a)`: the header from the framework's request object). Returns the client and the
// integration's options.
function floodwallVariant(limiter, redisUrl, Floodwall, keyOf) {
  const store = limiter.startsWith('floodwall-memory') ? 'memory://' : redisUrl;
  const keyed = limiter.endsWith('-key');
  const concurrency = limiter === 'floodwall-redis-rate' || keyed ? {} : { concurrency: { limit: 20 } };
  const headers = /-ietf(-key)?$/.test(limiter) ? { headers: 'ietf' } : {};
  const fw = new Floodwall({ store, prefix: 'fwhttp', request_rate: { rate: 100, burst: 500 }, ...concurrency, ...headers });
  const issued = new Set(Array.from({ length: 1000 }, (_, i) => `tenant-${i}`));
  const options = keyed ? { keyGenerator: (a) => keyOf(a) || 'anonymous' } : { verify: (key) => issued.has(key) };
  return { fw, options };
}

// Run as a script (bench/http/run.js starts it): the app of FW_HTTP_LIMITER on a free port, saying "listening
// on PORT"; an orderly exit on SIGINT, so that `node --cpu-prof` writes its profile. For an app whose
// listen() is node:http's (Express, Koa).
function serve(build) {
  process.on('SIGINT', () => process.exit(0));
  build(process.env.FW_HTTP_LIMITER || 'none', { redisUrl: process.env.FW_BENCH_REDIS }).then((app) => {
    const server = app.listen(0, '127.0.0.1', () => console.log(`listening on ${server.address().port}`));
  }, (err) => {
    console.error(err);
    process.exit(1);
  });
}

module.exports = { floodwallVariant, serve };
