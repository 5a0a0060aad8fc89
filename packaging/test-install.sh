#!/usr/bin/env bash
# The install paths a new user takes from a fresh clone, as the README writes them, on what is committed
# (a `git clone` of this checkout's HEAD, so a file that was never added fails here):
#   npm    the README's line (npm install && npm run build:prebuilt && npm pack), the tarball it names
#          installed into an empty project, imported from ESM and from CommonJS
#   Bundler  a Gemfile with `path:` to the clone's bindings/ruby and one with `git:` (file://, glob:),
#          `bundle install --local`, then `require "floodwall"` under `bundle exec`
#   pip    `pip install <clone>` into a fresh venv
# and floodwall.schema.json in each package. The wheel and the sdist are packaging/test-wheel.sh's; the
# tarball's source build and its README example are tests/node/package.test.js's.
# Builds go through ccache when it is installed (see CCACHE_BASEDIR below).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
for tool in git node npm bundle python3 cmake swig; do
  command -v "$tool" >/dev/null || { echo "test-install: $tool is missing (run packaging/install-deps.sh)" >&2; exit 1; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/floodwall-install.XXXXXX")
# ccache (core/ccache.cmake): paths under this run's directory are hashed relative to the build directory,
# system headers by their absolute paths, so the core compiled in the clone (npm's build-node/core, path:'s
# build-ruby/core) and in Bundler's deeper git: checkout (build-ruby/core) is one set of entries, shared
# with every other run and copy. Set here, so that a CCACHE_BASEDIR=/ from outside cannot spell
# /usr/include/hiredis with as many ../ as a build directory is deep.
export CCACHE_BASEDIR=$work CCACHE_NOHASHDIR=true FLOODWALL_JOBS=${FLOODWALL_JOBS:-2}
trap 'rm -rf "$work"' EXIT
fail() { echo "test-install: $*" >&2; exit 1; }
step() { echo "test-install: $* ($SECONDS s)"; }

clone=$work/floodwall
git clone -q "$root" "$clone"
step "cloned $(git -C "$clone" rev-parse --short HEAD)"
v=$(head -n 1 "$clone/VERSION")
# No npm, Bundler or pip configuration of this machine's user: a new user's defaults.
export npm_config_userconfig=$work/npmrc BUNDLE_USER_HOME=$work/bundle-home PIP_CONFIG_FILE=/dev/null
: >"$work/npmrc"
for key in $(env | sed -n -E 's/^(npm_config_[A-Za-z_]*)=.*/\1/ip'); do [ "$key" = npm_config_userconfig ] || unset "$key"; done

# --- npm: the README's line, word for word -------------------------------------------------------------
readme_npm=$(grep -m 1 -E '^npm install && npm run build:prebuilt && npm pack' "$clone/README.md") ||
  fail "the README has no 'npm install && npm run build:prebuilt && npm pack' line"
readme_tgz=$(grep -m 1 -o -E '^npm install \./floodwall-[^ ]*\.tgz' "$clone/README.md" | sed 's|^npm install \./||') ||
  fail "the README names no tarball to install"
[ "$readme_tgz" = "floodwall-$v.tgz" ] || fail "the README installs $readme_tgz, VERSION says $v"
(cd "$clone" && bash -c "${readme_npm%%#*}" >"$work/npm.log" 2>&1) || { tail -n 40 "$work/npm.log"; fail "the README's npm line failed"; }
[ -f "$clone/$readme_tgz" ] || fail "the README's npm line made no $readme_tgz"
tar tzf "$clone/$readme_tgz" >"$work/tgz.files"
grep -qx "package/prebuilds/linux-x64/floodwall.node" "$work/tgz.files" || fail "$readme_tgz carries no prebuilt addon"
grep -qx "package/floodwall.schema.json" "$work/tgz.files" || fail "$readme_tgz lacks floodwall.schema.json"
step "npm: the README's line made $readme_tgz"

mkdir "$work/app-npm"
(cd "$work/app-npm" && echo '{"name":"app","version":"1.0.0","private":true}' >package.json &&
  npm install --no-audit --no-fund --no-package-lock --loglevel=error --no-update-notifier "$clone/$readme_tgz" >"$work/npm-app.log" 2>&1) ||
  { cat "$work/npm-app.log"; fail "npm install ./$readme_tgz failed"; }
cat >"$work/app-npm/esm.mjs" <<'JS'
import { Floodwall, PolicyError, express, version } from 'floodwall';
const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 1 } });
const got = [(await fw.admit({ tenant: 't' })).allowed, (await fw.admit({ tenant: 't' })).allowed];
fw.close();
let refused = false;
try { new Floodwall({ request_rate: { rate: 1, burst: 0 } }); } catch (e) { refused = e instanceof PolicyError; }
console.log(JSON.stringify({ got, refused, middleware: typeof express(new Floodwall({})), version }));
JS
cat >"$work/app-npm/cjs.js" <<'JS'
const { Floodwall, PolicyError, express, version } = require('floodwall');
const fw = new Floodwall({ request_rate: { rate: 0.001, burst: 1 } });
(async () => {
  const got = [(await fw.admit({ tenant: 't' })).allowed, (await fw.admit({ tenant: 't' })).allowed];
  fw.close();
  let refused = false;
  try { new Floodwall({ request_rate: { rate: 1, burst: 0 } }); } catch (e) { refused = e instanceof PolicyError; }
  console.log(JSON.stringify({ got, refused, middleware: typeof express(new Floodwall({})), version }));
})();
JS
want="{\"got\":[true,false],\"refused\":true,\"middleware\":\"function\",\"version\":\"$v\"}"
for f in esm.mjs cjs.js; do
  got=$(cd "$work/app-npm" && node "$f") || fail "node $f in the project that installed $readme_tgz failed"
  [ "$got" = "$want" ] || fail "node $f gave $got, not $want"
done
[ ! -d "$work/app-npm/node_modules/floodwall/build-node" ] || fail "installing $readme_tgz built the addon instead of using its prebuilt one"
step "npm: $readme_tgz installed into an empty project, imported from ESM and CommonJS"

# --- Bundler: path: and git: ---------------------------------------------------------------------------
ruby_check='require "floodwall"
fw = Floodwall::Client.new(request_rate: { rate: 0.001, burst: 1 })
got = [fw.admit(tenant: "t").allowed?, fw.admit(tenant: "t").allowed?]
fw.close
abort "admits gave #{got.inspect}" unless got == [true, false]
puts "#{Floodwall::VERSION} #{$LOADED_FEATURES.grep(/native\.so$/).first}"'
bundler_app() { # NAME GEMFILE-LINE
  local app=$work/app-$1
  mkdir "$app"
  printf '%s\n' "$2" >"$app/Gemfile"
  (cd "$app" && BUNDLE_APP_CONFIG=$app/.bundle BUNDLE_PATH=$app/vendor/bundle bundle install --local >"$app/install.log" 2>&1) ||
    { cat "$app/install.log"; fail "bundle install --local with $2 failed"; }
  (cd "$app" && BUNDLE_APP_CONFIG=$app/.bundle BUNDLE_PATH=$app/vendor/bundle bundle exec ruby -e "$ruby_check" >"$app/run.log" 2>&1) ||
    { cat "$app/run.log"; find "$app" -name build.log -exec tail -n 30 {} \; ; fail "require \"floodwall\" with $2 failed"; }
  loaded=$(tail -n 1 "$app/run.log")
  [ "${loaded%% *}" = "$v" ] || fail "with $2 the gem says ${loaded%% *}, VERSION says $v"
  step "Bundler: $2: require \"floodwall\" loads ${loaded#* }"
}
bundler_app path "gem \"floodwall\", path: \"$clone/bindings/ruby\""
bundler_app git "gem \"floodwall\", git: \"file://$clone\", glob: \"bindings/ruby/floodwall.gemspec\""
# The .gem itself carries the schema (rake gem vendors the core; test-ruby.sh installs and tests that gem).
(cd "$clone/bindings/ruby" && rake gem GEM_OUT="$work/floodwall.gem" >"$work/gem.log" 2>&1) || { cat "$work/gem.log"; fail "rake gem failed"; }
tar xOf "$work/floodwall.gem" data.tar.gz | tar tz >"$work/gem.files"  # a file: grep -q would cut the pipe
grep -qx "floodwall.schema.json" "$work/gem.files" || fail "the .gem lacks floodwall.schema.json"
step "rake gem: the .gem carries floodwall.schema.json"

# --- pip from the clone --------------------------------------------------------------------------------
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip --disable-pip-version-check -q install "$clone" >"$work/pip.log" 2>&1 ||
  { tail -n 40 "$work/pip.log"; fail "pip install <clone> failed"; }
cat >"$work/pip_check.py" <<'PY'
import importlib.resources, json, sys
import floodwall, floodwall.asgi, floodwall.wsgi
fw = floodwall.Floodwall({"request_rate": {"rate": 0.001, "burst": 1}})
got = [fw.admit("t").allowed for _ in range(2)]
assert got == [True, False], got
assert floodwall.__version__ == sys.argv[1], (floodwall.__version__, sys.argv[1])
schema = json.loads(importlib.resources.files("floodwall").joinpath("floodwall.schema.json").read_text())
assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", schema.get("$schema")
PY
(cd "$work" && "$work/venv/bin/python" pip_check.py "$v") || fail "floodwall from pip install <clone> does not work"
step "pip: pip install <clone> into a fresh venv, with floodwall.schema.json"
echo "test-install: passed in $SECONDS s"
