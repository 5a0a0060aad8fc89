'use strict';
// The client-side helper: full-jitter backoff that never retries before Retry-After.
const assert = require('node:assert/strict');
const http = require('node:http');
const { test } = require('node:test');
const { Floodwall, express: floodwall, backoff, backoffDefaults, retry, parseRetryAfter, InvalidArgumentError } = require('../..');
const express = require('express');

// Milliseconds computed through seconds in the core: equal to a nanosecond.
function near(actual, expected, message) {
  assert.ok(Math.abs(actual - expected) < 1e-6, `${message ?? ''} ${actual} != ${expected}`);
}

test('parseRetryAfter reads delay-seconds and the three HTTP-date forms', () => {
  assert.equal(parseRetryAfter('3'), 3000);
  assert.equal(parseRetryAfter('0'), 0);
  assert.equal(parseRetryAfter(2), 2000, 'a number is seconds already');
  const now = Date.parse('Wed, 21 Oct 2015 07:28:00 GMT');
  assert.equal(parseRetryAfter('Wed, 21 Oct 2015 07:28:05 GMT', now), 5000);
  assert.equal(parseRetryAfter('Wednesday, 21-Oct-15 07:28:05 GMT', now), 5000, 'RFC 850');
  assert.equal(parseRetryAfter('Wed Oct 21 07:28:05 2015', now), 5000, 'asctime');
  assert.equal(parseRetryAfter('Wed, 21 Oct 2015 07:27:00 GMT', now), 0, 'a date in the past means now');
  for (const bad of [undefined, null, '', 'soon', '-1', '1.5', -3, NaN]) assert.equal(parseRetryAfter(bad), null, String(bad));
});

test('the defaults are the core\'s, in milliseconds', () => {
  assert.deepEqual({ ...backoffDefaults }, { base: 100, cap: 20_000, attempts: 5 });
  assert.ok(Object.isFrozen(backoffDefaults));
  near(backoff(30, { random: () => 0.5 }), backoffDefaults.cap / 2, 'capped at the default cap');
  near(backoff(0, { random: () => 0.5 }), backoffDefaults.base / 2, 'the default base');
});

test('backoff is full jitter: uniform in [0, min(cap, base * 2^attempt)]', () => {
  assert.equal(backoff(0, { base: 100, random: () => 0 }), 0);
  near(backoff(0, { base: 100, random: () => 0.5 }), 50);
  near(backoff(3, { base: 100, random: () => 0.5 }), 400);
  near(backoff(30, { base: 100, cap: 1000, random: () => 0.999 }), 999);
  near(backoff(2000, { base: 100, cap: 1000, random: () => 0.5 }), 500, 'a huge attempt is capped, not infinite');
  for (let attempt = 0; attempt < 12; attempt++) {
    const w = backoff(attempt, { base: 10, cap: 5000 });
    assert.ok(w >= 0 && w <= Math.min(5000, 10 * 2 ** attempt), `${attempt}: ${w}`);
  }
});

test('backoff never waits less than Retry-After', () => {
  assert.equal(backoff(0, { retryAfter: '2', random: () => 0 }), 2000);
  near(backoff(2, { base: 100, retryAfter: '2', random: () => 0.75 }), 2300);
  near(backoff(1, { base: 100, retryAfter: 'Wed, 21 Oct 2015 07:28:00 GMT', random: () => 0.5 }), 100, 'a past date: no wait of its own');
  for (let i = 0; i < 100; i++) assert.ok(backoff(5, { retryAfter: 1 }) >= 1000);
});

test('backoff rejects what the core rejects, naming the field', () => {
  for (const [attempt, options, field] of [
    [-1, {}, 'attempt'],
    [1.5, {}, 'attempt'],
    ['1', {}, 'attempt'],
    [0, { random: () => 1 }, 'random'],
    [0, { random: () => -0.1 }, 'random'],
    [0, { random: () => NaN }, 'random'],
    [0, { random: () => '0.5' }, 'random'],
    [0, { base: '100' }, 'base'],
    // The core's checks, in the core's words (fw_backoff's fields).
    [0, { base: 0 }, 'backoff.base_s'],
    [0, { base: NaN }, 'backoff.base_s'],
    [0, { base: 100, cap: 50 }, 'backoff.cap_s'],
    [0, { cap: Infinity }, 'backoff.cap_s'],
  ]) {
    assert.throws(() => backoff(attempt, options), (err) => {
      assert.ok(err instanceof InvalidArgumentError, `${err.name}: ${err.message}`);
      assert.equal(err.field, field, `${attempt} ${JSON.stringify(options)}: ${err.message}`);
      return true;
    });
  }
});

test('retry comes back after a real 429 from floodwall, honouring its Retry-After', async () => {
  const fw = new Floodwall({ request_rate: { rate: 2, burst: 1 } });
  const app = express();
  app.use(floodwall(fw));
  app.get('/', (req, res) => res.send('ok'));
  const server = http.createServer(app);
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/`;
  try {
    assert.equal((await fetch(url)).status, 200);
    const seen = [];
    const started = Date.now();
    const res = await retry(() => fetch(url), { base: 10, onRetry: (info) => seen.push(info) });
    const waited = Date.now() - started;
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'ok');
    assert.ok(seen.length >= 1, 'the first call was rejected');
    assert.equal(seen[0].status, 429);
    assert.ok(seen[0].wait >= 1000, `waited ${seen[0].wait} ms, Retry-After said at least 1 s`);
    assert.ok(waited >= 1000);
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    fw.close();
  }
});

test('retry makes the core\'s attempts by default, the first call included', async () => {
  let calls = 0;
  const res = await retry(async () => {
    calls++;
    return { status: 429, headers: { 'retry-after': '0' } };
  }, { base: 1, cap: 1 });
  assert.equal(res.status, 429);
  assert.equal(calls, backoffDefaults.attempts);
});

test('retry gives up after `retries` and returns the last response', async () => {
  let calls = 0;
  const res = await retry(async () => {
    calls++;
    return { status: 503, headers: { 'retry-after': '0' } };
  }, { retries: 3, base: 1 });
  assert.equal(res.status, 503);
  assert.equal(calls, 4);
});

test('retry returns at once on a status it does not retry', async () => {
  let calls = 0;
  const res = await retry(async () => ({ statusCode: 404, headers: {}, calls: ++calls }));
  assert.equal(res.statusCode, 404);
  assert.equal(calls, 1);
});

test('an aborted signal stops the wait', async () => {
  const ac = new AbortController();
  const pending = retry(async () => ({ status: 429, headers: { 'retry-after': '60' } }), { signal: ac.signal });
  setTimeout(() => ac.abort(), 20);
  await assert.rejects(pending, { name: 'AbortError' });
});
