'use strict';
// floodwall's otel.instrument: the Prometheus text's counters and gauges as OpenTelemetry observable
// instruments, read by @opentelemetry/sdk-metrics' in-memory exporter: the same names, attributes and values.
const assert = require('node:assert/strict');
const { test, afterEach } = require('node:test');
const { metrics, diag, DiagLogLevel } = require('@opentelemetry/api');
const {
  MeterProvider, PeriodicExportingMetricReader, InMemoryMetricExporter, AggregationTemporality, DataPointType,
} = require('@opentelemetry/sdk-metrics');
const { Floodwall, otel } = require('../..');
const { startRedis } = require('./helpers');

const cleanups = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()();
});

function sdk() {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  cleanups.push(() => provider.shutdown());
  // name -> { type, points: Map(JSON of sorted attributes -> value) }, from the latest export.
  async function collect() {
    exporter.reset();
    await reader.forceFlush();
    const out = new Map();
    for (const rm of exporter.getMetrics()) {
      for (const sm of rm.scopeMetrics) {
        for (const m of sm.metrics) {
          const points = new Map(m.dataPoints.map((p) => [key(p.attributes), p.value]));
          out.set(m.descriptor.name, { type: m.dataPointType, scope: sm.scope.name, points });
        }
      }
    }
    return out;
  }
  return { provider, meter: provider.getMeter('test'), collect };
}

function key(attributes) {
  return JSON.stringify(Object.keys(attributes).sort().map((k) => [k, attributes[k]]));
}

function prometheusValues(fw) {
  const out = new Map();
  for (const [name, rows] of otel.parseFamilies(fw.prometheus()).samples) {
    out.set(name, new Map(rows.map(({ labels, value }) => [key(labels), value])));
  }
  return out;
}

for (const store of ['memory', 'redis']) {
  test(`every family has an instrument with the same name, attributes and values (${store})`, async () => {
    const policy = { request_rate: { rate: 1, burst: 2 }, concurrency: { limit: 1 }, adaptive: { enabled: true } };
    if (store === 'redis') {
      const redis = await startRedis();
      cleanups.push(() => redis.stop());
      Object.assign(policy, { store: redis.url, redis: { deadline_ms: 2000, connect_timeout_ms: 2000 } });
    }
    const fw = new Floodwall(policy);
    cleanups.push(() => fw.close());
    const { meter, collect } = sdk();
    otel.instrument(fw, meter);
    const held = await fw.admit({ tenant: 'acme', route: '/a' });
    for (let i = 0; i < 3; i++) fw.release(await fw.admit({ tenant: 'acme', route: '/a' }));
    const got = await collect();
    const want = prometheusValues(fw);
    assert.deepEqual([...got.keys()].sort(), [...want.keys()].sort());
    for (const [name, { points }] of got) assert.deepEqual(points, want.get(name), name);
    const rejected = key({ limiter: 'concurrency', outcome: 'rejected', route: '/a' });
    assert.equal(got.get('floodwall_decisions_total').points.get(rejected), 3);
    assert.equal(got.get('floodwall_adaptive_in_flight').points.get(key({ route: '*' })), 1);
    fw.release(held);
  });
}

test('counters are monotonic sums and gauges are gauges', async () => {
  const fw = new Floodwall({ request_rate: { rate: 1, burst: 1 } });
  cleanups.push(() => fw.close());
  const { meter, collect } = sdk();
  otel.instrument(fw, meter);
  await fw.admit({ tenant: 'a' });
  await fw.admit({ tenant: 'a' });
  const got = await collect();
  assert.equal(got.get('floodwall_decisions_total').type, DataPointType.SUM);
  assert.equal(got.get('floodwall_breaker_state').type, DataPointType.GAUGE);
  assert.deepEqual(got.get('floodwall_tenant_rejection_ratio').points, new Map([[key({ tenant: 'a' }), 1]]));
});

test('each collection reads the counters anew', async () => {
  const fw = new Floodwall({ request_rate: { rate: 1, burst: 1 } });
  cleanups.push(() => fw.close());
  const { meter, collect } = sdk();
  otel.instrument(fw, meter);
  const rejected = key({ limiter: 'request_rate', outcome: 'rejected', route: 'default' });
  await fw.admit({ tenant: 'a' });
  assert.equal((await collect()).get('floodwall_decisions_total').points.get(rejected), 0);
  await fw.admit({ tenant: 'a' });
  assert.equal((await collect()).get('floodwall_decisions_total').points.get(rejected), 1);
});

test('a closed client observes nothing and its collection reports no error', async () => {
  const errors = [];
  diag.setLogger({ error: (...args) => errors.push(args), warn() {}, info() {}, debug() {}, verbose() {} },
    DiagLogLevel.ERROR);
  cleanups.push(() => diag.disable());
  const fw = new Floodwall({ request_rate: { rate: 1, burst: 1 } });
  const { meter, collect } = sdk();
  otel.instrument(fw, meter);
  await fw.admit({ tenant: 'a' });
  const before = await collect();
  assert.ok(before.get('floodwall_decisions_total').points.size > 0, 'observed while open');
  fw.close();
  await fw.admit({ tenant: 'a' }).catch(() => {}); // refused: closed
  // Cumulative points keep their last observed values: nothing new is observed, nothing fails.
  assert.deepEqual(await collect(), before);
  assert.deepEqual(errors, []);
});

test('the global MeterProvider is the default, its meter named floodwall', async () => {
  const { provider, collect } = sdk();
  metrics.setGlobalMeterProvider(provider);
  cleanups.push(() => metrics.disable());
  const fw = new Floodwall({ request_rate: { rate: 1, burst: 1 } });
  cleanups.push(() => fw.close());
  otel.instrument(fw);
  await fw.admit({ tenant: 'a' });
  assert.deepEqual(new Set([...(await collect()).values()].map((m) => m.scope)), new Set(['floodwall']));
});

test('a client that is not a Floodwall is refused by name', () => {
  assert.throws(() => otel.instrument({}), { name: 'TypeError', message: 'client: must be a floodwall Floodwall' });
});
