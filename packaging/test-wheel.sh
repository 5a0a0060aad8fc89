#!/usr/bin/env bash
# The wheel as a user without a compiler meets it: built by packaging/build-wheel.sh (make wheels),
# installed into a fresh venv whose PATH has no compiler, CMake or pkg-config, then used; its extension
# must load the hiredis, libssl and libcrypto bundled in the wheel, not the system's.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap '[ ! -s "$work/tls/redis.pid" ] || kill "$(cat "$work/tls/redis.pid")"; rm -rf "$work"' EXIT
# Into a directory of its own: dist/ may hold every CPython's wheels (make packages).
FW_DIST="$work/dist" bash packaging/build-wheel.sh >/dev/null
wheel=$(ls "$work"/dist/floodwall-*manylinux*.whl)
# A TLS redis-server for the wheel's rediss:// check (its certificates signed by a test CA).
read -r redis_port tls_port < <(bash packaging/tls-redis.sh "$work/tls")
python3 -m venv "$work/venv"
# The venv's bin alone on PATH: python and pip, no compiler.
PATH="$work/venv/bin" python -m pip --disable-pip-version-check -q install --no-index "$wheel"
cd "$work"
PATH="$work/venv/bin" FW_TLS_PORT="$tls_port" FW_TLS_CA="$work/tls/certs/ca.crt" python - <<'PY'
import os, shutil, sys
assert sys.prefix != sys.base_prefix, "not in the fresh venv"
for tool in ("cc", "gcc", "g++", "c++", "cmake", "pkg-config"):
    assert shutil.which(tool) is None, f"{tool} is on PATH: this test proves nothing"
import floodwall
fw = floodwall.Floodwall({"request_rate": {"rate": 0.001, "burst": 2}})
got = [fw.admit("t").allowed for _ in range(3)]
assert got == [True, True, False], got
maps = open(f"/proc/{os.getpid()}/maps").read().splitlines()
hiredis = sorted({line.split()[-1] for line in maps if "hiredis" in line})
assert hiredis and all("floodwall.libs" in path for path in hiredis), hiredis
# OpenSSL (rediss://) is bundled the same way, so the wheel runs where no libssl 3 is installed: the
# extension loads the renamed copies in floodwall.libs (Python's own ssl and hashlib modules may map the
# system's too, which are theirs).
ssl = sorted({line.split()[-1] for line in maps if ("libssl" in line or "libcrypto" in line) and "floodwall.libs" in line})
assert any("libssl" in p for p in ssl) and any("libcrypto" in p for p in ssl), ssl
# rediss:// through that OpenSSL: the handshake verified against the test CA, decided by Redis (not degraded).
tls = floodwall.Floodwall({
    "store": f"rediss://127.0.0.1:{os.environ['FW_TLS_PORT']}/0", "prefix": "wheel-tls",
    "redis": {"deadline_ms": 2000, "connect_timeout_ms": 2000, "tls": {"ca_file": os.environ["FW_TLS_CA"]}},
    "request_rate": {"rate": 0.001, "burst": 2}})
got = [(d.allowed, d.degraded, d.fail_reason) for d in (tls.admit("t") for _ in range(3))]
assert got == [(True, False, None), (True, False, None), (False, False, None)], got
tls.close()
print(f"wheel: {os.path.basename(floodwall.__file__)} from the wheel, no compiler on PATH, hiredis from {hiredis[0]}, "
      f"OpenSSL from {', '.join(os.path.basename(p) for p in ssl)}, rediss:// decided by Redis")
PY
keys=$(redis-cli -p "$redis_port" --scan --pattern 'wheel-tls:*')
[ "$keys" = 'wheel-tls:{t}:rate' ] || { echo "test-wheel: Redis holds '$keys' under wheel-tls:, not the bucket the rediss:// admits made" >&2; exit 1; }

# The sdist, as a user on a platform without a wheel meets it: built by `python -m build --sdist`, then
# installed from the .tar.gz alone into a fresh venv (this time with the compiler and the system hiredis),
# so that a file the sdist's allowlist forgot fails here, not on a user's machine.
cd "$root"
py=$(bash packaging/python-venv.sh build | tail -n 1)
"$py" -m build --sdist -o "$work/sdist" . >/dev/null
sdist=$(ls "$work"/sdist/floodwall-*.tar.gz)
# Every file git tracks under core/, capi/ and lua/ (core/src/stores/redis/ with its TLS connection
# included) is in it: the allowlist in pyproject.toml must not drop a new one.
missing=$(comm -23 <(git ls-files core capi lua | sort) <(tar tzf "$sdist" | sed 's|^[^/]*/||' | sort))
[ -z "$missing" ] || { echo "test-wheel: the sdist lacks: $missing" >&2; exit 1; }
python3 -m venv "$work/sdist-venv"
"$work/sdist-venv/bin/python" -m pip --disable-pip-version-check -q install "$sdist"
(cd "$work" && "$work/sdist-venv/bin/python" -c '
import floodwall, floodwall.asgi, floodwall.wsgi
fw = floodwall.Floodwall({"request_rate": {"rate": 0.001, "burst": 1}})
got = [fw.admit("t").allowed for _ in range(2)]
assert got == [True, False], got
print("sdist:", floodwall.__version__, "built from", __import__("os").path.basename("'"$sdist"'"))
')
echo "test-wheel: passed"
