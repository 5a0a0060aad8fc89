'use strict';
// floodwall for Node: the idiomatic layer over the addon (src/addon.cc), which maps the C ABI one to one.
const url = require('node:url');
const errors = require('./errors');
const { Decision } = require('./decision');
const { Admin } = require('./admin');
const { admitNow } = require('./internal');
const otel = require('./otel'); // @opentelemetry/api is loaded only by otel.instrument()

const native = require(require('./addon_path').addonPath());
native.setErrorFactory(errors.fromStatus);

const { CODES, fromStatus } = errors;
const invalid = (message) => fromStatus(CODES.FW_EINVAL, message);

// The policy crosses the ABI as JSON. NaN and Infinity would silently become null in JSON.stringify;
// as strings they reach the core, which names the field that holds them.
function policyJson(policy) {
  if (policy === undefined) return '{}';
  // A string by the rule of every floodwall language (fw_policy_text: JSON text when it starts with "{" or
  // "[", else a file's path); a file: URL is always a path.
  if (typeof policy === 'string') return native.policyText(policy, false);
  if (policy instanceof URL) {
    let file;
    try {
      file = url.fileURLToPath(policy);
    } catch (err) {
      throw fromStatus(CODES.FW_EPOLICY, `policy: ${policy.href} is not a file: URL (${err.message})`);
    }
    return native.policyText(file, true);
  }
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) {
    throw fromStatus(CODES.FW_EPOLICY, 'policy: must be an object, a JSON string or a file path');
  }
  try {
    return JSON.stringify(policy, (key, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v));
  } catch (err) {
    throw fromStatus(CODES.FW_EPOLICY, `policy: cannot be written as JSON (${err.message})`);
  }
}

function optionalString(value, field) {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw invalid(`${field}: must be a string`);
  // The C ABI takes route and method as NUL-terminated strings: a NUL would silently cut them short.
  if (value.includes('\0')) throw invalid(`${field}: must not contain NUL characters`);
  return value;
}

// The request's path (fw_request.path: bytes with their length, so a NUL in it is its text): the glob rules
// match it when no route pattern is known.
function pathArg(value) {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw invalid('path: must be a string (the request\'s path, without its query string)');
  return value;
}

function optionalBoolean(value, field) {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') throw invalid(`${field}: must be a boolean`);
  return value;
}

// Who the request is from: the tenant as given (a string, its UTF-8 bytes; a Buffer or Uint8Array, its
// bytes; '' the anonymous tenant), or, when it is undefined or null, the headers and the peer address from
// which the core derives it (policy section "tenant"). Checked here; the addon checks each header entry.
function tenantArg(value) {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' && !(value instanceof Uint8Array)) {
    throw invalid('tenant: must be a string, a Buffer, or null to derive it from the headers and the peer');
  }
  return value;
}

function headersArg(value) {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) throw invalid('headers: must be an array: flat [name, value, ...] (req.rawHeaders) or [name, value] pairs');
  return value;
}

function peerArg(value) {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw invalid('peer: must be a string (the connection\'s peer address)');
  return value;
}

// What the app said of the request's credential (fw_request.credential): undefined or null, nothing (the
// policy's tenant.credentials decides, and by default the credential names no tenant); true, its verify
// hook vouched for it (it names the tenant); false, it did not (the request is keyed by its address).
const CREDENTIAL_UNCHECKED = 0;
const CREDENTIAL_VERIFIED = 1;
const CREDENTIAL_REJECTED = 2;

function credentialArg(value) {
  if (value === undefined || value === null) return CREDENTIAL_UNCHECKED;
  if (value === true) return CREDENTIAL_VERIFIED;
  if (value === false) return CREDENTIAL_REJECTED;
  throw invalid('verified: must be true, false or undefined (what the app\'s check of the request\'s credential said)');
}

function requestObject(request) {
  if (typeof request !== 'object' || request === null) throw invalid('request: must be an object');
  return request;
}

// Resolves once performance.now() reaches `at` (a reservation's turn, counted from when its decision reached
// this thread, which is after the core's): a timer may fire up to the loop's turn early, so it is armed
// again for what is left. An abort before then releases the reservation (giving it back) and rejects.
function waitForTurn(at, signal, giveBack) {
  return new Promise((resolve, reject) => {
    let timer;
    const onAbort = () => {
      clearTimeout(timer);
      giveBack();
      reject(signal.reason);
    };
    const check = () => {
      const left = at - performance.now();
      if (left > 0) {
        timer = setTimeout(check, Math.ceil(left));
        return;
      }
      signal?.removeEventListener('abort', onAbort);
      resolve();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    check();
  });
}

class Floodwall {
  #core; // { native, handle, scratch, ruleNames, inScratch }: shared with the decisions, which format themselves through it
  #closed = false;
  #admin;
  // A network store (Redis): the admits and releases of one event-loop turn go out in one write, as ioredis'
  // auto-pipelining sends them. The first of a turn holds the store's writes (fw_client_hold) and queues the
  // flush (fw_client_flush) with setImmediate, which runs once the turn's I/O callbacks are done, and before
  // the loop could wait for I/O again (a pending immediate makes libuv poll without blocking).
  #batching;
  #held = false;
  #flush = () => {
    this.#held = false;
    native.flush(this.#core.handle);
  };

  /**
   * @param {object|string|URL} [policy] the policy: an object, a JSON document or the path of a JSON file.
   * @throws {PolicyError} naming the field, for an invalid policy; {StoreError} for a bad store URL.
   */
  constructor(policy) {
    const scratch = new Float64Array(native.rawSize);
    const handle = native.create(policyJson(policy), scratch);
    // The names of the policy's limits and quotas by index: they never change, so they are asked once.
    this.#core = { native, handle, scratch, ruleNames: Object.freeze(native.ruleNames(handle)), inScratch: null, allowedHeaders: null };
    this.#admin = new Admin(native, handle);
    this.#batching = native.canBlock(handle);
  }

  #hold() {
    if (this.#held || !this.#batching) return;
    this.#held = true;
    native.hold(this.#core.handle);
    setImmediate(this.#flush);
  }

  /**
   * The admin API: tenants' overrides, tiers, blocks and resets, and fleet-wide modes, kept in the store and
   * applied to the next request of every client of it. Every method returns a promise (the call waits on
   * the store off the event loop, for at most its deadline).
   */
  get admin() {
    return this.#admin;
  }

  /**
   * Decides one request: {tenant?, headers?, peer?, verified?, route?, path?, method?, cost?, critical?, sandbox?}.
   * `route` is the framework's matched route pattern in its own syntax ('/orders/:id', '/orders/{id}'), `path`
   * the request's path without its query string: the policy's route globs match the route made canonical,
   * else the path (see requestRoute()). A middleware mounted app-wide passes both.
   * Without a tenant (undefined or null) the core derives it from the headers and the peer address: a
   * Bearer token or API key names the tenant only when `verified` is true (the app checked it), else
   * the request is keyed by its address (unless the policy's tenant.credentials is "unverified").
   * Never blocks the event loop: on Redis it resolves from the core's I/O thread.
   * Rejects with InvalidArgumentError (naming the field) for a request that cannot be decided.
   */
  admit(request) {
    try {
      const d = this[admitNow](request);
      return d instanceof Decision ? Promise.resolve(d) : d;
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Waits for the request's turn instead of refusing it: {tenant, route?, cost?, maxWait?, signal?}. When the
   * tenant's bucket would have the tokens within `maxWait` milliseconds (default 10000; capped at the
   * bucket's full refill, burst / rate), the store reserves them at once (one round trip, first come first
   * served) and the promise resolves at the turn with the Decision admit() gives an allowed request
   * (`waitedMs`: how long it waited); the wait is a timer: the event loop never blocks. A request whose turn
   * is further away, or that another limiter refuses, resolves at once with admit()'s refusal, nothing
   * consumed. Release it as admit()'s. An AbortSignal aborted before the turn rejects with its reason and
   * gives the reservation back (its tokens return when no later reservation was made).
   * Rejects with InvalidArgumentError naming maxWait for a negative, non-finite or non-numeric one.
   */
  async acquire(request) {
    requestObject(request);
    const { maxWait = 10000, signal } = request;
    if (typeof maxWait !== 'number' || !Number.isFinite(maxWait) || maxWait < 0) {
      throw invalid(`maxWait: must be a finite number of milliseconds, 0 or more (got ${String(maxWait)})`);
    }
    if (signal !== undefined && (signal === null || typeof signal.aborted !== 'boolean')) {
      throw invalid('signal: must be an AbortSignal');
    }
    signal?.throwIfAborted();
    const d = await this[admitNow](request, maxWait / 1000);
    const waitMs = d.waitedMs;
    if (signal?.aborted) {
      this.release(d); // aborted while the store answered: before the turn, the reservation goes back
      throw signal.reason;
    }
    if (!d.allowed || !(waitMs > 0)) return d;
    await waitForTurn(performance.now() + waitMs, signal, () => this.release(d));
    return d;
  }

  // admit() without the promise when the core decided at once (lib/internal.js); throws for a bad request.
  // With maxWait (seconds), a reservation (acquire).
  [admitNow](request, maxWait) {
    requestObject(request);
    const { cost = 1 } = request;
    if (!Number.isSafeInteger(cost) || cost < 0) throw invalid('cost: must be a non-negative integer');
    const core = this.#core;
    this.#hold();
    const pending = native.admit(core.handle, tenantArg(request.tenant), headersArg(request.headers), peerArg(request.peer),
      optionalString(request.route, 'route'), optionalString(request.method, 'method'), cost,
      optionalBoolean(request.critical, 'critical'), optionalBoolean(request.sandbox, 'sandbox'),
      credentialArg(request.verified), pathArg(request.path), maxWait);
    // Decided inline (the memory store): the numbers are in the scratch array, read them right away.
    if (pending === undefined) return new Decision(core, core.scratch);
    return pending.then((raw) => new Decision(core, raw));
  }

  /**
   * The tenant id that admit() would use for {tenant?, headers?, peer?, verified?}: the tenant as given, else
   * the one the core derives ("key:<32 hex digits>" for a verified Bearer token or API key, "ip:<address>",
   * "anonymous").
   * @throws {InvalidArgumentError} naming the field.
   */
  tenantKey(request) {
    requestObject(request);
    return native.tenantKey(this.#core.handle, tenantArg(request.tenant), headersArg(request.headers), peerArg(request.peer),
      credentialArg(request.verified));
  }

  /**
   * The route the policy's route rules match for {route?, path?}, in one spelling for every framework: the
   * route pattern made canonical ('/orders/{id}', '/orders/<int:id>' and '/orders/:id(\\d+)' are '/orders/:id';
   * an optional part such as '(.:format)' or '{/:id}' is dropped; so is a trailing '/'), else the path
   * without its trailing '/', else '' (the default route).
   * @throws {InvalidArgumentError} naming the field.
   */
  requestRoute(request) {
    requestObject(request);
    return native.requestRoute(this.#core.handle, optionalString(request.route, 'route'), pathArg(request.path));
  }

  /**
   * The credential a verify hook is asked about for {headers?, peer?}: the Bearer token (without its scheme)
   * or the API key, trimmed, that would name the request's tenant once the app vouches for it, by the
   * policy's tenant.from; null when the request carries none (or its address comes first).
   * @throws {InvalidArgumentError} naming the field.
   */
  requestCredential(request) {
    requestObject(request);
    return native.requestCredential(this.#core.handle, headersArg(request.headers), peerArg(request.peer));
  }

  /**
   * The longest an admit waits for the store, in milliseconds (the policy's redis.deadline_ms, 50 by
   * default, whatever the store): the Express middleware gives a verify hook no longer by default.
   */
  get deadlineMs() {
    return native.deadlineMs(this.#core.handle);
  }

  /** Frees what a decision holds. Idempotent; never throws; accepts a decision or its ticket. */
  release(decision) {
    const ticket = typeof decision === 'object' && decision !== null ? decision.ticket : decision;
    if (!ticket) return;
    this.#hold();
    native.release(this.#core.handle, ticket);
  }

  /** Sets a limiter's mode at run time: limiter 'request_rate' | 'concurrency' | 'fleet' | 'utilization' | 'adaptive',
   * mode 'enforce' | 'dark' | 'off'. */
  setMode(limiter, mode) {
    native.setMode(this.#core.handle, limiter, mode);
  }

  /** The limiter's mode in force now (the fleet-wide one from Redis when set). */
  getMode(limiter) {
    return native.getMode(this.#core.handle, limiter);
  }

  /** Reports this box's worker utilization in [0, 1] to the utilization shedder. */
  reportUtilization(u) {
    if (typeof u !== 'number') throw invalid('utilization: must be a number in [0, 1]');
    native.reportUtilization(this.#core.handle, u);
  }

  /** The utilization shedder's current shedding amount (0 when not configured). */
  sheddingAmount() {
    return native.sheddingAmount(this.#core.handle);
  }

  /** The counters: {decisions, routes, top_tenants, breaker, store, shedding_amount, utilization}. */
  metrics() {
    return JSON.parse(native.metricsJson(this.#core.handle));
  }

  /** The same counters as Prometheus text exposition format. */
  prometheus() {
    return native.metricsPrometheus(this.#core.handle);
  }

  /** Stops the client; admits still waiting on the store resolve, decided by the fallback. Idempotent. */
  close() {
    this.#closed = true;
    native.close(this.#core.handle);
  }

  get closed() {
    return this.#closed;
  }
}

const { express } = require('./express');
const { fastify } = require('./fastify');
const { koa } = require('./koa');
const { backoff, backoffDefaults, retry, parseRetryAfter } = require('./retry');

// Every export a plain name, so that Node's detection of a CommonJS module's exports (cjs-module-lexer)
// finds them all and `import { Floodwall, express, PolicyError } from 'floodwall'` works from ESM: a
// member expression such as `native.version` here would end what it detects.
const { version } = native;
const { FloodwallError, PolicyError, StoreError, InvalidArgumentError, ClosedError } = errors;
module.exports = {
  Floodwall,
  Decision,
  Admin,
  express,
  fastify,
  koa,
  backoff,
  backoffDefaults,
  retry,
  parseRetryAfter,
  otel,
  version,
  FloodwallError,
  PolicyError,
  StoreError,
  InvalidArgumentError,
  ClosedError,
};
