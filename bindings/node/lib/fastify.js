'use strict';
// The Fastify plugin (Fastify 4 and 5): app.register(floodwall.fastify, { client: fw, ...options }) with the
// options of every Node integration (lib/integration.js), hooks getting (request, reply).
//
// - App-wide: the plugin sets fastify-plugin's symbols itself (skip-override, display name and its
//   metadata), as fastify-plugin would, so that its hooks apply to the whole app and not only to its own
//   encapsulated context; floodwall has no runtime dependency on fastify-plugin for it.
// - The route family is the route's pattern, request.routeOptions.url ('/orders/:id'), and the path is
//   always passed: a request no route matches (a 404) is limited too, its path matched by the rules' globs.
// - A route's own options are its config.floodwall ({cost, critical, sandbox, skip}, as @fastify/rate-limit
//   reads config.rateLimit), checked when the route is registered (onRoute): an unknown key or a wrong
//   type fails the registration, not the first request.
// - The limit headers go on every reply (set in onRequest); a rejection is the core's status and body.
// - The ticket is released exactly once when the request is over: on the node:http response's 'close',
//   which comes after the reply is sent (a handler that threw included: Fastify answers its error), when the
//   client goes away and when connectionTimeout cuts the request off; or at once when the admit resolved
//   after the client had gone. One listener, as the Express middleware does, and only on a request that
//   holds a ticket: Fastify's onResponse, onRequestAbort and onTimeout hooks would cost every request of
//   the app their listeners and objects (5 to 10 us of CPU a request, bench/http/inject.js).
const { integration, isThenable, pathOf, releaseWhenDone, SKIPPED, GONE } = require('./integration');

function defaultRoute(request) {
  return request.routeOptions.url;
}

function defaultHandler(request, reply, decision) {
  // The core's body and type as they are: Fastify would add "; charset=utf-8" to a JSON type sent with a
  // string, never with a Buffer.
  reply.code(decision.status).header('content-type', decision.contentType).send(Buffer.from(decision.body));
}

function fastifyPlugin(app, options, done) {
  try {
    register(app, options);
  } catch (err) {
    return done(err); // app.register(...) / app.ready() fails with it: a missing or closed client, a bad option
  }
  return done();
}

function register(app, options) {
  const where = 'floodwall.fastify';
  if (typeof options !== 'object' || options === null) throw new TypeError(`${where}: options must be an object`);
  const { client, prefix, logLevel, logSerializers, ...rest } = options; // the last three are Fastify's
  if (client === undefined) throw new TypeError(`${where}: the client option is required (a Floodwall)`);
  const { decide, handler, routeSettings } = integration(client, rest, { where, defaultRoute, defaultHandler });
  // Declared for every request (the shape Fastify's request objects keep).
  if (!app.hasRequestDecorator('floodwall')) app.decorateRequest('floodwall', null);
  const settingsOf = (route, own) => routeSettings(own, `${where}: route ${route.method} ${route.url}: config.floodwall`);
  // Each route's settings, made at its first request, by the config object Fastify keeps for the route
  // (its own config, with its url and method): the route's config.floodwall over the plugin's options, and
  // the route's pattern as the route when the app gave no route option. request.routeOptions is a getter
  // that builds a new object on every read (Fastify 4 and 5): read once a request.
  const perRoute = new WeakMap();
  function settingsFor(route) {
    const config = route.config;
    let settings = perRoute.get(config);
    if (settings === undefined) {
      settings = settingsOf(route, config.floodwall);
      if (settings.route === defaultRoute) settings = Object.freeze({ ...settings, route: config.url });
      perRoute.set(config, settings);
    }
    return settings;
  }
  // Checked as each route is registered; a route registered before the plugin is checked at its first request.
  app.addHook('onRoute', (route) => {
    const own = route.config && route.config.floodwall;
    if (own !== undefined) settingsOf(route, own);
  });

  // The decision answered: headers, the ticket held until the request is over, the route's handler or the
  // rejection. Returns whether the request goes on.
  function answer(request, reply, decision) {
    if (decision === SKIPPED) return true;
    if (decision === GONE) return false; // the client went away while it waited: nothing to answer
    request.floodwall = decision;
    // Decided later (Redis): the client may have gone meanwhile (releaseWhenDone releases at once then).
    if (decision.ticket) {
      if (request.raw.destroyed) client.release(decision);
      else releaseWhenDone(client, decision, reply.raw);
    }
    reply.headers(decision.headers);
    if (decision.allowed) return true;
    const sent = handler(request, reply, decision);
    if (isThenable(sent)) sent.then(undefined, (err) => reply.send(err));
    return false;
  }

  app.addHook('onRequest', (request, reply, next) => {
    let decided;
    try {
      decided = decide(request, reply, request.raw, pathOf(request.raw.url), settingsFor(request.routeOptions));
    } catch (err) {
      return next(err);
    }
    if (!isThenable(decided)) {
      if (answer(request, reply, decided)) next();
      return undefined;
    }
    decided.then((decision) => {
      let goOn;
      try {
        goOn = answer(request, reply, decision);
      } catch (err) {
        return next(err);
      }
      if (goOn) next();
      return undefined;
    }, next);
    return undefined;
  });
}

// fastify-plugin's conventions, set here as it sets them.
fastifyPlugin[Symbol.for('skip-override')] = true;
fastifyPlugin[Symbol.for('fastify.display-name')] = 'floodwall';
fastifyPlugin[Symbol.for('plugin-meta')] = { name: 'floodwall', fastify: '4.x || 5.x' };
fastifyPlugin.default = fastifyPlugin;

module.exports = { fastify: fastifyPlugin };
