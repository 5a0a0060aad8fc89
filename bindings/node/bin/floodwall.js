#!/usr/bin/env node
'use strict';
// The floodwall command, as npm installs it (package.json "bin"): the C library's own (fw_cli_run), run
// by the addon, so that `npx floodwall` and the executable and the pip script are one implementation.
// `floodwall --help` says what it does; the store comes from --store or FLOODWALL_STORE.
const native = require(require('../lib/addon_path').addonPath());

const { code, out, err } = native.cliRun(['floodwall', ...process.argv.slice(2)]);
// Written synchronously, so that nothing is lost when a pipe is slow and the exit status stays the command's.
const fs = require('node:fs');
if (out.length) fs.writeSync(1, out);
if (err.length) fs.writeSync(2, err);
process.exitCode = code;
