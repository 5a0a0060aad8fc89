'use strict';
// Express middleware (Express 4 and 5), after express-rate-limit's conventions where they fit: keyGenerator,
// skip and handler options, limit headers on every response, the decision on the request. What it adds:
// the tenant derived by the core from the request (the same key as floodwall's Python and Ruby
// middlewares give the same request), the core's RateLimit headers and rejection bodies, 503s from the
// shedders, 403s for tenants blocked through the admin API, and a ticket released exactly once when the
// response ends - on 'finish', or on 'close' when the client goes away mid-request.

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

function resolveOption(value, req, res) {
  return typeof value === 'function' ? value(req, res) : value;
}

// Releases the decision's ticket once, on whichever of 'finish' (response sent) and 'close' (connection
// gone, possibly mid-request) comes first.
function releaseWhenDone(fw, decision, res) {
  if (!decision.ticket) return;
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    res.off('finish', release);
    res.off('close', release);
    fw.release(decision);
  };
  res.on('finish', release);
  res.on('close', release);
  // On Redis the admit resolves later: the client may have left, or the response ended, meanwhile.
  if (res.writableFinished || res.destroyed || res.closed) release();
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
  const hooks = keyGenerator === undefined ? { skip, handler } : { keyGenerator, skip, handler };
  for (const [name, fn] of Object.entries(hooks)) {
    if (typeof fn !== 'function') throw new TypeError(`express(fw, options): ${name} must be a function`);
  }

  // Resolves true when the request may go on to the next handler.
  async function decide(req, res, next) {
    if (await skip(req, res)) return true;
    const decision = await fw.admit({
      tenant: keyGenerator === undefined ? undefined : await keyGenerator(req, res),
      // Read by the core only when there is no tenant. The peer, not req.ip: which X-Forwarded-For entry
      // to believe is the policy's tenant.trusted_proxies, the same in every language.
      headers: req.rawHeaders,
      peer: req.socket ? req.socket.remoteAddress : undefined,
      route: await resolveOption(route, req, res),
      method: req.method,
      cost: await resolveOption(cost, req, res),
      critical: await resolveOption(critical, req, res),
      sandbox: await resolveOption(sandbox, req, res),
    });
    releaseWhenDone(fw, decision, res);
    req.floodwall = decision;
    if (!res.headersSent) {
      for (const [name, value] of Object.entries(decision.headers)) res.setHeader(name, value);
    }
    if (decision.allowed) return true;
    await handler(req, res, next, decision);
    return false;
  }

  return function floodwall(req, res, next) {
    decide(req, res, next).then((proceed) => proceed && next(), next);
  };
}

module.exports = { express, defaultRoute };
