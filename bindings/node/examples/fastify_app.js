// A Fastify app behind floodwall: 100 requests/s per tenant (bursts to 500), 20 in flight per tenant, and an
// "orders" limit of its own on /orders and everything under it.
const Fastify = require('fastify');
const { Floodwall, fastify: floodwall } = require('floodwall');

const issued = new Set((process.env.API_KEYS || 'acme,globex').split(','));
const fw = new Floodwall({
  request_rate: { rate: 100, burst: 500, limits: [{ name: 'orders', routes: ['/orders', '/orders/*'], rate: 5, burst: 10 }] },
  concurrency: { limit: 20 },
});
const app = Fastify();
app.register(floodwall, { client: fw, verify: (key) => issued.has(key) }); // before the routes: app-wide
app.get('/', async (request) => ({ remaining: request.floodwall.remaining }));
app.get('/orders/:id', async (request) => ({ order: request.params.id, rules: request.floodwall.rules }));
app.post('/reports', { config: { floodwall: { cost: 10 } } }, async () => ({ queued: true })); // a route's own cost
app.get('/health', { config: { floodwall: { skip: true } } }, async () => 'ok');
app.listen({ port: Number(process.env.PORT || 3000) }).then((address) => console.log(`listening on ${address}`));
