#!/usr/bin/env bash
# make demo: routes-api under pressure, over real HTTP, on the embedded memory store (no Redis needed).
#   make demo                 one server process, memory store
#   make demo REDIS=auto      a throwaway redis-server and three worker processes sharing it
#   make demo REDIS=redis://127.0.0.1:6379/0
# The service is a Starlette app behind floodwall's ASGI middleware; the driver replays the seed's stories.
# Each step and each scene prints a progress line with its own time and the time since the demo began.
# The scenes run one after another: they share one app, its tenants, its box-wide shedders and the
# timeline picture, so none is independent of the one before (a scene's bucket state is the next one's).
set -euo pipefail
build=${1:-build}
redis=${2:-}
cd "$(dirname "$0")/.."
started=$(date +%s.%N)
progress() { # STEP-START WHAT: "[demo 0:42 | 12.3 s] WHAT"
  local now
  now=$(date +%s.%N)
  awk -v t0="$started" -v s="$1" -v n="$now" -v w="$2" \
    'BEGIN { e = n - t0; printf "[demo %d:%02d | %5.1f s] %s\n", int(e / 60), int(e) % 60, n - s, w }'
}
step=$(date +%s.%N)
venv="$build/demo-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check starlette uvicorn httpx matplotlib
progress "$step" "the demo's venv (starlette, uvicorn, httpx, matplotlib)"
step=$(date +%s.%N)
# The floodwall package itself, built from this checkout (incremental in $build/python-demo), and only when
# its sources changed since the last install into this venv (a stamp of the tracked files; outside a git
# checkout, always): a reinstall takes about 40 s even when nothing changed.
stamp=
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd)" ]; then
  stamp=$(git ls-files -z core capi lua bindings/python CMakeLists.txt pyproject.toml VERSION floodwall.schema.json |
    xargs -0 cat | sha1sum | cut -d' ' -f1)
fi
if [ -z "$stamp" ] || [ "$(cat "$venv/.floodwall-stamp" 2>/dev/null)" != "$stamp" ] ||
  ! "$venv/bin/python" -c 'import floodwall' 2>/dev/null; then
  rm -f "$venv/.floodwall-stamp"
  "$venv/bin/pip" install -q --disable-pip-version-check . -C build-dir="$build/python-demo"
  [ -z "$stamp" ] || echo "$stamp" >"$venv/.floodwall-stamp"
  progress "$step" "floodwall installed into it from this checkout"
else
  progress "$step" "floodwall already installed from these sources"
fi
args=()
[ -n "$redis" ] && args+=(--redis "$redis")
cd examples/routes_api
# The driver's output as it comes, with a progress line as each scene ends (its time, and the time since
# the demo began); the driver's exit status is the demo's.
"../../$venv/bin/python" -u driver.py "${args[@]}" | "../../$venv/bin/python" -u -c '
import re, sys, time
t0 = float(sys.argv[1])
scene, since = None, time.time()
def done(what):
    now = time.time()
    e = now - t0
    print(f"[demo {int(e) // 60}:{int(e) % 60:02d} | {now - since:5.1f} s] {what}", flush=True)
for line in sys.stdin:
    m = re.match(r"^\[ ?(\d+)\] ", line)
    if m or line.startswith("timeline picture:"):
        if scene is None:
            done("the app started")
        else:
            done(f"scene {scene} done")
        scene, since = (m.group(1) if m else None), time.time()
    sys.stdout.write(line)
    sys.stdout.flush()
e = time.time() - t0
print(f"[demo {int(e) // 60}:{int(e) % 60:02d}] done", flush=True)
' "$started"
