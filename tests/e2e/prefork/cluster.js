'use strict';
// Node's cluster module: a primary and two workers, each its own process with its own client, on one
// store (shm:// shares their buckets on this machine).
const cluster = require('node:cluster');
const path = require('node:path');

if (cluster.isPrimary) {
  for (let i = 0; i < 2; i++) cluster.fork();
  process.on('SIGTERM', () => {
    for (const w of Object.values(cluster.workers)) w.kill();
    process.exit(0);
  });
} else {
  const express = require('express');
  const floodwall = require(path.resolve(__dirname, '../../..'));
  const fw = new floodwall.Floodwall(process.env.FW_POLICY);
  const app = express();
  // Every answer, the 429s too, names the worker that gave it (X-Worker-Pid).
  app.use((req, res, next) => { res.set('X-Worker-Pid', String(process.pid)); next(); });
  app.use(floodwall.express(fw, { keyGenerator: (req) => req.get('x-api-key') }));
  app.get('/work', (req, res) => res.json({ pid: process.pid }));
  app.listen(Number(process.argv[2]), '127.0.0.1');
}
