'use strict';
// Run by packaging/test-cross-node.sh with the target's node (under qemu) in a project that installed the
// npm package: the prebuilt addon loads, and admit, release, the headers, a 429 and the Redis path work.
// argv: the redis port. Prints one JSON line; exits non-zero on the first difference.
const assert = require('node:assert/strict');
const { Floodwall } = require('floodwall');

async function main() {
  const port = process.argv[2];
  const memory = new Floodwall({ request_rate: { rate: 0.001, burst: 2 }, concurrency: { limit: 1 } });
  const first = await memory.admit({ tenant: 't' });
  assert.equal(first.allowed, true);
  assert.match(first.headers['RateLimit-Policy'], /^"request_rate";q=2;w=\d+, "concurrency";q=1;qu="concurrent-requests"$/);
  assert.equal(first.headers['RateLimit-Remaining'], '1');
  const held = await memory.admit({ tenant: 't' });
  assert.equal(held.status, 429, 'the concurrency slot is held');
  memory.release(first);
  const second = await memory.admit({ tenant: 't' });
  assert.equal(second.allowed, true, 'the release freed the slot');
  memory.release(second);
  const drained = await memory.admit({ tenant: 't' });
  assert.equal(drained.status, 429);
  assert.ok(Number(drained.headers['Retry-After']) >= 1, JSON.stringify(drained.headers));
  memory.close();

  const redis = new Floodwall({ store: `redis://127.0.0.1:${port}/0`, prefix: 'cross-node', request_rate: { rate: 0.001, burst: 2 },
    redis: { deadline_ms: 5000, connect_timeout_ms: 5000 } });
  const got = [];
  for (let i = 0; i < 3; i++) {
    const d = await redis.admit({ tenant: 'acme' });
    got.push([d.allowed, d.status, d.degraded]);
    redis.release(d);
  }
  assert.deepEqual(got, [[true, 200, false], [true, 200, false], [false, 429, false]]);
  redis.close();
  console.log(JSON.stringify({ arch: process.arch, node: process.version, memory: 'ok', redis: got }));
}
main().catch((err) => { console.error(err); process.exit(1); });
