'use strict';
// The Floodwall API on the memory store: decisions, the core's headers and bodies, tickets, modes, metrics.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { test, describe } = require('node:test');
const floodwall = require('../..');
const { Floodwall, Decision, FloodwallError, ClosedError } = floodwall;
const { eventually } = require('./helpers');

const SEED = { request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 } };
// A limit of its own for POSTs and a daily quota for everything, next to the tenant's bucket.
const RULES = {
  store: 'memory://',
  request_rate: {
    rate: 0.001,
    burst: 10,
    limits: [{ name: 'writes', routes: ['/*'], methods: ['POST'], rate: 0.001, burst: 1 }],
  },
  quotas: [{ name: 'daily', limit: 100, period: 'day' }],
};

function withClient(policy, fn) {
  const fw = new Floodwall(policy);
  return Promise.resolve(fn(fw)).finally(() => fw.close());
}

async function admitMany(fw, n, request) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await fw.admit(request));
  return out;
}

describe('construction', () => {
  test('takes the policy as an object, a JSON string, a file path or a file URL', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fw-policy-'));
    const file = path.join(dir, 'policy.json');
    fs.writeFileSync(file, JSON.stringify(SEED));
    try {
      for (const policy of [SEED, JSON.stringify(SEED), `  \n${JSON.stringify(SEED)}`, file, pathToFileURL(file)]) {
        await withClient(policy, async (fw) => {
          const d = await fw.admit({ tenant: 'acme' });
          assert.equal(d.limit, 500);
          assert.equal(d.concurrencyLimit, 20);
        });
      }
    } finally {
      fs.rmSync(dir, { recursive: true });
    }
  });

  test('an empty policy configures no limiter and allows everything', async () => {
    await withClient(undefined, async (fw) => {
      const d = await fw.admit({ tenant: 'acme' });
      assert.equal(d.allowed, true);
      assert.equal(d.status, 200);
      assert.equal(d.limit, 0);
      assert.deepEqual(d.headers, {});
      assert.equal(fw.getMode('request_rate'), 'off');
    });
  });

  test('exposes the core version and the error classes', () => {
    assert.match(floodwall.version, /^\d+\.\d+\.\d+$/);
    for (const name of ['PolicyError', 'StoreError', 'InvalidArgumentError', 'ClosedError']) {
      assert.ok(new floodwall[name]('x: y') instanceof FloodwallError, name);
      assert.equal(new floodwall[name]('x: y').field, 'x');
    }
  });

  test('the JS error codes are the C ABI codes', () => {
    const addon = require('../../build-node/floodwall.node');
    assert.deepEqual(require('../../bindings/node/lib/errors').CODES, addon.codes);
  });
});

describe('admit on the memory store', () => {
  test('an allowed request carries the seed example headers and no body', async () => {
    await withClient(SEED, async (fw) => {
      const d = await fw.admit({ tenant: 'acme', route: '/v1/routes', method: 'POST' });
      assert.ok(d instanceof Decision);
      assert.equal(d.allowed, true);
      assert.equal(d.status, 200);
      assert.equal(d.limiter, null);
      assert.equal(d.darkLimiter, null);
      assert.equal(d.failedOpen, false);
      assert.equal(d.failReason, null);
      assert.equal(d.limit, 500);
      assert.equal(d.remaining, 499);
      assert.equal(d.reset, 1);
      assert.equal(d.retryAfter, 0);
      assert.equal(d.rate, 100);
      assert.equal(d.concurrencyLimit, 20);
      assert.equal(d.concurrencyRemaining, 19);
      assert.equal(typeof d.ticket, 'number');
      assert.notEqual(d.ticket, 0);
      assert.deepEqual(Object.entries(d.headers), [
        ['RateLimit-Policy', '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"'],
        ['RateLimit', '"concurrency";r=19'], // the policy closest to exhaustion: 19/20 left against 499/500
        ['RateLimit-Limit', '500'],
        ['RateLimit-Remaining', '499'],
        ['RateLimit-Reset', '1'],
      ]);
      assert.equal(d.body, null);
      assert.equal(d.contentType, null);
      assert.equal(d.cost, 1);
      fw.release(d);
    });
  });

  test('the request-rate bucket rejects with 429, Retry-After and the core body', async () => {
    await withClient({ request_rate: { rate: 1, burst: 3 } }, async (fw) => {
      const allowed = await admitMany(fw, 3, { tenant: 'acme' });
      assert.deepEqual(allowed.map((d) => d.remaining), [2, 1, 0]);
      const d = await fw.admit({ tenant: 'acme' });
      assert.equal(d.allowed, false);
      assert.equal(d.status, 429);
      assert.equal(d.limiter, 'request_rate');
      assert.ok(d.retryAfter >= 1);
      assert.equal(d.ticket, 0);
      assert.equal(d.headers['Retry-After'], String(d.retryAfter));
      assert.equal(d.headers['RateLimit-Remaining'], '0');
      assert.equal(d.contentType, 'application/json');
      assert.deepEqual(JSON.parse(d.body), {
        error: {
          type: 'rate_limit_error',
          limit_type: 'request_rate',
          message: `Request rate limit exceeded: 1 requests/second sustained (bursts to 3). Retry after ${d.retryAfter}s.`,
          limit: 3,
          rate: 1,
          retry_after: d.retryAfter,
        },
      });
      // Another tenant has its own bucket.
      assert.equal((await fw.admit({ tenant: 'globex' })).allowed, true);
    });
  });

  test('cost spends that many tokens; cost 0 counts as 1; the decision says what it asked for', async () => {
    await withClient({ request_rate: { rate: 0.001, burst: 10 } }, async (fw) => {
      const five = await fw.admit({ tenant: 'a', cost: 5 });
      assert.equal(five.remaining, 5);
      assert.equal(five.cost, 5);
      const zero = await fw.admit({ tenant: 'a', cost: 0 });
      assert.equal(zero.remaining, 4);
      assert.equal(zero.cost, 1);
      assert.equal((await fw.admit({ tenant: 'a' })).remaining, 3);
      const d = await fw.admit({ tenant: 'a', cost: 4 });
      assert.equal(d.status, 429);
      assert.equal(d.cost, 4);
      assert.match(d.body, /\b4\b/, 'the rejection names the cost');
      assert.equal((await fw.admit({ tenant: 'a', cost: 3 })).remaining, 0, 'a rejection spends nothing');
    });
  });

  test('per-tenant overrides get their own bucket size', async () => {
    const policy = { request_rate: { rate: 1, burst: 2, overrides: { vip: { rate: 1, burst: 50 } } } };
    await withClient(policy, async (fw) => {
      assert.equal((await fw.admit({ tenant: 'vip' })).limit, 50);
      assert.equal((await fw.admit({ tenant: 'other' })).limit, 2);
    });
  });

  test('concurrency counts in-flight requests until release; release is idempotent', async () => {
    await withClient({ concurrency: { limit: 2 } }, async (fw) => {
      const [a, b] = await admitMany(fw, 2, { tenant: 't' });
      const rejected = await fw.admit({ tenant: 't' });
      assert.equal(rejected.status, 429);
      assert.equal(rejected.limiter, 'concurrency');
      assert.equal(rejected.retryAfter, 1);
      assert.equal(JSON.parse(rejected.body).error.limit_type, 'concurrency');
      assert.equal(rejected.headers.RateLimit, '"concurrency";r=0');
      fw.release(a);
      fw.release(a);
      fw.release(a.ticket);
      const c = await fw.admit({ tenant: 't' });
      assert.equal(c.allowed, true);
      assert.equal(c.concurrencyRemaining, 0, 'releasing one ticket three times freed one slot');
      assert.equal((await fw.admit({ tenant: 't' })).status, 429);
      for (const nothing of [undefined, null, 0, {}, rejected]) fw.release(nothing);
      fw.release(b);
      fw.release(c);
      assert.equal((await fw.admit({ tenant: 't' })).concurrencyRemaining, 1);
    });
  });

  test('concurrency counts only the routes it lists', async () => {
    await withClient({ concurrency: { limit: 1, routes: ['/search'] } }, async (fw) => {
      const other = await admitMany(fw, 3, { tenant: 't', route: '/browse' });
      assert.ok(other.every((d) => d.allowed && d.concurrencyLimit === 0));
      assert.equal((await fw.admit({ tenant: 't', route: '/search' })).allowed, true);
      assert.equal((await fw.admit({ tenant: 't', route: '/search' })).status, 429);
    });
  });

  test('the fleet shedder answers 503 to non-critical traffic and never counts critical requests', async () => {
    await withClient({ fleet: { capacity: 1 } }, async (fw) => {
      const first = await fw.admit({ tenant: 'a' });
      const shed = await fw.admit({ tenant: 'b' });
      assert.equal(shed.status, 503);
      assert.equal(shed.limiter, 'fleet');
      assert.equal(JSON.parse(shed.body).error.type, 'service_unavailable');
      assert.equal(shed.headers['Retry-After'], '1');
      const critical = await admitMany(fw, 5, { tenant: 'c', critical: true });
      assert.ok(critical.every((d) => d.allowed));
      fw.release(first);
      assert.equal((await fw.admit({ tenant: 'b' })).allowed, true);
    });
  });

  test('the utilization shedder sheds sandbox traffic first and critical traffic last (503)', async () => {
    const policy = { utilization: { workers: 1, sample_s: 0.02, ramp_s: 2, delay_s: 0 } };
    await withClient(policy, async (fw) => {
      fw.reportUtilization(1);
      await eventually(() => fw.sheddingAmount() >= 0.25); // tier 0 (sandbox) now drops with probability 1
      const sandbox = await fw.admit({ tenant: 't', sandbox: true });
      const critical = await fw.admit({ tenant: 't', critical: true, method: 'POST' });
      assert.equal(sandbox.status, 503);
      assert.equal(sandbox.limiter, 'utilization');
      assert.equal(JSON.parse(sandbox.body).error.limit_type, 'utilization');
      assert.ok(sandbox.retryAfter >= 1);
      assert.equal(critical.allowed, true, `critical shed at amount ${fw.sheddingAmount()}`);
      fw.release(critical);
    });
  });

  test('dark mode allows and names the limiter that would have blocked; off skips it', async () => {
    await withClient({ request_rate: { rate: 0.001, burst: 1 } }, async (fw) => {
      await fw.admit({ tenant: 't' });
      fw.setMode('request_rate', 'dark');
      assert.equal(fw.getMode('request_rate'), 'dark');
      const d = await fw.admit({ tenant: 't' });
      assert.equal(d.allowed, true);
      assert.equal(d.status, 200);
      assert.equal(d.limiter, null);
      assert.equal(d.darkLimiter, 'request_rate');
      assert.equal(fw.metrics().decisions.request_rate.dark_rejected, 1);
      fw.setMode('request_rate', 'off');
      const off = await fw.admit({ tenant: 't' });
      assert.equal(off.allowed, true);
      assert.equal(off.darkLimiter, null);
      fw.setMode('request_rate', 'enforce');
      assert.equal((await fw.admit({ tenant: 't' })).status, 429);
    });
  });

  test('a decision names the limits and quotas that applied and the one that rejected', async () => {
    await withClient(RULES, async (fw) => {
      const first = await fw.admit({ tenant: 'acme', route: '/orders', method: 'POST' });
      assert.equal(first.allowed, true);
      assert.deepEqual(first.rules, ['writes', 'daily']); // the limits in policy order, then the quotas
      assert.equal(first.rule, null);
      assert.equal(first.darkRule, null);
      const second = await fw.admit({ tenant: 'acme', route: '/orders', method: 'POST' });
      // Decided after `second`: the scratch array now holds its numbers, and `second` must not need them.
      const read = await fw.admit({ tenant: 'acme', route: '/orders', method: 'GET' });
      assert.equal(second.allowed, false);
      assert.equal(second.status, 429);
      assert.equal(second.limiter, 'request_rate');
      assert.equal(second.rule, 'writes');
      assert.deepEqual(second.rules, ['writes', 'daily']);
      const policy = second.headers['RateLimit-Policy'];
      assert.match(policy, /"writes";q=1;.*"daily";q=100;w=86400/);
      assert.match(second.headers.RateLimit, /^"writes";r=0;/);
      const error = JSON.parse(second.body).error;
      assert.equal(error.policy, 'writes');
      assert.equal(error.limit, 1);
      assert.equal(read.allowed, true);
      assert.deepEqual(read.rules, ['daily']);
      assert.equal(read.rule, null);
      assert.doesNotMatch(read.headers['RateLimit-Policy'], /"writes"/);
      assert.deepEqual(JSON.parse(JSON.stringify(second)).rules, ['writes', 'daily']);
      assert.equal(JSON.parse(JSON.stringify(second)).rule, 'writes');
    });
    // No rules in the policy: nothing to name.
    await withClient({ request_rate: { rate: 1, burst: 2 } }, async (fw) => {
      const d = await fw.admit({ tenant: 'acme', route: '/orders', method: 'POST' });
      assert.deepEqual([d.rules, d.rule, d.darkRule], [[], null, null]);
    });
    // A dark limit lets the request in and names itself as the one that would have rejected it.
    const dark = { ...RULES.request_rate, limits: [{ ...RULES.request_rate.limits[0], mode: 'dark' }] };
    await withClient({ ...RULES, request_rate: dark }, async (fw) => {
      await fw.admit({ tenant: 'acme', route: '/orders', method: 'POST' });
      const d = await fw.admit({ tenant: 'acme', route: '/orders', method: 'POST' });
      assert.deepEqual([d.allowed, d.rule, d.darkRule, d.darkLimiter], [true, null, 'writes', 'request_rate']);
    });
  });

  test('any bytes are a tenant: Buffers, NUL, braces, CR/LF, 1 MB; none reaches a header', async () => {
    await withClient({ request_rate: { rate: 0.001, burst: 5 } }, async (fw) => {
      const huge = 'x'.repeat(1 << 20);
      for (const tenant of ['a\0b', '{a}', '}{', 'a\r\nSet-Cookie: x=1', huge, Buffer.from([0, 255, 1]), 'é']) {
        const d = await fw.admit({ tenant });
        assert.equal(d.allowed, true);
        assert.equal(d.remaining, 4, 'a fresh bucket for every distinct tenant');
        for (const [name, value] of Object.entries(d.headers)) {
          assert.match(name + value, /^[\x20-\x7e]*$/);
          assert.ok(!value.includes('Set-Cookie') && !value.includes('{a}'));
        }
      }
      // A string and a Buffer of the same UTF-8 bytes are the same tenant; NUL does not truncate.
      assert.equal((await fw.admit({ tenant: Buffer.from('é') })).remaining, 3);
      assert.equal((await fw.admit({ tenant: 'a\0c' })).remaining, 4);
      assert.equal((await fw.admit({ tenant: new Uint8Array([0, 255, 1]) })).remaining, 3);
    });
  });

  test('a decision serialises with its headers and body', async () => {
    await withClient({ request_rate: { rate: 1, burst: 1 } }, async (fw) => {
      await fw.admit({ tenant: 't' });
      const d = await fw.admit({ tenant: 't' });
      const json = JSON.parse(JSON.stringify(d));
      assert.equal(json.status, 429);
      assert.equal(json.limiter, 'request_rate');
      assert.deepEqual(json.headers, d.headers);
      assert.equal(json.body, d.body);
      assert.equal(json.contentType, 'application/json');
      assert.equal(json.cost, 1);
    });
  });

  test('a decision formatted after later ones keeps its own headers and body', async () => {
    await withClient({ request_rate: { rate: 0.001, burst: 2 }, concurrency: { limit: 5 } }, async (fw) => {
      const first = await fw.admit({ tenant: 'a' });
      const second = await fw.admit({ tenant: 'a' });
      const third = await fw.admit({ tenant: 'a' }); // rejected: the bucket is empty
      assert.equal(third.status, 429);
      assert.equal(third.headers['RateLimit-Remaining'], '0');
      assert.ok(third.body.includes('request_rate'));
      // Formatted after the client's later decisions (and after a formatting): each its own numbers.
      assert.equal(first.headers['RateLimit-Remaining'], '1');
      assert.equal(first.body, null);
      assert.equal(second.headers['RateLimit-Remaining'], '0');
      assert.equal(second.headers['Retry-After'], undefined);
      assert.equal(first.headers['RateLimit'], '"request_rate";r=1;t=1000');
      assert.match(second.headers['RateLimit'], /^"request_rate";r=0;/);
      fw.release(first);
      fw.release(second);
    });
  });

  test('allowed decisions with the same numbers have equal headers, each its own object', async () => {
    await withClient({ request_rate: { rate: 0.001, burst: 5 }, concurrency: { limit: 5 }, headers: 'ietf' }, async (fw) => {
      // Two tenants' first requests: the same numbers, so the same response (the addon formats it once).
      const a = await fw.admit({ tenant: 'a' });
      const b = await fw.admit({ tenant: 'b' });
      assert.deepEqual(b.headers, a.headers);
      assert.notEqual(b.headers, a.headers);
      a.headers.RateLimit = 'changed by the app';
      const c = await fw.admit({ tenant: 'c' });
      assert.equal(c.headers.RateLimit, '"request_rate";r=4;t=1000');
      assert.deepEqual(Object.keys(c.headers), ['RateLimit-Policy', 'RateLimit']);
      // Other numbers between two like ones, and a rejection: each decision its own headers.
      const second = await fw.admit({ tenant: 'a' });
      assert.equal(second.headers.RateLimit, '"request_rate";r=3;t=2000');
      for (let i = 0; i < 3; i++) fw.release(await fw.admit({ tenant: 'a' }));
      const rejected = await fw.admit({ tenant: 'a' });
      assert.equal(rejected.status, 429);
      assert.match(rejected.headers.RateLimit, /^"request_rate";r=0;/);
      const d = await fw.admit({ tenant: 'd' });
      assert.equal(d.headers.RateLimit, '"request_rate";r=4;t=1000');
      assert.equal(d.body, null);
      for (const x of [a, b, c, second, d]) fw.release(x);
      // Closed, the client formats nothing, even a response it has made before.
      const e = await fw.admit({ tenant: 'e' });
      fw.close();
      assert.throws(() => e.headers, ClosedError);
    });
  });

  test('many admits in one tick all resolve, each with its own decision', async () => {
    await withClient({ request_rate: { rate: 0.001, burst: 1000 } }, async (fw) => {
      const decisions = await Promise.all(Array.from({ length: 1000 }, () => fw.admit({ tenant: 't' })));
      const remaining = decisions.map((d) => d.remaining).sort((a, b) => a - b);
      assert.deepEqual(remaining, Array.from({ length: 1000 }, (_, i) => i));
    });
  });
});

describe('the tenant: given, or derived by the core from the headers and the peer', () => {
  const BEARER = 'Bearer 0123456789abcdef';

  test('tenantKey: a verified credential hashed, else the peer address, else anonymous; a given tenant as it is', async () => {
    await withClient(undefined, (fw) => {
      const key = fw.tenantKey({ headers: ['Authorization', BEARER], peer: '203.0.113.7', verified: true });
      assert.match(key, /^key:[0-9a-f]{32}$/);
      assert.ok(!key.includes('0123456789abcdef'), 'the token is hashed');
      assert.match(fw.tenantKey({ headers: ['X-API-Key', 'k-1'], verified: true }), /^key:[0-9a-f]{32}$/);
      assert.notEqual(fw.tenantKey({ headers: ['X-API-Key', 'k-1'], verified: true }),
        fw.tenantKey({ headers: ['X-API-Key', 'k-2'], verified: true }));
      assert.equal(fw.tenantKey({ headers: ['Accept', '*/*'], peer: '203.0.113.7' }), 'ip:203.0.113.7');
      assert.equal(fw.tenantKey({ peer: '::ffff:203.0.113.7' }), 'ip:203.0.113.7', 'IPv4-mapped IPv6 is the IPv4 address');
      assert.equal(fw.tenantKey({}), 'anonymous');
      assert.equal(fw.tenantKey({ tenant: null, headers: null, peer: null }), 'anonymous');
      assert.equal(fw.tenantKey({ tenant: 'acme', headers: ['Authorization', BEARER] }), 'acme', 'a tenant is used as given');
    });
  });

  test('a credential nobody vouched for names no tenant: unchecked and rejected are the address', async () => {
    await withClient(undefined, (fw) => {
      const request = { headers: ['Authorization', BEARER], peer: '203.0.113.7' };
      assert.equal(fw.tenantKey(request), 'ip:203.0.113.7', 'unchecked: the policy\'s default "verified" ignores it');
      assert.equal(fw.tenantKey({ ...request, verified: null }), 'ip:203.0.113.7');
      assert.equal(fw.tenantKey({ ...request, verified: false }), 'ip:203.0.113.7');
      assert.match(fw.tenantKey({ ...request, verified: true }), /^key:/);
      assert.equal(fw.tenantKey({ tenant: 'acme', verified: false }), 'acme', 'a given tenant is used as given');
    });
  });

  test('tenant.credentials "unverified" opts back in: an unchecked credential names its tenant, a rejected one never', async () => {
    await withClient({ tenant: { credentials: 'unverified' } }, (fw) => {
      const request = { headers: [['X-API-Key', 'k-1']], peer: '203.0.113.7' };
      assert.equal(fw.tenantKey(request), fw.tenantKey({ ...request, verified: true }));
      assert.match(fw.tenantKey(request), /^key:/);
      assert.equal(fw.tenantKey({ ...request, verified: false }), 'ip:203.0.113.7');
    });
  });

  test('requestCredential: what a verify hook is asked about, raw and trimmed; null without one', async () => {
    await withClient(undefined, (fw) => {
      assert.equal(fw.requestCredential({ headers: ['Authorization', `  ${BEARER} `], peer: '203.0.113.7' }), '0123456789abcdef');
      assert.equal(fw.requestCredential({ headers: [['X-API-Key', ' k-1 ']] }), 'k-1');
      assert.equal(fw.requestCredential({ headers: ['Authorization', 'Basic dXNlcjpwYXNz'] }), 'Basic dXNlcjpwYXNz');
      assert.equal(fw.requestCredential({ headers: ['Accept', '*/*'], peer: '203.0.113.7' }), null);
      assert.equal(fw.requestCredential({}), null);
      // Latin-1 both ways: the string is the header value as node:http gives it to the app.
      const value = Buffer.from([0x74, 0xe9, 0xff]).toString('latin1');
      assert.equal(fw.requestCredential({ headers: ['X-API-Key', value] }), value);
      assert.equal(fw.requestCredential({ headers: [Buffer.from('X-API-Key'), Buffer.from([0x74, 0xe9, 0xff])] }), value);
    });
    await withClient({ tenant: { from: ['ip', 'authorization'] } }, (fw) => {
      const headers = ['Authorization', BEARER];
      assert.equal(fw.requestCredential({ headers, peer: '203.0.113.7' }), null, 'the address comes first');
      assert.equal(fw.requestCredential({ headers }), '0123456789abcdef', 'no address: the credential');
    });
  });

  test('deadlineMs: the store\'s deadline, 50 ms unless the policy says', async () => {
    await withClient(undefined, (fw) => assert.equal(fw.deadlineMs, 50));
    await withClient({ redis: { deadline_ms: 250 } }, (fw) => assert.equal(fw.deadlineMs, 250));
  });

  test('both header layouts, any case, strings or Buffers: one key', async () => {
    await withClient(undefined, (fw) => {
      const key = fw.tenantKey({ headers: ['Authorization', BEARER], verified: true });
      for (const headers of [
        [['authorization', BEARER]],
        ['Host', 'example.test', 'AUTHORIZATION', BEARER, 'Accept', '*/*'],
        [['Host', 'example.test'], ['Authorization', BEARER]],
        [Buffer.from('authorization'), Buffer.from(BEARER)],
        [[Buffer.from('Authorization'), BEARER]],
      ]) {
        assert.equal(fw.tenantKey({ headers, peer: '198.51.100.1', verified: true }), key, JSON.stringify(headers));
        assert.equal(fw.requestCredential({ headers, peer: '198.51.100.1' }), '0123456789abcdef', JSON.stringify(headers));
      }
    });
  });

  test('header strings are Latin-1, as node:http decodes the bytes a client sent', async () => {
    await withClient(undefined, (fw) => {
      const bytes = Buffer.from([0x42, 0x65, 0x61, 0x72, 0x65, 0x72, 0x20, 0x74, 0xe9, 0xff]); // 'Bearer t\xe9\xff'
      assert.equal(fw.tenantKey({ headers: ['Authorization', bytes.toString('latin1')], verified: true }),
        fw.tenantKey({ headers: [Buffer.from('Authorization'), bytes], verified: true }));
    });
  });

  test('admit without a tenant decides on the derived one; \'\' is the anonymous tenant', async () => {
    await withClient({ request_rate: { rate: 0.001, burst: 10 } }, async (fw) => {
      const bearer = (peer) => ({ headers: ['Authorization', BEARER], peer, verified: true });
      assert.equal((await fw.admit(bearer('192.0.2.1'))).remaining, 9);
      assert.equal((await fw.admit(bearer('192.0.2.2'))).remaining, 8, 'the same credential from another peer');
      assert.equal((await fw.admit({ tenant: fw.tenantKey(bearer()) })).remaining, 7, 'tenantKey names that bucket');
      assert.equal((await fw.admit({ peer: '192.0.2.1' })).remaining, 9);
      assert.equal((await fw.admit({ tenant: 'ip:192.0.2.1' })).remaining, 8);
      assert.equal((await fw.admit({})).remaining, 9, 'nothing to derive from: the anonymous tenant');
      const empty = await fw.admit({ tenant: '' });
      assert.equal(empty.allowed, true, 'an empty tenant is limited, not refused');
      assert.equal(empty.remaining, 8, 'an empty tenant is that same anonymous tenant');
      assert.equal((await fw.admit({ tenant: Buffer.alloc(0) })).remaining, 7, 'and so is an empty Buffer');
      assert.equal(fw.tenantKey({ tenant: '' }), 'anonymous');
    });
  });

  test('made-up credentials from one address spend that address\'s bucket; a verified one has its own', async () => {
    await withClient({ request_rate: { rate: 0.001, burst: 2 } }, async (fw) => {
      const madeUp = (i) => ({ headers: [['X-API-Key', `made-up-${i}`]], peer: '192.0.2.9' });
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push((await fw.admit(madeUp(i))).status);
      assert.deepEqual(statuses, [200, 200, 429, 429, 429]);
      assert.equal((await fw.admit({ ...madeUp(9), verified: false })).status, 429, 'rejected: the address too');
      const real = await fw.admit({ ...madeUp('real'), verified: true });
      assert.equal(real.status, 200);
      assert.equal(real.remaining, 1, 'a verified key: its own bucket');
    });
  });

  test('the request\'s own bytes are copied: reusing the header array afterwards changes nothing', async () => {
    await withClient({ request_rate: { rate: 0.001, burst: 10 } }, async (fw) => {
      const headers = ['Authorization', BEARER];
      const pending = fw.admit({ headers, verified: true });
      headers[1] = 'Bearer other';
      assert.equal((await pending).remaining, 9);
      assert.equal((await fw.admit({ headers: ['Authorization', BEARER], verified: true })).remaining, 8);
    });
  });
});

describe('metrics, modes and close', () => {
  test('metrics() and prometheus() are the core counters', async () => {
    await withClient(SEED, async (fw) => {
      fw.release(await fw.admit({ tenant: 'acme', route: '/v1/routes' }));
      const m = fw.metrics();
      assert.equal(m.decisions.request_rate.allowed, 1);
      assert.equal(m.decisions.concurrency.allowed, 1);
      assert.equal(m.routes['/v1/routes'].request_rate.allowed, 1);
      assert.equal(m.breaker, 'closed');
      assert.match(fw.prometheus(), /^floodwall_decisions_total\{limiter="request_rate",outcome="allowed",route="\/v1\/routes"\} 1$/m);
    });
  });

  test('reportUtilization feeds the shedder; sheddingAmount reads it', async () => {
    await withClient({ utilization: { workers: 4 } }, async (fw) => {
      fw.reportUtilization(0.5);
      assert.equal(typeof fw.sheddingAmount(), 'number');
      assert.ok(fw.sheddingAmount() <= 0);
    });
  });

  test('close is idempotent; afterwards admits reject with ClosedError and release is a no-op', async () => {
    const fw = new Floodwall(SEED);
    const d = await fw.admit({ tenant: 't' });
    fw.close();
    fw.close();
    assert.equal(fw.closed, true);
    fw.release(d);
    await assert.rejects(fw.admit({ tenant: 't' }), ClosedError);
    assert.throws(() => fw.tenantKey({ peer: '192.0.2.1' }), ClosedError);
    assert.throws(() => fw.requestCredential({ headers: ['X-API-Key', 'k'] }), ClosedError);
    assert.throws(() => fw.deadlineMs, ClosedError);
    assert.throws(() => fw.metrics(), ClosedError);
    assert.throws(() => fw.setMode('request_rate', 'dark'), ClosedError);
    assert.throws(() => d.headers, ClosedError, 'formatting needs the client');
  });
});

test('the adaptive limit sheds with its own 503, and dark mode says so', () =>
  withClient(
    { adaptive: { enabled: true, min_limit: 2, max_limit: 2, initial_limit: 2, critical_reserve: 0 } },
    async (fw) => {
      const held = [await fw.admit({ tenant: 'acme' }), await fw.admit({ tenant: 'acme' })];
      assert.ok(held.every((d) => d.allowed));
      const shed = await fw.admit({ tenant: 'acme' });
      assert.deepEqual([shed.allowed, shed.status, shed.limiter], [false, 503, 'adaptive']);
      assert.equal(shed.headers['Retry-After'], '1');
      assert.equal(JSON.parse(shed.body).error.limit_type, 'adaptive');
      fw.setMode('adaptive', 'dark');
      const dark = await fw.admit({ tenant: 'acme' });
      assert.deepEqual([dark.allowed, dark.darkLimiter], [true, 'adaptive']);
      fw.setMode('adaptive', 'enforce');
      for (const d of held) fw.release(d);
      assert.ok((await fw.admit({ tenant: 'acme' })).allowed);
      assert.match(fw.prometheus(), /floodwall_adaptive_limit\{route="\*"\} 2\n/);
    },
  ));
