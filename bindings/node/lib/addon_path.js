'use strict';
// Where the addon is: one built here from the shipped sources (build-node/, by the install script when
// there is no prebuild for this platform, or by `npm run build` in a checkout), else the prebuilt one
// that ships in the package (prebuilds/<platform>-<arch>/, from `npm run build:prebuilt`). A dozen lines
// instead of node-gyp-build: the addon is built with CMake, not node-gyp, and has one name.
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..', '..', '..');

function candidates() {
  return [path.join(root, 'build-node', 'floodwall.node'),
    path.join(root, 'prebuilds', `${process.platform}-${process.arch}`, 'floodwall.node')];
}

function addonPath() {
  const found = candidates().find((p) => fs.existsSync(p));
  if (!found) {
    throw new Error(`floodwall: no addon for ${process.platform}-${process.arch} (looked in ${candidates().join(', ')}); ` +
      'run `npm rebuild floodwall` to build it from source (needs CMake, a C++20 compiler, libhiredis-dev, libssl-dev, nlohmann-json3-dev)');
  }
  return found;
}

module.exports = { addonPath, candidates };
