'use strict';
// The client side: how a caller of a floodwall-protected API should come back after a 429 or a 503.
// Exponential backoff with full jitter (a random wait in [0, min(cap, base * 2^attempt)]) spreads the
// retries of many clients instead of synchronising them; Retry-After, when the server sends one, is the
// earliest moment a retry can pass, so the jittered wait is added on top of it, never instead of it.
//
// The numbers are the core's, as in every floodwall language: every delay is fw_backoff_delay, every
// Retry-After is read by fw_parse_retry_after, and the defaults are FW_BACKOFF_INIT. This API keeps Node's
// unit, milliseconds, and converts.
const { setTimeout: sleep } = require('node:timers/promises');
const { CODES, fromStatus } = require('./errors');

const native = require(require('./addon_path').addonPath());

/** The core's defaults (FW_BACKOFF_INIT) in this API's units: base and cap in milliseconds, attempts in all. */
const backoffDefaults = Object.freeze({
  base: native.backoffDefaults.base_s * 1000,
  cap: native.backoffDefaults.cap_s * 1000,
  attempts: native.backoffDefaults.attempts,
});

// Retry-After in seconds, or null: a number is seconds already; text is the header's value.
function retryAfterSeconds(value, now) {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value : null;
  return native.parseRetryAfter(String(value), now / 1000);
}

/**
 * Retry-After (delay-seconds or an HTTP-date in any of its three forms, counted from `now`, never negative)
 * in milliseconds; null when absent or unparseable. A number is taken as seconds.
 * @param {string|number|null|undefined} value
 * @param {number} [now] the current time in milliseconds since the epoch
 */
function parseRetryAfter(value, now = Date.now()) {
  const seconds = retryAfterSeconds(value, now);
  return seconds === null ? null : seconds * 1000;
}

/**
 * The wait in milliseconds before retry number `attempt` (0 for the first retry): Retry-After (when given)
 * plus random() * min(cap, base * 2^attempt).
 * @param {number} attempt
 * @param {{base?: number, cap?: number, retryAfter?: string|number|null, random?: () => number}} [options]
 * @throws {InvalidArgumentError} naming the field, for a bad attempt, base, cap or random value.
 */
function backoff(attempt, { base = backoffDefaults.base, cap = backoffDefaults.cap, retryAfter = null, random = Math.random } = {}) {
  if (!Number.isSafeInteger(attempt) || attempt < 0) throw fromStatus(CODES.FW_EINVAL, 'attempt: must be a non-negative integer');
  for (const [field, value] of [['base', base], ['cap', cap]]) {
    if (typeof value !== 'number') throw fromStatus(CODES.FW_EINVAL, `${field}: must be a number of milliseconds`);
  }
  const r = random();
  if (typeof r !== 'number') throw fromStatus(CODES.FW_EINVAL, 'random: must return a number in [0, 1)');
  const after = retryAfterSeconds(retryAfter, Date.now());
  return native.backoffDelay(base / 1000, cap / 1000, attempt, after === null ? -1 : after, r) * 1000;
}

function header(response, name) {
  const headers = response && response.headers;
  if (!headers) return null;
  if (typeof headers.get === 'function') return headers.get(name); // fetch's Headers
  return headers[name] ?? headers[name.toLowerCase()] ?? null; // node:http (lower-case names)
}

// A response that will not be read must still be drained, or its connection is not reused.
async function discard(response) {
  if (response.body && typeof response.body.cancel === 'function') await response.body.cancel().catch(() => {});
  else if (typeof response.resume === 'function') response.resume();
}

/**
 * Calls fn(attempt) until its response's status is not one of `statuses` (429 and 503), or `retries`
 * retries have been made (default: the core's attempts, less the first call); waits
 * backoff(attempt, {retryAfter}) in between. Returns the last response.
 * Works with fetch's Response and node:http's IncomingMessage (anything with status or statusCode).
 */
async function retry(fn, { retries = backoffDefaults.attempts - 1, statuses = [429, 503], signal, onRetry, ...backoffOptions } = {}) {
  for (let attempt = 0; ; attempt++) {
    const response = await fn(attempt);
    const status = response && (response.status ?? response.statusCode);
    if (!statuses.includes(status) || attempt >= retries) return response;
    const wait = backoff(attempt, { ...backoffOptions, retryAfter: header(response, 'Retry-After') });
    if (onRetry) onRetry({ attempt, status, wait });
    await discard(response);
    await sleep(wait, undefined, { signal });
  }
}

module.exports = { backoff, backoffDefaults, retry, parseRetryAfter };
