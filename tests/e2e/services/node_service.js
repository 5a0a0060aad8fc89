'use strict';
// The Node member of the e2e fleet: Express behind floodwall's middleware.
const path = require('path');
const express = require('express');
const floodwall = require(process.env.FW_NODE_PACKAGE || path.resolve(__dirname, '../../..'));

const fw = new floodwall.Floodwall(process.env.FW_POLICY);
const app = express();
app.get('/metrics', (req, res) => res.type('text/plain').send(fw.prometheus()));
// No keyGenerator: the core derives the tenant from the request, as the Python and Ruby services do; every key
// but the test's made-up ones is one the fleet issued.
app.use(floodwall.express(fw, { route: '/work', verify: (key) => !key.startsWith('made-up-') }));
app.get('/work', (req, res) => {
  setTimeout(() => res.json({ lang: 'node' }), 1000 * Number(req.query.hold_s || 0));
});
app.listen(Number(process.argv[2]), '127.0.0.1');
