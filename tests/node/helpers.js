'use strict';
// Shared by the node test files: a throwaway redis-server on a free port, and HTTP requests over real sockets.
const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const http = require('node:http');
const net = require('node:net');

/**
 * A port for a server the test starts: random below the kernel's ephemeral range (32768-60999), checked by
 * listening on it. Port 0's port is one any outgoing connection may take as its local port before the
 * server binds it (a cluster node's bus port was taken so once in make test's lanes).
 */
function tryPort(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

async function freePort() {
  for (let i = 0; i < 200; i++) {
    const port = 20000 + crypto.randomInt(12000);
    if (await tryPort(port)) return port;
  }
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function ping(port) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.setTimeout(500);
    let reply = '';
    sock.on('connect', () => sock.write('PING\r\n'));
    sock.on('data', (d) => {
      reply += d;
      if (reply.includes('\r\n')) {
        sock.destroy();
        resolve(reply.startsWith('+PONG'));
      }
    });
    sock.on('error', () => resolve(false));
    sock.on('timeout', () => {
      sock.destroy();
      resolve(false);
    });
  });
}

/**
 * Starts `redis-server --port P --save '' --appendonly no` (and `extraArgs`, e.g. a --tls-port) and waits for
 * PING on the plain port. Fails (never skips) when redis-server is missing. Returns { port, url, pid, stop() }.
 */
async function startRedis(extraArgs = []) {
  const port = await freePort();
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...extraArgs],
    { stdio: ['ignore', 'ignore', 'inherit'] });
  const failed = new Promise((_, reject) => {
    proc.once('error', (err) => reject(new Error(`cannot start redis-server: ${err.message}`)));
    proc.once('exit', (code) => reject(new Error(`redis-server exited with ${code}`)));
  });
  failed.catch(() => {});
  const deadline = Date.now() + 10_000;
  for (;;) {
    await Promise.race([failed, new Promise((r) => setTimeout(r, 50))]);
    if (await ping(port)) break;
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer PING`);
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    pid: proc.pid,
    stop() {
      return new Promise((resolve) => {
        if (proc.exitCode !== null) return resolve();
        proc.once('exit', () => resolve());
        process.kill(proc.pid, 'SIGTERM');
      });
    },
  };
}

/**
 * One HTTP request over a real socket: resolves { status, headers, rawHeaders, body }.
 * `abortAfterMs` destroys the request that long after it was sent (a client leaving mid-request);
 * `localAddress` is the address the connection comes from (any of 127.0.0.0/8: another client).
 */
function request(port, path, { method = 'GET', headers = {}, abortAfterMs, localAddress } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method, headers, agent: false, localAddress }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('error', () => {}); // a response we cut short ourselves
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, rawHeaders: res.rawHeaders, body }));
    });
    req.on('error', (err) => (abortAfterMs === undefined ? reject(err) : resolve({ aborted: true })));
    req.end();
    if (abortAfterMs !== undefined) {
      setTimeout(() => {
        req.destroy();
        resolve({ aborted: true });
      }, abortAfterMs);
    }
  });
}

/** Polls fn until it returns truthy (a structural wait, not a timing assertion). */
async function eventually(fn, { timeoutMs = 5000, stepMs = 10 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

module.exports = { freePort, startRedis, request, eventually };
