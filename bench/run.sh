#!/usr/bin/env bash
# bench/run.sh [BUILD_DIR] - the entry of `make bench`.
#
# Builds the C++ benchmark into BUILD_DIR (default: build), starts a throwaway redis-server on a free
# port, runs the C++ comparisons (bench/cpp/redis_path.cpp: floodwall's Redis path against the seed's
# reference design, the embedded store, memory per tenant, fail-open cost), then the language
# benchmarks that exist (bench/python/run.py, bench/node/run.js, bench/ruby/run.rb; they get the Redis
# URL in FW_BENCH_REDIS), and writes bench/RESULTS.md and bench/results.json. Redis is stopped by pid.
#
# FW_BENCH_ARGS adds flags to redis_path, e.g. FW_BENCH_ARGS="--seconds 1 --rounds 1" for a quick run.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
JOBS=${JOBS:-2}

for tool in redis-server redis-cli redis-benchmark cmake python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is required (bash packaging/install-deps.sh)" >&2; exit 1; }
done

# ------------------------------------------------------------------------------------------ build
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFW_BUILD_BENCH=ON
else
  cmake -S "$ROOT" -B "$BUILD" -DFW_BUILD_BENCH=ON >/dev/null
fi
cmake --build "$BUILD" --target redis_path floodwall -j "$JOBS"

# The language benchmarks' peers, installed here so that `make bench` works from a clean clone. Python:
# the shared venv (packaging/python-venv.sh) with floodwall from this checkout and `limits` with
# redis-py (FW_BENCH_PYTHON names another interpreter that has both). Node: `npm install` of the
# package, whose devDependencies hold rate-limiter-flexible and ioredis. Ruby: rack-attack and
# redis-rb come from Debian (packaging/install-deps.sh).
PYTHON=${FW_BENCH_PYTHON:-$(bash "$ROOT/packaging/python-venv.sh" "limits[redis]>=3.10" | tail -n 1)}
if [[ ! -d $ROOT/node_modules/rate-limiter-flexible || ! -d $ROOT/node_modules/ioredis ]]; then
  (cd "$ROOT" && FLOODWALL_BUILD_FROM_SOURCE=1 npm install --no-audit --no-fund --no-package-lock --no-update-notifier --loglevel=error)
fi

# ------------------------------------------------------------------------------- throwaway Redis
WORK=$(mktemp -d "${TMPDIR:-/tmp}/floodwall-bench.XXXXXX")
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  --logfile "$WORK/redis.log" --dir "$WORK" &
REDIS_PID=$!
stop_redis() {
  # SIGCONT first: a fail-open run that died mid-blackhole must not leave a stopped server behind.
  kill -CONT "$REDIS_PID" 2>/dev/null || true
  kill "$REDIS_PID" 2>/dev/null || true
  wait "$REDIS_PID" 2>/dev/null || true
}
trap 'stop_redis; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do
  redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
  kill -0 "$REDIS_PID" 2>/dev/null || { cat "$WORK/redis.log" >&2; echo "bench: redis-server did not start" >&2; exit 1; }
  sleep 0.05
done
redis-cli -p "$PORT" ping >/dev/null
export FW_BENCH_REDIS="redis://127.0.0.1:$PORT/0"
export FW_BUILD_DIR="$BUILD"
echo "bench: redis-server pid $REDIS_PID on port $PORT"

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# --------------------------------------------------------------------------------------- the runs
status=0
# shellcheck disable=SC2086 # FW_BENCH_ARGS is a list of flags
"$BUILD/bench/redis_path" --port "$PORT" --redis-pid "$REDIS_PID" \
  --json "$WORK/cpp.json" --markdown "$WORK/cpp.md" ${FW_BENCH_ARGS:-} || status=1

# Where the redis-server's time goes inside the script (bench/cpp/PROFILE.md, section 1).
bash "$ROOT/bench/cpp/script_cost.sh" "$PORT" "$REDIS_PID" | tee "$WORK/script_cost.txt" || status=1

declare -A RUNNERS=([python]="$PYTHON bench/python/run.py" [node]="node bench/node/run.js" [ruby]="ruby bench/ruby/run.rb")
declare -A FILES=([python]=bench/python/run.py [node]=bench/node/run.js [ruby]=bench/ruby/run.rb)
for lang in python node ruby; do
  [[ -f $ROOT/${FILES[$lang]} ]] || continue
  redis-cli -p "$PORT" flushall >/dev/null
  echo "bench: ${RUNNERS[$lang]}"
  rc=0
  # shellcheck disable=SC2086 # the runner is a command and its script
  # REDIS_URL as well: the Node benchmark reads that name.
  (cd "$ROOT" && REDIS_URL=$FW_BENCH_REDIS REDIS_PID=$REDIS_PID ${RUNNERS[$lang]}) >"$WORK/$lang.out" || rc=$?
  cat "$WORK/$lang.out"
  echo "$rc" >"$WORK/$lang.rc"
  [[ $rc -eq 0 ]] || status=1
done

# ------------------------------------------------------------------------------------ the report
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
export START LOAD_BEFORE LOAD_AFTER WORK ROOT
python3 - <<'PY'
import json, os, platform, subprocess

work, root = os.environ["WORK"], os.environ["ROOT"]

def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        return "unknown"

cpu = "unknown"
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
machine = {"nproc": os.cpu_count(), "cpu_model": cpu, "kernel": platform.release(),
           "loadavg_before": os.environ["LOAD_BEFORE"], "loadavg_after": os.environ["LOAD_AFTER"]}
versions = {"redis_server": sh("redis-server", "--version"), "gxx": sh("g++", "--version"),
            "hiredis": sh("pkg-config", "--modversion", "hiredis"), "cmake": sh("cmake", "--version")}

results = {"date": os.environ["START"], "machine": machine, "versions": versions}
try:
    with open(os.path.join(work, "cpp.json")) as f:
        results["cpp"] = json.load(f)
    with open(os.path.join(work, "cpp.md")) as f:
        cpp_md = f.read()
except OSError:
    results["cpp"] = None
    cpp_md = "**The C++ benchmark failed; see the output of bench/run.sh.**\n"

try:
    script_cost = open(os.path.join(work, "script_cost.txt")).read()
except OSError:
    script_cost = "(not run)"
results["redis_cpu_us_per_call"] = {
    line.rsplit(None, 1)[0]: float(line.rsplit(None, 1)[1])
    for line in script_cost.splitlines()[1:] if line.strip() and line.rsplit(None, 1)[-1].replace(".", "", 1).isdigit()}
langs = {}
for lang, path in (("python", "bench/python/run.py"), ("node", "bench/node/run.js"), ("ruby", "bench/ruby/run.rb")):
    if not os.path.exists(os.path.join(work, lang + ".rc")):
        continue
    out = open(os.path.join(work, lang + ".out")).read()
    rc = int(open(os.path.join(work, lang + ".rc")).read())
    try:
        parsed = json.loads(out)
    except ValueError:
        parsed = None
    langs[lang] = {"runner": path, "exit_status": rc, "output": parsed if parsed is not None else out}
results["languages"] = langs

with open(os.path.join(root, "bench", "results.json"), "w") as f:
    json.dump(results, f, indent=2)
    f.write("\n")

md = ["# floodwall benchmark results", "",
      f"Run {results['date']} by `make bench` (`bench/run.sh`). Regenerate with `make bench`; "
      "`bench/results.json` holds the same figures and every round.", "",
      "| | |", "|---|---|",
      f"| machine | {machine['nproc']} cores, {cpu}, Linux {machine['kernel']} |",
      f"| load average (1, 5, 15 min) | before {machine['loadavg_before']}, after {machine['loadavg_after']} |",
      f"| redis-server | {versions['redis_server']} |",
      f"| compiler | {versions['gxx']} |",
      f"| hiredis | {versions['hiredis']} |",
      f"| floodwall | {(results['cpp'] or {}).get('floodwall_version', 'unknown')} |", "",
      f"**Read these figures with the machine in mind.** It has {machine['nproc']} cores, shared by the "
      "redis-server, the benchmark's callers, floodwall's I/O thread and redis-benchmark, and (on the box these "
      "figures came from) by other work running at the same time: see the load average. Throughput and "
      "latency are therefore lower and noisier than on a dedicated server; the ratios between contenders run in "
      "the same minutes, alternating, are the figures to compare, and the CPU-per-call columns say what each "
      "call costs regardless of how the box was shared.", "",
      "## C++ (through the C ABI)", "", cpp_md,
      "### Redis CPU per call of script variants (`bench/cpp/script_cost.sh`)", "",
      "Each a part of what `lua/tenant_admit.lua` does for a request-rate-only admit, through "
      "`redis-benchmark -c 64 -P 16`; the redis-server's CPU time per call, best of 3 runs.", "",
      "```", script_cost.rstrip(), "```", "",
      "Where the time goes and what to change: `bench/cpp/PROFILE.md`.", ""]
for lang, r in langs.items():
    md += [f"## {lang} (`{r['runner']}`)", ""]
    if r["exit_status"] != 0:
        md += [f"**Failed with exit status {r['exit_status']}.**", ""]
    out = r["output"] if isinstance(r["output"], str) else json.dumps(r["output"], indent=2)
    md += ["```", out.rstrip(), "```", ""]
with open(os.path.join(root, "bench", "RESULTS.md"), "w") as f:
    f.write("\n".join(md))
print("bench: wrote bench/RESULTS.md and bench/results.json")
PY
exit $status
