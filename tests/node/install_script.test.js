'use strict';
// The install script's choice (bindings/node/scripts/install.js, lib/prebuild.js): the prebuilt addon by
// platform, arch and libc, and on a machine the package has no addon for, a first line that names the
// machine, the addons that ship and what a build from source needs, never a raw compiler or CMake error.
const assert = require('node:assert/strict');
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test, after } = require('node:test');
const prebuild = require('../../bindings/node/lib/prebuild');

const ROOT = path.resolve(__dirname, '..', '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'floodwall-install-'));
after(() => fs.rmSync(work, { recursive: true, force: true }));

// A prebuilds/ directory holding (empty) addons for TAGS.
function prebuildsWith(tags) {
  const dir = fs.mkdtempSync(path.join(work, 'prebuilds-'));
  for (const t of tags) {
    fs.mkdirSync(path.join(dir, t));
    fs.writeFileSync(path.join(dir, t, 'floodwall.node'), '');
  }
  return dir;
}

test('the tag is platform-arch, with -musl on a musl Linux only', () => {
  assert.equal(prebuild.tag({ platform: 'linux', arch: 'x64', libc: 'glibc' }), 'linux-x64');
  assert.equal(prebuild.tag({ platform: 'linux', arch: 'arm64', libc: 'musl' }), 'linux-arm64-musl');
  assert.equal(prebuild.tag({ platform: 'darwin', arch: 'arm64', libc: null }), 'darwin-arm64');
});

test('the libc is the one ldd names on this machine', () => {
  const ldd = spawnSync('ldd', ['--version'], { encoding: 'utf8' });
  assert.ok(!ldd.error, 'ldd is needed to check the detection');
  const text = `${ldd.stdout}${ldd.stderr}`;
  const expected = /musl/i.test(text) ? 'musl' : /GLIBC|GNU libc/i.test(text) ? 'glibc' : null;
  assert.ok(expected, `ldd --version names neither glibc nor musl: ${text}`);
  assert.equal(prebuild.detectLibc('linux'), expected);
  assert.equal(prebuild.detectLibc('darwin'), null);
});

test('the addon for the platform, arch and libc is picked among those that ship', () => {
  const dir = prebuildsWith(['linux-x64', 'linux-x64-musl', 'linux-arm64', 'darwin-arm64']);
  for (const [t, want] of [
    [{ platform: 'linux', arch: 'x64', libc: 'glibc' }, 'linux-x64'],
    [{ platform: 'linux', arch: 'x64', libc: 'musl' }, 'linux-x64-musl'],
    [{ platform: 'linux', arch: 'arm64', libc: 'glibc' }, 'linux-arm64'],
    [{ platform: 'darwin', arch: 'arm64', libc: null }, 'darwin-arm64'],
  ]) {
    const picked = prebuild.select(t, dir);
    assert.equal(picked.tag, want);
    assert.equal(picked.file, path.join(dir, want, 'floodwall.node'));
  }
});

test('a glibc addon is never picked for musl, nor an x64 one for arm64', () => {
  const dir = prebuildsWith(['linux-x64']);
  const musl = prebuild.select({ platform: 'linux', arch: 'x64', libc: 'musl' }, dir);
  assert.equal(musl.file, null);
  assert.match(musl.message, /^floodwall: no prebuilt addon for linux-x64-musl \(this package has linux-x64\); building it from source, which needs CMake >= 3\.20/);
  const arm = prebuild.select({ platform: 'linux', arch: 'arm64', libc: 'glibc' }, dir);
  assert.equal(arm.file, null);
  assert.match(arm.message, /no prebuilt addon for linux-arm64 \(this package has linux-x64\)/);
});

test('the message names the system packages of Debian, Alpine and macOS', () => {
  const { message } = prebuild.select({ platform: 'freebsd', arch: 'riscv64', libc: null }, prebuildsWith([]));
  assert.match(message, /this package has none/);
  for (const needed of ['libhiredis-dev libssl-dev nlohmann-json3-dev', 'apk add cmake g++ make pkgconf linux-headers hiredis-dev openssl-dev nlohmann-json',
    'brew install cmake pkg-config hiredis openssl@3 nlohmann-json']) {
    assert.ok(message.includes(needed), `the message lacks "${needed}": ${message}`);
  }
});

// The script itself, as npm runs it, for a machine it has no addon for (FLOODWALL_PLATFORM/ARCH fake it)
// on a PATH with node alone: no CMake, no compiler. Its first line is the message; it fails on CMake's
// absence with the same list, and builds nothing.
test('npm install on an unknown platform says what ships and what a build needs, first', () => {
  const bin = path.join(work, 'bin');
  fs.mkdirSync(bin);
  fs.symlinkSync(process.execPath, path.join(bin, 'node'));
  const env = { PATH: bin, HOME: work, FLOODWALL_PLATFORM: 'freebsd', FLOODWALL_ARCH: 'riscv64' };
  const r = spawnSync(process.execPath, [path.join(ROOT, 'bindings', 'node', 'scripts', 'install.js')], { cwd: work, env, encoding: 'utf8' });
  assert.notEqual(r.status, 0, 'the install succeeded without an addon');
  const lines = `${r.stdout}${r.stderr}`.split('\n').filter(Boolean);
  assert.match(lines[0], /^floodwall: no prebuilt addon for freebsd-riscv64 \(this package has [^)]*\); building it from source, which needs CMake >= 3\.20, a C\+\+20 compiler/);
  assert.match(lines[lines.length - 1], /^floodwall: cannot run cmake \(.*ENOENT.*\); a build from source needs CMake >= 3\.20/);
  assert.ok(!lines.some((l) => /error:|CMake Error/.test(l)), `a raw error in: ${lines.join('\n')}`);
});

test('FLOODWALL_LIBC=musl on this machine asks for the musl addon', () => {
  const r = execFileSync(process.execPath, ['-e', `
    const p = require(${JSON.stringify(path.join(ROOT, 'bindings', 'node', 'lib', 'prebuild.js'))});
    console.log(p.tag(p.target()));`], { env: { ...process.env, FLOODWALL_LIBC: 'musl', FLOODWALL_PLATFORM: 'linux' }, encoding: 'utf8' });
  assert.equal(r.trim(), `linux-${process.arch}-musl`);
});
