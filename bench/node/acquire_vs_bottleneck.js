'use strict';
// floodwall's acquire against Bottleneck (the npm package, its ioredis datastore) on one Redis and one limit
// (#57 item 5): N callers each in a loop of "wait for my turn, then go", for 1, 16 and 64 callers. For each:
//   achieved / limit: the calls that went per second in the steady state (after the first second, which
//     spends the burst), over the limit's rate;
//   script calls per call (EVALSHA and EVAL: round trips that ran a script) and Redis commands per call
//     (every command Redis ran, those inside the scripts too), from INFO commandstats;
//   lateness (p50/p99): floodwall: how long after its instant a call went (the acquire's time less the wait
//     it was told, so Redis' round trip is in it); Bottleneck: how long after the previous call's slot
//     (minTime later) a call went, when it went later than that.
// Usage: node bench/node/acquire_vs_bottleneck.js [seconds per run, default 4]. Starts its own redis-server.
const { spawn } = require('node:child_process');
const net = require('node:net');
const path = require('node:path');
const Redis = require('ioredis');
const Bottleneck = require('bottleneck');
const { Floodwall } = require(path.resolve(__dirname, '..', '..'));

const RATE = 100; // the partner's limit: 100 calls/s
// --markdown FILE also writes the table as Markdown (bench/run.sh puts it in bench/RESULTS.md).
const markdownAt = process.argv.indexOf('--markdown');
const MARKDOWN = markdownAt >= 0 ? process.argv[markdownAt + 1] : null;
const positional = process.argv.slice(2).filter((a, i, all) => a !== '--markdown' && all[i - 1] !== '--markdown');
const SECONDS = Number(positional[0] || 4);
const CALLERS = [1, 16, 64];

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startRedis() {
  const port = await freePort();
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' });
  const admin = new Redis({ port, lazyConnect: true, retryStrategy: () => 50 });
  admin.on('error', () => {}); // refused until redis-server listens: retried below
  for (let i = 0; i < 100; i++) {
    try {
      await admin.connect();
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return { port, admin, stop: () => { admin.disconnect(); proc.kill(); } };
}

// Every command Redis ran (those inside scripts too), and the script calls alone (EVALSHA, EVAL): the
// round trips that ran a script.
async function commands(admin) {
  const info = await admin.info('commandstats');
  let all = 0;
  let scripts = 0;
  for (const m of info.matchAll(/cmdstat_(\w+):calls=(\d+)/g)) {
    all += Number(m[2]);
    if (m[1] === 'evalsha' || m[1] === 'eval') scripts += Number(m[2]);
  }
  return { all, scripts };
}

function since(before, after) {
  return { all: after.all - before.all - 1, scripts: after.scripts - before.scripts }; // less the INFO itself
}

function pct(values, p) {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

// Runs `loop(until)` on n callers; returns the go times (ms, performance.now()) and the latenesses.
async function drive(n, one) {
  const went = [];
  const late = [];
  const until = performance.now() + SECONDS * 1000;
  await Promise.all(Array.from({ length: n }, async () => {
    while (performance.now() < until) await one(went, late);
  }));
  return { went, late };
}

function summary(name, n, went, late, cmds) {
  const t0 = Math.min(...went);
  const steady = went.filter((t) => t >= t0 + 1000 && t < t0 + SECONDS * 1000);
  const rate = steady.length / (SECONDS - 1);
  return {
    limiter: name,
    callers: n,
    calls: went.length,
    achieved_over_limit: Number((rate / RATE).toFixed(3)),
    script_calls_per_call: Number((cmds.scripts / went.length).toFixed(2)),
    redis_commands_per_call: Number((cmds.all / went.length).toFixed(2)),
    late_p50_ms: Number(pct(late, 50).toFixed(2)),
    late_p99_ms: Number(pct(late, 99).toFixed(2)),
  };
}

async function floodwallRun(redis, n) {
  // A burst of at least the callers that wait at once: a turn is never further than burst / rate.
  const burst = Math.max(n, 20);
  // The shipped redis defaults (deadline, breaker, fallback, flags poll, fleet summary): the commands counted
  // per call include the flags' polls and the summary's writes, as a user's would.
  const fw = new Floodwall({ store: `redis://127.0.0.1:${redis.port}/0`, prefix: `fw${n}`,
    request_rate: { rate: RATE, burst } });
  await fw.admit({ tenant: 'warm' }); // the connection and the scripts loaded before the count starts
  const before = await commands(redis.admin);
  let notByStore = 0; // decided by the local fallback or failed open: Redis did not answer in time
  const { went, late } = await drive(n, async (w, l) => {
    const start = performance.now();
    const d = await fw.acquire({ tenant: 'partner-api', maxWait: 60000 });
    const now = performance.now();
    if (d.degraded || d.failedOpen) notByStore++;
    if (!d.allowed) throw new Error(`refused within maxWait (${n} callers)`);
    w.push(now);
    if (d.waitedMs > 0) l.push(now - start - d.waitedMs);
    fw.release(d);
  });
  const cmds = since(before, await commands(redis.admin));
  fw.close();
  return { ...summary('floodwall acquire', n, went, late, cmds), not_by_store: notByStore / went.length };
}

async function bottleneckRun(redis, n) {
  const minTime = 1000 / RATE;
  const limiter = new Bottleneck({ id: `bn${n}`, minTime, maxConcurrent: null, datastore: 'ioredis',
    clearDatastore: true, clientOptions: { host: '127.0.0.1', port: redis.port } });
  await limiter.ready();
  await limiter.schedule(() => null); // connected and its scripts loaded
  const before = await commands(redis.admin);
  let last = 0;
  const { went, late } = await drive(n, async (w, l) => {
    await limiter.schedule(() => {
      const now = performance.now();
      if (last && now - last > minTime) l.push(now - last - minTime);
      last = now;
      w.push(now);
      return null;
    });
  });
  const cmds = since(before, await commands(redis.admin));
  await limiter.disconnect();
  return summary('Bottleneck (ioredis)', n, went, late, cmds);
}

(async () => {
  const redis = await startRedis();
  const rows = [];
  try {
    for (const n of CALLERS) {
      rows.push(await floodwallRun(redis, n));
      rows.push(await bottleneckRun(redis, n));
    }
  } finally {
    redis.stop();
  }
  console.log(`${RATE} calls/s, ${SECONDS} s per run, steady state after the first second`);
  console.table(rows);
  console.log(JSON.stringify(rows));
  if (MARKDOWN) {
    const lines = [
      `One limit of ${RATE} calls/s on one Redis, ${SECONDS} s per run (the steady state after the first second).`,
      '',
      '| callers | limiter | achieved / limit | not answered by Redis | script calls per call | Redis commands per call | late p50 / p99 (ms) |',
      '|---|---|---|---|---|---|---|',
      ...rows.map(
        (r) =>
          `| ${r.callers} | ${r.limiter} | ${r.achieved_over_limit.toFixed(3)} | ` +
          `${r.not_by_store === undefined ? '-' : `${(100 * r.not_by_store).toFixed(2)}%`} | ${r.script_calls_per_call} | ` +
          `${r.redis_commands_per_call} | ${r.late_p50_ms} / ${r.late_p99_ms} |`,
      ),
      '',
    ];
    require('fs').writeFileSync(MARKDOWN, lines.join('\n'));
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
