'use strict';
// The shipped TypeScript declarations compile against real usage (tsc --strict), and name what exists.
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');
const floodwall = require('../..');

const ROOT = path.resolve(__dirname, '..', '..');

test('types/usage.ts compiles with tsc --strict, @ts-expect-error lines included', () => {
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const out = execFileSync(process.execPath, [tsc, '-p', path.join(__dirname, 'types')], { encoding: 'utf8' });
  assert.equal(out, '');
});

test('every runtime export is declared', () => {
  const dts = fs.readFileSync(path.join(ROOT, 'bindings', 'node', 'index.d.ts'), 'utf8');
  for (const name of Object.keys(floodwall)) {
    assert.match(dts, new RegExp(`export (declare )?(class|function|const) ${name}\\b`), name);
  }
});
