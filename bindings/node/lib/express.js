'use strict';
// Express middleware (Express 4 and 5), after express-rate-limit's conventions where they fit: keyGenerator,
// skip and handler options, limit headers on every response, the decision on the request. What it adds:
// the tenant derived by the core from the request (the same key as floodwall's Python and Ruby
// middlewares give the same request), the core's RateLimit headers and rejection bodies, 503s from the
// shedders, 403s for tenants blocked through the admin API, and a ticket released exactly once when the
// response ends ('close': after 'finish', or when the client goes away mid-request).

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

/**
 * @param {import('./index').Floodwall} fw
 * @param {object} [options] keyGenerator(req, res), route, cost, critical, sandbox (values or functions of
 *   (req, res), possibly async), skip(req, res), handler(req, res, next, decision) for rejections.
 *   Without a keyGenerator, or when it returns undefined or null, the core derives the tenant from
 *   req.rawHeaders and req.socket.remoteAddress (policy section "tenant"); '' is the anonymous tenant.
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
  } = options;
  // A Floodwall decides at once when it can; anything else with admit() and release() (a wrapper, a spy)
  // answers with a promise.
  const admit = typeof fw[admitNow] === 'function' ? (request) => fw[admitNow](request) : (request) => fw.admit(request);
  const hooks = keyGenerator === undefined ? { skip, handler } : { keyGenerator, skip, handler };
  for (const [name, fn] of Object.entries(hooks)) {
    if (typeof fn !== 'function') throw new TypeError(`express(fw, options): ${name} must be a function`);
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

  // The request's fields, each option's value as the app gives it (possibly a promise).
  function fields(req, res) {
    return {
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
    };
  }

  // Some hook or option answered with a promise: every one of them is awaited, in the order above. Each hook
  // runs once: `request` is the fields already asked for, when skip was not a promise.
  async function decideLater(req, res, skipped, request) {
    if (await skipped) return null;
    if (request === undefined) request = fields(req, res);
    for (const key of ['tenant', 'route', 'cost', 'critical', 'sandbox']) request[key] = await request[key];
    return admit(request);
  }

  // Synchronous as long as the app's hooks are and the core decides at once (memory://, shm://, a hot
  // tenant): no promise and no microtask on that path. A store that answers later (Redis) resolves the
  // decision's promise, and the app's async hooks are awaited.
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
          isThenable(request.critical) || isThenable(request.sandbox);
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
