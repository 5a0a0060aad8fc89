#!/usr/bin/env bash
# make demo: routes-api under pressure, over real HTTP, on the embedded memory store (no Redis needed).
#   make demo                 one server process, memory store
#   make demo REDIS=auto      a throwaway redis-server and three worker processes sharing it
#   make demo REDIS=redis://127.0.0.1:6379/0
# The service is a Starlette app behind floodwall's ASGI middleware; the driver replays the seed's stories.
set -euo pipefail
build=${1:-build}
redis=${2:-}
cd "$(dirname "$0")/.."
venv="$build/demo-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check starlette uvicorn httpx matplotlib
# The floodwall package itself, built from this checkout (incremental in $build/python-demo).
"$venv/bin/pip" install -q --disable-pip-version-check . -C build-dir="$build/python-demo"
args=()
[ -n "$redis" ] && args+=(--redis "$redis")
cd examples/routes_api
exec "../../$venv/bin/python" driver.py "${args[@]}"
