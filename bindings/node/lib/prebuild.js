'use strict';
// Which prebuilt addon fits this machine: prebuilds/<tag>/floodwall.node, where the tag is
// <platform>-<arch> (linux-x64, linux-arm64, darwin-arm64) for glibc Linux and every other OS, and
// <platform>-<arch>-musl on a musl Linux (Alpine): a glibc addon does not load under musl, nor the reverse.
// Used by the install script (which picks or builds), by the loader (lib/addon_path.js) and by
// `npm run build:prebuilt` (which names the directory it writes), so the three agree.
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..', '..', '..');
const PREBUILDS = path.join(ROOT, 'prebuilds');

// glibc or musl, as detect-libc decides first: Node's diagnostic report names the glibc it runs on
// (header.glibcVersionRuntime), and has no such field under musl. null off Linux.
function detectLibc(platform = process.platform) {
  if (platform !== 'linux') return null;
  if (typeof process.report?.getReport !== 'function') return 'glibc';
  // The report lists open sockets unless told not to (Node >= 20.6): slow with many, and not needed here.
  const exclude = process.report.excludeNetwork;
  let report;
  try {
    process.report.excludeNetwork = true;
    report = process.report.getReport();
  } finally {
    process.report.excludeNetwork = exclude;
  }
  const header = report && (typeof report === 'string' ? JSON.parse(report).header : report.header);
  return header && header.glibcVersionRuntime ? 'glibc' : 'musl';
}

// The machine the install is for. FLOODWALL_PLATFORM, FLOODWALL_ARCH and FLOODWALL_LIBC override what Node
// reports (to pick for another machine, as npm's --os/--cpu/--libc do, or to test the script's messages).
function target(env = process.env) {
  const platform = env.FLOODWALL_PLATFORM || process.platform;
  const arch = env.FLOODWALL_ARCH || process.arch;
  const libc = platform === 'linux' ? env.FLOODWALL_LIBC || detectLibc(platform) : null;
  return { platform, arch, libc };
}

function tag({ platform, arch, libc }) {
  return platform === 'linux' && libc === 'musl' ? `${platform}-${arch}-musl` : `${platform}-${arch}`;
}

// The tags this package carries an addon for (the directories of prebuilds/ that hold floodwall.node).
function available(dir = PREBUILDS) {
  let entries = [];
  try {
    entries = fs.readdirSync(dir);
  } catch (err) {
    if (err.code !== 'ENOENT') throw err;
  }
  return entries.filter((t) => fs.existsSync(path.join(dir, t, 'floodwall.node'))).sort();
}

// What a build from source needs, by the package names of the systems users deploy on.
const SOURCE_BUILD_NEEDS = 'CMake >= 3.20, a C++20 compiler, make or ninja, pkg-config, hiredis, OpenSSL and nlohmann-json ' +
  '(Debian/Ubuntu: apt-get install cmake g++ make pkg-config libhiredis-dev libssl-dev nlohmann-json3-dev; ' +
  'Alpine: apk add cmake g++ make pkgconf linux-headers hiredis-dev openssl-dev nlohmann-json; ' +
  'macOS: brew install cmake pkg-config hiredis openssl@3 nlohmann-json)';

// select(): { tag, file } when the package carries an addon for the target, else { tag, file: null,
// message } whose message is the first line the install prints: what was looked for, what ships, what a
// build from source needs.
function select(t = target(), dir = PREBUILDS) {
  const want = tag(t);
  const file = path.join(dir, want, 'floodwall.node');
  if (fs.existsSync(file)) return { tag: want, file };
  const ships = available(dir);
  const message = `floodwall: no prebuilt addon for ${want} (this package has ${ships.length ? ships.join(', ') : 'none'}); ` +
    `building it from source, which needs ${SOURCE_BUILD_NEEDS}`;
  return { tag: want, file: null, message };
}

module.exports = { PREBUILDS, SOURCE_BUILD_NEEDS, available, detectLibc, select, tag, target };
