'use strict';
// close() on a Redis client with hundreds of admits still waiting on the store (issue #40): the addon closes
// through fw_client_close, whose pending admits are decided (by the fallback) before it returns, their
// completions queued to the JS thread that close() itself is running on. Every promise settles exactly once,
// as a decision or a ClosedError; close() neither hangs (the test would time out) nor crashes; and every
// call after it throws ClosedError (an admit rejects with it), release and a second close excepted.
const assert = require('node:assert/strict');
const { test, describe, before, after } = require('node:test');
const { Floodwall, ClosedError } = require('../..');
const { startRedis } = require('./helpers');

let redis;
let prefixes = 0;

before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

const tick = () => new Promise((r) => setImmediate(r));

// Issues `n` admits of distinct tenants (so that no hot tenant is decided in process) and counts how each
// settles: settles[i] is how many times admit i's promise called back, outcomes[i] what it settled with.
function issue(fw, n, offset = 0) {
  const settles = new Array(n).fill(0);
  const outcomes = new Array(n);
  const done = Array.from({ length: n }, (_, i) => fw.admit({ tenant: `tenant-${offset + i}`, route: '/close' }).then(
    (d) => {
      settles[i]++;
      outcomes[i] = { decision: d };
    },
    (err) => {
      settles[i]++;
      outcomes[i] = { error: err };
    }));
  return { settles, outcomes, all: Promise.all(done) };
}

// Every call on a closed client: ClosedError (admit: a rejected promise), release a no-op, close harmless.
async function assertClosed(fw, decision) {
  assert.equal(fw.closed, true);
  await assert.rejects(fw.admit({ tenant: 'after' }), ClosedError);
  await assert.rejects(fw.admit({ headers: [['X-Api-Key', 'k']], peer: '192.0.2.1' }), ClosedError);
  assert.throws(() => fw.tenantKey({ tenant: 'after' }), ClosedError);
  assert.throws(() => fw.metrics(), ClosedError);
  assert.throws(() => fw.prometheus(), ClosedError);
  assert.throws(() => fw.setMode('request_rate', 'dark'), ClosedError);
  assert.throws(() => fw.getMode('request_rate'), ClosedError);
  assert.throws(() => fw.reportUtilization(0.5), ClosedError);
  assert.throws(() => fw.sheddingAmount(), ClosedError);
  if (decision) {
    assert.throws(() => decision.headers, ClosedError, 'formatting a decision needs its client');
    fw.release(decision); // never throws
  }
  fw.release(12345);
  fw.close();
  fw.close();
  assert.equal(fw.closed, true);
}

describe('close() with admits pending on Redis', () => {
  test('on a stalled Redis: close decides every pending admit once, through the fallback, and returns', async () => {
    const own = await startRedis();
    // A 2 s deadline: the admits still wait when close() is called, and close decides them. The core's close
    // drains for at most max(200 ms, deadline) (a reply may still come), then the fallback decides the rest.
    const deadlineMs = 2000;
    const fw = new Floodwall({ store: own.url, prefix: `close${process.pid}x${prefixes++}`,
      request_rate: { rate: 1000, burst: 1000 }, redis: { deadline_ms: deadlineMs } });
    let stopped = false;
    try {
      const warm = await fw.admit({ tenant: 'warm' });
      assert.equal(warm.degraded || warm.failedOpen, false, 'connected to Redis');
      process.kill(own.pid, 'SIGSTOP');
      stopped = true;
      const n = 600;
      const { settles, outcomes, all } = issue(fw, n);
      await tick();
      await new Promise((r) => setTimeout(r, 50));
      const before = settles.reduce((a, b) => a + b, 0);
      assert.ok(before < n, `admits wait on the stalled Redis when close() is called (${before} of ${n} settled)`);
      const t0 = process.hrtime.bigint();
      fw.close();
      const closeMs = Number(process.hrtime.bigint() - t0) / 1e6;
      assert.ok(closeMs < deadlineMs + 3000, `close() returned after its drain, not a hang (${closeMs} ms)`);
      // Admits issued right after close: rejected with ClosedError, never queued.
      const late = issue(fw, 50, n);
      await all;
      await late.all;
      await new Promise((r) => setTimeout(r, 100)); // a second settle would have come by now
      assert.deepEqual(settles, new Array(n).fill(1), 'every pending admit settled exactly once');
      assert.deepEqual(late.settles, new Array(50).fill(1));
      for (const o of outcomes) {
        if (o.error) {
          assert.ok(o.error instanceof ClosedError, `only ClosedError rejects a pending admit: ${o.error}`);
        } else {
          assert.equal(typeof o.decision.allowed, 'boolean');
          assert.ok([200, 429, 503].includes(o.decision.status), String(o.decision.status));
        }
      }
      const decided = outcomes.filter((o) => o.decision);
      assert.equal(decided.length, n, 'the admits accepted before close were all decided (by the fallback), not dropped');
      assert.ok(decided.some((o) => o.decision.degraded || o.decision.failedOpen || o.decision.status === 503),
        'the fallback decided those that Redis never answered');
      for (const o of late.outcomes) assert.ok(o.error instanceof ClosedError, String(o.error));
      console.log(`${n - before} of ${n} admits pending at close(), which took ${closeMs.toFixed(0)} ms; ` +
        `${decided.filter((o) => o.decision.degraded).length} decided by the fallback`);
      await assertClosed(fw, decided[0].decision);
    } finally {
      if (stopped) process.kill(own.pid, 'SIGCONT');
      fw.close();
      await own.stop();
    }
  });

  test('on a live Redis, round after round: several hundred in flight at close, each settles once', async () => {
    for (let round = 0; round < 5; round++) {
      const fw = new Floodwall({ store: redis.url, prefix: `close${process.pid}x${prefixes++}`,
        request_rate: { rate: 1000, burst: 100000 }, concurrency: { limit: 100000 }, redis: { deadline_ms: 2000 } });
      const n = 500;
      const { settles, outcomes, all } = issue(fw, n);
      // A completion delivered after close that calls the client again: ClosedError, from inside delivery.
      const reentrant = fw.admit({ tenant: 'first' }).then(() => {
        const closedThen = fw.closed;
        return fw.admit({ tenant: 'again' }).then(() => assert.equal(closedThen, false, 'an admit after close resolved'),
          (err) => assert.ok(closedThen && err instanceof ClosedError, String(err)));
      });
      if (round % 2) await tick(); // some rounds let a few complete first
      fw.close();
      await all;
      await reentrant;
      await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual(settles, new Array(n).fill(1), `round ${round}: every admit settled exactly once`);
      for (const o of outcomes) {
        if (o.error) assert.ok(o.error instanceof ClosedError, `round ${round}: ${o.error}`);
        else fw.release(o.decision); // a no-op on the closed client, never a throw
      }
      await assertClosed(fw);
    }
  });

  test('a client dropped without close() with admits in flight: they settle, nothing crashes', async () => {
    let all;
    {
      const fw = new Floodwall({ store: redis.url, prefix: `close${process.pid}x${prefixes++}`,
        request_rate: { rate: 1000, burst: 100000 }, redis: { deadline_ms: 2000 } });
      ({ all } = issue(fw, 300));
    }
    await all;
    if (global.gc) global.gc();
  });
});
