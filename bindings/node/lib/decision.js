'use strict';
// A decision of the core (fw_decision), built from the addon's raw Float64Array (src/addon.cc, RawIndex).
// Headers, content type and body are the core's fw_format_response, computed on first use and cached: an
// admit that nobody formats (a benchmark, a worker that only counts) does not pay for them. The policy's
// limits and quotas (the rules) are kept only for a decision that one of them applied to, and named on
// first use from the client's names, asked once (core.ruleNames).

// The core's names, by code (the addon is the module index.js loaded; require caches it).
const addon = require(require('./addon_path').addonPath());
const LIMITERS = [null, ...addon.limiters];
const LIMITER_CODES = Object.fromEntries(addon.limiters.map((name, i) => [name, i + 1]));
const FAIL_REASONS = [null, ...addon.failReasons];
const TWO_32 = 2 ** 32;
// Where the rules' fields start in the raw array (src/addon.cc, kRawRulesHigh): the mask's high and low
// halves, then rule, dark_rule, shown_rule, rule_limit, rule_remaining, rule_reset_s, rule_window_end_s.
const RULES_AT = 17;
const RULES_END = 26;
// After them, always written: blocked, blocked_until_s (src/addon.cc, kRawBlocked).
const BLOCKED_AT = 26;
// Then fw_decision.wait_s and waited_s (src/addon.cc, kRawWait).
const WAIT_AT = 28;

class Decision {
  #core;
  #failReason;
  #response;
  #rules; // undefined when no rule applied; else the raw rules' fields (RULES_AT to RULES_END)

  constructor(core, raw) {
    this.#core = core;
    /** The request may proceed (also true in dark mode when degraded and when failed open). */
    this.allowed = raw[0] !== 0;
    /** 200, 403 (blocked through the admin API), 429 (request_rate, concurrency) or 503 (fleet, utilization, adaptive). */
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
    /** The tenant is blocked through the admin API: status 403, nothing consumed. */
    this.blocked = raw[BLOCKED_AT] !== 0;
    /** When the block ends, in seconds since the epoch; null when not blocked, or blocked until unblocked. */
    this.blockedUntil = this.blocked && raw[BLOCKED_AT + 1] > 0 ? raw[BLOCKED_AT + 1] : null;
    /** acquire(): the milliseconds the request waited for its turn (0: it went at once; 0 for admit). */
    this.waitedMs = (raw[WAIT_AT] + raw[WAIT_AT + 1]) * 1000;
    // Only the mask is read when no limit or quota applied: the fields after it are then left unwritten.
    if (raw[RULES_AT] !== 0 || raw[RULES_AT + 1] !== 0) this.#rules = raw.slice(RULES_AT, RULES_END);
    // The scratch array holds this decision until the client's next one (or a formatting) overwrites it.
    if (raw === core.scratch) core.inScratch = this;
  }

  /** Why the store did not decide: 'timeout', 'connection', 'breaker', 'config', 'error', 'overload', 'cluster', or null. */
  get failReason() {
    return FAIL_REASONS[this.#failReason];
  }

  /** The name of the limit or quota (request_rate.limits, quotas) that rejected the request, or null. */
  get rule() {
    return this.#rules === undefined ? null : this.#core.ruleNames[this.#rules[2]] ?? null;
  }

  /** The name of the first dark-mode limit or quota that would have rejected the request, or null. */
  get darkRule() {
    return this.#rules === undefined ? null : this.#core.ruleNames[this.#rules[3]] ?? null;
  }

  /** The names of the limits and quotas that applied to the request (limits in policy order, then quotas). */
  get rules() {
    const rules = this.#rules;
    if (rules === undefined) return [];
    const names = this.#core.ruleNames;
    const out = [];
    for (let i = 0; i < names.length && i < 64; i++) {
      if (((i < 32 ? rules[1] >>> i : rules[0] >>> (i - 32)) & 1) === 1) out.push(names[i]);
    }
    return out;
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

  /** The body of a rejection (403, 429 or 503), or null when allowed. */
  get body() {
    return this.#format().body;
  }

  toJSON() {
    const { headers, contentType, body, failReason, rule, darkRule, rules } = this;
    return { ...this, failReason, rule, darkRule, rules, headers, contentType, body };
  }

  // fw_format_response of this decision, once, from the client's scratch array, where the addon reads it:
  // written back into it first unless it still holds this decision (the middleware formats right after the
  // admit).
  #format() {
    if (this.#response !== undefined) return this.#response;
    const core = this.#core;
    const raw = core.scratch;
    if (core.inScratch !== this) this.#writeBack(raw);
    core.inScratch = null; // the scratch array holds the header lengths now
    // The names and values come as one string, cut by the lengths of the core's name/value pairs, which
    // the addon leaves in the scratch array; the object keeps the core's order.
    const formatted = core.native.formatResponse(core.handle);
    // true: an allowed decision with the numbers of the last allowed one formatted (the same headers),
    // whose headers object core.allowedHeaders keeps; each decision gets its own copy.
    if (formatted === true) {
      this.#response = { headers: { ...core.allowedHeaders }, contentType: null, body: null };
      return this.#response;
    }
    let fields = formatted, contentType = null, body = null;
    if (typeof formatted !== 'string') [fields, contentType, body] = formatted;
    const headers = {};
    for (let i = 0, at = 0; i < raw[0]; i++) {
      const name = at + raw[1 + 2 * i];
      const end = name + raw[2 + 2 * i];
      headers[fields.slice(at, name)] = fields.slice(name, end);
      at = end;
    }
    if (typeof formatted === 'string' && this.allowed) core.allowedHeaders = { ...headers };
    this.#response = { headers, contentType: contentType || null, body: body || null };
    return this.#response;
  }

  // This decision's numbers, back into the scratch array `raw` (see the constructor).
  #writeBack(raw) {
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
    raw[BLOCKED_AT] = this.blocked ? 1 : 0;
    raw[BLOCKED_AT + 1] = this.blockedUntil ?? 0;
    raw[WAIT_AT] = 0;
    raw[WAIT_AT + 1] = this.waitedMs / 1000;
    if (this.#rules === undefined) {
      raw[RULES_AT] = 0;
      raw[RULES_AT + 1] = 0;
    } else {
      raw.set(this.#rules, RULES_AT);
    }
  }
}

module.exports = { Decision };
