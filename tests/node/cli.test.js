'use strict';
// The floodwall command as npm installs it (package.json "bin"): bin/floodwall.js runs the C library's
// command (fw_cli_run) through the addon. Against a real redis-server: each change seen by a Node client in
// another process (this test) at its next request, a mode at its next flags poll; --json read back; bad
// input and an unreachable store said with their exit statuses.
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { test, before, after } = require('node:test');
const { Floodwall, version } = require('../..');
const pkg = require('../../package.json');
const { startRedis, freePort, eventually } = require('./helpers');

const BIN = path.join(__dirname, '..', '..', pkg.bin.floodwall);
let redis;

before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

function floodwall(args, store) {
  const env = { ...process.env };
  delete env.FLOODWALL_STORE;
  if (store !== undefined) env.FLOODWALL_STORE = store;
  const r = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 60000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

test('package.json names the bin, and its help and version are the command\'s', () => {
  assert.equal(pkg.bin.floodwall, 'bindings/node/bin/floodwall.js');
  const h = floodwall(['--help']);
  assert.equal(h.code, 0, h.err);
  assert.ok(h.out.startsWith('Usage: floodwall [OPTIONS] COMMAND [ARGS]\n'));
  assert.match(h.out, /Exit status: 0/);
  assert.equal(floodwall(['--version']).out, `floodwall ${version}\n`);
  const none = floodwall([]);
  assert.equal(none.code, 2);
  assert.match(none.err, /Usage: floodwall/);
});

test('block, override, tenant show and mode reach a Node client of the same store', async () => {
  const prefix = `cli${process.pid}`;
  const fw = new Floodwall({
    store: redis.url, prefix, redis: { deadline_ms: 2000, flags_poll_ms: 1000 },
    request_rate: { rate: 0.001, burst: 2 },
  });
  try {
    const store = redis.url;
    assert.equal((await fw.admit({ tenant: 'js-acme' })).status, 200);
    let r = floodwall(['--prefix', prefix, 'block', 'js-acme', '--json'], store);
    assert.equal(r.code, 0, r.err);
    const shown = JSON.parse(r.out);
    assert.deepEqual([shown.tenant, shown.blocked, shown.blocked_until], ['js-acme', true, null]);
    const d = await fw.admit({ tenant: 'js-acme' });
    assert.deepEqual([d.status, d.blocked], [403, true]);
    assert.equal(floodwall(['--prefix', prefix, 'unblock', 'js-acme'], store).code, 0);
    assert.equal((await fw.admit({ tenant: 'js-acme' })).status, 200);

    r = floodwall(['--prefix', prefix, 'override', 'set', 'js-acme', '--rate', '1', '--burst', '9'], store);
    assert.equal(r.code, 0, r.err);
    assert.equal((await fw.admit({ tenant: 'js-acme' })).limit, 9);
    r = floodwall(['--prefix', prefix, 'tenant', 'show', 'js-acme', '--json'], store);
    assert.equal(r.code, 0, r.err);
    const t = JSON.parse(r.out);
    assert.deepEqual(t.override, { rate: 1, burst: 9 });
    assert.equal(t.request_rate.limit, 9);

    for (let i = 0; i < 3; i++) await fw.admit({ tenant: 'js-moded' });
    assert.equal((await fw.admit({ tenant: 'js-moded' })).status, 429);
    assert.equal(floodwall(['--prefix', prefix, 'mode', 'request_rate', 'dark'], store).code, 0);
    await eventually(async () => {
      const x = await fw.admit({ tenant: 'js-moded' });
      return x.allowed && x.darkLimiter === 'request_rate';
    }); // the fleet-wide dark mode, at the client's next flags poll
    assert.equal(floodwall(['--prefix', prefix, 'mode', 'request_rate', 'default'], store).code, 0);
    await eventually(async () => (await fw.admit({ tenant: 'js-moded' })).status === 429); // the policy's again
  } finally {
    await fw.close();
  }
});

test('bad input exits 2 naming the argument; an unreachable store exits 1 without its password', () => {
  let r = floodwall(['override', 'set', 't', '--rate', '-2', '--burst', '1'], redis.url);
  assert.equal(r.code, 2);
  assert.match(r.err, /--rate: must be a positive number/);
  r = floodwall(['block', 't', '--for', '3 fortnights'], redis.url);
  assert.equal(r.code, 2);
  assert.match(r.err, /--for: "3 fortnights" is not a duration/);
  return freePort().then((port) => {
    r = floodwall(['status'], `redis://ops:pa55word@127.0.0.1:${port}`);
    assert.equal(r.code, 1);
    assert.ok(r.err.includes(`cannot reach redis://ops:***@127.0.0.1:${port} (connection refused)`), r.err);
    assert.ok(!(r.err + r.out).includes('pa55word'));
  });
});
