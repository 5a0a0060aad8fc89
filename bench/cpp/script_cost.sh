#!/usr/bin/env bash
# bench/cpp/script_cost.sh PORT REDIS_PID [LUA_DIR] - where the redis-server's time goes in
# lua/tenant_admit.lua. LUA_DIR holds the scripts as Redis gets them (with lua/lib/ included: the build's
# generated/lua; default build/generated/lua).
#
# Runs variants of the script (each a subset of what tenant_admit.lua does for a request-rate-only
# admit) through redis-benchmark, pipelined 16 deep over 64 connections, and prints the redis-server's
# CPU time per call (from /proc/PID/stat), the lowest of REPS runs: CPU time is what a call costs even
# when the box is shared. Then what each limiter asks of Redis for one request, the same way: floodwall's
# admit with a concurrency slot and its release, and the incumbents' commands (rate-limit-redis' script,
# from node_modules; rack-attack's INCRBY and EXPIRE). It FLUSHALLs: use a throwaway server, never one
# that holds data.
set -euo pipefail
PORT=${1:?usage: script_cost.sh PORT REDIS_PID}
PID=${2:?usage: script_cost.sh PORT REDIS_PID}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LUA_DIR=${3:-$ROOT/build/generated/lua}
[[ -f $LUA_DIR/tenant_admit.lua ]] || { echo "script_cost: $LUA_DIR/tenant_admit.lua is missing (build first)" >&2; exit 1; }
N=${N:-100000}
REPS=${REPS:-3}
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }

# The arguments RedisStore sends for a request-rate-only admit (bucket 1,000,000/s, burst 1,000,000): the
# bucket's key and the tenant's control record's (redis-benchmark picks each __rand_int__ on its own: another
# tenant's record, as absent), the flags, rate, burst and cost, and the tier last ('': none).
ARGS=(2 'floodwall:{__rand_int__}:rate' 'floodwall:{__rand_int__}:ctl' E-- 1000000000000 1000000000000 1000000 '')
names=(trivial reply7 time get set_px get_set time_get_set parse_format gcra_int tenant_admit.lua)
bodies=(
  'return 1'
  'return {1, 1, 1, 1, 0, 0, 0}'
  "local t = redis.call('TIME') return 1"
  "local s = redis.call('GET', KEYS[1]) return 1"
  "redis.call('SET', KEYS[1], '999999000000:1764693137000000', 'PX', '2000') return 1"
  "local s = redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], '999999000000:1764693137000000', 'PX', '2000') return 1"
  "local t = redis.call('TIME') local s = redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], '999999000000:1764693137000000', 'PX', '2000') return 1"
  "local st = '999999000000:1764693137000000' local sep = string.find(st, ':', 1, true) local a = tonumber(string.sub(st, 1, sep - 1)) local b = tonumber(string.sub(st, sep + 1)) local c = tonumber(ARGV[2]) + tonumber(ARGV[3]) + tonumber(ARGV[4]) local x = string.format('%d:%d', a, b) local y = string.format('%d', 2000) return 1"
  # One integer of state (GCRA's theoretical arrival time, us): TIME, GET, compare, SET PX, the same reply.
  "local t = redis.call('TIME') local now = t[1] * 1000000 + t[2] local tat = tonumber(redis.call('GET', KEYS[1]) or now) redis.call('SET', KEYS[1], string.format('%d', math.max(tat, now) + 1), 'PX', '2000') return {1, 1, 1, 1, 0, 0, 0}"
  "$(cat "$LUA_DIR/tenant_admit.lua")"
)
# The redis-server's CPU per call of one pipelined redis-benchmark command (its arguments), best of REPS.
best_of() {
  local best="" c0 c1 us
  for _ in $(seq "$REPS"); do
    c0=$(cpu)
    redis-benchmark -p "$PORT" -c 64 -n "$N" -P 16 -r 1000 --csv "$@" >/dev/null
    c1=$(cpu)
    us=$(awk -v a="$c0" -v b="$c1" -v n="$N" -v t="$ticks" 'BEGIN { printf "%.2f", (b - a) * 1e6 / t / n }')
    if [[ -z $best ]] || awk -v x="$us" -v y="$best" 'BEGIN { exit !(x < y) }'; then best=$us; fi
  done
  echo "$best"
}

printf '%-18s %s\n' variant "redis-server CPU per call (us), best of $REPS"
for i in "${!names[@]}"; do
  redis-cli -p "$PORT" FLUSHALL >/dev/null  # each variant starts from no keys (their values differ)
  sha=$(redis-cli -p "$PORT" SCRIPT LOAD "${bodies[$i]}")
  printf '%-18s %s\n' "${names[$i]}" "$(best_of EVALSHA "$sha" "${ARGS[@]}")"
done
redis-cli -p "$PORT" FLUSHALL >/dev/null
seed=$(cat "$ROOT/bench/seed/request_rate_limiter.lua")
printf '%-18s %s\n' "seed (EVAL text)" "$(best_of EVAL "$seed" 2 'request_rate_limiter.__rand_int__.tokens' \
  'request_rate_limiter.__rand_int__.timestamp' 1000000 1000000 "$(date +%s)" 1)"

# What each limiter asks of Redis for one request, pipelined as above: the least Redis CPU it can cost,
# whatever its client batches. floodwall on the README's example policy (a request rate and a concurrency
# slot: the four keys and nine arguments RedisStore sends, each slot set holding one entry) and the ZREM that
# releases the slot; express-rate-limit's rate-limit-redis (its increment script, as it sends it); rack-attack
# with a Redis cache store (INCRBY and EXPIRE, pipelined together: one call each here).
redis-cli -p "$PORT" FLUSHALL >/dev/null
admit=$(redis-cli -p "$PORT" SCRIPT LOAD "$(cat "$LUA_DIR/tenant_admit.lua")")
slot=$(best_of EVALSHA "$admit" 4 'floodwall:{__rand_int__}:rate' 'floodwall:{__rand_int__}:conc' floodwall:fleet \
  'floodwall:{__rand_int__}:ctl' EE- 1000000000000 1000000000000 1000000 20 60000000 0 0 0123456789abcdef '')
zrem=$(best_of ZREM 'floodwall:{__rand_int__}:conc' 0123456789abcdef)
erl_js=$ROOT/node_modules/rate-limit-redis/dist/index.cjs
erl="-"  # printed as not measured when the Node packages are not installed (bench/run.sh installs them)
if [[ -f $erl_js ]]; then
  erl_sha=$(redis-cli -p "$PORT" SCRIPT LOAD "$(sed -n '/^const scripts/,/^};/p' "$erl_js" |
    awk '/increment: `/{on=1; next} on && /`/{exit} on' | sed -e 's/^[[:space:]]*//')")
  erl=$(best_of EVALSHA "$erl_sha" 1 'erl:__rand_int__' 0 60000)
else
  echo "script_cost: $erl_js is missing (npm install): rate-limit-redis not measured" >&2
fi
incrby=$(best_of INCRBY 'ra:__rand_int__' 1)
expire=$(best_of EXPIRE 'ra:__rand_int__' 60)
redis-cli -p "$PORT" FLUSHALL >/dev/null
printf '%-18s %s\n' "admit with a slot" "$slot" "release (ZREM)" "$zrem" "rate-limit-redis" "$erl" "INCRBY" "$incrby" \
  "EXPIRE" "$expire"
awk -v a="$slot" -v z="$zrem" -v e="$erl" -v i="$incrby" -v x="$expire" 'BEGIN {
  printf "per request, floodwall (rate + slot) %.2f\n", a + z
  if (e != "-") printf "per request, rate-limit-redis %.2f\n", e
  printf "per request, rack-attack %.2f\n", i + x }'
