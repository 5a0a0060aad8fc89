// Compiled by types.test.js with tsc --strict --noEmit: the declarations describe the API as it is used.
import express = require('express');
import Fastify = require('fastify');
import {
  Floodwall, Decision, PolicyError, InvalidArgumentError, express as floodwall, fastify as floodwallFastify, koa as floodwallKoa,
  backoff, backoffDefaults, retry,
  parseRetryAfter, Admin, StoreError, type Policy, type LimiterName, type HeaderList, type TenantInfo, type TenantRecord,
} from 'floodwall';

const policy: Policy = {
  request_rate: { rate: 100, burst: 500 },
  concurrency: { limit: 20, routes: ['/search'] },
  tenant: { from: ['authorization', 'ip'], trusted_proxies: ['10.0.0.0/8'], ipv6_prefix: 56, credentials: 'verified' },
  body_format: 'problem+json',
  headers: 'ietf',
};
new Floodwall({
  request_rate: { rate: 10, burst: 20, limits: [{ name: 'writes', routes: ['/orders/*'], methods: ['POST'], rate: 1, burst: 5 }] },
  quotas: [{ name: 'daily', limit: 10000, period: 'day', timezone: 'UTC+09:00', mode: 'dark' }],
});
const fw = new Floodwall(policy);
new Floodwall('{"fleet":{"capacity":10}}');
new Floodwall(new URL('file:///etc/floodwall.json'));

async function main(): Promise<void> {
  const d: Decision = await fw.admit({ tenant: Buffer.from('acme'), route: '/search', method: 'GET', cost: 2, critical: false, sandbox: true });
  const allowed: boolean = d.allowed;
  const status: 200 | 403 | 429 | 503 = d.status;
  const limiter: LimiterName | null = d.limiter ?? d.darkLimiter;
  const numbers: number[] = [d.limit, d.remaining, d.reset, d.retryAfter, d.rate, d.concurrencyLimit, d.concurrencyRemaining];
  const headers: Record<string, string> = d.headers;
  const body: string | null = d.body;
  const contentType: string | null = d.contentType;
  const cost: number = d.cost;
  const rule: string | null = d.rule ?? d.darkRule;
  const rules: string[] = d.rules;
  console.log(allowed, status, limiter, numbers, headers, body, contentType, cost, d.failedOpen, d.failReason, rule, rules);
  const flat: HeaderList = ['Authorization', 'Bearer t', 'Accept', '*/*'];
  const pairs: HeaderList = [['Authorization', 'Bearer t'], [Buffer.from('X-API-Key'), Buffer.from('k')]];
  await fw.admit({ headers: flat, peer: '192.0.2.1', route: '/search' });
  await fw.admit({ tenant: null, headers: pairs });
  await fw.admit({});
  const key: string = fw.tenantKey({ headers: flat, peer: null });
  const credential: string | null = fw.requestCredential({ headers: flat, peer: '192.0.2.1' });
  await fw.admit({ headers: flat, peer: '192.0.2.1', verified: credential === 't' });
  fw.tenantKey({ headers: pairs, verified: null });
  const deadline: number = fw.deadlineMs;
  console.log(key, deadline);
  // @ts-expect-error: verified is a boolean
  fw.tenantKey({ headers: flat, verified: 'yes' });
  // @ts-expect-error: the deadline is read-only
  fw.deadlineMs = 10;
  fw.release(d);
  fw.release(d.ticket);
  fw.setMode('request_rate', 'dark');
  const mode: 'enforce' | 'dark' | 'off' = fw.getMode('fleet');
  fw.reportUtilization(0.5);
  console.log(mode, fw.sheddingAmount(), fw.metrics().decisions, fw.prometheus().length);
  try {
    new Floodwall({ request_rate: { rate: -1, burst: 0 } });
  } catch (e) {
    if (e instanceof PolicyError) console.log(e.field, e.code);
    if (e instanceof InvalidArgumentError) console.log(e.field);
  }
  // @ts-expect-error: an unknown limiter name
  fw.setMode('requests', 'dark');
  // @ts-expect-error: header entries are strings or Buffers
  await fw.admit({ headers: [1, 2] });
  // @ts-expect-error: the peer is an address string
  fw.tenantKey({ peer: 127 });
  // @ts-expect-error: cost is a number
  await fw.admit({ tenant: 't', cost: '1' });

  const tiered = new Floodwall({
    request_rate: { rate: 10, burst: 20 },
    tiers: { pro: { rate: 100, burst: 200, limits: [{ name: 'search', routes: ['/search'], rate: 5, burst: 10 }] }, free: { rate: 1, burst: 5 } },
  });
  const admin: Admin = tiered.admin;
  await admin.setOverride('acme', { rate: 50, burst: 100 });
  await admin.removeOverride(Buffer.from('acme'));
  await admin.setTier('acme', 'pro');
  await admin.setTier('acme', null);
  await admin.block('abuser');
  await admin.block('abuser', { seconds: 3600 });
  await admin.unblock('abuser');
  await admin.reset('acme');
  await admin.setMode('fleet', 'dark');
  await admin.setMode('fleet', null);
  const info: TenantInfo = await admin.show('acme');
  const remaining: number | undefined = info.request_rate?.remaining;
  const listed: TenantRecord[] = await admin.list({ limit: 10 });
  const blocked: boolean = d.blocked;
  const until: number | null = d.blockedUntil;
  console.log(info.tier, info.blocked, remaining, listed.length, blocked, until);
  try {
    await admin.show('acme');
  } catch (e) {
    if (e instanceof StoreError) console.log(e.message);
  }
  // @ts-expect-error: rate and burst come in an object
  await admin.setOverride('acme', 50, 100);
  // @ts-expect-error: an unknown limiter name
  await admin.setMode('requests', 'dark');

  const app = express();
  app.use(floodwall(fw, {
    keyGenerator: (req) => req.get('x-tenant'), // undefined: derived by the core
    cost: (req) => (req.method === 'POST' ? 5 : 1),
    critical: false,
    skip: (req) => req.path === '/health',
    handler: (req, res, next, decision) => {
      res.status(decision.status).json({ retryAfter: decision.retryAfter });
    },
  }));
  // req.floodwall is typed on Express' own Request (index.d.ts augments it), with no cast.
  app.get('/', (req, res) => res.json({ remaining: req.floodwall?.remaining }));
  app.get('/limit', (req: express.Request, res: express.Response) => {
    const decided: Decision | undefined = req.floodwall;
    // @ts-expect-error: absent on requests the middleware skipped
    const remaining: number = req.floodwall.remaining;
    res.json({ decided: decided?.allowed, remaining });
  });
  const router = express.Router();
  // @ts-expect-error: a Decision, not a number
  router.get('/', (req) => { req.floodwall = 5; });

  app.use(floodwall(fw)); // no keyGenerator at all
  const issued = new Set(['k-1', 'k-2']);
  app.use(floodwall(fw, { verify: (credential) => issued.has(credential) }));
  app.use(floodwall(fw, { verify: async (credential, req) => issued.has(credential) && req.method === 'GET', verifyTimeout: 20 }));
  // @ts-expect-error: verifyTimeout is milliseconds, a number
  app.use(floodwall(fw, { verify: () => true, verifyTimeout: '20ms' }));
  // Fastify: the plugin with its options; a route's config.floodwall.
  const fapp = Fastify();
  fapp.register(floodwallFastify, { client: fw, keyGenerator: (req) => req.headers['x-tenant'], cost: 2 });
  fapp.register(floodwallFastify, { client: fw, skip: (req) => req.url === '/health', handler: (req, reply, d) => reply.code(d.status).send(d.body) });
  // @ts-expect-error: the client is required
  fapp.register(floodwallFastify, { cost: 2 });
  // @ts-expect-error: cost is a number or a function
  fapp.register(floodwallFastify, { client: fw, cost: 'two' });
  fapp.get('/x', { config: { floodwall: { cost: 3, critical: true } } }, async () => 'x');
  const routeOwn: import('floodwall').FastifyRouteOptions = { skip: true, sandbox: () => false };
  // Koa: ctx in, a promise out; the route of a @koa/router Router.
  const koaMiddleware = floodwallKoa(fw, { keyGenerator: (ctx) => ctx.path, cost: 1, handler: (ctx, next, d) => { ctx.status = d.status; } });
  const pending: Promise<unknown> = koaMiddleware({} as import('floodwall').KoaLikeContext, async () => undefined);
  // @ts-expect-error: verifyTimeout is milliseconds, a number
  floodwallKoa(fw, { verify: () => true, verifyTimeout: '20ms' });
  const family: string = fw.requestRoute({ route: '/orders/{id}', path: '/orders/42' });
  console.log(routeOwn, pending, family, fw.admit({ tenant: 't', route: '/orders/:id', path: '/orders/42' }));
  const wait: number = backoff(3, { base: backoffDefaults.base / 2, cap: backoffDefaults.cap, retryAfter: '2', random: Math.random });
  const ms: number | null = parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT');
  const res = await retry(() => fetch('http://127.0.0.1:1/'), { retries: 2, onRetry: ({ wait: w }) => console.log(w) });
  console.log(wait, ms, res.status);
  fw.close();
}
void main;
