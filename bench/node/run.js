'use strict';
// node bench/node/run.js [--quick]
// 1. Memory store: what one `await fw.admit()` costs beyond the promise itself and the core's own work.
// 2. The Express middleware called alone on the memory store (no socket, no HTTP parsing: a real
//    http.ServerResponse per request), floodwall's (the README's example policy, with the default five
//    limit headers and with "headers": "ietf") against express-rate-limit's (draft-7 headers, the X-API-Key
//    as the key, as bench/http/express_app.js configures both): what each adds to a request in JavaScript.
// 3. Redis: admits/s from Node, floodwall against rate-limiter-flexible (ioredis) on the same redis-server,
//    in one run, with the same number of requests in flight.
// Starts its own redis-server on a free port (or uses REDIS_URL, and REDIS_PID for its CPU per call).
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Floodwall } = require('../..');
const { startRedis } = require('../../tests/node/helpers');

const quick = process.argv.includes('--quick');
const MEM_N = quick ? 200_000 : 2_000_000;
const REDIS_N = quick ? 20_000 : 100_000;
const IN_FLIGHT = 256;
const TENANTS = 1000;
const ROUNDS = quick ? 1 : 3;
const REDIS_ROUNDS = quick ? 1 : 5;

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const nsPerOp = (start, n) => Number(process.hrtime.bigint() - start) / n;

async function timeAwait(n, fn) {
  for (let i = 0; i < 10_000; i++) await fn(); // warm up the JIT
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await fn();
  return nsPerOp(start, n);
}

const MEMORY_POLICY = { request_rate: { rate: 1e6, burst: 1e9 } };
const ROOT = path.resolve(__dirname, '..', '..');

// The core's own cost, measured outside Node: fw_admit + fw_release in a loop of a tiny C++ program
// (bench/python/capi_admit.cpp, the same baseline as the Python benchmark's), linked with the
// libfloodwall_static.a that `npm install` built for the addon (its Release build).
function capiAdmitProgram() {
  const lib = path.join(ROOT, 'build-node', 'core', 'libfloodwall_static.a');
  if (!fs.existsSync(lib)) throw new Error(`${lib} is missing: run \`npm install\` (or npm run build) first`);
  const src = path.join(ROOT, 'bench', 'python', 'capi_admit.cpp');
  const exe = path.join(ROOT, 'build-node', 'bench', 'capi_admit');
  const mtime = (f) => fs.statSync(f).mtimeMs;
  if (!fs.existsSync(exe) || mtime(exe) < Math.max(mtime(src), mtime(lib))) {
    fs.mkdirSync(path.dirname(exe), { recursive: true });
    // What libfloodwall_static.a needs beside it: hiredis and OpenSSL (rediss://).
    const libs = execFileSync('pkg-config', ['--libs', 'hiredis', 'openssl'], { encoding: 'utf8' }).trim().split(/\s+/);
    execFileSync('c++', ['-std=c++20', '-O2', '-I', path.join(ROOT, 'capi', 'include'), src, lib, ...libs,
      '-lpthread', '-o', exe], { stdio: 'inherit' });
  }
  return exe;
}

// Nanoseconds per fw_admit + fw_release in C.
function capiNs(exe, n) {
  return Number(execFileSync(exe, [String(n), JSON.stringify(MEMORY_POLICY)], { encoding: 'utf8' }));
}

async function memory() {
  const fw = new Floodwall(MEMORY_POLICY);
  const capi = capiAdmitProgram();
  const request = { tenant: 'acme' };
  const value = {};
  const best = { promise: Infinity, core: Infinity, admit: Infinity, headers: Infinity };
  for (let round = 0; round < ROUNDS; round++) {
    best.promise = Math.min(best.promise, await timeAwait(MEM_N, () => Promise.resolve(value)));
    best.core = Math.min(best.core, capiNs(capi, MEM_N));
    best.admit = Math.min(best.admit, await timeAwait(MEM_N, () => fw.admit(request)));
    best.headers = Math.min(best.headers, await timeAwait(MEM_N / 4, async () => (await fw.admit(request)).headers));
  }
  fw.close();
  return best;
}

// The middleware called alone, ns per request: n requests through `mw`, each a real http.ServerResponse
// whose 'close' is emitted once next() was called (a concurrency slot is released then). The request
// rotates over TENANTS X-API-Keys among a browser's usual headers; the round's own ServerResponse and
// promise are timed too (the `none` middleware only calls next()).
async function middlewareNs(mw, n) {
  const http = require('node:http');
  const socket = { remoteAddress: '203.0.113.9', on() {}, once() {}, removeListener() {} };
  const reqs = [];
  for (let i = 0; i < TENANTS; i++) {
    const req = new http.IncomingMessage(socket);
    req.method = 'GET';
    req.url = '/v1/things';
    req.rawHeaders = ['Host', 'api.example.com', 'User-Agent', 'Mozilla/5.0 (X11; Linux x86_64)', 'Accept', '*/*',
      'X-API-Key', `key-${i}`, 'Accept-Encoding', 'gzip, deflate, br', 'Connection', 'keep-alive'];
    req.headers = Object.fromEntries(Array.from({ length: req.rawHeaders.length / 2 }, (_, j) =>
      [req.rawHeaders[2 * j].toLowerCase(), req.rawHeaders[2 * j + 1]]));
    reqs.push(req);
  }
  const one = async (i) => {
    const req = reqs[i % TENANTS];
    const res = new http.ServerResponse(req);
    await new Promise((resolve, reject) => mw(req, res, (err) => (err ? reject(err) : resolve())));
    res.emit('close');
  };
  for (let i = 0; i < 20_000; i++) await one(i); // warm up the JIT
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await one(i);
  return nsPerOp(start, n);
}

async function middleware() {
  const { express: floodwall } = require('../..');
  const { rateLimit } = require('express-rate-limit');
  const policy = { store: 'memory://', request_rate: { rate: 1e6, burst: 1e6 }, concurrency: { limit: 20 } };
  const fw = new Floodwall(policy);
  const fwIetf = new Floodwall({ ...policy, headers: 'ietf' });
  const issued = new Set(Array.from({ length: TENANTS }, (_, i) => `key-${i}`));
  const verify = (key) => issued.has(key);
  const contenders = {
    'none (next() alone)': (req, res, next) => next(),
    'express-rate-limit (memory store, draft-7 headers)': rateLimit({ windowMs: 60_000, limit: 1e9,
      standardHeaders: 'draft-7', legacyHeaders: false, keyGenerator: (req) => req.headers['x-api-key'], validate: false }),
    // Keyed on the X-API-Key as express-rate-limit is here: through a verify hook that looks it up.
    'floodwall express() (memory://, the five headers)': floodwall(fw, { verify }),
    'floodwall express() (memory://, headers: ietf)': floodwall(fwIetf, { verify }),
  };
  const n = quick ? 20_000 : 200_000;
  const best = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, mw] of Object.entries(contenders)) best[name] = Math.min(best[name] ?? Infinity, await middlewareNs(mw, n));
  }
  fw.close();
  fwIetf.close();
  return best;
}

// CPU seconds another process has used (utime + stime from /proc, in USER_HZ = 100 ticks); null off Linux.
function readCpu(pid) {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}

// Keeps `inFlight` calls of op() running until n have completed. Returns calls per second, and the CPU
// microseconds per call that this process (JS thread and floodwall's I/O thread) and redis-server spent:
// on a shared 2-core machine the rates swing with the neighbours' load, the CPU costs much less.
async function throughput(n, inFlight, op, redisPid) {
  let started = 0;
  const redis0 = redisPid ? readCpu(redisPid) : null;
  const node0 = process.cpuUsage();
  const start = process.hrtime.bigint();
  const worker = async () => {
    while (started < n) {
      started++;
      await op(started);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const rate = n / (Number(process.hrtime.bigint() - start) / 1e9);
  const node = process.cpuUsage(node0);
  const redis = redis0 === null ? null : ((readCpu(redisPid) - redis0) * 1e6) / n;
  return { rate, nodeUs: (node.user + node.system) / n, redisUs: redis };
}

async function redisBench(url, redisPid) {
  const Redis = require('ioredis');
  const { RateLimiterRedis } = require('rate-limiter-flexible');
  const { port } = new URL(url);
  const ioredis = new Redis({ host: '127.0.0.1', port: Number(port), enableAutoPipelining: false });
  const ioredisPipelined = new Redis({ host: '127.0.0.1', port: Number(port), enableAutoPipelining: true });
  const rlf = new RateLimiterRedis({ storeClient: ioredis, points: 1e9, duration: 60, keyPrefix: 'rlf' });
  const rlfPipelined = new RateLimiterRedis({ storeClient: ioredisPipelined, points: 1e9, duration: 60, keyPrefix: 'rlfp' });
  // The shipped Redis options (deadline, breaker, fallback): what users get. A decision Redis did not
  // answer is counted beside the figures.
  const fw = new Floodwall({ store: url, request_rate: { rate: 1e6, burst: 1e9 } });
  const fwConc = new Floodwall({ store: url, prefix: 'fwc', request_rate: { rate: 1e6, burst: 1e9 },
    concurrency: { limit: 1e6 } });
  let failedOpen = 0, notStore = 0, decided = 0;
  const count = (d) => {
    decided++;
    if (d.failedOpen) failedOpen++;
    if (d.failedOpen || d.degraded || d.failReason !== null) notStore++;
  };
  const cases = {
    'floodwall (token bucket)': async (i) => count(await fw.admit({ tenant: `t${i % TENANTS}` })),
    'floodwall (bucket + concurrency, admit + release)': async (i) => {
      const d = await fwConc.admit({ tenant: `t${i % TENANTS}` });
      count(d);
      fwConc.release(d);
    },
    'rate-limiter-flexible + ioredis': (i) => rlf.consume(`t${i % TENANTS}`),
    'rate-limiter-flexible + ioredis (auto-pipelining)': (i) => rlfPipelined.consume(`t${i % TENANTS}`),
  };
  const rounds = {};
  for (const op of Object.values(cases)) await throughput(2000, IN_FLIGHT, op); // warm up, load scripts
  failedOpen = notStore = decided = 0;
  for (let round = 0; round < REDIS_ROUNDS; round++) {
    // Interleaved rounds, so that a busy moment on this shared machine does not fall on one side only;
    // every other round runs the cases in reverse, so that a drift within a round falls on both sides.
    const order = Object.entries(cases);
    if (round % 2) order.reverse();
    for (const [name, op] of order) {
      (rounds[name] ||= []).push(await throughput(REDIS_N, IN_FLIGHT, op, redisPid));
    }
  }
  fw.close();
  fwConc.close();
  ioredis.disconnect();
  ioredisPipelined.disconnect();
  return { rounds, failedOpen, notStore, decided };
}

// One event loop, `inFlight` admits in flight on one tenant of a bucket that binds (rate 2,000/s,
// burst 200), shipped defaults: what was admitted against burst + rate x time, and who decided.
async function oneTenant(url, inFlight, seconds, prefix) {
  const fw = new Floodwall({ store: url, prefix, request_rate: { rate: 2000, burst: 200 } });
  const tally = { decisions: 0, admitted: 0, notStore: 0, failedOpen: 0 };
  try {
    await fw.admit({ tenant: 'warm' });
    tally.startMs = Date.now();
    const start = process.hrtime.bigint();
    const end = start + BigInt(Math.round(seconds * 1e9));
    const worker = async () => {
      while (process.hrtime.bigint() < end) {
        const d = await fw.admit({ tenant: 'hot' });
        tally.decisions++;
        if (d.allowed) tally.admitted++;
        if (d.failedOpen) tally.failedOpen++;
        if (d.degraded || d.failedOpen || d.failReason !== null) tally.notStore++;
      }
    };
    await Promise.all(Array.from({ length: inFlight }, worker));
    tally.elapsed = Number(process.hrtime.bigint() - start) / 1e9;
    tally.endMs = Date.now();
  } finally {
    fw.close();
  }
  return tally;
}

// The same on one tenant from several Node processes at once (this script, re-run as a child).
async function oneTenantFleet(url, procs, inFlight, seconds) {
  const { spawn } = require('node:child_process');
  const prefix = `fleet${Date.now()}`;
  const runs = await Promise.all(Array.from({ length: procs }, () => new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [__filename, '--one-tenant-child', url, String(inFlight), String(seconds), prefix],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (b) => { out += b; });
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`child exited ${code}`))));
  })));
  const sum = { decisions: 0, admitted: 0, notStore: 0, failedOpen: 0 };
  for (const r of runs) for (const k of Object.keys(sum)) sum[k] += r[k];
  // The bucket is shared: the bound runs from the first process's start to the last one's end.
  sum.elapsed = (Math.max(...runs.map((r) => r.endMs)) - Math.min(...runs.map((r) => r.startMs))) / 1000;
  return sum;
}

function bound(t) {
  return 200 + 2000 * t.elapsed;
}

function row(label, value, note = '') {
  console.log(`  ${label.padEnd(52)} ${value.padStart(12)}${note}`);
}

async function main() {
  console.log(`floodwall Node bench: node ${process.version}, ${os.availableParallelism()} cores, load ${os.loadavg()[0].toFixed(1)}` +
    `${quick ? ' (quick)' : ''}; best of ${ROUNDS}`);
  const m = await memory();
  const overhead = m.admit - m.promise - m.core;
  console.log(`\nmemory store, ${MEM_N} sequential awaits               ns/call`);
  row('await Promise.resolve(value)  (the promise itself)', m.promise.toFixed(0));
  row('fw_admit in a C loop          (the core itself)', m.core.toFixed(0));
  row('await fw.admit({ tenant })', m.admit.toFixed(0));
  row('binding overhead = admit - promise - core', overhead.toFixed(0), overhead < 1000 ? '  (goal < 1000: met)' : '  (goal < 1000: MISSED)');
  row('await fw.admit() and read .headers', m.headers.toFixed(0), '  (formatting is lazy: paid only when used)');

  const mw = await middleware();
  const none = mw['none (next() alone)'];
  console.log(`\n${`the Express middleware called alone, memory store, ${ROUNDS > 1 ? 'best of ' + ROUNDS : 'one round'}`.padEnd(54)}` +
    ' ns/request   over none');
  for (const [name, ns] of Object.entries(mw)) row(name, ns.toFixed(0), `${(ns - none).toFixed(0).padStart(11)}`);

  const ownRedis = process.env.REDIS_URL ? null : await startRedis();
  try {
    const url = process.env.REDIS_URL || ownRedis.url;
    // bench/run.sh shares its redis-server and says which process it is: its CPU per call is the
    // steadiest figure on a shared box.
    const redisPid = ownRedis ? ownRedis.pid : Number(process.env.REDIS_PID) || null;
    const { rounds, failedOpen, notStore, decided } = await redisBench(url, redisPid);
    console.log(`\nRedis (${url}), ${REDIS_N} admits, ${IN_FLIGHT} in flight, ${TENANTS} tenants; medians of ${REDIS_ROUNDS} alternating rounds`);
    console.log(`${' '.repeat(54)}    admits/s        min-max  node us/op  redis us/op`);
    const med = (name, key) => median(rounds[name].map((r) => r[key]));
    for (const [name, rs] of Object.entries(rounds)) {
      const rates = rs.map((r) => r.rate);
      const spread = `${Math.round(Math.min(...rates))}-${Math.round(Math.max(...rates))}`;
      const redisUs = rs[0].redisUs === null ? '-' : med(name, 'redisUs').toFixed(1);
      row(name, Math.round(med(name, 'rate')).toString(),
        `${spread.padStart(15)}${med(name, 'nodeUs').toFixed(1).padStart(12)}${redisUs.padStart(13)}`);
    }
    const fwName = 'floodwall (token bucket)';
    for (const peer of ['rate-limiter-flexible + ioredis', 'rate-limiter-flexible + ioredis (auto-pipelining)']) {
      // The median of each round's own ratio: the two ran in the same minute of a shared box.
      const ratios = rounds[fwName].map((r, i) => r.rate / rounds[peer][i].rate);
      const redisNote = rounds[fwName][0].redisUs === null ? ''
        : `, Redis CPU per admit ${(med(peer, 'redisUs') / med(fwName, 'redisUs')).toFixed(2)}x lower`;
      row(`floodwall / ${peer.replace('rate-limiter-flexible', 'rlf')}`, `${median(ratios).toFixed(2)}x`,
        `  (rounds ${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}; Node CPU per admit ` +
        `${(med(peer, 'nodeUs') / med(fwName, 'nodeUs')).toFixed(2)}x lower${redisNote})`);
    }
    row('floodwall decisions that failed open', String(failedOpen), '  (0: every figure above is a real decision)');
    row('floodwall decisions Redis did not answer', `${((100 * notStore) / decided).toFixed(4)}%`,
      `  (${notStore} of ${decided}; the local fallback decided them)`);

    const seconds = quick ? 1 : 3;
    console.log(`\nOne tenant (rate 2000/s, burst 200), shipped defaults, ${seconds} s each: admitted against burst + rate x time`);
    console.log(`${' '.repeat(54)} decisions/s  not by Redis  failed open  admitted / bound`);
    const report = (label, t) => row(label, Math.round(t.decisions / t.elapsed).toString(),
      `${`${((100 * t.notStore) / t.decisions).toFixed(3)}%`.padStart(14)}${String(t.failedOpen).padStart(13)}` +
      `${`${t.admitted} / ${Math.round(bound(t))} = ${(t.admitted / bound(t)).toFixed(3)}`.padStart(28)}`);
    for (const n of [1, 256, 1024]) report(`1 process, ${n} admits in flight`, await oneTenant(url, n, seconds, `one${n}`));
    report('4 processes x 256 admits in flight', await oneTenantFleet(url, 4, 256, seconds));
  } finally {
    if (ownRedis) await ownRedis.stop();
  }
}

if (process.argv[2] === '--one-tenant-child') {
  const [url, inFlight, seconds, prefix] = process.argv.slice(3);
  oneTenant(url, Number(inFlight), Number(seconds), prefix).then((t) => process.stdout.write(JSON.stringify(t)),
    (err) => { console.error(err); process.exit(1); });
} else main().catch((err) => {
  console.error(err);
  process.exit(1);
});
