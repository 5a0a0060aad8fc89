'use strict';
// The one place where floodwall's status codes (capi/include/floodwall.h, fw_status) become exceptions.
// The addon calls fromStatus() for every failing fw_* call; the JS layer calls it for arguments that
// cannot even cross into C (a tenant that is a number, say).

const CODES = {
  FW_ERROR: -1,
  FW_ENOMEM: -2,
  FW_EINVAL: -3,
  FW_EPOLICY: -4,
  FW_ESTORE: -5,
  FW_ECLOSED: -6,
};
const NAMES = Object.fromEntries(Object.entries(CODES).map(([name, code]) => [code, name]));

class FloodwallError extends Error {
  constructor(message, status = CODES.FW_ERROR) {
    super(message);
    this.name = new.target.name;
    /** The fw_status name, e.g. 'FW_EPOLICY'. */
    this.code = NAMES[status] || 'FW_ERROR';
    /** The field the core named ("request_rate.burst: must be ..." -> 'request_rate.burst'), or null. */
    const m = /^([A-Za-z_][\w.[\]-]*): /.exec(message);
    this.field = m ? m[1] : null;
  }
}

/** The policy document is invalid; `field` names the offending field. */
class PolicyError extends FloodwallError {}
/** The store could not be set up (a bad or unknown store URL). */
class StoreError extends FloodwallError {}
/** A bad argument (a tenant or header of the wrong type, cost above the burst, unknown limiter or mode); `field` names it. */
class InvalidArgumentError extends FloodwallError {}
/** The client was closed. */
class ClosedError extends FloodwallError {}

const CLASSES = {
  [CODES.FW_EPOLICY]: PolicyError,
  [CODES.FW_ESTORE]: StoreError,
  [CODES.FW_EINVAL]: InvalidArgumentError,
  [CODES.FW_ECLOSED]: ClosedError,
};

function fromStatus(status, message) {
  const Class = CLASSES[status] || FloodwallError;
  return new Class(message, status);
}

module.exports = { CODES, FloodwallError, PolicyError, StoreError, InvalidArgumentError, ClosedError, fromStatus };
