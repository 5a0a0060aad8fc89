#!/usr/bin/env bash
# The Ruby suite, as a new user meets the gem: build floodwall-*.gem from bindings/ruby, `gem install`
# it offline into a throwaway GEM_HOME (the extension builds the core from the sources the gem carries,
# with warnings as errors), check that it links OpenSSL and speaks rediss://, then run the minitest suites
# in tests/ruby against the installed gem. Rack, rack-test, minitest, Puma, WEBrick and Sinatra come from
# Debian; the suites start their own redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d "${TMPDIR:-/tmp}/floodwall-ruby.XXXXXX")
trap '[ ! -s "$work/tls/redis.pid" ] || kill "$(cat "$work/tls/redis.pid")"; rm -rf "$work"' EXIT

echo "test-ruby: rake gem (vendors the core, generates the SWIG wrapper, builds the gem)"
# One at a time (make test's lanes): test-e2e.sh prepares the same bindings/ruby/ext.
mkdir -p build-ruby
flock build-ruby/.lock rake -f bindings/ruby/Rakefile gem GEM_OUT="$work/floodwall.gem"

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

# The extension links OpenSSL (rediss://) as it links hiredis: named in its NEEDED entries (an unresolved
# SSL_* would otherwise surface only at the first TLS connection, or bind to whatever the process loaded),
# and a TLS handshake through it, verified against a test CA, is decided by Redis.
echo "test-ruby: rediss:// through the installed gem"
native=$(find "$GEM_HOME" -path '*floodwall*' -name 'native.so' | head -n 1)
needed=$(readelf -d "$native" | grep NEEDED)
for lib in libhiredis libssl libcrypto; do
  grep -q "\[$lib\." <<<"$needed" || { echo "$needed"; echo "test-ruby: $native does not link $lib" >&2; exit 1; }
done
read -r redis_port tls_port < <(bash packaging/tls-redis.sh "$work/tls")
FW_TLS_PORT="$tls_port" FW_TLS_CA="$work/tls/certs/ca.crt" ruby -e '
require "floodwall"
fw = Floodwall::Client.new(store: "rediss://127.0.0.1:#{ENV["FW_TLS_PORT"]}/0", prefix: "gem-tls",
                           redis: { deadline_ms: 2000, connect_timeout_ms: 2000, tls: { ca_file: ENV["FW_TLS_CA"] } },
                           request_rate: { rate: 0.001, burst: 2 })
got = Array.new(3) { fw.admit(tenant: "t") }.map { |d| [d.allowed?, d.degraded?, d.fail_reason] }
fw.close
want = [[true, false, nil], [true, false, nil], [false, false, nil]]
abort "test-ruby: rediss:// admits gave #{got.inspect}, not #{want.inspect}" unless got == want
puts "test-ruby: rediss:// decided by Redis, through the OpenSSL the extension links"
'
keys=$(redis-cli -p "$redis_port" --scan --pattern 'gem-tls:*')
[ "$keys" = 'gem-tls:{t}:rate' ] || { echo "test-ruby: Redis holds '$keys' under gem-tls:, not the bucket the rediss:// admits made" >&2; exit 1; }

echo "test-ruby: minitest"
ruby -e 'ARGV.each { |f| require File.expand_path(f) }' tests/ruby/test_*.rb
