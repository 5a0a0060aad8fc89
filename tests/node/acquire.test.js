'use strict';
// fw.acquire() (#57 part 2): waits for the turn instead of a 429, on memory:// and a real redis-server; the
// wait is a timer (the event loop keeps running); an AbortSignal before the turn rejects and gives the
// reservation back; bad input named.
const assert = require('node:assert/strict');
const { test, describe, before, after } = require('node:test');
const { Floodwall, InvalidArgumentError } = require('../..');
const { startRedis } = require('./helpers');

let redis;
let prefixes = 0;

before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

const STORES = {
  memory: (policy) => new Floodwall({ store: 'memory://', ...policy }),
  redis: (policy) =>
    new Floodwall({ store: redis.url, prefix: `acq${process.pid}x${prefixes++}`, redis: { deadline_ms: 2000 }, ...policy }),
};

for (const [name, make] of Object.entries(STORES)) {
  describe(`acquire on ${name}`, () => {
    test('waits for its turn and resolves with the decision admit gives', async () => {
      const fw = make({ request_rate: { rate: 20, burst: 1 } });
      const first = await fw.acquire({ tenant: 'acme', maxWait: 1000 });
      assert.equal(first.allowed, true);
      assert.equal(first.waitedMs, 0);
      const t0 = performance.now();
      const second = await fw.acquire({ tenant: 'acme', maxWait: 1000 });
      const took = performance.now() - t0;
      assert.equal(second.allowed, true);
      assert.equal(second.status, 200);
      assert.ok(second.waitedMs > 0 && second.waitedMs <= 50, `one token at 20/s: ${second.waitedMs}`);
      assert.ok(took >= second.waitedMs - 1, 'it resolved no earlier than its turn');
      assert.ok(second.headers['RateLimit-Policy'], 'the same decision object, headers and all');
      fw.release(second);
      assert.equal((await fw.admit({ tenant: 'acme' })).allowed, false, 'the acquired token was spent');
      fw.close();
    });

    test('beyond maxWait it is admit\'s refusal, nothing consumed', async () => {
      const fw = make({ request_rate: { rate: 1, burst: 1 } });
      assert.equal((await fw.acquire({ tenant: 'acme', maxWait: 500 })).allowed, true);
      const refused = await fw.acquire({ tenant: 'acme', maxWait: 500 });
      assert.equal(refused.allowed, false);
      assert.equal(refused.status, 429);
      assert.equal(refused.limiter, 'request_rate');
      assert.ok(refused.retryAfter >= 1);
      fw.close();
    });

    test('bad maxWait, signal and cost are refused naming them', async () => {
      const fw = make({ request_rate: { rate: 10, burst: 2 } });
      for (const bad of [-1, NaN, Infinity, '10', null, true]) {
        await assert.rejects(fw.acquire({ tenant: 'acme', maxWait: bad }), (err) =>
          err instanceof InvalidArgumentError && /maxWait/.test(err.message));
      }
      await assert.rejects(fw.acquire({ tenant: 'acme', signal: 'no' }), /signal/);
      await assert.rejects(fw.acquire({ tenant: 'acme', cost: 3 }), (err) =>
        err instanceof InvalidArgumentError && /cost/.test(err.message));
      assert.equal((await fw.admit({ tenant: 'acme' })).allowed, true);
      assert.equal((await fw.admit({ tenant: 'acme' })).allowed, true, 'the refusals took nothing');
      fw.close();
    });

    test('the event loop keeps running while acquires wait', async () => {
      const fw = make({ request_rate: { rate: 20, burst: 4 } }); // max_wait caps at 200 ms
      for (let i = 0; i < 4; i++) fw.release(await fw.admit({ tenant: 'acme' }));
      let ticks = 0;
      const ticker = setInterval(() => ticks++, 5);
      const all = await Promise.all([1, 2, 3, 4].map(() => fw.acquire({ tenant: 'acme', maxWait: 1000 })));
      clearInterval(ticker);
      assert.ok(all.every((d) => d.allowed), 'nothing refused within maxWait');
      assert.ok(ticks >= 10, `the interval ran while they waited (${ticks})`);
      fw.close();
    });

    test('concurrent acquires are served in turn within the bound', async () => {
      const rate = 200;
      const burst = 30; // max_wait caps at burst / rate: 150 ms
      const fw = make({ request_rate: { rate, burst } });
      const went = [];
      await Promise.all(Array.from({ length: 60 }, async () => {
        const d = await fw.acquire({ tenant: 'acme', maxWait: 2000 });
        went.push(performance.now());
        assert.equal(d.allowed, true, 'nothing refused within maxWait');
        fw.release(d);
      }));
      went.sort((a, b) => a - b);
      assert.ok(went.at(-1) - went[0] >= (30 / rate) * 1000 * 0.9, 'the last 30 waited a token apart');
      for (let i = 0; i < went.length; i++) {
        for (let j = i; j < went.length; j++) {
          const windowS = (went[j] - went[i]) / 1000;
          assert.ok(j - i + 1 <= burst + rate * (windowS + 0.01) + 1, `window ${i}..${j}`);
        }
      }
      fw.close();
    });

    test('an abort before the turn rejects and gives the reservation back', async () => {
      const fw = make({ request_rate: { rate: 1, burst: 2 } });
      await fw.acquire({ tenant: 'acme' });
      await fw.acquire({ tenant: 'acme' }); // the bucket is empty now
      const ac = new AbortController();
      const waiting = fw.acquire({ tenant: 'acme', maxWait: 1900, signal: ac.signal }); // a second ahead
      await new Promise((r) => setTimeout(r, 50));
      ac.abort(new Error('gave up'));
      await assert.rejects(waiting, /gave up/);
      // Given back: the next one has the aborted one's turn (within 1.5 s), not a second after it (2 s).
      const t0 = performance.now();
      const after = await fw.acquire({ tenant: 'acme', maxWait: 1500 });
      assert.equal(after.allowed, true, 'the aborted reservation\'s token came back');
      assert.ok(performance.now() - t0 >= after.waitedMs - 1);
      fw.close();
    });

    test('an abort with a later reservation behind it keeps its tokens', async () => {
      const fw = make({ request_rate: { rate: 1, burst: 3 } });
      for (let i = 0; i < 3; i++) fw.release(await fw.acquire({ tenant: 'acme' }));
      const a = new AbortController();
      const b = new AbortController();
      const first = fw.acquire({ tenant: 'acme', maxWait: 2900, signal: a.signal }); // a second ahead
      await new Promise((r) => setTimeout(r, 20));
      const second = fw.acquire({ tenant: 'acme', maxWait: 2900, signal: b.signal }); // two seconds ahead
      await new Promise((r) => setTimeout(r, 20));
      a.abort();
      await assert.rejects(first);
      const third = await fw.acquire({ tenant: 'acme', maxWait: 2500 }); // three seconds ahead: beyond 2.5
      assert.equal(third.allowed, false);
      b.abort();
      await assert.rejects(second);
      fw.close();
    });

    test('an already aborted signal takes nothing', async () => {
      const fw = make({ request_rate: { rate: 1, burst: 1 } });
      await assert.rejects(fw.acquire({ tenant: 'acme', signal: AbortSignal.abort() }));
      assert.equal((await fw.admit({ tenant: 'acme' })).allowed, true);
      fw.close();
    });
  });
}
