#!/usr/bin/env node
'use strict';
// The package's install script: builds the core (CMake target floodwall_static, which embeds lua/*.lua at
// build time) and then the Node-API addon that links it, into <package>/build-node/.
//
// Why not node-gyp: it downloads Node's headers unless told --nodedir, and the core needs CMake anyway.
// The headers of the Node that runs this script are found from process.execPath (<prefix>/bin/node ->
// <prefix>/include/node), so nothing is downloaded, in the repository and in a tarball installed as a
// dependency alike. Override with FLOODWALL_NODE_INCLUDE (a directory holding node_api.h) or npm's nodedir.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { SOURCE_BUILD_NEEDS, tag, target } = require('../lib/prebuild');

const root = path.resolve(__dirname, '..', '..', '..');
// --prebuild (npm run build:prebuilt): the addon that ships in the npm package, in prebuilds/<tag>/ (<platform>-<arch>,
// -musl appended on a musl Linux: lib/prebuild.js), with hiredis, OpenSSL and the C++ runtime linked in, so that
// installing the package builds nothing.
const prebuild = process.argv.includes('--prebuild');
// FLOODWALL_CMAKE_TOOLCHAIN (a CMake toolchain file, packaging/cross/) cross-compiles the prebuilt addon for
// another machine, named by FLOODWALL_PLATFORM/ARCH/LIBC (lib/prebuild.js), in a build directory of its own.
const toolchain = process.env.FLOODWALL_CMAKE_TOOLCHAIN ? [`-DCMAKE_TOOLCHAIN_FILE=${path.resolve(process.env.FLOODWALL_CMAKE_TOOLCHAIN)}`] : [];
const out = path.join(root, prebuild ? `build-node-prebuild${toolchain.length ? `-${tag(target())}` : ''}` : 'build-node');
const addonOut = prebuild ? path.join(root, 'prebuilds', tag(target())) : out;
const jobs = String(process.env.FLOODWALL_JOBS || 2);
const buildType = process.env.FLOODWALL_BUILD_TYPE || 'Release';

function fail(message) {
  console.error(`floodwall: ${message}`);
  process.exit(1);
}

function nodeInclude() {
  const candidates = [];
  if (process.env.FLOODWALL_NODE_INCLUDE) candidates.push(process.env.FLOODWALL_NODE_INCLUDE);
  if (process.env.npm_config_nodedir) candidates.push(path.join(process.env.npm_config_nodedir, 'include', 'node'));
  // Resolve symlinks: /usr/local/bin/node may point into a versioned prefix (nvm, n, Homebrew).
  const prefix = path.resolve(path.dirname(fs.realpathSync(process.execPath)), '..');
  candidates.push(path.join(prefix, 'include', 'node'));
  const found = candidates.find((dir) => fs.existsSync(path.join(dir, 'node_api.h')));
  if (!found) fail(`no Node headers (node_api.h) in ${candidates.join(', ')}; set FLOODWALL_NODE_INCLUDE`);
  return found;
}

function run(args) {
  const r = spawnSync('cmake', args, { stdio: 'inherit' });
  if (r.error) fail(`cannot run cmake (${r.error.message}); a build from source needs ${SOURCE_BUILD_NEEDS}`);
  if (r.status !== 0) fail(`cmake ${args.join(' ')} failed`);
}

// Ninja when there is one; the generator of an existing build directory cannot change, so ask only once.
function generator(dir) {
  if (fs.existsSync(path.join(dir, 'CMakeCache.txt'))) return [];
  const ninja = spawnSync('ninja', ['--version'], { stdio: 'ignore' });
  return ninja.status === 0 ? ['-G', 'Ninja'] : [];
}

// node-addon-api is the package's one dependency: npm installs it before this script runs in a user's
// install, but in a fresh clone it is there only after `npm install`.
function addonApiInclude() {
  try {
    return require('node-addon-api').include_dir;
  } catch (err) {
    if (err.code !== 'MODULE_NOT_FOUND') throw err;
    return fail('node-addon-api is not installed; run `npm install` in the repository first (it installs the dependencies and builds the addon)');
  }
}
const addonApi = addonApiInclude();

const coreDir = path.join(out, 'core');
// Warnings are errors only when asked (make test sets FLOODWALL_WERROR=1), never in a user's install.
const werror = `-DFW_WERROR=${process.env.FLOODWALL_WERROR === '1' ? 'ON' : 'OFF'}`;
run(['-S', root, '-B', coreDir, ...generator(coreDir), ...toolchain, `-DCMAKE_BUILD_TYPE=${buildType}`, '-DFW_BUILD_TESTS=OFF',
  '-DFW_BUILD_BENCH=OFF', '-DFW_BUILD_EXAMPLES=OFF', '-DFW_BUILD_PYTHON=OFF', werror]);
run(['--build', coreDir, '--target', 'floodwall_static', '--parallel', jobs]);

const addonDir = path.join(out, 'addon');
run(['-S', path.join(root, 'bindings', 'node'), '-B', addonDir, ...generator(addonDir), ...toolchain,
  `-DCMAKE_BUILD_TYPE=${buildType}`, `-DFW_CORE_BUILD_DIR=${coreDir}`, `-DFW_NODE_INCLUDE_DIR=${nodeInclude()}`,
  `-DFW_NODE_ADDON_API_DIR=${addonApi}`, `-DFW_ADDON_OUTPUT_DIR=${addonOut}`, werror,
  `-DFW_STATIC_HIREDIS=${prebuild ? 'ON' : 'OFF'}`]);
run(['--build', addonDir, '--parallel', jobs]);
