#!/usr/bin/env node
'use strict';
// The package's install script: the prebuilt addon when the package carries one for this platform and
// it loads here; otherwise the addon is built from the shipped sources (scripts/build.js).
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const prebuilt = path.join(__dirname, '..', '..', '..', 'prebuilds', `${process.platform}-${process.arch}`, 'floodwall.node');
if (fs.existsSync(prebuilt) && !process.env.FLOODWALL_BUILD_FROM_SOURCE) {
  try {
    require(prebuilt);
    console.log(`floodwall: using the prebuilt addon for ${process.platform}-${process.arch}`);
    process.exit(0);
  } catch (err) {
    console.warn(`floodwall: the prebuilt addon does not load here (${err.message}); building from source`);
  }
}
const r = spawnSync(process.execPath, [path.join(__dirname, 'build.js')], { stdio: 'inherit' });
process.exit(r.status === null ? 1 : r.status);
