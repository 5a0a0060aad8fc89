#!/usr/bin/env bash
# The Ruby suite, as a new user meets the gem: build floodwall-*.gem from bindings/ruby, `gem install`
# it offline into a throwaway GEM_HOME (the extension builds the core from the sources the gem carries,
# with warnings as errors), then run the minitest suites in tests/ruby against the installed gem. Rack,
# rack-test, minitest, Puma, WEBrick and Sinatra come from Debian; the suites start their own redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d "${TMPDIR:-/tmp}/floodwall-ruby.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "test-ruby: rake gem (vendors the core, generates the SWIG wrapper, builds the gem)"
rake -f bindings/ruby/Rakefile gem GEM_OUT="$work/floodwall.gem"

# The gem carries its wrapper: installing it must not need SWIG. A swig that fails stands first on PATH.
mkdir "$work/no-swig"
printf '#!/bin/sh\necho "swig was run, but the gem carries its wrapper" >&2\nexit 1\n' > "$work/no-swig/swig"
chmod +x "$work/no-swig/swig"

echo "test-ruby: gem install into $work/gems, with no usable swig"
export GEM_HOME="$work/gems"
if ! PATH="$work/no-swig:$PATH" FLOODWALL_WERROR=1 FLOODWALL_JOBS="${FLOODWALL_JOBS:-2}" \
    gem install --local --no-document "$work/floodwall.gem" >"$work/install.log" 2>&1; then
  cat "$work/install.log"
  find "$GEM_HOME" -name gem_make.out -exec tail -n 60 {} \;
  echo "test-ruby: gem install failed" >&2
  exit 1
fi
tail -n 2 "$work/install.log"

echo "test-ruby: minitest"
ruby -e 'ARGV.each { |f| require File.expand_path(f) }' tests/ruby/test_*.rb
