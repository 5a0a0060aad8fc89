'use strict';
// Where the addon is: one built here from the shipped sources (build-node/, by the install script when
// there is no prebuild for this platform, or by `npm run build` in a checkout), else the prebuilt one
// that ships in the package (prebuilds/<tag>/, from `npm run build:prebuilt`; lib/prebuild.js names the tag
// by platform, arch and libc). A dozen lines instead of node-gyp-build: the addon is built with CMake, not
// node-gyp, and has one name.
const fs = require('node:fs');
const path = require('node:path');
const prebuild = require('./prebuild');

const root = path.join(__dirname, '..', '..', '..');

const built = path.join(root, 'build-node', 'floodwall.node');

function candidates() {
  return [built, path.join(prebuild.PREBUILDS, prebuild.tag(prebuild.target()), 'floodwall.node')];
}

function addonPath() {
  // The libc is asked (a diagnostic report, a few ms) only when no addon was built here.
  if (fs.existsSync(built)) return built;
  const found = candidates().find((p) => fs.existsSync(p));
  if (!found) {
    throw new Error(`floodwall: no addon for ${prebuild.tag(prebuild.target())} (looked in ${candidates().join(', ')}); ` +
      `run \`npm rebuild floodwall\` to build it from source, which needs ${prebuild.SOURCE_BUILD_NEEDS}`);
  }
  return found;
}

module.exports = { addonPath, candidates };
