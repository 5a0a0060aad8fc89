#!/usr/bin/env node
'use strict';
// The package's install script: the prebuilt addon for this platform, arch and libc when the package
// carries one and it loads here (lib/prebuild.js picks it); otherwise the addon is built from the shipped
// sources (scripts/build.js), after a first line that says why and what the build needs.
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const prebuild = require('../lib/prebuild');

const picked = prebuild.select(prebuild.target());
if (picked.file && !process.env.FLOODWALL_BUILD_FROM_SOURCE) {
  try {
    require(picked.file);
    console.log(`floodwall: using the prebuilt addon for ${picked.tag}`);
    process.exit(0);
  } catch (err) {
    console.warn(`floodwall: the prebuilt addon for ${picked.tag} does not load here (${err.message}); ` +
      `building it from source, which needs ${prebuild.SOURCE_BUILD_NEEDS}`);
  }
} else if (picked.file) {
  console.log('floodwall: FLOODWALL_BUILD_FROM_SOURCE is set; building the addon from source');
} else {
  console.warn(picked.message);
}
const r = spawnSync(process.execPath, [path.join(__dirname, 'build.js')], { stdio: 'inherit' });
process.exit(r.status === null ? 1 : r.status);
