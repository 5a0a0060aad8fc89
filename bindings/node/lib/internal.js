'use strict';
// What the binding's own modules share and users do not see: Floodwall.prototype[admitNow](request)
// decides like admit() but returns the Decision itself when the core decided at once (memory://, shm://, a
// hot tenant, the fallback) and a promise only when the store answers later, so that the Express
// middleware can go on in the same tick, with no promise or microtask, when nothing waited.
module.exports = { admitNow: Symbol('floodwall.admitNow') };
