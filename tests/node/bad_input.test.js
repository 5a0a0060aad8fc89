'use strict';
// Every bad input gets a clear error naming the field, and nothing else: no crash, no hang, no spent token.
const assert = require('node:assert/strict');
const { test, describe } = require('node:test');
const { Floodwall, PolicyError, StoreError, InvalidArgumentError, FloodwallError, express } = require('../..');

const POLICY_CASES = [
  [{ request_rate: { rate: -1, burst: 5 } }, 'request_rate.rate'],
  [{ request_rate: { rate: NaN, burst: 5 } }, 'request_rate.rate'],
  [{ request_rate: { rate: Infinity, burst: 5 } }, 'request_rate.rate'],
  [{ request_rate: { rate: 0, burst: 5 } }, 'request_rate.rate'],
  [{ request_rate: { rate: '10', burst: 5 } }, 'request_rate.rate'],
  [{ request_rate: { burst: 5 } }, 'request_rate.rate'],
  [{ request_rate: { rate: 1, burst: 0 } }, 'request_rate.burst'],
  [{ request_rate: { rate: 1, burst: 1.5 } }, 'request_rate.burst'],
  [{ request_rate: { rate: 1 } }, 'request_rate.burst'],
  [{ request_rate: { rate: 1, burst: 5, burts: 5 } }, 'request_rate.burts'],
  [{ request_rate: { rate: 1, burst: 5, mode: 'loud' } }, 'request_rate.mode'],
  [{ request_rate: { rate: 1, burst: 5, overrides: { vip: { rate: 1, burst: -2 } } } }, 'request_rate.overrides.vip.burst'],
  [{ request_rate: 5 }, 'request_rate'],
  [{ concurrency: { limit: 0 } }, 'concurrency.limit'],
  [{ concurrency: { limit: 1, routes: '/search' } }, 'concurrency.routes'],
  [{ concurrency: { limit: 1, routes: [''] } }, 'concurrency.routes[0]'],
  [{ fleet: { capacity: -1 } }, 'fleet.capacity'],
  [{ utilization: { good: 0.9, bad: 0.8 } }, 'utilization.bad'],
  [{ utilization: { workers: 0 } }, 'utilization.workers'],
  [{ redis: { deadline_ms: 0 } }, 'redis.deadline_ms'],
  [{ prefix: 'with space' }, 'prefix'],
  [{ bogus: 1 }, 'bogus'],
  ['{"request_rate":', 'policy'],
  ['[1, 2]', 'policy'],
  ['/nonexistent/floodwall-policy.json', 'policy'],
  [42, 'policy'],
  [null, 'policy'],
  [[], 'policy'],
  [{ big: 1n }, 'policy'],
];

describe('a bad policy throws PolicyError naming the field', () => {
  for (const [policy, field] of POLICY_CASES) {
    test(`${typeof policy === 'string' ? policy : String(JSON.stringify(policy, (k, v) => (typeof v === 'bigint' ? `${v}n` : v)))} -> ${field}`, () => {
      assert.throws(() => new Floodwall(policy), (err) => {
        assert.ok(err instanceof PolicyError, `${err.name}: ${err.message}`);
        assert.ok(err instanceof FloodwallError && err instanceof Error);
        assert.equal(err.code, 'FW_EPOLICY');
        assert.equal(err.field, field, err.message);
        assert.ok(err.message.startsWith(`${field}: `), err.message);
        return true;
      });
    });
  }

  for (const store of ['ftp://example', 'redis://127.0.0.1:notaport/0', 'nonsense']) {
    test(`store ${store} -> StoreError`, () => {
      assert.throws(() => new Floodwall({ store }), (err) => {
        assert.ok(err instanceof StoreError, err.message);
        assert.equal(err.code, 'FW_ESTORE');
        assert.equal(err.field, 'store');
        return true;
      });
    });
  }
});

describe('a bad request rejects with InvalidArgumentError naming the field', () => {
  const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 10 } });
  const cases = [
    [undefined, 'request'],
    [null, 'request'],
    ['acme', 'request'],
    [{ tenant: 42 }, 'tenant'],
    [{ tenant: false }, 'tenant'],
    [{ tenant: { id: 'a' } }, 'tenant'],
    [{ tenant: new Uint16Array(2) }, 'tenant'],
    [{ headers: 'Authorization: Bearer x' }, 'headers'],
    [{ headers: { authorization: 'Bearer x' } }, 'headers'],
    [{ headers: ['Authorization'] }, 'headers'],
    [{ headers: ['Authorization', 5] }, 'headers'],
    [{ headers: ['Authorization', null] }, 'headers'],
    [{ headers: [['Authorization', 'Bearer x'], 'Accept'] }, 'headers'],
    [{ headers: [['Authorization']] }, 'headers'],
    [{ headers: [['Authorization', 'Bearer x', 'extra']] }, 'headers'],
    [{ headers: [['Authorization', new Uint16Array(2)]] }, 'headers'],
    [{ peer: 127001 }, 'peer'],
    [{ peer: ['127.0.0.1'] }, 'peer'],
    [{ tenant: 't', cost: -1 }, 'cost'],
    [{ tenant: 't', cost: 1.5 }, 'cost'],
    [{ tenant: 't', cost: NaN }, 'cost'],
    [{ tenant: 't', cost: Infinity }, 'cost'],
    [{ tenant: 't', cost: '3' }, 'cost'],
    [{ tenant: 't', cost: 2 ** 60 }, 'cost'],
    [{ tenant: 't', cost: 11 }, 'cost'],
    [{ tenant: 't', route: 5 }, 'route'],
    [{ tenant: 't', route: '/a\0b' }, 'route'],
    [{ tenant: 't', method: {} }, 'method'],
    [{ tenant: 't', method: 'GE\0T' }, 'method'],
    [{ tenant: 't', critical: 'yes' }, 'critical'],
    [{ tenant: 't', sandbox: 1 }, 'sandbox'],
    [{ peer: '192.0.2.1', verified: 'yes' }, 'verified'],
    [{ peer: '192.0.2.1', verified: 1 }, 'verified'],
    [{ peer: '192.0.2.1', verified: 0 }, 'verified'],
  ];
  for (const [request, field] of cases) {
    test(`${require('node:util').inspect(request, { breakLength: Infinity })} -> ${field}`, async () => {
      const pending = fw.admit(request);
      assert.ok(pending instanceof Promise, 'admit never throws synchronously');
      await assert.rejects(pending, (err) => {
        assert.ok(err instanceof InvalidArgumentError, `${err.name}: ${err.message}`);
        assert.equal(err.code, 'FW_EINVAL');
        assert.equal(err.field, field, err.message);
        return true;
      });
    });
  }

  test('no tenant, no headers, no peer: not an error, the anonymous tenant', async () => {
    for (const request of [{}, { tenant: null }, { tenant: undefined, headers: [], peer: null }]) {
      const d = await fw.admit(request);
      assert.equal(d.allowed, true);
    }
    assert.equal((await fw.admit({ tenant: '' })).allowed, true, 'an empty tenant is limited, not refused');
  });

  // CR, LF, NUL and a megabyte in header values and the peer: the key is hashed or falls back, and no
  // caller byte reaches the response (the trusted-proxy rule reads X-Forwarded-For from anyone here).
  test('hostile headers and peers never reach a response header', async () => {
    const evil = new Floodwall({ request_rate: { rate: 1, burst: 1 }, tenant: { trusted_proxies: ['0.0.0.0/0'] } });
    const hostile = [
      ['Authorization', 'Bearer acme\r\nX-Injected: yes'],
      ['X-API-Key', 'acme\0X-Injected: yes'],
      ['Authorization', 'x'.repeat(1 << 20)],
      ['X-Forwarded-For', `acme\r\nX-Injected: yes, ${'1.2.3.4, '.repeat(10000)}`],
    ];
    for (const [name, value] of hostile) {
      const headers = [name, value];
      // Vouched for, so that the hostile credentials are what the key is made of.
      const key = evil.tenantKey({ headers, peer: '10.0.0.1', verified: true });
      assert.ok(/^[\x21-\x7e]{1,46}$/.test(key) && !key.includes('acme'), key.slice(0, 80));
      await evil.admit({ headers, peer: '10.0.0.1', verified: true });
      const d = await evil.admit({ headers, peer: '10.0.0.1', verified: true });
      assert.equal(d.status, 429, 'one tenant: the hostile bytes were hashed or dropped the same way each time');
      const text = Object.entries(d.headers).map(([k, v]) => `${k}: ${v}\r\n`).join('') + d.contentType + d.body;
      assert.ok(/^[\x20-\x7e\r\n]*$/.test(text) && !text.includes('acme') && !text.includes('Injected'));
    }
    for (const peer of ['1.2.3.4\r\nX-Injected: yes', '/run/app.sock', '', '01.2.3.4', 'x'.repeat(1 << 20)]) {
      assert.equal(evil.tenantKey({ peer }), 'anonymous', JSON.stringify(peer.slice(0, 40)));
    }
    evil.close();
  });

  test('tenantKey throws the same errors, synchronously', () => {
    for (const [request, field] of [[null, 'request'], [{ tenant: 42 }, 'tenant'], [{ headers: 'x' }, 'headers'],
      [{ headers: ['a', 1] }, 'headers'], [{ peer: 1 }, 'peer'], [{ verified: 'true' }, 'verified']]) {
      assert.throws(() => fw.tenantKey(request), (err) => err instanceof InvalidArgumentError && err.field === field);
    }
  });

  test('requestCredential throws them too, synchronously', () => {
    for (const [request, field] of [[null, 'request'], [{ headers: 'x' }, 'headers'], [{ headers: ['a', 1] }, 'headers'],
      [{ headers: [['X-API-Key']] }, 'headers'], [{ peer: 1 }, 'peer']]) {
      assert.throws(() => fw.requestCredential(request), (err) => err instanceof InvalidArgumentError && err.field === field);
    }
  });

  test('a rejected request spends nothing', async () => {
    await assert.rejects(fw.admit({ tenant: 'fresh', cost: 11 }), InvalidArgumentError);
    assert.equal((await fw.admit({ tenant: 'fresh' })).remaining, 9);
  });

  test('after every bad request the client still works', async () => {
    assert.equal((await fw.admit({ tenant: 'after' })).allowed, true);
    fw.close();
  });
});

describe('bad control calls throw InvalidArgumentError naming the field', () => {
  const cases = [
    ['setMode', ['nope', 'dark'], 'limiter'],
    ['setMode', ['none', 'dark'], 'limiter'],
    ['setMode', [undefined, 'dark'], 'limiter'],
    ['setMode', ['request_rate', 'loud'], 'mode'],
    ['setMode', ['request_rate', 1], 'mode'],
    ['getMode', ['nope'], 'limiter'],
    ['reportUtilization', [NaN], 'utilization'],
    ['reportUtilization', [-0.1], 'utilization'],
    ['reportUtilization', [1.5], 'utilization'],
    ['reportUtilization', ['0.5'], 'utilization'],
    ['reportUtilization', [undefined], 'utilization'],
  ];
  for (const [method, args, field] of cases) {
    test(`${method}(${args.map((a) => JSON.stringify(a) ?? 'undefined').join(', ')}) -> ${field}`, () => {
      const fw = new Floodwall({ request_rate: { rate: 1, burst: 1 }, utilization: {} });
      try {
        assert.throws(() => fw[method](...args), (err) => {
          assert.ok(err instanceof InvalidArgumentError, `${err.name}: ${err.message}`);
          assert.equal(err.field, field, err.message);
          return true;
        });
      } finally {
        fw.close();
      }
    });
  }
});

describe('bad middleware options throw TypeError at setup', () => {
  const fw = new Floodwall();
  for (const [args, what] of [
    [[null], 'fw'],
    [[{}], 'fw'],
    [[fw, { keyGenerator: 'ip' }], 'keyGenerator'],
    [[fw, { keyGenerator: null }], 'keyGenerator'],
    [[fw, { skip: 'yes' }], 'skip'], // a boolean or a function (config.floodwall's skip: true, the same option)
    [[fw, { handler: 429 }], 'handler'],
    [[fw, { cost: 1.5 }], 'cost'],
    [[fw, { critical: 'no' }], 'critical'],
    [[fw, { route: 5 }], 'route'],
    [[fw, { keygenerator: () => 'x' }], 'keygenerator'],
  ]) {
    test(what, () => assert.throws(() => express(...args), (err) => err instanceof TypeError && err.message.includes(what)));
  }
  test('close', () => fw.close());
});
