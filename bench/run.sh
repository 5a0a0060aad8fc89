#!/usr/bin/env bash
# bench/run.sh [BUILD_DIR] - the entry of `make bench`.
#
# Builds the C++ benchmark into BUILD_DIR (default: build), starts a throwaway redis-server on a free
# port, and on a second free port in TLS (its certificate from a throwaway CA that openssl makes in the
# run's temp dir), and a throwaway Redis Cluster of 3 masters (when redis_path's cluster section runs),
# runs the C++ comparisons (bench/cpp/redis_path.cpp: floodwall's Redis path against the seed's reference
# design, the same path over TLS beside plain TCP, over the cluster beside the single node, the price of a
# tenant's limits and quota beside its bucket alone, the embedded store, memory per tenant, fail-open cost),
# then the language benchmarks that exist (bench/python/run.py, bench/node/run.js, bench/ruby/run.rb; they
# get the Redis URL in FW_BENCH_REDIS), and writes bench/RESULTS.md and bench/results.json. Every
# redis-server is stopped by pid.
#
# FW_BENCH_ARGS adds flags to redis_path, e.g. FW_BENCH_ARGS="--seconds 1 --rounds 1" for a quick run.
# FW_BENCH_CPP_ONLY=1 runs redis_path alone: no peers installed, no script_cost.sh, no language benchmarks,
# no HTTP section (bench/http/run.js; FW_BENCH_HTTP=0 leaves out that one alone).
# FW_BENCH_HTTP_ONLY=1 runs the HTTP section alone (bench/http/run.js; about 3 minutes), e.g.
#   FW_BENCH_HTTP_ONLY=1 FW_BENCH_OUT=/tmp/fw bash bench/run.sh
# FW_BENCH_ADAPTIVE_ONLY=1 runs the adaptive concurrency limit's box alone (bench/cpp/adaptive_box.cpp, about
# 80 s; FW_BENCH_ADAPTIVE=0 leaves out that one alone).
# FW_BENCH_OUT=DIR writes RESULTS.md and results.json into DIR instead of bench/ (for a trial run that
# must not replace the committed figures), e.g.
#   FW_BENCH_CPP_ONLY=1 FW_BENCH_OUT=/tmp/fw FW_BENCH_ARGS="--sections tls --seconds 1 --rounds 1" bash bench/run.sh
# or the price of limits and quotas alone (redis_path's rules section, about 40 s):
#   FW_BENCH_CPP_ONLY=1 FW_BENCH_OUT=/tmp/fw FW_BENCH_ARGS="--sections rules" bash bench/run.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
JOBS=${JOBS:-2}
CPP_ONLY=${FW_BENCH_CPP_ONLY:-0}
HTTP_ONLY=${FW_BENCH_HTTP_ONLY:-0}
ADAPTIVE_ONLY=${FW_BENCH_ADAPTIVE_ONLY:-0}
if [[ $ADAPTIVE_ONLY == 1 ]]; then
  CPP_ONLY=1  # no peers, no languages, no HTTP: the box alone
fi
OUT=${FW_BENCH_OUT:-$ROOT/bench}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

for tool in redis-server redis-cli redis-benchmark cmake python3 openssl; do
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
# redis-py, Starlette and uvicorn for bench/http (FW_BENCH_PYTHON names another interpreter that has them). Node: `npm install` of the
# package, whose devDependencies hold rate-limiter-flexible, ioredis, express-rate-limit, rate-limit-redis
# and autocannon (bench/http). Ruby: rack-attack and
# redis-rb come from Debian (packaging/install-deps.sh).
if [[ $CPP_ONLY != 1 ]]; then
  PYTHON=${FW_BENCH_PYTHON:-$(bash "$ROOT/packaging/python-venv.sh" "limits[redis]>=3.10" starlette uvicorn | tail -n 1)}
  if [[ ! -d $ROOT/node_modules/rate-limiter-flexible || ! -d $ROOT/node_modules/ioredis || ! -d $ROOT/node_modules/autocannon ||
        ! -d $ROOT/node_modules/express-rate-limit || ! -d $ROOT/node_modules/rate-limit-redis ||
        ! -d $ROOT/node_modules/bottleneck ]]; then
    (cd "$ROOT" && FLOODWALL_BUILD_FROM_SOURCE=1 npm install --no-audit --no-fund --no-package-lock --no-update-notifier --loglevel=error)
  fi
fi

# ------------------------------------------------------------------------------- throwaway Redis
WORK=$(mktemp -d "${TMPDIR:-/tmp}/floodwall-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT  # until the server runs (below: stop it, then this)
# Does redis_path run its cluster section? It does unless FW_BENCH_ARGS names sections without it (the
# last --sections counts, as in redis_path).
WANT_CLUSTER=1
[[ $HTTP_ONLY != 1 && $ADAPTIVE_ONLY != 1 ]] || WANT_CLUSTER=0
read -ra BENCH_ARGS <<<"${FW_BENCH_ARGS:-}"
for ((i = 0; i < ${#BENCH_ARGS[@]}; i++)); do
  if [[ ${BENCH_ARGS[i]} == --sections ]]; then
    WANT_CLUSTER=0
    IFS=, read -ra sections <<<"${BENCH_ARGS[i + 1]:-}"
    for s in "${sections[@]}"; do [[ $s != cluster ]] || WANT_CLUSTER=1; done
  fi
done
# Eight free ports, all bound at once so that they differ: plain TCP and TLS of the single server, then
# the cluster's masters (clients) and their cluster bus (--cluster-port: the default, port + 10000, is
# not checked free and can pass 65535).
read -r PORT TLS_PORT C1 C2 C3 B1 B2 B3 < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(8)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
for s in socks:
    s.close()')
[[ -n ${B3:-} ]] || { echo "bench: no free ports" >&2; exit 1; }
CLUSTER_PORTS=("$C1" "$C2" "$C3")
CLUSTER_BUS=("$B1" "$B2" "$B3")
CLUSTER_PIDS=()

# The TLS port's certificates, EC P-256, valid for two days: a throwaway CA and a server certificate it
# signed for IP:127.0.0.1 (the host of the benchmark's rediss:// URL) and DNS:localhost. Our own config, so
# that the system's openssl.cnf adds nothing; OpenSSL 3 checks what it says (CA:TRUE and keyCertSign on the
# CA, a subjectAltName and serverAuth on the server certificate), as in tests/core/tls_redis.hpp.
TLS=$WORK/tls
mkdir "$TLS"
cat >"$TLS/openssl.cnf" <<'CNF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
CNF
tls_openssl() {
  openssl "$@" >"$TLS/openssl.log" 2>&1 || { cat "$TLS/openssl.log" >&2; echo "bench: openssl $1 failed" >&2; exit 1; }
}
tls_openssl req -config "$TLS/openssl.cnf" -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -noenc \
  -keyout "$TLS/ca.key" -out "$TLS/ca.crt" -days 2 -subj "/O=floodwall bench/CN=floodwall bench CA" -extensions ca_ext
tls_openssl req -config "$TLS/openssl.cnf" -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -noenc \
  -keyout "$TLS/server.key" -out "$TLS/server.csr" -subj "/O=floodwall bench/CN=localhost"
tls_openssl x509 -req -in "$TLS/server.csr" -CA "$TLS/ca.crt" -CAkey "$TLS/ca.key" -set_serial 2 -days 2 \
  -out "$TLS/server.crt" -extfile "$TLS/openssl.cnf" -extensions server_ext

redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  --tls-port "$TLS_PORT" --tls-cert-file "$TLS/server.crt" --tls-key-file "$TLS/server.key" \
  --tls-ca-cert-file "$TLS/ca.crt" --tls-auth-clients no \
  --logfile "$WORK/redis.log" --dir "$WORK" &
REDIS_PID=$!
stop_redis() {
  # SIGCONT first: a fail-open run that died mid-blackhole must not leave a stopped server behind.
  kill -CONT "$REDIS_PID" 2>/dev/null || true
  kill "$REDIS_PID" 2>/dev/null || true
  wait "$REDIS_PID" 2>/dev/null || true
  local pid
  for pid in ${CLUSTER_PIDS[@]+"${CLUSTER_PIDS[@]}"}; do
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
trap 'stop_redis; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do
  redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
  kill -0 "$REDIS_PID" 2>/dev/null || { cat "$WORK/redis.log" >&2; echo "bench: redis-server did not start" >&2; exit 1; }
  sleep 0.05
done
redis-cli -p "$PORT" ping >/dev/null
# The TLS port answers a verified handshake (the CA above, the name 127.0.0.1).
redis-cli --tls --cacert "$TLS/ca.crt" -h 127.0.0.1 -p "$TLS_PORT" ping >"$WORK/tls-ping.txt" 2>&1 &&
  grep -qx PONG "$WORK/tls-ping.txt" || {
  cat "$WORK/tls-ping.txt" "$WORK/redis.log" >&2
  echo "bench: redis-server does not answer over TLS on port $TLS_PORT (is it built with TLS?)" >&2
  exit 1
}
export FW_BENCH_REDIS="redis://127.0.0.1:$PORT/0"
export FW_BUILD_DIR="$BUILD"
echo "bench: redis-server pid $REDIS_PID on port $PORT, TLS on port $TLS_PORT"

# ---------------------------------------------------------------------- throwaway Redis Cluster
# 3 masters (the fewest redis-cli --cluster create accepts) and no replicas: this machine has 2 cores,
# which the masters already share with the single server above, the benchmark's callers and floodwall's
# I/O threads (one per master); replicas would only take CPU from them. Each node in a dir of its own
# (its nodes.conf, its log), no persistence, a 1 s node timeout.
CLUSTER_ARGS=()
if [[ $WANT_CLUSTER == 1 ]]; then
  seeds=()
  for k in "${!CLUSTER_PORTS[@]}"; do
    p=${CLUSTER_PORTS[k]}
    dir=$WORK/cluster/$p
    mkdir -p "$dir"
    redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes --cluster-port "${CLUSTER_BUS[k]}" \
      --cluster-config-file "$dir/nodes.conf" --cluster-node-timeout 1000 --save '' --appendonly no \
      --daemonize no --logfile "$dir/redis.log" --dir "$dir" &
    CLUSTER_PIDS+=($!)
    seeds+=("127.0.0.1:$p")
  done
  cluster_fail() {
    for p in "${CLUSTER_PORTS[@]}"; do
      echo "--- node $p: $(redis-cli -p "$p" cluster info 2>&1 | grep -E 'cluster_state|slots_assigned' | tr -d '\r' | tr '\n' ' ')" >&2
      tail -n 20 "$WORK/cluster/$p/redis.log" >&2 2>/dev/null || true
    done
    echo "bench: $1" >&2
    exit 1
  }
  for k in "${!CLUSTER_PORTS[@]}"; do
    for _ in $(seq 100); do
      redis-cli -p "${CLUSTER_PORTS[k]}" ping >/dev/null 2>&1 && break
      kill -0 "${CLUSTER_PIDS[k]}" 2>/dev/null || cluster_fail "cluster node ${CLUSTER_PORTS[k]} did not start"
      sleep 0.05
    done
  done
  redis-cli --cluster create "${seeds[@]}" --cluster-replicas 0 --cluster-yes >"$WORK/cluster/create.log" 2>&1 || {
    cat "$WORK/cluster/create.log" >&2
    cluster_fail "redis-cli --cluster create failed"
  }
  # Settled when every node says cluster_state:ok (the masters say fail for up to about a second after
  # the create returns); 20 s at most.
  for _ in $(seq 200); do
    ok=0
    for p in "${CLUSTER_PORTS[@]}"; do
      info=$(redis-cli -p "$p" cluster info 2>/dev/null || true)
      [[ $info != *cluster_state:ok* ]] || ok=$((ok + 1))
    done
    [[ $ok -lt ${#CLUSTER_PORTS[@]} ]] || break
    sleep 0.1
  done
  [[ $ok -eq ${#CLUSTER_PORTS[@]} ]] || cluster_fail "the cluster did not say cluster_state:ok on every node in 20 s"
  CLUSTER_ARGS=(--cluster-ports "$(IFS=,; echo "${CLUSTER_PORTS[*]}")" --cluster-pids "$(IFS=,; echo "${CLUSTER_PIDS[*]}")")
  echo "bench: Redis Cluster of ${#CLUSTER_PORTS[@]} masters (no replicas), pids ${CLUSTER_PIDS[*]} on ports ${CLUSTER_PORTS[*]}"
fi

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# --------------------------------------------------------------------------------------- the runs
status=0
if [[ $HTTP_ONLY != 1 && $ADAPTIVE_ONLY != 1 ]]; then
  # shellcheck disable=SC2086 # FW_BENCH_ARGS is a list of flags
  "$BUILD/bench/redis_path" --port "$PORT" --tls-port "$TLS_PORT" --tls-ca "$TLS/ca.crt" --redis-pid "$REDIS_PID" \
    ${CLUSTER_ARGS[@]+"${CLUSTER_ARGS[@]}"} --json "$WORK/cpp.json" --markdown "$WORK/cpp.md" ${FW_BENCH_ARGS:-} || status=1
fi

# The adaptive concurrency limit on a box of real threads: no limiter, gradient2 and vegas, then the
# capacity halved (bench/cpp/adaptive_box.cpp).
if [[ $HTTP_ONLY != 1 && ${FW_BENCH_ADAPTIVE:-1} == 1 ]]; then
  echo "bench: adaptive_box"
  "$BUILD/bench/adaptive_box" --markdown "$WORK/adaptive.md" --json "$WORK/adaptive.json" || status=1
fi

# Where the redis-server's time goes inside the script (bench/cpp/PROFILE.md, section 1).
if [[ $CPP_ONLY != 1 && $HTTP_ONLY != 1 ]]; then
  bash "$ROOT/bench/cpp/script_cost.sh" "$PORT" "$REDIS_PID" "$BUILD/generated/lua" | tee "$WORK/script_cost.txt" || status=1
fi

declare -A RUNNERS=([python]="${PYTHON:-} bench/python/run.py" [node]="node bench/node/run.js" [ruby]="ruby bench/ruby/run.rb")
declare -A FILES=([python]=bench/python/run.py [node]=bench/node/run.js [ruby]=bench/ruby/run.rb)
for lang in python node ruby; do
  [[ $CPP_ONLY != 1 && $HTTP_ONLY != 1 ]] || break
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

# Middleware over real HTTP (bench/http/run.js): Express, Starlette under uvicorn and a Rack app under Puma,
# each with no limiter, with its incumbent (express-rate-limit, `limits`, rack-attack) and with floodwall, as
# apps of their own loaded by autocannon. FW_BENCH_HTTP=0 leaves it out; FW_BENCH_HTTP_ARGS
# adds flags (e.g. "--rounds 1 --seconds 2").
if [[ $CPP_ONLY != 1 && ${FW_BENCH_HTTP:-1} == 1 ]]; then
  redis-cli -p "$PORT" flushall >/dev/null
  echo "bench: node bench/http/run.js"
  rc=0
  # shellcheck disable=SC2086 # FW_BENCH_HTTP_ARGS is a list of flags
  (cd "$ROOT" && FW_BENCH_REDIS_PID=$REDIS_PID FW_BENCH_PYTHON=$PYTHON node bench/http/run.js --markdown "$WORK/http.md" \
    ${FW_BENCH_HTTP_ARGS:-}) \
    >"$WORK/http.json" || rc=$?
  [[ ! -f $WORK/http.md ]] || cat "$WORK/http.md"
  echo "$rc" >"$WORK/http.rc"
  [[ $rc -eq 0 ]] || status=1
fi

# Acquire against Bottleneck (bench/node/acquire_vs_bottleneck.js, #57): 1, 16 and 64 callers waiting
# for their turns at one limit, each on a redis-server of its own. FW_BENCH_ACQUIRE=0 leaves it out.
if [[ $CPP_ONLY != 1 && ${FW_BENCH_ACQUIRE:-1} == 1 ]]; then
  echo "bench: node bench/node/acquire_vs_bottleneck.js"
  rc=0
  (cd "$ROOT" && node bench/node/acquire_vs_bottleneck.js --markdown "$WORK/acquire.md") || rc=$?
  echo "$rc" >"$WORK/acquire.rc"
  [[ $rc -eq 0 ]] || status=1
fi

# ------------------------------------------------------------------------------------ the report
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
export START LOAD_BEFORE LOAD_AFTER WORK ROOT OUT CPP_ONLY HTTP_ONLY ADAPTIVE_ONLY
python3 - <<'PY'
import json, os, platform, subprocess

work, root, out = os.environ["WORK"], os.environ["ROOT"], os.environ["OUT"]

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
    cpp_md = ("(not run: FW_BENCH_HTTP_ONLY)\n" if os.environ["HTTP_ONLY"] == "1"
              else "(not run: FW_BENCH_ADAPTIVE_ONLY)\n" if os.environ["ADAPTIVE_ONLY"] == "1"
              else "**The C++ benchmark failed; see the output of bench/run.sh.**\n")

try:
    script_cost = open(os.path.join(work, "script_cost.txt")).read()
except OSError:
    script_cost = "(not run)"
results["redis_cpu_us_per_call"] = {
    line.rsplit(None, 1)[0]: float(line.rsplit(None, 1)[1])
    for line in script_cost.splitlines()[1:] if line.strip() and line.rsplit(None, 1)[-1].replace(".", "", 1).isdigit()}
adaptive_md = None
try:
    results["adaptive"] = json.load(open(os.path.join(work, "adaptive.json")))
    adaptive_md = open(os.path.join(work, "adaptive.md")).read()
except (OSError, ValueError):
    if os.environ["HTTP_ONLY"] != "1":
        adaptive_md = "**bench/cpp/adaptive_box failed, or was left out; see the output of bench/run.sh.**\n"
langs = {}
for lang, path in (("python", "bench/python/run.py"), ("node", "bench/node/run.js"), ("ruby", "bench/ruby/run.rb")):
    if not os.path.exists(os.path.join(work, lang + ".rc")):
        continue
    text = open(os.path.join(work, lang + ".out")).read()  # (not `out`: that is where the results go)
    rc = int(open(os.path.join(work, lang + ".rc")).read())
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    langs[lang] = {"runner": path, "exit_status": rc, "output": parsed if parsed is not None else text}
results["languages"] = langs
http_md = None
if os.path.exists(os.path.join(work, "http.rc")):
    rc = int(open(os.path.join(work, "http.rc")).read())
    try:
        results["http"] = json.load(open(os.path.join(work, "http.json")))
        http_md = open(os.path.join(work, "http.md")).read()
    except (OSError, ValueError):
        results["http"] = None
    if rc != 0 or http_md is None:
        http_md = f"**bench/http/run.js failed with exit status {rc}; see the output of bench/run.sh.**\n"

with open(os.path.join(out, "results.json"), "w") as f:
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
if adaptive_md is not None:
    md += ["## The adaptive concurrency limit (`bench/cpp/adaptive_box.cpp`)", "",
           "A box of 4 workers, 5 ms +-20% of work per request (a request beyond 4 waits for a worker), 64 callers "
           "in a closed loop through the C ABI on memory:// with `{\"adaptive\": {\"enabled\": true}}` (a shed "
           "caller sends again 5 ms later); latency from admit to release.", "", adaptive_md]
if http_md is not None:
    md += ["## Middleware over real HTTP (`bench/http/run.js`)", "",
           "Each app a process of its own on the same redis-server, the limit never reached; the overhead is "
           "what the limiter adds to the same framework's request with no limiter; CPU per request from "
           "/proc/PID/stat of the app and of the redis-server.", "", http_md]
if os.path.exists(os.path.join(work, "acquire.rc")):
    rc = int(open(os.path.join(work, "acquire.rc")).read())
    acquire_md = open(os.path.join(work, "acquire.md")).read() if os.path.exists(os.path.join(work, "acquire.md")) else None
    if rc != 0 or acquire_md is None:
        acquire_md = f"**bench/node/acquire_vs_bottleneck.js failed with exit status {rc}; see the output of bench/run.sh.**\n"
    md += ["## Acquire against Bottleneck (`bench/node/acquire_vs_bottleneck.js`)", "",
           "Callers in a loop of \"wait for my turn, then go\": floodwall's `fw.acquire` beside Bottleneck with its "
           "ioredis datastore. The two lateness columns are measured differently (docs/benchmarks.md).", "",
           acquire_md]
for lang, r in langs.items():
    md += [f"## {lang} (`{r['runner']}`)", ""]
    if r["exit_status"] != 0:
        md += [f"**Failed with exit status {r['exit_status']}.**", ""]
    shown_output = r["output"] if isinstance(r["output"], str) else json.dumps(r["output"], indent=2)
    md += ["```", shown_output.rstrip(), "```", ""]
with open(os.path.join(out, "RESULTS.md"), "w") as f:
    f.write("\n".join(md))
shown = os.path.relpath(out, root) if os.path.commonpath([out, root]) == root else out
print(f"bench: wrote {shown}/RESULTS.md and {shown}/results.json"
      + (" (FW_BENCH_CPP_ONLY: the C++ figures alone)"
         if os.environ["CPP_ONLY"] == "1" and os.environ["ADAPTIVE_ONLY"] != "1" else "")
      + (" (FW_BENCH_HTTP_ONLY: the HTTP figures alone)" if os.environ["HTTP_ONLY"] == "1" else "")
      + (" (FW_BENCH_ADAPTIVE_ONLY: the adaptive box alone)" if os.environ["ADAPTIVE_ONLY"] == "1" else ""))
PY
exit $status
