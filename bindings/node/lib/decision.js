'use strict';
// A decision of the core (fw_decision), built from the addon's raw Float64Array (src/addon.cc, RawIndex).
// Headers and body are the core's formatter output, computed on first use and cached: an admit that
// nobody formats (a benchmark, a worker that only counts) does not pay for them.

const LIMITERS = [null, 'request_rate', 'concurrency', 'fleet', 'utilization'];
const LIMITER_CODES = { request_rate: 1, concurrency: 2, fleet: 3, utilization: 4 };
// The core's names, by code (the addon is the module index.js loaded; require caches it).
const FAIL_REASONS = [null, ...require(require('./addon_path').addonPath()).failReasons];
const TWO_32 = 2 ** 32;

// "Name: value\r\n" lines of fw_format_headers, into an object in the core's order.
function parseHeaders(text) {
  const headers = {};
  for (let at = 0, end; (end = text.indexOf('\r\n', at)) > at; at = end + 2) {
    const colon = text.indexOf(': ', at);
    headers[text.slice(at, colon)] = text.slice(colon + 2, end);
  }
  return headers;
}

class Decision {
  #core;
  #failReason;
  #headers;
  #body;

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
    /** What the request holds until fw.release(decision): a number (a bigint past 2^53), 0 for nothing. */
    this.ticket = raw[13] === 0 ? raw[14] : raw[13] < 2 ** 21 ? raw[13] * TWO_32 + raw[14]
      : (BigInt(raw[13]) << 32n) | BigInt(raw[14]);
  }

  /** Why the store did not decide: 'timeout', 'connection', 'breaker', 'config', 'error', 'overload', or null. */
  get failReason() {
    return FAIL_REASONS[this.#failReason];
  }

  /** The response headers (RateLimit-Policy, RateLimit, RateLimit-Limit/-Remaining/-Reset, Retry-After). */
  get headers() {
    if (this.#headers === undefined) this.#headers = parseHeaders(this.#format('formatHeaders'));
    return this.#headers;
  }

  /** The JSON body of a rejection (429 or 503), or null when allowed. */
  get body() {
    if (this.#body === undefined) this.#body = this.#format('formatBody') || null;
    return this.#body;
  }

  toJSON() {
    const { headers, body, failReason } = this;
    return { ...this, failReason, headers, body };
  }

  // Writes this decision back into the client's scratch array, where the addon's formatters read it.
  #format(kind) {
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
    return this.#core.native[kind](this.#core.handle);
  }
}

module.exports = { Decision, parseHeaders };
