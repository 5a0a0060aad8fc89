// A Koa app with @koa/router behind floodwall: 100 requests/s per tenant (bursts to 500), 20 in flight per
// tenant, and an "orders" limit of its own on /orders and everything under it.
const Koa = require('koa');
const { Router } = require('@koa/router');
const { Floodwall, koa: floodwall } = require('floodwall');

const issued = new Set((process.env.API_KEYS || 'acme,globex').split(','));
const fw = new Floodwall({
  request_rate: { rate: 100, burst: 500, limits: [{ name: 'orders', routes: ['/orders', '/orders/*'], rate: 5, burst: 10 }] },
  concurrency: { limit: 20 },
});
const app = new Koa();
const router = new Router();
router.get('/', (ctx) => { ctx.body = { remaining: ctx.state.floodwall.remaining }; });
router.get('/orders/:id', (ctx) => { ctx.body = { order: ctx.params.id, rules: ctx.state.floodwall.rules }; });
// App-wide, before the router: the route family is the route the router matches ('/orders/:id').
app.use(floodwall(fw, { verify: (key) => issued.has(key), skip: (ctx) => ctx.path === '/health' }));
app.use(router.routes());
const server = app.listen(Number(process.env.PORT || 3000), () => console.log(`listening on ${server.address().port}`));
