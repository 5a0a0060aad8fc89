'use strict';
// The admin API (Floodwall#admin): a tenant's control record, kept in the store (fw_admin_*). Each call may
// wait on the store for up to its deadline, so each runs on libuv's thread pool (src/addon.cc, AdminWorker)
// and returns a promise; a bad argument rejects it too, never throws.

const { CODES, fromStatus } = require('./errors');

const invalid = (message) => fromStatus(CODES.FW_EINVAL, message);

function tenantArg(tenant) {
  if (typeof tenant !== 'string' && !(tenant instanceof Uint8Array)) {
    throw invalid('tenant: must be a string or a Buffer (a tenant id, as admit() and tenantKey() have it)');
  }
  return tenant;
}

function optionsArg(options, what) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object' || Array.isArray(options)) throw invalid(`options: must be an object ${what}`);
  return options;
}

function numberArg(value, field) {
  if (typeof value !== 'number') throw invalid(`${field}: must be a number`);
  return value; // NaN, Infinity and negatives reach the core, which names the field
}

function nameOrNull(value, field) {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw invalid(`${field}: must be a string, or null for none`);
  if (value.includes('\0')) throw invalid(`${field}: must not contain NUL characters`);
  return value;
}

class Admin {
  #native;
  #handle;

  constructor(native, handle) {
    this.#native = native;
    this.#handle = handle;
  }

  // Runs fn (which calls the addon and returns its promise) so that an argument error rejects.
  #call(fn) {
    try {
      return fn(this.#native, this.#handle);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Gives the tenant its own request-rate bucket: {rate} tokens per second, {burst} tokens. */
  setOverride(tenant, options) {
    return this.#call((native, handle) => {
      const { rate, burst } = optionsArg(options, '{rate, burst}');
      return native.adminSetOverride(handle, tenantArg(tenant), numberArg(rate, 'rate'), numberArg(burst, 'burst'));
    });
  }

  /** Removes the tenant's own bucket: its tier's, or the policy's, applies again. */
  removeOverride(tenant) {
    return this.#call((native, handle) => native.adminRemoveOverride(handle, tenantArg(tenant)));
  }

  /** Puts the tenant in a tier of the policy's "tiers"; null takes it out of any. */
  setTier(tenant, tier) {
    return this.#call((native, handle) => native.adminSetTier(handle, tenantArg(tenant), nameOrNull(tier, 'tier')));
  }

  /** Blocks the tenant (403, nothing consumed) for {seconds}, or until unblock() without them. */
  block(tenant, options) {
    return this.#call((native, handle) => {
      const { seconds } = optionsArg(options, '{seconds}');
      let s = 0; // the core's "until unblocked"
      if (seconds !== undefined && seconds !== null) {
        if (typeof seconds !== 'number') throw invalid('seconds: must be a number');
        if (!(seconds > 0) || seconds === Infinity) {
          throw invalid('seconds: must be a finite number above 0 (leave it out to block until unblocked)');
        }
        s = seconds;
      }
      return native.adminBlock(handle, tenantArg(tenant), s);
    });
  }

  /** Lifts the tenant's block. */
  unblock(tenant) {
    return this.#call((native, handle) => native.adminUnblock(handle, tenantArg(tenant)));
  }

  /** The tenant as the store has it: tier, override, blocked, blockedUntil's RFC 3339, request_rate, ... */
  show(tenant) {
    return this.#call((native, handle) => native.adminShow(handle, tenantArg(tenant))).then(JSON.parse);
  }

  /** Forgets the tenant's buckets and quotas (full again); its control record and in-flight slots stay. */
  reset(tenant) {
    return this.#call((native, handle) => native.adminReset(handle, tenantArg(tenant)));
  }

  /** Sets a limiter's mode for every client of the store; null goes back to each client's own. */
  setMode(limiter, mode) {
    return this.#call((native, handle) => {
      if (typeof limiter !== 'string') throw invalid('limiter: must be a string');
      return native.adminSetMode(handle, limiter, nameOrNull(mode, 'mode'));
    });
  }

  /** The tenants with a control record, at most {limit} (default 1000). */
  list(options) {
    return this.#call((native, handle) => {
      const { limit = 1000 } = optionsArg(options, '{limit}');
      if (!Number.isSafeInteger(limit) || limit < 1) throw invalid('limit: must be an integer of at least 1');
      return native.adminList(handle, limit);
    }).then(JSON.parse);
  }
}

module.exports = { Admin };
