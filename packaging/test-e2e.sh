#!/usr/bin/env bash
# tests/e2e: one fleet of three languages on one Redis. Builds what each service needs the way its own
# suite does (the Python venv of packaging/python-venv.sh, the Node addon by `npm install`, the gem
# installed into build/e2e-gems), then pytest drives the three services over HTTP. Redis is started by
# the test itself.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

py=$(bash packaging/python-venv.sh pytest fastapi uvicorn httpx flask gunicorn | tail -n 1)

mkdir -p build-node
FLOODWALL_WERROR=1 FLOODWALL_BUILD_FROM_SOURCE=1 flock build-node/.lock npm install --no-audit --no-fund --no-package-lock --no-update-notifier --loglevel=error

export GEM_HOME="$root/build/e2e-gems"
# Reinstall the gem when the sources it is built from changed.
stamp=$(cat $(git ls-files core capi lua bindings/ruby CMakeLists.txt 2>/dev/null || find core capi lua bindings/ruby -type f) | sha1sum)
if [ "$(cat "$GEM_HOME/.floodwall-stamp" 2>/dev/null)" != "$stamp" ] || ! ruby -e 'require "floodwall"' 2>/dev/null; then
  work=$(mktemp -d)
  # One at a time (make test's lanes): test-ruby.sh prepares the same bindings/ruby/ext.
  mkdir -p build-ruby
  flock build-ruby/.lock rake -f bindings/ruby/Rakefile gem GEM_OUT="$work/floodwall.gem" >/dev/null
  FLOODWALL_WERROR=1 gem install --local --no-document "$work/floodwall.gem" >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
  rm -rf "$work"
  echo "$stamp" > "$GEM_HOME/.floodwall-stamp"
fi

cd tests/e2e
FW_E2E_PYTHON="$py" exec "$py" -m pytest -q -p no:cacheprovider -s "$@"
