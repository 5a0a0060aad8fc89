// An Express app behind floodwall: 100 requests/s per tenant (bursts to 500), 20 in flight per tenant.
const express = require('express');
const { Floodwall, express: floodwall } = require('floodwall');

// The API keys this app issued: in a real app a lookup in its own store (verify may return a promise).
const issued = new Set((process.env.API_KEYS || 'acme,globex').split(','));

const fw = new Floodwall({ request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 } });
const app = express();
// The tenant: a Bearer token or X-API-Key that verify vouches for (hashed), else the client's address, so
// that a client inventing keys gets no bucket of its own.
app.use(floodwall(fw, { verify: (key) => issued.has(key) }));
app.get('/', (req, res) => res.json({ remaining: req.floodwall.remaining }));
const server = app.listen(process.env.PORT || 3000, () => console.log(`listening on ${server.address().port}`));
