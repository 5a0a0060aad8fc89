'use strict';
// node bench/http/run.js [--quick] [--rounds N] [--seconds S] [--only a,b] [--markdown FILE]
// (--only: contenders whose name contains a, or whose limiter or framework:limiter is a)
//
// Middleware over real HTTP: each app (bench/http/express_app.js, fastify_app.js, koa_app.js, starlette_app.py under uvicorn, config.ru
// under Puma) behind each limiter is started as a process of its own, loaded by autocannon (64 connections,
// X-API-Key rotating over 1,000 tenants, limits never reached), one after the other and round after round
// (alternating, so that the box's other work falls on every contender alike). Reported per contender, medians over the rounds: requests/s, the overhead per
// request against the same framework with no limiter (1/rps - 1/rps_none), p99 latency, the app's and the
// redis-server's CPU per request (from /proc/PID/stat), and the share of floodwall's decisions the store did
// not answer (the app's metrics). Needs a redis-server: FW_BENCH_REDIS (URL) and FW_BENCH_REDIS_PID, else
// it starts its own. Prints the results as JSON; --markdown FILE writes the table.
const { spawn, spawnSync } = require('node:child_process');
const net = require('node:net');
const fs = require('node:fs');
const path = require('node:path');
const autocannon = require('autocannon');
const { startRedis, freePort } = require('../../tests/node/helpers');

const args = process.argv.slice(2);
const flag = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const quick = args.includes('--quick');
const ROUNDS = Number(flag('--rounds', quick ? 1 : 3));
const SECONDS = Number(flag('--seconds', quick ? 2 : 5));
const CONNECTIONS = 64;
const TENANTS = 1000;
const HERE = __dirname;
const ROOT = path.resolve(HERE, '..', '..');

// Each contender: the framework it belongs to (its overhead is against that framework's "none"), and how
// to start it: a command that says "listening on PORT", or (port) => a command that serves on that port.
const PYTHON = process.env.FW_BENCH_PYTHON || path.join(ROOT, 'build-python', 'venv', 'bin', 'python');
const starlette = (port) => [PYTHON, [path.join(HERE, 'starlette_app.py')], { FW_HTTP_PORT: String(port) }];
const puma = (port) => ['puma', ['-b', `tcp://127.0.0.1:${port}`, '-t', '4:4', path.join(HERE, 'config.ru')], {}];
const CONTENDERS = [
  { name: 'express', framework: 'express', limiter: 'none', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + express-rate-limit (memory)', framework: 'express', limiter: 'erl-memory', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + floodwall (memory://)', framework: 'express', limiter: 'floodwall-memory', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + express-rate-limit + rate-limit-redis', framework: 'express', limiter: 'erl-redis', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + floodwall (redis://)', framework: 'express', limiter: 'floodwall-redis', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + floodwall (redis://, request rate alone)', framework: 'express', limiter: 'floodwall-redis-rate', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + floodwall (memory://, headers: ietf)', framework: 'express', limiter: 'floodwall-memory-ietf', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + floodwall (memory://, headers: ietf, keyGenerator, no concurrency: like for like)', framework: 'express', limiter: 'floodwall-memory-ietf-key', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + floodwall (redis://, headers: ietf)', framework: 'express', limiter: 'floodwall-redis-ietf', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + next() alone (a floor)', framework: 'express', limiter: 'floor-next', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + the five limit headers alone (a floor)', framework: 'express', limiter: 'floor-headers', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'fastify', framework: 'fastify', limiter: 'none', cmd: ['node', [path.join(HERE, 'fastify_app.js')]] },
  { name: 'fastify + @fastify/rate-limit (memory)', framework: 'fastify', limiter: 'frl-memory', cmd: ['node', [path.join(HERE, 'fastify_app.js')]] },
  { name: 'fastify + floodwall (memory://)', framework: 'fastify', limiter: 'floodwall-memory', cmd: ['node', [path.join(HERE, 'fastify_app.js')]] },
  { name: 'fastify + floodwall (memory://, headers: ietf)', framework: 'fastify', limiter: 'floodwall-memory-ietf', cmd: ['node', [path.join(HERE, 'fastify_app.js')]] },
  { name: 'fastify + floodwall (memory://, headers: ietf, keyGenerator, no concurrency: like for like)', framework: 'fastify', limiter: 'floodwall-memory-ietf-key', cmd: ['node', [path.join(HERE, 'fastify_app.js')]] },
  { name: 'fastify + @fastify/rate-limit (redis)', framework: 'fastify', limiter: 'frl-redis', cmd: ['node', [path.join(HERE, 'fastify_app.js')]] },
  { name: 'fastify + floodwall (redis://)', framework: 'fastify', limiter: 'floodwall-redis', cmd: ['node', [path.join(HERE, 'fastify_app.js')]] },
  { name: 'fastify + floodwall (redis://, headers: ietf)', framework: 'fastify', limiter: 'floodwall-redis-ietf', cmd: ['node', [path.join(HERE, 'fastify_app.js')]] },
  { name: 'koa', framework: 'koa', limiter: 'none', cmd: ['node', [path.join(HERE, 'koa_app.js')]] },
  { name: 'koa + koa-ratelimit (memory)', framework: 'koa', limiter: 'krl-memory', cmd: ['node', [path.join(HERE, 'koa_app.js')]] },
  { name: 'koa + floodwall (memory://)', framework: 'koa', limiter: 'floodwall-memory', cmd: ['node', [path.join(HERE, 'koa_app.js')]] },
  { name: 'koa + floodwall (memory://, headers: ietf)', framework: 'koa', limiter: 'floodwall-memory-ietf', cmd: ['node', [path.join(HERE, 'koa_app.js')]] },
  { name: 'koa + floodwall (memory://, headers: ietf, keyGenerator, no concurrency: like for like)', framework: 'koa', limiter: 'floodwall-memory-ietf-key', cmd: ['node', [path.join(HERE, 'koa_app.js')]] },
  { name: 'koa + koa-ratelimit (redis)', framework: 'koa', limiter: 'krl-redis', cmd: ['node', [path.join(HERE, 'koa_app.js')]] },
  { name: 'koa + floodwall (redis://)', framework: 'koa', limiter: 'floodwall-redis', cmd: ['node', [path.join(HERE, 'koa_app.js')]] },
  { name: 'koa + floodwall (redis://, headers: ietf)', framework: 'koa', limiter: 'floodwall-redis-ietf', cmd: ['node', [path.join(HERE, 'koa_app.js')]] },
  { name: 'starlette (uvicorn)', framework: 'starlette', limiter: 'none', cmd: starlette },
  { name: 'starlette + limits (async redis, fixed window)', framework: 'starlette', limiter: 'limits-redis', cmd: starlette },
  { name: 'starlette + floodwall (memory://)', framework: 'starlette', limiter: 'floodwall-memory', cmd: starlette },
  { name: 'starlette + floodwall (redis://)', framework: 'starlette', limiter: 'floodwall-redis', cmd: starlette },
  { name: 'rack (puma, 4 threads)', framework: 'rack', limiter: 'none', cmd: puma },
  { name: 'rack + rack-attack (redis cache store)', framework: 'rack', limiter: 'rack-attack-redis', cmd: puma },
  { name: 'rack + floodwall (memory://)', framework: 'rack', limiter: 'floodwall-memory', cmd: puma },
  { name: 'rack + floodwall (redis://)', framework: 'rack', limiter: 'floodwall-redis', cmd: puma },
];

function median(xs) {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

// utime + stime of a process, in seconds.
function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ: 100 on Linux
}

// Resolves once something accepts connections on the port (within 60 s: a gem build may come first).
async function accepting(port, child, name) {
  const until = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name}: exited with ${child.exitCode} before it served`);
    const ok = await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => resolve(s.end() && true));
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`${name}: nothing accepted connections on port ${port} within 60 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function startApp(c, redisUrl) {
  const env = { ...process.env, FW_HTTP_LIMITER: c.limiter, FW_BENCH_REDIS: redisUrl };
  if (typeof c.cmd === 'function') {
    const port = await freePort();
    const [cmd, argv, extra] = c.cmd(port);
    const child = spawn(cmd, argv, { cwd: ROOT, env: { ...env, ...extra }, stdio: ['ignore', 'ignore', 'inherit'] });
    await accepting(port, child, c.name);
    return { child, port };
  }
  const [cmd, argv] = c.cmd;
  const child = spawn(cmd, argv, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${c.name}: did not say "listening on" within 30 s`)), 30_000);
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const m = /listening on (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        child.stdout.removeAllListeners('data');
        child.stdout.resume();
        resolve({ child, port: Number(m[1]) });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${c.name}: exited with ${code} before it served`));
    });
  });
}

function load(port, seconds) {
  let i = 0;
  return autocannon({
    url: `http://127.0.0.1:${port}/`,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [{
      setupRequest: (req) => {
        req.headers = { ...req.headers, 'x-api-key': `tenant-${i++ % TENANTS}` };
        return req;
      },
    }],
  });
}

// The app's count of floodwall's decisions by source (null for the other limiters).
async function sources(port) {
  const res = await fetch(`http://127.0.0.1:${port}/__sources`);
  return res.json();
}

async function runOne(c, redis) {
  const { child, port } = await startApp(c, redis.url);
  try {
    await load(port, 1); // warm-up: JIT, connections, scripts loaded
    const s0 = await sources(port);
    const app0 = cpuSeconds(child.pid);
    const redis0 = cpuSeconds(redis.pid);
    const r = await load(port, SECONDS);
    const appCpu = cpuSeconds(child.pid) - app0;
    const redisCpu = cpuSeconds(redis.pid) - redis0;
    const s1 = await sources(port);
    let notAnswered = null;
    if (s0 && s1) {
      const d = (k) => s1[k] - s0[k];
      const total = d('store') + d('fallback') + d('failed_open') + d('refused');
      notAnswered = total ? (d('fallback') + d('failed_open') + d('refused')) / total : 0;
    }
    const n = r.requests.total;
    // A limit reached, or an app that failed: never a figure. Connection errors (Puma closes a keep-alive
    // connection it has no thread for; autocannon reconnects) are counted and shown, not hidden.
    if (r.non2xx) throw new Error(`${c.name}: ${r.non2xx} non-2xx answers: a limit was reached or the app failed`);
    return {
      rps: n / r.duration,
      p99_ms: r.latency.p99,
      app_cpu_us: (appCpu / n) * 1e6,
      redis_cpu_us: (redisCpu / n) * 1e6,
      not_answered: notAnswered,
      connection_errors: r.errors + r.timeouts,
      requests: n,
    };
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
  }
}

async function main() {
  const only = flag('--only', '');
  const contenders = only ? CONTENDERS.filter((c) => only.split(',').some((o) => c.name.includes(o) || c.limiter === o || `${c.framework}:${c.limiter}` === o)) : CONTENDERS;
  let redis = process.env.FW_BENCH_REDIS ? { url: process.env.FW_BENCH_REDIS, pid: Number(process.env.FW_BENCH_REDIS_PID) } : null;
  let own = null;
  if (!redis || !redis.pid) {
    own = await startRedis();
    redis = { url: own.url, pid: own.pid };
  }
  // The Rack apps load the floodwall gem, built and installed first when it is not (minutes, not timed).
  if (contenders.some((c) => c.framework === 'rack' && c.limiter.startsWith('floodwall-'))) {
    const r = spawnSync('ruby', ['-e', 'require_relative "bench/ruby/load_floodwall"; load_floodwall'], { cwd: ROOT, stdio: 'inherit' });
    if (r.status !== 0) throw new Error('bench/http: the floodwall gem could not be built and loaded for the Rack apps');
  }
  const rounds = contenders.map(() => []);
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < contenders.length; k++) {
        const r = await runOne(contenders[k], redis);
        rounds[k].push(r);
        process.stderr.write(`bench/http: round ${round + 1} ${contenders[k].name}: ${r.rps.toFixed(0)} requests/s, p99 ${r.p99_ms} ms, ` +
          `app ${r.app_cpu_us.toFixed(1)} us, redis ${r.redis_cpu_us.toFixed(1)} us of CPU per request` +
          `${r.not_answered === null ? '' : `, ${(r.not_answered * 100).toFixed(4)}% not answered by the store`}` +
          `${r.connection_errors ? `, ${r.connection_errors} connection errors` : ''}\n`);
      }
    }
  } finally {
    if (own) await own.stop();
  }
  const rows = contenders.map((c, k) => ({
    name: c.name,
    framework: c.framework,
    limiter: c.limiter,
    rps: median(rounds[k].map((r) => r.rps)),
    p99_ms: median(rounds[k].map((r) => r.p99_ms)),
    app_cpu_us: median(rounds[k].map((r) => r.app_cpu_us)),
    redis_cpu_us: median(rounds[k].map((r) => r.redis_cpu_us)),
    // The largest share of the rounds: a benchmark that hides fallback decisions flatters the store.
    not_answered: rounds[k][0].not_answered === null ? null : Math.max(...rounds[k].map((r) => r.not_answered)),
    rounds: rounds[k],
  }));
  for (const row of rows) {
    const none = rows.find((x) => x.framework === row.framework && x.limiter === 'none');
    // Overhead per request, median over the rounds of each round's own pair.
    row.overhead_us = none ? median(rounds[rows.indexOf(row)].map((r, i) => (1 / r.rps - 1 / none.rounds[i].rps) * 1e6)) : NaN;
  }
  const result = { connections: CONNECTIONS, tenants: TENANTS, seconds: SECONDS, rounds: ROUNDS, contenders: rows };
  console.log(JSON.stringify(result, null, 2));
  const md = flag('--markdown', '');
  if (md) fs.writeFileSync(md, markdown(result));
}

function markdown(result) {
  const f = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : '-');
  const lines = [
    `autocannon, ${result.connections} connections, X-API-Key over ${result.tenants} tenants, ${result.seconds} s per run, ` +
      `medians of ${result.rounds} alternating rounds; overhead = 1/rps - 1/rps(no limiter), per round.`, '',
    '| app | requests/s | overhead per request | p99 | app CPU per request | redis CPU per request | not answered by the store |',
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of result.contenders) {
    lines.push(`| ${r.name} | ${f(r.rps)} | ${r.limiter === 'none' ? '-' : `${f(r.overhead_us, 1)} us`} | ${f(r.p99_ms)} ms | ` +
      `${f(r.app_cpu_us, 1)} us | ${f(r.redis_cpu_us, 1)} us | ${r.not_answered === null ? '-' : `${(r.not_answered * 100).toFixed(4)}%`} |`);
  }
  // Each floodwall contender's overhead against its framework's incumbent (the issue's measure: at most 0.5x).
  const ratios = [];
  for (const r of result.contenders) {
    const against = incumbent(r);
    const base = against && result.contenders.find((x) => x.framework === r.framework && x.limiter === against);
    if (base && Number.isFinite(r.overhead_us) && base.overhead_us > 0) {
      const redisCpu = r.limiter.includes('redis') ? `; Redis CPU ${f(r.redis_cpu_us, 1)} against ${f(base.redis_cpu_us, 1)} us per request` : '';
      ratios.push(`- ${r.name}: ${(r.overhead_us / base.overhead_us).toFixed(2)}x the overhead of ${base.name.replace(`${r.framework} + `, '')} ` +
        `(p99 ${f(r.p99_ms)} against ${f(base.p99_ms)} ms${redisCpu})`);
    }
  }
  if (ratios.length) lines.push('', 'Against the incumbent of each framework (same store kind):', '', ...ratios);
  // What any middleware pays that sets the headers every response must carry, against the goal (half of the
  // incumbent's overhead on memory).
  const floors = [];
  for (const r of result.contenders.filter((x) => x.limiter.startsWith('floor-'))) {
    const base = result.contenders.find((x) => x.framework === r.framework && x.limiter === 'erl-memory');
    if (base && Number.isFinite(r.overhead_us))
      floors.push(`- ${r.name}: ${f(r.overhead_us, 1)} us per request; half of ${base.name.replace(`${r.framework} + `, '')}'s overhead is ${f(base.overhead_us / 2, 1)} us`);
  }
  if (floors.length) lines.push('', 'Floors (middlewares that decide nothing):', '', ...floors);
  return lines.join('\n') + '\n';
}

// The incumbent a floodwall contender is measured against: the same framework's limiter on the same kind of store.
function incumbent(c) {
  if (!c.limiter.startsWith('floodwall-')) return null;
  if (c.framework === 'express') return c.limiter.startsWith('floodwall-memory') ? 'erl-memory' : 'erl-redis';
  if (c.framework === 'fastify') return c.limiter.startsWith('floodwall-memory') ? 'frl-memory' : 'frl-redis';
  if (c.framework === 'starlette') return 'limits-redis';
  if (c.framework === 'rack') return 'rack-attack-redis';
  return null;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
