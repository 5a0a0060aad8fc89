'use strict';
// The client side: how a caller of a floodwall-protected API should come back after a 429 or a 503.
// Exponential backoff with full jitter (a random wait in [0, min(cap, base * 2^attempt)]) spreads the
// retries of many clients instead of synchronising them; Retry-After, when the server sends one, is the
// earliest moment a retry can pass, so the jittered wait is added on top of it, never instead of it.
const { setTimeout: sleep } = require('node:timers/promises');

/** Retry-After (delta-seconds or an HTTP-date) in milliseconds; null when absent or unparseable. */
function parseRetryAfter(value, now = Date.now()) {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value * 1000 : null;
  const text = String(value).trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  if (!/^[A-Za-z]{3}/.test(text)) return null; // an HTTP-date starts with the day's name; '1.5' is no date
  const date = Date.parse(text);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/**
 * The wait in milliseconds before retry number `attempt` (0 for the first retry).
 * @param {number} attempt
 * @param {{base?: number, cap?: number, retryAfter?: string|number|null, random?: () => number}} [options]
 */
function backoff(attempt, { base = 100, cap = 20_000, retryAfter = null, random = Math.random } = {}) {
  const jitter = random() * Math.min(cap, base * 2 ** attempt);
  return (parseRetryAfter(retryAfter) ?? 0) + jitter;
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
 * retries have been made; waits backoff(attempt, {retryAfter}) in between. Returns the last response.
 * Works with fetch's Response and node:http's IncomingMessage (anything with status or statusCode).
 */
async function retry(fn, { retries = 4, statuses = [429, 503], signal, onRetry, ...backoffOptions } = {}) {
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

module.exports = { backoff, retry, parseRetryAfter };
