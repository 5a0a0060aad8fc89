'use strict';
// A decision of the core (fw_decision), built from the addon's raw Float64Array (src/addon.cc, RawIndex).
// Headers, content type and body are the core's fw_format_response, computed on first use and cached: an
// admit that nobody formats (a benchmark, a worker that only counts) does not pay for them.

const LIMITERS = [null, 'request_rate', 'concurrency', 'fleet', 'utilization'];
const LIMITER_CODES = { request_rate: 1, concurrency: 2, fleet: 3, utilization: 4 };
// The core's names, by code (the addon is the module index.js loaded; require caches it).
const FAIL_REASONS = [null, ...require(require('./addon_path').addonPath()).failReasons];
const TWO_32 = 2 ** 32;

class Decision {
  #core;
  #failReason;
  #response;

  constructor(core, raw) {
    this.#core = core;
    /** The request may proceed (also true in dark mode when degraded and when failed open). */
    this.allowed = raw[0] !== 0;
    /** 200, 429 (request_rate, concurrency) or 503 (fleet, utilization). */
    this.status = raw[1];
    /** The enforcing limiter that rejected, or null. */
    this.limiter = LIMITERS[raw[2]];
    /** The first dark-mode limiter that would have rejected, or null. */
    this.darkLimiter = LIMITERS[raw[3]];
    /** Allowed with no limiter at all: the store could not decide and redis.fallback is "open". */
    this.failedOpen = raw[4] !== 0;
    /** The local fallback table decided (the store could not answer in time; failReason says why). */
    this.degraded = raw[15] !== 0;
    this.#failReason = raw[5];
    /** The tenant's bucket: capacity (burst), whole tokens left, seconds until full, tokens per second. */
    this.limit = raw[6];
    this.remaining = raw[7];
    this.reset = raw[8];
    /** On a rejection: whole seconds (at least 1) until a retry can pass; else 0. */
    this.retryAfter = raw[9];
    this.rate = raw[10];
    /** The tenant's concurrency cap on this route and the slots left (both 0 when not counted). */
    this.concurrencyLimit = raw[11];
    this.concurrencyRemaining = raw[12];
    /** The tokens the request asked for (its cost, 0 counted as 1). */
    this.cost = raw[16];
    /** What the request holds until fw.release(decision): a number (a bigint past 2^53), 0 for nothing. */
    this.ticket = raw[13] === 0 ? raw[14] : raw[13] < 2 ** 21 ? raw[13] * TWO_32 + raw[14]
      : (BigInt(raw[13]) << 32n) | BigInt(raw[14]);
  }

  /** Why the store did not decide: 'timeout', 'connection', 'breaker', 'config', 'error', 'overload', 'cluster', or null. */
  get failReason() {
    return FAIL_REASONS[this.#failReason];
  }

  /**
   * The response headers, names as the core spells them, in its order: RateLimit-Policy, RateLimit,
   * RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, then Retry-After on a rejection.
   */
  get headers() {
    return this.#format().headers;
  }

  /** The Content-Type of the rejection's body ('application/json' or 'application/problem+json'), or null when allowed. */
  get contentType() {
    return this.#format().contentType;
  }

  /** The body of a rejection (429 or 503), or null when allowed. */
  get body() {
    return this.#format().body;
  }

  toJSON() {
    const { headers, contentType, body, failReason } = this;
    return { ...this, failReason, headers, contentType, body };
  }

  // fw_format_response of this decision, once: written back into the client's scratch array, where the
  // addon reads it.
  #format() {
    if (this.#response !== undefined) return this.#response;
    const raw = this.#core.scratch;
    raw[0] = this.allowed ? 1 : 0;
    raw[1] = this.status;
    raw[2] = LIMITER_CODES[this.limiter] || 0;
    raw[3] = LIMITER_CODES[this.darkLimiter] || 0;
    raw[4] = this.failedOpen ? 1 : 0;
    raw[5] = this.#failReason;
    raw[6] = this.limit;
    raw[7] = this.remaining;
    raw[8] = this.reset;
    raw[9] = this.retryAfter;
    raw[10] = this.rate;
    raw[11] = this.concurrencyLimit;
    raw[12] = this.concurrencyRemaining;
    raw[13] = 0;
    raw[14] = 0;
    raw[15] = this.degraded ? 1 : 0;
    raw[16] = this.cost;
    // The names and values come as one string, cut by the lengths of the core's name/value pairs, which
    // the addon leaves in the scratch array; the object keeps the core's order.
    const [contentType, body, fields] = this.#core.native.formatResponse(this.#core.handle);
    const headers = {};
    for (let i = 0, at = 0; i < raw[0]; i++) {
      const name = at + raw[1 + 2 * i];
      const end = name + raw[2 + 2 * i];
      headers[fields.slice(at, name)] = fields.slice(name, end);
      at = end;
    }
    this.#response = { headers, contentType: contentType || null, body: body || null };
    return this.#response;
  }
}

module.exports = { Decision };
