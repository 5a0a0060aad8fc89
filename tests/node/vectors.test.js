'use strict';
// tests/vectors.json, the vectors shared by the core, Python, Node and Ruby suites, through the Node
// binding's public API: every vector of every section. A missing file or a missing or empty section fails.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test, describe } = require('node:test');
const { pathToFileURL } = require('node:url');
const { Floodwall, PolicyError, backoff, parseRetryAfter } = require('../..');

const FILE = path.resolve(__dirname, '..', 'vectors.json');
const SECTIONS = ['tenant_keys', 'routes', 'policy_text', 'backoff', 'retry_after', 'decisions'];

function load() {
  assert.ok(fs.existsSync(FILE), `${FILE} is missing`);
  return JSON.parse(fs.readFileSync(FILE, 'utf8'));
}

// Read once, at load: a file that is missing or not JSON fails here, loudly, and so does every section.
let vectors;
let loadError;
try {
  vectors = load();
} catch (err) {
  loadError = err;
}

function section(name) {
  if (loadError) throw loadError;
  const cases = vectors[name];
  assert.ok(Array.isArray(cases), `${path.basename(FILE)} has no "${name}" section`);
  assert.ok(cases.length > 0, `${path.basename(FILE)}: the "${name}" section is empty`);
  return cases;
}

// A vector's "check" as admit's `verified`: "verified" true, "rejected" false, absent (unchecked) undefined.
function verified(v, where) {
  if (v.check === undefined) return undefined;
  assert.ok(v.check === 'verified' || v.check === 'rejected', `${where}: check must be "verified" or "rejected"`);
  return v.check === 'verified';
}

function label(v, i) {
  return `${i}${v.name ? `: ${v.name}` : ''}`;
}

// Seconds, to a nanosecond: the API speaks milliseconds and converts.
function near(actual, expected, message) {
  assert.equal(typeof actual, 'number', message);
  assert.ok(Math.abs(actual - expected) <= 1e-9, `${message}: ${actual} != ${expected}`);
}

test('the vectors file has every section, none empty', () => {
  for (const name of SECTIONS) section(name);
});

describe('tenant_keys', () => {
  test('every vector: tenantKey({headers, peer, verified}) under its "tenant" section', () => {
    const cases = section('tenant_keys');
    cases.forEach((v, i) => {
      const fw = new Floodwall(v.tenant === undefined ? {} : { tenant: v.tenant });
      try {
        assert.ok(Array.isArray(v.headers), `${label(v, i)}: headers must be an array`);
        const check = verified(v, label(v, i));
        const key = fw.tenantKey({ headers: v.headers, peer: v.peer ?? undefined, verified: check });
        assert.equal(key, v.key, label(v, i));
        // The flat layout (req.rawHeaders) gives the same key as the pairs.
        assert.equal(fw.tenantKey({ headers: v.headers.flat(), peer: v.peer, verified: check }), v.key, `${label(v, i)} (flat)`);
      } finally {
        fw.close();
      }
    });
  });

  test('every vector: requestCredential({headers, peer}) names its "credential"', () => {
    section('tenant_keys').forEach((v, i) => {
      const fw = new Floodwall(v.tenant === undefined ? {} : { tenant: v.tenant });
      try {
        assert.ok(v.credential === null || typeof v.credential === 'string', `${label(v, i)}: "credential" must be a string or null`);
        assert.equal(fw.requestCredential({ headers: v.headers, peer: v.peer }), v.credential, label(v, i));
        assert.equal(fw.requestCredential({ headers: v.headers.flat(), peer: v.peer ?? undefined }), v.credential,
          `${label(v, i)} (flat)`);
      } finally {
        fw.close();
      }
    });
  });
});

describe('policy_text', () => {
  test('every vector: a policy string is JSON text or a path by one rule (a file: URL is always a path)', () => {
    section('policy_text').forEach((v, i) => {
      // Node's path object is a file: URL, whose path is absolute: the message names that path.
      const policy = v.is_path ? pathToFileURL(path.resolve(v.input)) : v.input;
      const shown = v.is_path ? v.error.replace(`"${v.input}"`, `"${path.resolve(v.input)}"`) : v.error;
      let fw;
      try {
        fw = new Floodwall(policy);
      } catch (err) {
        assert.ok(err instanceof PolicyError, `${label(v, i)}: ${err}`);
        if (v.error !== undefined) {
          assert.equal(err.message, shown, label(v, i));
          return;
        }
        // JSON text: the core's own verdict on it (an array is not a policy), never a file's.
        assert.doesNotMatch(err.message, /cannot read the file/, label(v, i));
        return;
      }
      fw.close();
      assert.equal(v.error, undefined, `${label(v, i)}: constructed, expected ${v.error}`);
    });
  });
});

describe('routes', () => {
  test('every vector: requestRoute({route, path}) is its "route_family"', () => {
    const fw = new Floodwall();
    try {
      section('routes').forEach((v, i) => {
        assert.equal(typeof v.route_family, 'string', `${label(v, i)}: "route_family" must be a string`);
        assert.equal(fw.requestRoute({ route: v.route, path: v.path }), v.route_family, `${label(v, i)} (${v.framework})`);
      });
    } finally {
      fw.close();
    }
  });

  test('every vector: a limit on its route family limits the request, a limit on another does not', async () => {
    // The glob that is the family itself (its "*" and ":name" are glob characters and parameters, so it
    // matches the family): the admit with the vector's route and path is counted by it. Not for a family
    // holding "(" or "{": a glob is made canonical as a pattern, where they are a regex and a parameter.
    const cases = section('routes').filter((v) => v.route_family !== '' && !/[({]/.test(v.route_family));
    for (const [i, v] of cases.entries()) {
      const fw = new Floodwall({
        request_rate: { rate: 1000, burst: 1000, limits: [
          { name: 'family', routes: [v.route_family], rate: 0.001, burst: 1 },
          { name: 'other', routes: ['/elsewhere/*'], rate: 0.001, burst: 1 },
        ] },
      });
      try {
        const request = { tenant: 't', route: v.route, path: v.path };
        assert.deepEqual((await fw.admit(request)).rules, ['family'], `${label(v, i)}: first`);
        const second = await fw.admit(request);
        assert.equal(second.status, 429, `${label(v, i)}: second`);
      } finally {
        fw.close();
      }
    }
  });
});

describe('backoff', () => {
  test('every vector: backoff(attempt, {base, cap, retryAfter, random})', () => {
    section('backoff').forEach((v, i) => {
      const options = { random: () => v.random };
      if (v.base_s !== undefined) options.base = v.base_s * 1000;
      if (v.cap_s !== undefined) options.cap = v.cap_s * 1000;
      if (v.retry_after_s >= 0) options.retryAfter = v.retry_after_s;
      near(backoff(v.attempt, options) / 1000, v.delay_s, label(v, i));
    });
  });
});

describe('retry_after', () => {
  test('every vector: parseRetryAfter(value, now)', () => {
    section('retry_after').forEach((v, i) => {
      const ms = parseRetryAfter(v.value, v.now * 1000);
      if (v.seconds === null) assert.equal(ms, null, `${label(v, i)}: ${JSON.stringify(v.value)} is unparseable`);
      else near(ms / 1000, v.seconds, `${label(v, i)}: ${JSON.stringify(v.value)}`);
    });
  });
});

describe('decisions', () => {
  // One test per case. When the section is missing there are none here: the first test above fails.
  const cases = !loadError && Array.isArray(vectors.decisions) ? vectors.decisions : [];
  cases.forEach((c, i) => {
    test(`${label(c, i)}: status, headers in order, content type and body`, async () => {
      assert.ok(Array.isArray(c.requests) && c.requests.length > 0, `${label(c, i)}: no requests`);
      const fw = new Floodwall(c.policy);
      const held = [];
      try {
        for (const [j, r] of c.requests.entries()) {
          const where = `${label(c, i)}, request ${j}`;
          const d = await fw.admit({ tenant: r.tenant, headers: r.headers, peer: r.peer, verified: verified(r, where),
            route: r.route, method: r.method, cost: r.cost });
          assert.equal(d.status, r.expect.status, `${where}: status`);
          assert.deepEqual(Object.entries(d.headers), r.expect.headers, `${where}: headers`);
          assert.equal(d.contentType ?? '', r.expect.content_type, `${where}: content type`);
          assert.equal(d.body ?? '', r.expect.body, `${where}: body`);
          if (r.hold) held.push(d);
          else fw.release(d);
        }
      } finally {
        held.forEach((d) => fw.release(d));
        fw.close();
      }
    });
  });
});
