'use strict';
// What the Express middleware, the Fastify plugin and the Koa middleware share: their options, checked once
// when the integration is made (a wrong type names the option), and the way one request becomes an admit
// (skip, keyGenerator, route, cost, critical, sandbox and verify, each possibly async). Each framework's
// file adds only its own part: where the route pattern and the path come from, how the decision's headers
// and rejection reach the response, and when the ticket is released.
//
// A framework's hooks get its own objects: Express (req, res), Fastify (request, reply), Koa (ctx).
const { performance } = require('node:perf_hooks');
const { admitNow } = require('./internal');

// decide()'s answer for a skipped request.
const SKIPPED = Symbol('floodwall.skipped');

// The options of every integration; each framework may add its own (Fastify's client, Koa's router).
const OPTIONS = ['keyGenerator', 'route', 'cost', 'critical', 'sandbox', 'skip', 'handler', 'verify', 'verifyTimeout',
  'maxWait'];
// The options a route may set for itself (Fastify's config.floodwall).
const ROUTE_OPTIONS = ['cost', 'critical', 'sandbox', 'skip'];

function isThenable(v) {
  return v !== null && (typeof v === 'object' || typeof v === 'function') && typeof v.then === 'function';
}

function resolveOption(value, a, b) {
  return typeof value === 'function' ? value(a, b) : value;
}

// Each option's type, checked when the integration (or a route's config) is made, never at the first request.
const CHECKS = {
  keyGenerator: [(v) => typeof v === 'function', 'a function'],
  route: [(v) => typeof v === 'string' || typeof v === 'function', 'a string or a function'],
  cost: [(v) => (Number.isSafeInteger(v) && v >= 0) || typeof v === 'function', 'a non-negative integer or a function'],
  critical: [(v) => typeof v === 'boolean' || typeof v === 'function', 'a boolean or a function'],
  sandbox: [(v) => typeof v === 'boolean' || typeof v === 'function', 'a boolean or a function'],
  skip: [(v) => typeof v === 'boolean' || typeof v === 'function', 'a boolean or a function'],
  handler: [(v) => typeof v === 'function', 'a function'],
  verify: [(v) => typeof v === 'function', 'a function'],
  verifyTimeout: [(v) => typeof v === 'number' && v > 0 && v <= 2 ** 31 - 1, 'a number of milliseconds above 0'],
  maxWait: [(v) => typeof v === 'number' && Number.isFinite(v) && v >= 0, 'a finite number of milliseconds, 0 or more'],
};

// Throws a TypeError naming `where` and the option for an unknown key or a value of the wrong type.
function checkOptions(options, known, where) {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new TypeError(`${where}: options must be an object`);
  }
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw new TypeError(`${where}: unknown option "${key}" (known: ${known.join(', ')})`);
    const check = CHECKS[key];
    if (check && options[key] !== undefined && !check[0](options[key])) {
      throw new TypeError(`${where}: ${key} must be ${check[1]}`);
    }
  }
}

// The name and message of what a verify hook threw or rejected with (anything can be thrown).
function describeError(err) {
  if (err instanceof Error) return `${err.name || err.constructor.name}: ${err.message}`;
  const kind = err !== null && typeof err === 'object' && err.constructor ? err.constructor.name : typeof err;
  return `${kind}: ${String(err)}`;
}

// The app's verify hook around the core: asked about the request's credential when the core derives the
// tenant, it answers true (the credential names the tenant), false, or a promise of either. Every failure is
// false (the request is keyed by its address) and is reported once per integration, as a process warning.
function verifier(fw, verify, timeoutMs) {
  const reported = new Set();
  function report(kind, message) {
    if (reported.has(kind)) return;
    reported.add(kind);
    process.emitWarning(`${message}; such requests are keyed by their address (reported once)`,
      { type: 'FloodwallWarning', code: 'FLOODWALL_VERIFY' });
  }
  const failed = (err) => {
    report('threw', `floodwall: the verify hook failed (${describeError(err)})`);
    return false;
  };
  const late = () => report('late', `floodwall: the verify hook took longer than verifyTimeout (${timeoutMs} ms)`);

  // A promise's answer, or false once the `leftMs` are up: the hook goes on, and its late answer (or
  // failure) is ignored.
  function within(answer, leftMs) {
    return new Promise((resolve) => {
      let waiting = true;
      const timer = setTimeout(() => {
        waiting = false;
        late();
        resolve(false);
      }, leftMs);
      timer.unref(); // a hook that never answers keeps nothing alive
      Promise.resolve(answer).then((ok) => {
        if (!waiting) return;
        clearTimeout(timer);
        resolve(Boolean(ok));
      }, (err) => {
        if (!waiting) return;
        clearTimeout(timer);
        resolve(failed(err));
      });
    });
  }

  // `request` holds the headers and the peer. undefined: no credential to ask about (nothing is checked);
  // true or false; or a promise of the answer. Never throws, never rejects.
  return function vouch(a, request) {
    const credential = fw.requestCredential(request);
    if (credential === null) return undefined;
    // A synchronous hook cannot be interrupted: a late answer is measured, and counts as no.
    const started = performance.now();
    let answer;
    try {
      answer = verify(credential, a);
    } catch (err) {
      return failed(err);
    }
    // The time the hook took to hand back its promise counts too: it gets what is left of verifyTimeout.
    const left = timeoutMs - (performance.now() - started);
    if (isThenable(answer)) {
      if (left > 0) return within(answer, left);
      Promise.resolve(answer).catch(() => {}); // its end, whatever it is, comes too late to count
    } else if (left >= 0) {
      return Boolean(answer);
    }
    late();
    return false;
  };
}

/**
 * One integration's options, checked, and its decide().
 * @param fw a Floodwall (or anything with admit() and release())
 * @param {object} options the app's options (see OPTIONS)
 * @param {object} framework {where: the name errors give, extra: the framework's own option names,
 *   defaultRoute(a, b): the route pattern when the app gives no `route`, defaultHandler}
 */
function integration(fw, options, framework) {
  const { where, extra = [], defaultRoute, defaultHandler } = framework;
  if (!fw || typeof fw.admit !== 'function' || typeof fw.release !== 'function') {
    throw new TypeError(`${where}: the client must be a Floodwall`);
  }
  if (fw.closed === true) throw new TypeError(`${where}: the client is closed`);
  checkOptions(options, OPTIONS.concat(extra), where);
  const { keyGenerator, verify, verifyTimeout } = options;
  const base = Object.freeze({
    route: options.route === undefined ? defaultRoute : options.route,
    cost: options.cost === undefined ? 1 : options.cost,
    critical: options.critical === undefined ? false : options.critical,
    sandbox: options.sandbox === undefined ? false : options.sandbox,
    skip: options.skip === undefined ? false : options.skip,
  });
  const handler = options.handler === undefined ? defaultHandler : options.handler;
  // A Floodwall decides at once when it can; anything else with admit() and release() (a wrapper, a spy)
  // answers with a promise.
  // With maxWait, a request the bucket would refuse waits for its turn instead (fw.acquire: a timer, the
  // event loop serves other requests meanwhile), when that turn is within maxWait ms.
  const { maxWait } = options;
  if (maxWait !== undefined && typeof fw.acquire !== 'function') {
    throw new TypeError(`${where}: maxWait needs the client's acquire (a Floodwall)`);
  }
  const admit = maxWait !== undefined ? (request, raw) => acquireWhileConnected(fw, { ...request, maxWait }, raw)
    : typeof fw[admitNow] === 'function' ? (request) => fw[admitNow](request) : (request) => fw.admit(request);

  if (verify === undefined && verifyTimeout !== undefined) throw new TypeError(`${where}: verifyTimeout needs a verify hook`);
  let vouch;
  if (verify !== undefined) {
    if (typeof fw.requestCredential !== 'function') {
      throw new TypeError(`${where}: verify needs the client's requestCredential (a Floodwall)`);
    }
    // By default no longer than the store is given: a verify hook is on the request's path as the store is.
    const timeoutMs = verifyTimeout === undefined ? fw.deadlineMs : verifyTimeout;
    if (typeof timeoutMs !== 'number' || !(timeoutMs > 0) || timeoutMs > 2 ** 31 - 1) {
      throw new TypeError(`${where}: verifyTimeout must be a number of milliseconds above 0`);
    }
    vouch = verifier(fw, verify, timeoutMs);
  }

  // A route's own options (Fastify's config.floodwall) over the integration's: checked now, at the route's
  // registration. `label` names the route in the error.
  function routeSettings(overrides, label) {
    if (overrides === undefined) return base;
    checkOptions(overrides, ROUTE_OPTIONS, label);
    const settings = { ...base };
    for (const key of ROUTE_OPTIONS) if (overrides[key] !== undefined) settings[key] = overrides[key];
    return Object.freeze(settings);
  }

  // The request's fields, each option's value as the app gives it (possibly a promise). With a verify hook
  // and a tenant already known to be derived, its answer too (when the tenant is a promise, decideLater asks).
  function fields(a, b, raw, path, s) {
    const request = {
      tenant: keyGenerator === undefined ? undefined : keyGenerator(a, b),
      // Read by the core only when there is no tenant. The peer, not a framework's ip: which X-Forwarded-For
      // entry to believe is the policy's tenant.trusted_proxies, the same in every language.
      headers: raw.rawHeaders,
      peer: raw.socket ? raw.socket.remoteAddress : undefined,
      route: resolveOption(s.route, a, b),
      path,
      method: raw.method,
      cost: resolveOption(s.cost, a, b),
      critical: resolveOption(s.critical, a, b),
      sandbox: resolveOption(s.sandbox, a, b),
      verified: undefined,
    };
    if (vouch !== undefined && (request.tenant === undefined || request.tenant === null)) {
      request.verified = vouch(a, request);
    }
    return request;
  }

  // Some hook or option answered with a promise: every one of them is awaited, in the order above. Each hook
  // runs once: `request` is the fields already asked for, when skip was not a promise.
  async function decideLater(a, b, raw, path, s, skipped, request) {
    if (await skipped) return SKIPPED;
    if (request === undefined) request = fields(a, b, raw, path, s);
    const tenantLater = isThenable(request.tenant);
    for (const key of ['tenant', 'route', 'cost', 'critical', 'sandbox']) request[key] = await request[key];
    if (vouch !== undefined && tenantLater && (request.tenant === undefined || request.tenant === null)) {
      request.verified = vouch(a, request);
    }
    request.verified = await request.verified;
    return admit(request, raw);
  }

  /**
   * Decides one request: `a`, `b` the framework's objects the hooks get, `raw` the node:http request (its
   * method, headers and peer), `path` its path without the query string, `s` the route's settings.
   * Returns SKIPPED, the Decision, or (when a hook answered with a promise, or the store answers later) a
   * promise of either. Synchronous as long as the app's hooks are and the core decides at once (memory://,
   * shm://, a hot tenant): no promise and no microtask on that path. Throws what a hook threw.
   */
  function decide(a, b, raw, path, s = base) {
    const skipped = resolveOption(s.skip, a, b);
    if (isThenable(skipped)) return decideLater(a, b, raw, path, s, skipped);
    if (skipped) return SKIPPED;
    const request = fields(a, b, raw, path, s);
    const later = isThenable(request.tenant) || isThenable(request.route) || isThenable(request.cost) ||
      isThenable(request.critical) || isThenable(request.sandbox) || isThenable(request.verified);
    return later ? decideLater(a, b, raw, path, s, false, request) : admit(request, raw);
  }

  return { decide, handler, routeSettings, base };
}

// The route patterns a router lookup found, by method and path, per router (Express, @koa/router): a
// lookup tests every layer's regexp, and a path is the client's, so each cache is cleared when full rather
// than allowed to grow, and when the router's stack has changed (`version`, its length).
const ROUTE_CACHE_SIZE = 1000;
const routeCaches = new WeakMap(); // router -> { version, map: 'METHOD path' -> pattern or null }

function rememberedRoute(router, version, method, path, find) {
  let cache = routeCaches.get(router);
  if (cache === undefined || cache.version !== version || cache.map.size >= ROUTE_CACHE_SIZE) {
    cache = { version, map: new Map() };
    routeCaches.set(router, cache);
  }
  const key = `${method} ${path}`;
  let pattern = cache.map.get(key);
  if (pattern === undefined) {
    pattern = find() ?? null;
    cache.map.set(key, pattern);
  }
  return pattern === null ? undefined : pattern;
}

// What a request whose client went away while it waited for its turn (maxWait) is decided as: the
// middleware answers nothing and calls nothing (the socket is closed; the app's handler never runs).
const GONE = Symbol('floodwall.clientGone');

// fw.acquire while the client is connected: its socket closing aborts the wait, which gives the reservation
// back (its tokens return when no later reservation was made) and resolves GONE.
function acquireWhileConnected(fw, request, raw) {
  const socket = raw && raw.socket;
  if (!socket || typeof socket.once !== 'function') return fw.acquire(request);
  if (socket.destroyed) return GONE;
  const gone = new AbortController();
  const onClose = () => gone.abort();
  socket.once('close', onClose);
  return fw.acquire({ ...request, signal: gone.signal }).then(
    (decision) => {
      socket.removeListener('close', onClose);
      return decision;
    },
    (err) => {
      socket.removeListener('close', onClose);
      if (gone.signal.aborted) return GONE;
      throw err;
    });
}

// Releases the decision's ticket once the node:http response is done (Express, Koa): its 'close' comes after
// 'finish' (the response sent) or when the connection goes away mid-request (Node >= 18), exactly once. One
// listener, never removed: the response is dropped with it.
function releaseWhenDone(fw, decision, res) {
  if (!decision.ticket) return;
  // On Redis the admit resolves later: the response may be over, or the client gone, meanwhile.
  // on, not once: 'close' comes once, and once() would wrap the listener in two more objects per request.
  if (res.closed || res.destroyed) fw.release(decision);
  else res.on('close', () => fw.release(decision));
}

// A request URL's path: what comes before its query string.
function pathOf(url) {
  if (typeof url !== 'string') return undefined;
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

module.exports = {
  integration, isThenable, pathOf, rememberedRoute, releaseWhenDone, SKIPPED, GONE, OPTIONS, ROUTE_OPTIONS,
};
