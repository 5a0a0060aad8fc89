'use strict';
// Koa middleware: app.use(floodwall.koa(fw, options)) with the options of every Node integration
// (lib/integration.js), hooks getting ctx, plus `router`: the @koa/router Router(s) whose route a request
// matches.
//
// - The route family: the route @koa/router matches for the method and path: the router given as `router`,
//   else the one dispatching (the middleware in router.use or on a route), else those the app uses
//   (router.routes() carries its router), with ctx._matchedRoute as the last resort; the path is always
//   passed, so that with no known pattern the rules' globs match it.
// - The limit headers go on every response, an error's too (Koa clears the headers when a downstream
//   middleware throws, and sets err.headers: the decision's are added there); the decision is ctx.state.floodwall.
// - The ticket is released exactly once when the response is over (node:http's 'close': the response
//   sent, a handler that threw answered, or the client gone), as in the Express middleware.
const { integration, isThenable, rememberedRoute, releaseWhenDone, SKIPPED, GONE } = require('./integration');

function isRouter(r) {
  return r !== null && typeof r === 'object' && typeof r.match === 'function' && Array.isArray(r.stack);
}

// The routers of the app's middleware (router.routes() returns a function whose .router is the Router).
function appRouters(app) {
  const found = [];
  for (const fn of app.middleware || []) if (fn && isRouter(fn.router)) found.push(fn.router);
  return found;
}

// The pattern of the route `router` would dispatch `method path` to: the last matched layer with methods,
// as @koa/router sets ctx._matchedRoute.
function routerMatch(router, method, path) {
  const { pathAndMethod } = router.match(path, method);
  for (let i = pathAndMethod.length - 1; i >= 0; i--) {
    const layer = pathAndMethod[i];
    if (layer.methods.length > 0) return typeof layer.path === 'string' ? layer.path : undefined;
  }
  return undefined;
}

function defaultHandler(ctx, next, decision) {
  ctx.status = decision.status;
  // The core's type as it is (ctx.type would add "; charset=utf-8"); set first, so that the body keeps it.
  ctx.set('Content-Type', decision.contentType);
  ctx.body = decision.body;
}

/**
 * @param {import('./index').Floodwall} fw
 * @param {object} [options] the options of every Node integration (README, index.d.ts), hooks and values as
 *   functions of (ctx), handler(ctx, next, decision); and router: a @koa/router Router or an array of them.
 */
function koa(fw, options = {}) {
  const where = 'koa(fw, options)';
  if (typeof options !== 'object' || options === null) throw new TypeError(`${where}: options must be an object`);
  const given = options.router;
  if (given !== undefined && !(isRouter(given) || (Array.isArray(given) && given.every(isRouter)))) {
    throw new TypeError(`${where}: router must be a @koa/router Router or an array of them`);
  }
  const routersGiven = given === undefined ? undefined : [].concat(given);
  const appRouterCache = new WeakMap(); // app -> { count: app.middleware.length, routers }

  function routersOf(ctx) {
    if (routersGiven !== undefined) return routersGiven;
    // Within a router (router.use, a route's own middleware): the one dispatching.
    if (isRouter(ctx.router)) return [ctx.router];
    const app = ctx.app;
    let known = appRouterCache.get(app);
    if (known === undefined || known.count !== app.middleware.length) {
      known = { count: app.middleware.length, routers: appRouters(app) };
      appRouterCache.set(app, known);
    }
    return known.routers;
  }

  // Within a router, ctx._matchedRoute is the path of the layer running (a router.use middleware's own, not
  // the route's): the router's match is asked first, and _matchedRoute is the last resort.
  function defaultRoute(ctx) {
    const path = ctx.path;
    const method = ctx.method;
    for (const router of routersOf(ctx)) {
      const pattern = rememberedRoute(router, router.stack.length, method, path, () => routerMatch(router, method, path));
      if (pattern !== undefined) return pattern;
    }
    return typeof ctx._matchedRoute === 'string' ? ctx._matchedRoute : undefined;
  }

  const { decide, handler } = integration(fw, options, { where, extra: ['router'], defaultRoute, defaultHandler });

  function answer(ctx, next, decision) {
    if (decision === SKIPPED) return next();
    if (decision === GONE) return undefined; // the client went away while it waited: nothing to answer
    releaseWhenDone(fw, decision, ctx.res);
    ctx.state.floodwall = decision;
    const headers = decision.headers;
    ctx.set(headers);
    if (!decision.allowed) return handler(ctx, next, decision);
    return next().catch((err) => {
      // Koa's error answer drops the headers set so far and sets the error's own.
      if (err !== null && typeof err === 'object') err.headers = { ...headers, ...err.headers };
      throw err;
    });
  }

  return function floodwall(ctx, next) {
    const decided = decide(ctx, undefined, ctx.req, ctx.path);
    if (isThenable(decided)) return decided.then((decision) => answer(ctx, next, decision));
    return Promise.resolve(answer(ctx, next, decided));
  };
}

module.exports = { koa };
