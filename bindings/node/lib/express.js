'use strict';
// Express middleware (Express 4 and 5), after express-rate-limit's conventions where they fit: keyGenerator,
// skip and handler options, limit headers on every response, the decision on the request. What it adds:
// the tenant derived by the core from the request (the same key as floodwall's Python and Ruby
// middlewares give the same request), the core's RateLimit headers and rejection bodies, 503s from the
// shedders, 403s for tenants blocked through the admin API, and a ticket released exactly once when the
// response ends ('close': after 'finish', or when the client goes away mid-request).
//
// The options, and how a request becomes an admit, are every Node integration's (lib/integration.js).
const { integration, isThenable, pathOf, rememberedRoute, releaseWhenDone, SKIPPED, GONE } = require('./integration');

// ------------------------------------------------------------------------------------------ route family

const MAX_DEPTH = 8; // routers mounted in routers

// A layer's match of `path` as { path: the part matched, pattern: the path the layer was given, when it is
// a string } or null. Express 5's router answers with an object naming the pattern that matched (one of an
// array's); Express 4's Layer#match with a boolean and the matched part in layer.path (as its own dispatch
// does), which is the pattern only for a mount path without parameters or a RegExp (`literal`).
function matchLayer(layer, path) {
  const m = layer.match(path);
  if (!m) return null;
  if (m === true) {
    const literal = !(layer.keys && layer.keys.length) && !(layer.route && typeof layer.route.path !== 'string');
    return { path: layer.path, pattern: literal ? layer.path : undefined };
  }
  return { path: m.path, pattern: typeof m.pattern === 'string' ? m.pattern : undefined };
}

// Whether the route answers the method, as the router decides (Express 4's Route#_handles_method, Express
// 5's _handlesMethod: the same rule over route.methods).
function handlesMethod(route, method) {
  const methods = route.methods || {};
  if (methods._all) return true;
  const name = method.toLowerCase();
  return Boolean(methods[name] || (name === 'head' && methods.get));
}

// The layers of what a non-route layer hands the request to: a Router, or a mounted app. Express 4's
// app.router is a getter that throws, hence _router first.
function innerStack(handle) {
  if (typeof handle !== 'function') return undefined;
  if (Array.isArray(handle.stack)) return handle.stack;
  if (handle._router && Array.isArray(handle._router.stack)) return handle._router.stack;
  if (typeof handle.set === 'function' && typeof handle.handle === 'function' && !('_router' in handle)) {
    const router = handle.router; // an Express 5 app
    return router && Array.isArray(router.stack) ? router.stack : undefined;
  }
  return undefined;
}

// The pattern of the route the router would dispatch `method path` to, its mounts' patterns in front
// ('/api' + '/orders/:id'), or undefined (no route matches, or a mount's or route's path is a RegExp).
function findRoute(stack, path, method, prefix, depth) {
  for (const layer of stack) {
    if (layer.route) {
      const m = matchLayer(layer, path);
      if (!m || !handlesMethod(layer.route, method)) continue;
      const pattern = typeof layer.route.path === 'string' ? layer.route.path : m.pattern;
      return pattern === undefined ? undefined : prefix + pattern;
    }
    if (depth >= MAX_DEPTH) continue;
    const inner = innerStack(layer.handle);
    if (inner === undefined) continue;
    const m = matchLayer(layer, path);
    if (!m) continue;
    if (m.pattern === undefined) return undefined; // a mount with parameters or a RegExp: no pattern to give
    const rest = path.slice(m.path.length);
    const found = findRoute(inner, rest.startsWith('/') ? rest : `/${rest}`, method, prefix + (m.pattern === '/' ? '' : m.pattern), depth + 1);
    if (found !== undefined) return found;
  }
  return undefined;
}

// The app router's stack: Express 4's app._router, Express 5's app.router.
function appRouter(app) {
  if (!app) return undefined;
  if (app._router) return app._router;
  if ('_router' in app) return undefined; // Express 4 before its first route
  return app.router;
}

// The pattern of the route that the app's router would match for the request (for a middleware mounted
// app-wide, before routing), remembered per method and path.
function lookUpRoute(req, path) {
  const router = appRouter(req.app);
  if (!router || !Array.isArray(router.stack) || path === undefined) return undefined;
  return rememberedRoute(router, router.stack.length, req.method, path, () => {
    try {
      return findRoute(router.stack, path, req.method, '', 0);
    } catch {
      return undefined; // a layer of a shape this lookup does not know: the path alone, never a failed request
    }
  });
}

// The route family: the matched route's pattern ('/users/:id', never '/users/42') with its mount path in
// front, so that the policy's route rules can name it and the metrics stay bounded. Mounted on a route, the
// route Express matched; mounted app-wide (no route matched yet), the one the app's router would match;
// undefined when none would (then the rules' globs match the path, which is always passed too).
function defaultRoute(req) {
  if (req.route && typeof req.route.path === 'string') return (req.baseUrl || '') + req.route.path;
  return lookUpRoute(req, pathOf(req.originalUrl || req.url));
}

function defaultHandler(req, res, next, decision) {
  res.statusCode = decision.status;
  // The core's body and type as they are: res.send() would append "; charset=utf-8" to the type.
  res.setHeader('Content-Type', decision.contentType);
  res.setHeader('Content-Length', Buffer.byteLength(decision.body));
  res.end(decision.body);
}

/**
 * @param {import('./index').Floodwall} fw
 * @param {object} [options] the options of every Node integration (README, index.d.ts): keyGenerator, route,
 *   cost, critical, sandbox, skip (values or functions of (req, res), possibly async), handler(req, res,
 *   next, decision) for rejections, verify(credential, req) and verifyTimeout (ms).
 */
function express(fw, options = {}) {
  const { decide, handler } = integration(fw, options, { where: 'express(fw, options)', defaultRoute, defaultHandler });

  // The decision answered: headers, the ticket's release, then the next handler or the rejection.
  function answer(req, res, next, decision) {
    if (decision === SKIPPED) return next();
    if (decision === GONE) return undefined; // the client went away while it waited: nothing to answer
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

  return function floodwall(req, res, next) {
    let decided;
    try {
      decided = decide(req, res, req, pathOf(req.originalUrl || req.url));
    } catch (err) {
      return next(err);
    }
    if (!isThenable(decided)) return answer(req, res, next, decided);
    decided.then((decision) => {
      try {
        answer(req, res, next, decision);
      } catch (err) {
        next(err);
      }
    }, next);
  };
}

module.exports = { express, defaultRoute };
