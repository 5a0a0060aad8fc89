// An Express app behind floodwall: 100 requests/s per tenant (bursts to 500), 20 in flight per tenant.
const express = require('express');
const { Floodwall, express: floodwall } = require('floodwall');

const fw = new Floodwall({ request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 } });
const app = express();
app.use(floodwall(fw)); // the tenant: a Bearer token or X-API-Key (hashed), else the client's address
app.get('/', (req, res) => res.json({ remaining: req.floodwall.remaining }));
const server = app.listen(process.env.PORT || 3000, () => console.log(`listening on ${server.address().port}`));
