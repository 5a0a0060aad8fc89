'use strict';
// A new user's path: `npm pack`, `npm install` of the tarball into an empty project (which builds the core
// and the addon from the shipped sources, downloading no headers, when there is no prebuilt addon for the
// platform), then the README's Express example runs as written and answers over HTTP. And the package
// with its prebuilt addon (`npm run build:prebuilt`): `npm install --ignore-scripts` with no compiler on
// PATH, an addon that needs no libhiredis nor libssl, and speaks rediss:// through the OpenSSL linked into it.
const assert = require('node:assert/strict');
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test, after } = require('node:test');
const { freePort, request, startRedis } = require('./helpers');

const ROOT = path.resolve(__dirname, '..', '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'floodwall-pack-'));
after(() => fs.rmSync(work, { recursive: true, force: true }));

function npm(args, cwd, env = process.env) {
  return execFileSync('npm', args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

let tarball;

test('npm pack ships the core sources and the binding, not builds or other languages', () => {
  const [info] = JSON.parse(npm(['pack', '--json', '--pack-destination', work], ROOT));
  tarball = path.join(work, info.filename);
  const files = info.files.map((f) => f.path);
  for (const needed of ['package.json', 'CMakeLists.txt', 'core/embed_scripts.cmake', 'core/CMakeLists.txt', 'core/sources.cmake', 'core/src/engine/guard.cpp',
    'core/src/stores/redis/connection.cpp', 'core/src/stores/redis/url.cpp',
    'capi/include/floodwall.h', 'capi/src/floodwall.cpp', 'capi/floodwall.map', 'lua/tenant_admit.lua', 'lua/lib/bucket.lua',
    'bindings/node/CMakeLists.txt', 'bindings/node/src/addon.cc', 'bindings/node/lib/index.js', 'bindings/node/lib/admin.js',
    'bindings/node/index.d.ts', 'bindings/node/scripts/build.js', 'bindings/node/examples/express_app.js']) {
    assert.ok(files.includes(needed), `${needed} is missing from the tarball`);
  }
  const unwanted = files.filter((f) => /^(build|build-[^/]*|tests|bench|node_modules|bindings\/(python|ruby))\//.test(f) ||
    (f.endsWith('.node') && !/^prebuilds\/[a-z0-9]+-[a-z0-9]+\/floodwall\.node$/.test(f)));
  assert.deepEqual(unwanted, []);
});

test('the tarball installs into an empty project and the README example serves requests', async (t) => {
  assert.ok(tarball, 'the pack step ran');
  const project = path.join(work, 'app');
  fs.mkdirSync(project);
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
  // An empty user config: no nodedir from this machine's ~/.npmrc; the build finds the headers by itself.
  const userconfig = path.join(work, 'npmrc');
  fs.writeFileSync(userconfig, '');
  // Built from source even if this checkout carries a prebuilt addon: the path of a platform without one.
  const env = { ...process.env, FLOODWALL_JOBS: '2', FLOODWALL_BUILD_FROM_SOURCE: '1' };
  for (const key of Object.keys(env)) if (/^npm_config_/i.test(key)) delete env[key];
  npm(['install', '--no-audit', '--no-fund', '--no-package-lock', '--prefer-offline', '--loglevel=error', '--no-update-notifier',
    '--userconfig', userconfig, tarball, 'express@^5'], project, env);
  assert.ok(fs.existsSync(path.join(project, 'node_modules', 'floodwall', 'build-node', 'floodwall.node')));
  // npm linked the command (package.json "bin"): what `npx floodwall` runs.
  const cmd = execFileSync(path.join(project, 'node_modules', '.bin', 'floodwall'), ['--version'], { encoding: 'utf8', env });
  assert.match(cmd, /^floodwall \d+\.\d+\.\d+\n$/);

  fs.copyFileSync(path.join(ROOT, 'bindings', 'node', 'examples', 'express_app.js'), path.join(project, 'app.js'));
  const server = spawn(process.execPath, ['app.js'], { cwd: project, env: { ...env, PORT: '0' }, stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => server.kill());
  const port = await new Promise((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    server.once('exit', (code) => reject(new Error(`the example exited with ${code}: ${out}`)));
  });
  const res = await request(port, '/', { headers: { 'x-api-key': 'acme' } });
  assert.equal(res.status, 200);
  assert.deepEqual(JSON.parse(res.body), { remaining: 499 });
  assert.equal(res.headers['ratelimit-policy'], '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"');
  assert.equal(res.headers.ratelimit, '"concurrency";r=19');
  const other = await request(port, '/', { headers: { 'x-api-key': 'globex' } });
  assert.equal(other.headers['ratelimit-remaining'], '499', 'each API key is its own tenant');
  const madeUp = [];
  for (const key of ['made-up-1', 'made-up-2']) madeUp.push((await request(port, '/', { headers: { 'x-api-key': key } })).headers['ratelimit-remaining']);
  assert.deepEqual(madeUp, ['499', '498'], 'keys the app never issued share the address\'s bucket');
});

test('with its prebuilt addon the package installs with --ignore-scripts and no compiler, and needs no libhiredis nor libssl', async (t) => {
  const env = { ...process.env, FLOODWALL_JOBS: '2' };
  for (const key of Object.keys(env)) if (/^npm_config_/i.test(key)) delete env[key];
  npm(['run', 'build:prebuilt'], ROOT, env);
  after(() => fs.rmSync(path.join(ROOT, 'prebuilds'), { recursive: true, force: true }));
  const addon = path.join(ROOT, 'prebuilds', `${process.platform}-${process.arch}`, 'floodwall.node');
  assert.ok(fs.existsSync(addon));
  const needed = execFileSync('readelf', ['-d', addon], { encoding: 'utf8' }).split('\n').filter((l) => l.includes('(NEEDED)'));
  assert.deepEqual(needed.filter((l) => /hiredis|libssl|libcrypto|stdc\+\+/.test(l)), [], `the prebuilt addon needs: ${needed.join('; ')}`);
  // Node's executable exports its own OpenSSL: the addon neither asks for an OpenSSL symbol (it would get
  // Node's) nor exports one of its copy's.
  const dynsyms = execFileSync('nm', ['-D', addon], { encoding: 'utf8' }).split('\n');
  const openssl = dynsyms.filter((l) => /\s(SSL|EVP|OPENSSL|CRYPTO|X509|BIO|ERR)_\w+(@\S*)?$/.test(l));
  assert.deepEqual(openssl, [], 'the prebuilt addon binds OpenSSL symbols dynamically');

  const dir = path.join(work, 'prebuilt');
  fs.mkdirSync(dir);
  const [info] = JSON.parse(npm(['pack', '--json', '--pack-destination', dir], ROOT, env));
  assert.ok(info.files.some((f) => f.path === `prebuilds/${process.platform}-${process.arch}/floodwall.node`));
  const project = path.join(dir, 'app');
  fs.mkdirSync(project);
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
  // PATH holds node and npm and nothing else: no compiler, no CMake.
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  fs.symlinkSync(process.execPath, path.join(bin, 'node'));
  fs.symlinkSync(execFileSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim(), path.join(bin, 'npm'));
  const bare = { ...env, PATH: bin };
  const userconfig = path.join(dir, 'npmrc');
  fs.writeFileSync(userconfig, '');
  npm(['install', '--ignore-scripts', '--no-audit', '--no-fund', '--no-package-lock', '--prefer-offline', '--loglevel=error',
    '--no-update-notifier', '--userconfig', userconfig, path.join(dir, info.filename)], project, bare);
  const installed = path.join(project, 'node_modules', 'floodwall');
  assert.ok(!fs.existsSync(path.join(installed, 'build-node')), 'nothing was built');
  const help = execFileSync(process.execPath, [path.join(project, 'node_modules', '.bin', 'floodwall'), 'check', '--help'],
    { encoding: 'utf8', env: bare });
  assert.ok(help.startsWith('Usage: floodwall check --policy FILE'), help);
  const out = execFileSync(process.execPath, ['-e', `
    const { Floodwall } = require('floodwall');
    const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 2 } });
    Promise.all([1, 2, 3].map(() => fw.admit({ tenant: 't' }))).then((ds) => {
      console.log(JSON.stringify(ds.map((d) => d.allowed)));
      fw.close();
    });`], { cwd: project, env: bare, encoding: 'utf8' });
  assert.deepEqual(JSON.parse(out), [true, true, false]);

  // rediss:// against a TLS redis-server, verified against a test CA: the OpenSSL linked into the addon
  // does the handshake. Decided by Redis (not degraded), and the bucket is there when asked in plain text.
  const certs = path.join(dir, 'certs');
  execFileSync('bash', [path.join(ROOT, 'tests', 'tls-certs.sh'), certs]);
  const tlsPort = await freePort();
  const redis = await startRedis(['--tls-port', String(tlsPort), '--tls-cert-file', path.join(certs, 'server.crt'),
    '--tls-key-file', path.join(certs, 'server.key'), '--tls-ca-cert-file', path.join(certs, 'ca.crt'), '--tls-auth-clients', 'no']);
  t.after(() => redis.stop());
  const policy = { store: `rediss://127.0.0.1:${tlsPort}/0`, prefix: 'prebuilt-tls', request_rate: { rate: 0.001, burst: 2 },
    redis: { deadline_ms: 2000, connect_timeout_ms: 2000, tls: { ca_file: path.join(certs, 'ca.crt') } } };
  const tls = execFileSync(process.execPath, ['-e', `
    const { Floodwall } = require('floodwall');
    const fw = new Floodwall(${JSON.stringify(policy)});
    (async () => {
      const ds = [];
      for (let i = 0; i < 3; i++) ds.push(await fw.admit({ tenant: 't' }));
      console.log(JSON.stringify(ds.map((d) => [d.allowed, d.degraded, d.failReason])));
      fw.close();
    })();`], { cwd: project, env: bare, encoding: 'utf8' });
  assert.deepEqual(JSON.parse(tls), [[true, false, null], [true, false, null], [false, false, null]]);
  const Redis = require('ioredis');
  const plain = new Redis({ port: redis.port, lazyConnect: true });
  try {
    await plain.connect();
    assert.deepEqual(await plain.keys('prebuilt-tls:*'), ['prebuilt-tls:{t}:rate']);
  } finally {
    plain.disconnect();
  }
});
