'use strict';
// node bench/http/inject.js [--framework fastify|express|koa] [--rounds N] [--requests N] [--only a,b]
//                           [--root ROOT] [--against ROOT]
//
// The CPU a limiter adds to each request of a Fastify, Express or Koa app, in process: the apps of
// bench/http/<framework>_app.js (build()) driven by light-my-request (fastify.inject for Fastify), with no
// socket, so that the figure is the limiter's and the framework's own CPU and not the kernel's. The
// incumbents: @fastify/rate-limit (frl), express-rate-limit (erl), koa-ratelimit (krl), each on its memory store. Every contender's app lives in this one process, warmed up first; then
// round after round each injects a batch of --requests requests one after the other (X-API-Key over 1,000
// tenants, no limit ever reached), timed with process.cpuUsage(), the contenders in a rotated order each
// round, so that the box's other work (the wall clock here is shared) falls on every contender alike.
// Run with node --expose-gc and each batch starts on a collected heap. Reported: each contender's median
// CPU per request, and the median over the rounds of what it added to Fastify alone in that round.
// --against ROOT also runs every floodwall contender with the floodwall package at ROOT (a copy of an
// earlier version, with its built addon in ROOT/build-node), in the same rounds, to measure a change;
// --root ROOT takes floodwall from ROOT instead of this checkout. Prints JSON; node --cpu-prof says where
// the time goes.
const path = require('node:path');

const args = process.argv.slice(2);
const flag = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const TENANTS = 1000;
const FRAMEWORK = flag('--framework', 'fastify');
const INCUMBENT = { fastify: 'frl-memory', express: 'erl-memory', koa: 'krl-memory' }[FRAMEWORK];
if (INCUMBENT === undefined) throw new Error(`--framework: fastify, express or koa (got ${FRAMEWORK})`);
const LIMITERS = ['none', INCUMBENT, 'floodwall-memory-ietf-key', 'floodwall-memory-ietf', 'floodwall-memory'];
const KEYS = Array.from({ length: TENANTS }, (_, i) => `tenant-${i}`);

// The app of `limiter`, ready, and its inject(options) (a promise of the response) and close().
async function app(limiter, floodwallModule) {
  const { build } = require(`./${FRAMEWORK}_app`);
  const built = await build(limiter, { floodwallModule });
  if (FRAMEWORK === 'fastify') {
    await built.ready();
    return { inject: (o) => built.inject(o), close: () => built.close() };
  }
  const inject = require('light-my-request');
  const dispatch = FRAMEWORK === 'koa' ? built.callback() : built;
  return { inject: (o) => inject(dispatch, o), close: () => built.close() };
}

// One contender's app, built and warmed up; run(n) injects n requests one after the other.
async function contender(c) {
  const floodwallModule = c.limiter.startsWith('floodwall-') ? require(c.root) : null;
  const { inject, close } = await app(c.limiter, floodwallModule);
  let i = 0;
  const run = async (n) => {
    for (const end = i + n; i < end; i++) {
      const res = await inject({ method: 'GET', url: '/', headers: { 'x-api-key': KEYS[i % TENANTS] } });
      if (res.statusCode !== 200) throw new Error(`${c.name}: status ${res.statusCode}: ${res.body}`);
      // Injected requests settle in microtasks, so a loop of them never lets the event loop turn: the
      // immediates each one queues (node:http's, Fastify's) would pile up, each holding its request.
      if (i % 64 === 63) await new Promise(setImmediate);
    }
  };
  await run(20_000); // warm-up: JIT
  return { ...c, close, run };
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function main() {
  const rounds = Number(flag('--rounds', 40));
  const batch = Number(flag('--requests', 2000));
  const only = flag('--only', '');
  const against = flag('--against', '');
  const here = path.resolve(flag('--root', path.join(__dirname, '..', '..')));
  let list = LIMITERS.map((limiter) => ({ name: limiter, limiter, root: here }));
  if (only) list = list.filter((c) => c.limiter === 'none' || only.split(',').includes(c.limiter));
  if (against) {
    const root = path.resolve(against);
    for (const c of list.filter((x) => x.limiter.startsWith('floodwall-'))) list.push({ name: `${c.limiter} (${against})`, limiter: c.limiter, root });
  }
  const contenders = [];
  for (const c of list) contenders.push(await contender(c));
  const gc = typeof global.gc === 'function' ? global.gc : () => {};
  const cpu = contenders.map(() => []);
  for (let r = 0; r < rounds; r++) {
    // Each round in another order (rotated), so that no contender always follows the same one.
    for (let j = 0; j < contenders.length; j++) {
      const k = (j + r) % contenders.length;
      gc(); // what the previous batch left is collected outside the timing
      const t0 = process.cpuUsage();
      await contenders[k].run(batch);
      const t = process.cpuUsage(t0);
      cpu[k].push((t.user + t.system) / batch);
    }
  }
  for (const c of contenders) await c.close();
  const none = contenders.findIndex((c) => c.limiter === 'none');
  const rows = contenders.map((c, k) => ({
    name: c.name,
    cpu_us: median(cpu[k]),
    added_us: median(cpu[k].map((x, r) => x - cpu[none][r])),
  }));
  const incumbent = rows.find((x) => x.name === INCUMBENT);
  for (const row of rows) if (incumbent && row.name.startsWith('floodwall-')) row.vs_incumbent = row.added_us / incumbent.added_us;
  for (const row of rows) {
    process.stderr.write(`bench/http/inject: ${FRAMEWORK} ${row.name}: ${row.cpu_us.toFixed(1)} us of CPU per request, ${row.added_us.toFixed(1)} us added` +
      `${row.vs_incumbent === undefined ? '' : ` (${row.vs_incumbent.toFixed(2)}x ${INCUMBENT}'s)`}\n`);
  }
  console.log(JSON.stringify({ framework: FRAMEWORK, batch, rounds, contenders: rows }, null, 2));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
