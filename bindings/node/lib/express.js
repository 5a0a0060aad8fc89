'use strict';
// Express middleware (Express 4 and 5), after express-rate-limit's conventions where they fit: keyGenerator,
// skip and handler options, limit headers on every response, the decision on the request. What it adds:
// the tenant derived by the core from the request (the same key as floodwall's Python and Ruby
// middlewares give the same request), the core's RateLimit headers and rejection bodies, 503s from the
// shedders, 403s for tenants blocked through the admin API, and a ticket released exactly once when the
// response ends ('close': after 'finish', or when the client goes away mid-request).
//
// A Bearer token or API key names the request's tenant only once the app vouches for it (the verify
// option): a client that invents a key per request would otherwise get a new bucket each time. Without
// verify (or when it says no, throws, or is too slow) the request is the tenant of its address.

// The route family: the mount path plus the route's pattern ('/users/:id', never '/users/42'), so that
// concurrency.routes can name it and the metrics stay bounded. At app level (no route matched yet) it
// is the mount path, '' being the core's default route.
function defaultRoute(req) {
  const pattern = req.route && typeof req.route.path === 'string' ? req.route.path : '';
  return (req.baseUrl || '') + pattern;
}

function defaultHandler(req, res, next, decision) {
  res.statusCode = decision.status;
  // The core's body and type as they are: res.send() would append "; charset=utf-8" to the type.
  res.setHeader('Content-Type', decision.contentType);
  res.setHeader('Content-Length', Buffer.byteLength(decision.body));
  res.end(decision.body);
}

const { performance } = require('node:perf_hooks');
const { admitNow } = require('./internal');

function resolveOption(value, req, res) {
  return typeof value === 'function' ? value(req, res) : value;
}

function isThenable(v) {
  return v !== null && (typeof v === 'object' || typeof v === 'function') && typeof v.then === 'function';
}

// Releases the decision's ticket once the response is done: its 'close' comes after 'finish' (the response
// sent) or when the connection goes away mid-request (Node >= 18), exactly once. One listener, never removed:
// the response is dropped with it.
function releaseWhenDone(fw, decision, res) {
  if (!decision.ticket) return;
  // On Redis the admit resolves later: the response may be over, or the client gone, meanwhile.
  // on, not once: 'close' comes once, and once() would wrap the listener in two more objects per request.
  if (res.closed || res.destroyed) fw.release(decision);
  else res.on('close', () => fw.release(decision));
}

// The name and message of what a verify hook threw or rejected with (anything can be thrown).
function describeError(err) {
  if (err instanceof Error) return `${err.name || err.constructor.name}: ${err.message}`;
  const kind = err !== null && typeof err === 'object' && err.constructor ? err.constructor.name : typeof err;
  return `${kind}: ${String(err)}`;
}

// The app's verify hook around the core: asked about the request's credential when the core derives the
// tenant, it answers true (the credential names the tenant), false, or a promise of either. Every failure is
// false (the request is keyed by its address) and is reported once per middleware, as a process warning.
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
  return function vouch(req, request) {
    const credential = fw.requestCredential(request);
    if (credential === null) return undefined;
    // A synchronous hook cannot be interrupted: a late answer is measured, and counts as no.
    const started = performance.now();
    let answer;
    try {
      answer = verify(credential, req);
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
 * @param {import('./index').Floodwall} fw
 * @param {object} [options] keyGenerator(req, res), route, cost, critical, sandbox (values or functions of
 *   (req, res), possibly async), skip(req, res), handler(req, res, next, decision) for rejections,
 *   verify(credential, req) and verifyTimeout (ms).
 *   Without a keyGenerator, or when it returns undefined or null, the core derives the tenant from
 *   req.rawHeaders and req.socket.remoteAddress (policy section "tenant"); '' is the anonymous tenant.
 *   A derived tenant is the client's address unless verify vouches for the request's Bearer token or API
 *   key (returns truthy, or a promise of it, within verifyTimeout: by default the store's deadline).
 */
function express(fw, options = {}) {
  if (!fw || typeof fw.admit !== 'function') throw new TypeError('express(fw, options): fw must be a Floodwall');
  const {
    keyGenerator,
    route = defaultRoute,
    cost = 1,
    critical = false,
    sandbox = false,
    skip = () => false,
    handler = defaultHandler,
    verify,
    verifyTimeout,
  } = options;
  // A Floodwall decides at once when it can; anything else with admit() and release() (a wrapper, a spy)
  // answers with a promise.
  const admit = typeof fw[admitNow] === 'function' ? (request) => fw[admitNow](request) : (request) => fw.admit(request);
  const hooks = { skip, handler };
  if (keyGenerator !== undefined) hooks.keyGenerator = keyGenerator;
  if (verify !== undefined) hooks.verify = verify;
  for (const [name, fn] of Object.entries(hooks)) {
    if (typeof fn !== 'function') throw new TypeError(`express(fw, options): ${name} must be a function`);
  }
  if (verify === undefined && verifyTimeout !== undefined) {
    throw new TypeError('express(fw, options): verifyTimeout needs a verify hook');
  }
  let vouch;
  if (verify !== undefined) {
    if (typeof fw.requestCredential !== 'function') {
      throw new TypeError('express(fw, options): verify needs fw.requestCredential (a Floodwall)');
    }
    // By default no longer than the store is given: a verify hook is on the request's path as the store is.
    const timeoutMs = verifyTimeout === undefined ? fw.deadlineMs : verifyTimeout;
    if (typeof timeoutMs !== 'number' || !(timeoutMs > 0) || timeoutMs > 2 ** 31 - 1) {
      throw new TypeError('express(fw, options): verifyTimeout must be a number of milliseconds above 0');
    }
    vouch = verifier(fw, verify, timeoutMs);
  }

  // The decision answered: headers, the ticket's release, then the next handler or the rejection.
  function answer(req, res, next, decision) {
    releaseWhenDone(fw, decision, res);
    req.floodwall = decision;
    if (!res.headersSent) {
      const headers = decision.headers;
      for (const name in headers) res.setHeader(name, headers[name]);
    }
    if (decision.allowed) return next();
    const done = handler(req, res, next, decision);
    if (isThenable(done)) done.then(undefined, next);
  }

  // The request's fields, each option's value as the app gives it (possibly a promise). With a verify hook
  // and a tenant already known to be derived, its answer too (when the tenant is a promise, decideLater asks).
  function fields(req, res) {
    const request = {
      tenant: keyGenerator === undefined ? undefined : keyGenerator(req, res),
      // Read by the core only when there is no tenant. The peer, not req.ip: which X-Forwarded-For entry
      // to believe is the policy's tenant.trusted_proxies, the same in every language.
      headers: req.rawHeaders,
      peer: req.socket ? req.socket.remoteAddress : undefined,
      route: resolveOption(route, req, res),
      method: req.method,
      cost: resolveOption(cost, req, res),
      critical: resolveOption(critical, req, res),
      sandbox: resolveOption(sandbox, req, res),
      verified: undefined,
    };
    if (vouch !== undefined && (request.tenant === undefined || request.tenant === null)) {
      request.verified = vouch(req, request);
    }
    return request;
  }

  // Some hook or option answered with a promise: every one of them is awaited, in the order above. Each hook
  // runs once: `request` is the fields already asked for, when skip was not a promise.
  async function decideLater(req, res, skipped, request) {
    if (await skipped) return null;
    if (request === undefined) request = fields(req, res);
    const tenantLater = isThenable(request.tenant);
    for (const key of ['tenant', 'route', 'cost', 'critical', 'sandbox']) request[key] = await request[key];
    if (vouch !== undefined && tenantLater && (request.tenant === undefined || request.tenant === null)) {
      request.verified = vouch(req, request);
    }
    request.verified = await request.verified;
    return admit(request);
  }

  // Synchronous as long as the app's hooks are (verify included) and the core decides at once (memory://,
  // shm://, a hot tenant): no promise and no microtask on that path. A store that answers later (Redis)
  // resolves the decision's promise, and the app's async hooks are awaited.
  return function floodwall(req, res, next) {
    let decided;
    try {
      const skipped = skip(req, res);
      if (isThenable(skipped)) {
        decided = decideLater(req, res, skipped);
      } else if (skipped) {
        return next();
      } else {
        const request = fields(req, res);
        const later = isThenable(request.tenant) || isThenable(request.route) || isThenable(request.cost) ||
          isThenable(request.critical) || isThenable(request.sandbox) || isThenable(request.verified);
        decided = later ? decideLater(req, res, false, request) : admit(request);
      }
    } catch (err) {
      return next(err);
    }
    if (!isThenable(decided)) return answer(req, res, next, decided);
    decided.then((decision) => {
      if (decision === null) return next(); // skipped
      try {
        answer(req, res, next, decision);
      } catch (err) {
        next(err);
      }
    }, next);
  };
}

module.exports = { express, defaultRoute };
