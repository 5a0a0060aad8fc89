'use strict';
// node bench/http/run.js [--quick] [--rounds N] [--seconds S] [--only a,b] [--markdown FILE]
//
// Middleware over real HTTP: each app (bench/http/*_app.*) behind each limiter is started as a process of
// its own, loaded by autocannon (64 connections, X-API-Key rotating over 1,000 tenants, limits never
// reached), one after the other and round after round (alternating, so that the box's other work falls on
// every contender alike). Reported per contender, medians over the rounds: requests/s, the overhead per
// request against the same framework with no limiter (1/rps - 1/rps_none), p99 latency, the app's and the
// redis-server's CPU per request (from /proc/PID/stat), and the share of floodwall's decisions the store did
// not answer (the app's metrics). Needs a redis-server: FW_BENCH_REDIS (URL) and FW_BENCH_REDIS_PID, else
// it starts its own. Prints the results as JSON; --markdown FILE writes the table.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const autocannon = require('autocannon');
const { startRedis } = require('../../tests/node/helpers');

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
// to start it.
const CONTENDERS = [
  { name: 'express', framework: 'express', limiter: 'none', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + express-rate-limit (memory)', framework: 'express', limiter: 'erl-memory', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + floodwall (memory://)', framework: 'express', limiter: 'floodwall-memory', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + express-rate-limit + rate-limit-redis', framework: 'express', limiter: 'erl-redis', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
  { name: 'express + floodwall (redis://)', framework: 'express', limiter: 'floodwall-redis', cmd: ['node', [path.join(HERE, 'express_app.js')]] },
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

function startApp(c, redisUrl) {
  const [cmd, argv] = c.cmd;
  const child = spawn(cmd, argv, {
    cwd: ROOT,
    env: { ...process.env, FW_HTTP_LIMITER: c.limiter, FW_BENCH_REDIS: redisUrl },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
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
    if (r.non2xx || r.errors || r.timeouts) {
      throw new Error(`${c.name}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} time-outs: a limit was reached or the app failed`);
    }
    return {
      rps: n / r.duration,
      p99_ms: r.latency.p99,
      app_cpu_us: (appCpu / n) * 1e6,
      redis_cpu_us: (redisCpu / n) * 1e6,
      not_answered: notAnswered,
      requests: n,
    };
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
  }
}

async function main() {
  const only = flag('--only', '');
  const contenders = only ? CONTENDERS.filter((c) => only.split(',').some((o) => c.name.includes(o) || c.limiter === o)) : CONTENDERS;
  let redis = process.env.FW_BENCH_REDIS ? { url: process.env.FW_BENCH_REDIS, pid: Number(process.env.FW_BENCH_REDIS_PID) } : null;
  let own = null;
  if (!redis || !redis.pid) {
    own = await startRedis();
    redis = { url: own.url, pid: own.pid };
  }
  const rounds = contenders.map(() => []);
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < contenders.length; k++) {
        const r = await runOne(contenders[k], redis);
        rounds[k].push(r);
        process.stderr.write(`bench/http: round ${round + 1} ${contenders[k].name}: ${r.rps.toFixed(0)} requests/s, p99 ${r.p99_ms} ms, ` +
          `app ${r.app_cpu_us.toFixed(1)} us, redis ${r.redis_cpu_us.toFixed(1)} us of CPU per request` +
          `${r.not_answered === null ? '' : `, ${(r.not_answered * 100).toFixed(4)}% not answered by the store`}\n`);
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
  return lines.join('\n') + '\n';
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
