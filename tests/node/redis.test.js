'use strict';
// The Redis store from Node, against a real redis-server started for this file: the same decisions as the
// memory store, one bucket shared by several clients and processes, admits that resolve from the core's
// I/O thread without blocking the event loop, and fail-open when Redis goes away.
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const path = require('node:path');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const { test, describe, before, after } = require('node:test');
const { Floodwall, InvalidArgumentError } = require('../..');
const { startRedis, eventually } = require('./helpers');

const ROOT = path.resolve(__dirname, '..', '..');
let redis;
let prefixes = 0;

// The default 5 ms deadline fails a decision open when this 2-core machine is busy (other builds, the
// test's own 20000 admits): these tests are about decisions, so they give Redis time. Fail-open has its own.
const PATIENT = { deadline_ms: 2000 };

// Each test gets its own key prefix, so that tests never see each other's buckets.
function client(policy) {
  return new Floodwall({ store: redis.url, prefix: `t${process.pid}x${prefixes++}`, redis: PATIENT, ...policy });
}

before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

// The in-flight slots that Redis holds under a prefix, read with a plain Redis client.
async function inFlightSlots(prefix) {
  const Redis = require('ioredis');
  const r = new Redis({ port: redis.port, lazyConnect: true });
  try {
    await r.connect();
    const keys = await r.keys(`${prefix}:*conc*`);
    const counts = await Promise.all(keys.map((k) => r.zcard(k)));
    return counts.reduce((a, b) => a + b, 0);
  } finally {
    r.disconnect();
  }
}

function plain(d) {
  const { ticket, ...fields } = d.toJSON();
  return { ...fields, holds: ticket !== 0 };
}

describe('Redis store', () => {
  test('decides exactly like the memory store, headers and bodies included', async () => {
    const policy = { request_rate: { rate: 0.001, burst: 3 }, concurrency: { limit: 2 }, docs_url: 'https://example.test/limits' };
    const script = async (fw) => {
      const out = [];
      const held = [];
      for (let i = 0; i < 4; i++) {
        const d = await fw.admit({ tenant: 'acme', route: '/v1', method: 'POST' });
        out.push(plain(d));
        held.push(d);
      }
      held.forEach((d) => fw.release(d));
      out.push(plain(await fw.admit({ tenant: 'acme', cost: 2 })));
      out.push(plain(await fw.admit({ tenant: 'acme' })));
      return out;
    };
    const memory = new Floodwall(policy);
    // One connection: a release is fire-and-forget, and on a second connection the next admit may reach
    // Redis before it (see the report); on one pipelined connection they arrive in order.
    const shared = client({ ...policy, redis: { ...PATIENT, connections: 1 } });
    try {
      const [m, r] = [await script(memory), await script(shared)];
      assert.deepEqual(r, m);
      assert.deepEqual(r.map((d) => d.status), [200, 200, 429, 429, 429, 200]);
      assert.equal(r[2].limiter, 'concurrency');
      assert.equal(r[4].limiter, 'request_rate');
      assert.ok(r.every((d) => !d.failedOpen && !d.degraded));
    } finally {
      memory.close();
      shared.close();
    }
  });

  test('a decision from the I/O thread names its limits and quotas', async () => {
    const fw = client({
      request_rate: { rate: 0.001, burst: 10, limits: [{ name: 'writes', routes: ['/*'], methods: ['POST'], rate: 0.001, burst: 1 }] },
      quotas: [{ name: 'daily', limit: 100, period: 'day' }],
    });
    try {
      const [first, second] = [await fw.admit({ tenant: 'acme', route: '/orders', method: 'POST' }),
        await fw.admit({ tenant: 'acme', route: '/orders', method: 'POST' })];
      assert.equal(first.failedOpen || first.degraded, false);
      assert.deepEqual([first.allowed, first.rules, first.rule], [true, ['writes', 'daily'], null]);
      assert.deepEqual([second.status, second.limiter, second.rule], [429, 'request_rate', 'writes']);
      assert.match(second.headers['RateLimit-Policy'], /"writes";q=1;.*"daily";q=100;/);
      assert.equal(JSON.parse(second.body).error.policy, 'writes');
      const read = await fw.admit({ tenant: 'acme', route: '/orders', method: 'GET' });
      assert.deepEqual([read.allowed, read.rules, read.rule], [true, ['daily'], null]);
    } finally {
      fw.close();
    }
  });

  test('the seed example headers come back through Redis', async () => {
    const fw = client({ request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 } });
    try {
      const d = await fw.admit({ tenant: 'acme' });
      assert.equal(d.failedOpen || d.degraded, false);
      assert.deepEqual(d.headers, {
        'RateLimit-Policy': '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"',
        RateLimit: '"concurrency";r=19',
        'RateLimit-Limit': '500',
        'RateLimit-Remaining': '499',
        'RateLimit-Reset': '1',
      });
      fw.release(d);
    } finally {
      fw.close();
    }
  });

  test('tenants derived from headers and peers, decided on the I/O thread, land where the memory store puts them', async () => {
    const policy = { request_rate: { rate: 0.001, burst: 50 } };
    const memory = new Floodwall(policy);
    const shared = client(policy);
    // Many in flight at once: each request's header bytes must have been copied before admit returned,
    // since the next call reuses the binding's buffers while the earlier ones still wait on Redis.
    // Vouched for: each credential is its own tenant.
    const requests = Array.from({ length: 200 }, (_, i) => (i % 3 === 0
      ? { headers: ['Authorization', `Bearer token-${i % 7}`], peer: `192.0.2.${i % 5}`, verified: true }
      : { headers: [['X-Api-Key', `key-${i % 4}`]], peer: '198.51.100.1', verified: true }));
    try {
      const viaRedis = await Promise.all(requests.map((r) => shared.admit(r)));
      assert.ok(viaRedis.every((d) => !d.degraded && !d.failedOpen));
      const viaMemory = [];
      for (const r of requests) viaMemory.push(await memory.admit(r));
      // Concurrent admits of one tenant may reach Redis in any order: compare what each bucket gave out.
      const spent = (ds) => {
        const byKey = {};
        ds.forEach((d, i) => {
          const key = memory.tenantKey(requests[i]);
          (byKey[key] ||= []).push(d.remaining);
        });
        return Object.fromEntries(Object.entries(byKey).map(([k, rs]) => [k, rs.sort((a, b) => a - b)]));
      };
      assert.deepEqual(spent(viaRedis), spent(viaMemory));
      assert.equal(Object.keys(spent(viaMemory)).length, 7 + 4);
    } finally {
      memory.close();
      shared.close();
    }
  });

  test('several clients in one process share one bucket: exactly burst admits pass', async () => {
    const policy = { request_rate: { rate: 0.001, burst: 50 }, prefix: `shared${process.pid}`, redis: PATIENT };
    const clients = [0, 1, 2].map(() => new Floodwall({ store: redis.url, ...policy }));
    try {
      const all = await Promise.all(clients.flatMap((fw) => Array.from({ length: 60 }, () => fw.admit({ tenant: 'one' }))));
      assert.equal(all.filter((d) => d.failedOpen || d.degraded).length, 0);
      assert.equal(all.filter((d) => d.allowed).length, 50);
      assert.equal(all.filter((d) => d.status === 429).length, 130);
    } finally {
      clients.forEach((fw) => fw.close());
    }
  });

  test('several processes share one bucket and one concurrency cap', async () => {
    const prefix = `procs${process.pid}`;
    const policy = JSON.stringify({ store: redis.url, prefix, redis: PATIENT, request_rate: { rate: 0.001, burst: 40 }, concurrency: { limit: 1000 } });
    const child = `
      const { Floodwall } = require(${JSON.stringify(ROOT)});
      const fw = new Floodwall(${JSON.stringify(policy)});
      Promise.all(Array.from({ length: 30 }, () => fw.admit({ tenant: Buffer.from([0, 123, 10]) }))).then((ds) => {
        process.stdout.write(JSON.stringify({ allowed: ds.filter((d) => d.allowed).length, failed: ds.filter((d) => d.failedOpen || d.degraded).length }));
        fw.close();
      });`;
    const run = () => new Promise((resolve, reject) => {
      execFile(process.execPath, ['-e', child], { timeout: 30_000 }, (err, stdout) => (err ? reject(err) : resolve(JSON.parse(stdout))));
    });
    const results = await Promise.all([run(), run(), run()]);
    assert.deepEqual(results.map((r) => r.failed), [0, 0, 0]);
    assert.equal(results.reduce((n, r) => n + r.allowed, 0), 40, JSON.stringify(results));
    // Nothing was released: 40 slots are held fleet-wide in Redis; a fourth client sees them.
    const fw = new Floodwall(policy);
    try {
      const d = await fw.admit({ tenant: Buffer.from([0, 123, 10]) });
      assert.equal(d.status, 429);
      assert.equal(d.concurrencyRemaining, 1000 - 40);
    } finally {
      fw.close();
    }
  });

  test('a concurrency cap holds across clients and frees on release', async () => {
    const policy = { concurrency: { limit: 5 }, prefix: `conc${process.pid}`, redis: PATIENT };
    const a = new Floodwall({ store: redis.url, ...policy });
    const b = new Floodwall({ store: redis.url, ...policy });
    try {
      const round = () => Promise.all([a, b].flatMap((fw) => Array.from({ length: 10 }, async () => [fw, await fw.admit({ tenant: 't' })])));
      const first = await round();
      assert.equal(first.filter(([, d]) => d.allowed).length, 5);
      for (const [fw, d] of first) fw.release(d);
      // A release is fire-and-forget: wait until Redis holds no slot, then ask again.
      await eventually(async () => (await inFlightSlots(policy.prefix)) === 0);
      const second = await round();
      assert.equal(second.filter(([, d]) => d.allowed).length, 5, 'every released slot came back');
    } finally {
      a.close();
      b.close();
    }
  });

  test('bad requests reject the same way as on the memory store; an empty tenant is anonymous', async () => {
    const fw = client({ request_rate: { rate: 1, burst: 5 } });
    try {
      await assert.rejects(fw.admit({ tenant: 42 }), (e) => e instanceof InvalidArgumentError && e.field === 'tenant');
      await assert.rejects(fw.admit({ headers: ['a', 1] }), (e) => e instanceof InvalidArgumentError && e.field === 'headers');
      await assert.rejects(fw.admit({ tenant: 't', cost: 6 }), (e) => e instanceof InvalidArgumentError && e.field === 'cost');
      assert.equal((await fw.admit({ tenant: 't' })).remaining, 4);
      const empty = await fw.admit({ tenant: '' });
      assert.equal(empty.allowed && !empty.degraded && !empty.failedOpen, true);
    } finally {
      fw.close();
    }
  });

  test('many concurrent admits keep the event loop responsive', async () => {
    const fw = client({ request_rate: { rate: 1000, burst: 1000000 }, concurrency: { limit: 100000 }, redis: { deadline_ms: 10000 } });
    const total = 20000;
    const window = 2000; // like a server, a bounded number of requests in flight
    const histogram = monitorEventLoopDelay({ resolution: 1 });
    let ticks = 0;
    let inFlight = 0;
    let ticksWhileInFlight = 0;
    const ticker = setInterval(() => {
      ticks++;
      if (inFlight > 0) ticksWhileInFlight++;
    }, 1);
    try {
      histogram.enable();
      const start = process.hrtime.bigint();
      const pending = [];
      // Issue in batches, as a server would receive them, so that the loop turns between them.
      for (let sent = 0; sent < total; sent += 500) {
        while (inFlight > window) await new Promise((r) => setTimeout(r, 1));
        for (let i = 0; i < 500; i++) {
          inFlight++;
          pending.push(fw.admit({ tenant: `tenant-${i % 50}` }).then((d) => {
            inFlight--;
            fw.release(d);
            return d;
          }));
        }
        await new Promise((r) => setImmediate(r));
      }
      const decisions = await Promise.all(pending);
      const tookMs = Number(process.hrtime.bigint() - start) / 1e6;
      histogram.disable();
      const maxMs = histogram.max / 1e6;
      console.log(`# ${total} Redis admits in ${tookMs.toFixed(0)} ms (${Math.round(total / (tookMs / 1000))}/s); ` +
        `event loop delay p50 ${(histogram.percentile(50) / 1e6).toFixed(2)} ms, p99 ${(histogram.percentile(99) / 1e6).toFixed(2)} ms, ` +
        `max ${maxMs.toFixed(2)} ms; ${ticksWhileInFlight} timer ticks while admits were in flight`);
      assert.equal(decisions.filter((d) => d.allowed && !d.failedOpen && !d.degraded).length, total);
      assert.ok(ticksWhileInFlight > 0, 'timers ran while admits were waiting on Redis');
      assert.ok(maxMs < tookMs, 'the event loop was never blocked for the whole run');
    } finally {
      clearInterval(ticker);
      fw.close();
    }
  });

  test('close() with admits in flight settles every one of them', async () => {
    const fw = client({ request_rate: { rate: 1000, burst: 100000 } });
    const pending = Array.from({ length: 2000 }, (_, i) => fw.admit({ tenant: `t${i % 10}` }));
    fw.close();
    const settled = await Promise.allSettled(pending);
    assert.equal(settled.length, 2000);
    assert.ok(settled.every((s) => s.status === 'fulfilled' && s.value.allowed), 'pending admits resolve (failed open if undecided)');
  });

  test('an idle client does not keep the process alive', async () => {
    const code = `
      const { Floodwall } = require(${JSON.stringify(ROOT)});
      const fw = new Floodwall({ store: ${JSON.stringify(redis.url)}, request_rate: { rate: 1, burst: 5 } });
      fw.admit({ tenant: 't' }).then((d) => console.log(d.allowed));`;
    const out = await new Promise((resolve, reject) => {
      execFile(process.execPath, ['-e', code], { timeout: 30_000 }, (err, stdout) => (err ? reject(err) : resolve(stdout)));
    });
    assert.equal(out.trim(), 'true');
  });

  test('the event loop\'s admits take one connection of those opened; redis.connections sets how many', async () => {
    const own = await startRedis();
    const Redis = require('ioredis');
    const probe = new Redis({ port: own.port });
    // Connections other than the probe's own, once the count has settled (a closed client's go away async).
    const others = async () => Number(/connected_clients:(\d+)/.exec(await probe.info('clients'))[1]) - 1;
    const opened = async (policy) => {
      const fw = new Floodwall({ store: own.url, request_rate: { rate: 100, burst: 100 }, ...policy });
      try {
        assert.equal((await fw.admit({ tenant: 't' })).failReason, null);
        await new Promise((r) => setTimeout(r, 100)); // every connection the client would open is open
        return await others();
      } finally {
        fw.close();
        await eventually(async () => (await others()) === 0);
      }
    };
    try {
      assert.equal(await opened({}), 2);
      assert.equal(await opened({ redis: { connections: 3 } }), 3);
      assert.equal(await opened({ redis: { connections: 1 } }), 1);
      // One event loop submits every admit: the core moves them all to one connection, which Redis sees.
      const fw = new Floodwall({ store: own.url, redis: PATIENT, request_rate: { rate: 1e6, burst: 1e9 } });
      try {
        assert.equal(fw.metrics().store.connections_in_use, 2);
        const tenants = Array.from({ length: 64 }, (_, i) => `loop-${i}`);
        for (let round = 0; round < 2000 && fw.metrics().store.connections_in_use !== 1; round++) {
          const ds = await Promise.all(tenants.map((tenant) => fw.admit({ tenant })));
          assert.ok(ds.every((d) => !d.failedOpen && !d.degraded));
        }
        assert.equal(fw.metrics().store.connections_in_use, 1);
        assert.match(fw.prometheus(), /^floodwall_store_connections_in_use 1$/m);
        const monitor = await probe.monitor(); // a connection of its own
        const sources = new Map(); // client address -> admits of the loop's tenants Redis got from it
        monitor.on('monitor', (_time, args, source) => {
          if (args[0] === 'EVALSHA' && String(args[3]).includes('{loop-')) sources.set(source, (sources.get(source) ?? 0) + 1);
        });
        try {
          await Promise.all(tenants.map((tenant) => fw.admit({ tenant })));
          await eventually(async () => [...sources.values()].reduce((a, b) => a + b, 0) === 64);
        } finally {
          monitor.disconnect();
        }
        assert.equal(sources.size, 1, `the 64 admits arrived on one connection: ${JSON.stringify([...sources])}`);
      } finally {
        fw.close();
      }
      // A bad value still reaches the core, which names the field.
      assert.throws(() => new Floodwall({ store: own.url, redis: { connections: 0 } }), /redis\.connections/);
      assert.throws(() => new Floodwall({ store: own.url, redis: 'fast' }), /redis/);
    } finally {
      probe.disconnect();
      await own.stop();
    }
  });

  test('when Redis goes away, the local fallback decides and says why', async () => {
    const own = await startRedis();
    const fw = new Floodwall({ store: own.url, request_rate: { rate: 1, burst: 5 }, redis: { deadline_ms: 50 } });
    try {
      const first = await fw.admit({ tenant: 't' });
      assert.equal(first.degraded || first.failedOpen, false);
      await own.stop();
      const decisions = [];
      for (let i = 0; i < 10; i++) decisions.push(await fw.admit({ tenant: 't' }));
      for (const d of decisions) {
        assert.equal(d.degraded, true);
        assert.equal(d.failedOpen, false, 'limited, not let through');
        assert.ok(['connection', 'timeout', 'breaker'].includes(d.failReason), d.failReason);
      }
      assert.deepEqual(decisions.map((d) => d.allowed), [true, true, true, true, true, false, false, false, false, false],
        'the fallback table holds the burst of 5 in this process');
      assert.equal(decisions[5].status, 429);
      assert.equal(decisions[0].headers['RateLimit-Remaining'], '4', 'the local table decided, and says its state');
      const m = fw.metrics();
      assert.equal(m.sources.fallback, 10);
      assert.equal(m.sources.failed_open, 0);
    } finally {
      fw.close();
    }
  });

  test('a stopped Redis: the fallback within the deadline, Redis again soon after it resumes', async () => {
    const own = await startRedis();
    const fw = new Floodwall({ store: own.url, request_rate: { rate: 1000, burst: 1000 },
      redis: { deadline_ms: 50, breaker_open_ms: 200 } });
    try {
      assert.equal((await fw.admit({ tenant: 't' })).failReason, null);
      process.kill(own.pid, 'SIGSTOP');
      try {
        // 256 admits in flight from the event loop: the first deadline passes with no reply byte, the
        // breaker opens, and every admit is answered by the fallback (none hangs, none is let through).
        const t0 = process.hrtime.bigint();
        const all = await Promise.all(Array.from({ length: 256 }, () => fw.admit({ tenant: 't' })));
        const waitedMs = Number(process.hrtime.bigint() - t0) / 1e6;
        assert.ok(waitedMs < 5000, `a time-out, not a hang (${waitedMs} ms)`);
        assert.ok(all.every((d) => d.degraded && !d.failedOpen && d.failReason === 'timeout'));
        // A reply read just after the stop, to a call sent before it, can make the first deadline look
        // answered; the next one then opens the breaker.
        if (fw.metrics().breaker !== 'open') assert.equal((await fw.admit({ tenant: 't' })).failReason, 'timeout');
        assert.equal(fw.metrics().breaker, 'open', 'no reply byte within the deadline opens the breaker');
        const next = await fw.admit({ tenant: 't' });
        assert.equal(next.failReason, 'breaker', 'the breaker is open: nobody waits for Redis');
      } finally {
        process.kill(own.pid, 'SIGCONT');
      }
      let byStore = false;
      for (let i = 0; i < 300 && !byStore; i++) {
        const d = await fw.admit({ tenant: 't' });
        byStore = !d.degraded && d.failReason === null;
        if (!byStore) await new Promise((r) => setTimeout(r, 10));
      }
      assert.ok(byStore, 'after SIGCONT the probe closes the breaker and Redis decides again');
    } finally {
      fw.close();
      await own.stop();
    }
  });

  test('redis.fallback "open" lets through and "closed" refuses with a 503', async () => {
    const own = await startRedis();
    const open = new Floodwall({ store: own.url, request_rate: { rate: 1, burst: 1 }, redis: { deadline_ms: 50, fallback: 'open' } });
    const closed = new Floodwall({ store: own.url, request_rate: { rate: 1, burst: 1 }, redis: { deadline_ms: 50, fallback: 'closed' } });
    try {
      await open.admit({ tenant: 'warm' });
      await closed.admit({ tenant: 'warm' });
      await own.stop();
      for (let i = 0; i < 3; i++) {
        const d = await open.admit({ tenant: 't' });
        assert.equal(d.allowed && d.failedOpen && !d.degraded, true);
        assert.equal(d.headers['RateLimit-Remaining'], undefined, 'a failed-open decision knows no bucket state');
        assert.equal(d.headers['RateLimit-Policy'], '"request_rate";q=1;w=1');
      }
      assert.equal(open.metrics().decisions.request_rate.failed_open, 3);
      const refused = await closed.admit({ tenant: 't' });
      assert.equal(refused.allowed, false);
      assert.equal(refused.status, 503);
      assert.equal(refused.limiter, null);
      assert.equal(refused.headers['Retry-After'], '1');
      assert.match(refused.body, /"limit_type":"unavailable"/);
      assert.equal(closed.metrics().sources.refused, 1);
      assert.throws(() => new Floodwall({ store: own.url, redis: { fallback: 'maybe' } }), /redis\.fallback/);
    } finally {
      open.close();
      closed.close();
    }
  });
});
