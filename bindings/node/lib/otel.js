'use strict';
// OpenTelemetry metrics for a floodwall client: the counters and gauges of its Prometheus text as
// observable instruments with the same names, descriptions and attributes, all observed from one read of
// the text per collection (a batch callback), so the two views cannot disagree.
//
//   const { Floodwall, otel } = require('floodwall');
//   otel.instrument(fw);            // on the global MeterProvider's meter "floodwall"
//   otel.instrument(fw, meter);     // or on a meter of yours
//
// Needs @opentelemetry/api (not a dependency of floodwall: install it beside the SDK your app uses); it is
// loaded only when instrument() is called. The instruments are the families the client shows at that call
// (a Redis client's connection gauges only if it has a connection then). A closed client observes nothing.
const { ClosedError } = require('./errors');

const SAMPLE = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function unescape(value) {
  return value.replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
}

/** Prometheus text -> { families: Map(name -> {type, help}), samples: Map(name -> [{labels, value}]) }. */
function parseFamilies(text) {
  const families = new Map();
  const helps = new Map();
  const samples = new Map();
  for (const line of text.split('\n')) {
    if (line.startsWith('# HELP ')) {
      const [, , name, ...rest] = line.split(' ');
      helps.set(name, rest.join(' '));
    } else if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      families.set(name, { type, help: helps.get(name) || '' });
      if (!samples.has(name)) samples.set(name, []);
    } else if (line && !line.startsWith('#')) {
      const m = SAMPLE.exec(line);
      if (!m) continue;
      const labels = {};
      for (const [, k, v] of (m[2] || '').matchAll(LABEL)) labels[k] = unescape(v);
      if (!samples.has(m[1])) samples.set(m[1], []);
      samples.get(m[1]).push({ labels, value: Number(m[3]) });
    }
  }
  return { families, samples };
}

function loadApi() {
  try {
    return require('@opentelemetry/api');
  } catch (err) {
    throw new Error(`floodwall otel: needs @opentelemetry/api (npm install @opentelemetry/api): ${err.message}`);
  }
}

/**
 * Registers one observable instrument per Prometheus family of `client` on `meter` (default: the global
 * MeterProvider's meter "floodwall"): counters as observable counters, gauges as observable gauges.
 * Returns the instruments, in the text's order.
 */
function instrument(client, meter) {
  if (client === null || typeof client !== 'object' || typeof client.prometheus !== 'function') {
    throw new TypeError('client: must be a floodwall Floodwall');
  }
  if (meter === undefined || meter === null) {
    const api = loadApi();
    meter = api.metrics.getMeter('floodwall', require('./index').version); // loaded by now: no cycle at load
  }
  const { families } = parseFamilies(client.prometheus());
  const instruments = new Map();
  for (const [name, { type, help }] of families) {
    const options = { description: help };
    instruments.set(name, type === 'counter' ? meter.createObservableCounter(name, options)
      : meter.createObservableGauge(name, options));
  }
  meter.addBatchObservableCallback((result) => {
    let samples;
    try {
      samples = parseFamilies(client.prometheus()).samples;
    } catch (err) {
      if (err instanceof ClosedError) return;
      throw err;
    }
    for (const [name, rows] of samples) {
      const observable = instruments.get(name);
      if (!observable) continue;
      for (const { labels, value } of rows) result.observe(observable, value, labels);
    }
  }, [...instruments.values()]);
  return [...instruments.values()];
}

module.exports = { instrument, parseFamilies };
