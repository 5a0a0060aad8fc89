# frozen_string_literal: true

# floodwall from Ruby, in one run:
#   1. the per-call cost of Client#admit on the memory store (the binding's overhead over the core);
#   2. admits/s on Redis, floodwall against rack-attack's throttle on the same throwaway redis-server,
#      as raw calls and as Rack middleware around the same empty app, with 1 and 4 threads.
#
#   ruby bench/ruby/run.rb            (QUICK=1 for a shorter run)
#
# It starts its own throwaway redis-server, or uses FW_BENCH_REDIS=redis://127.0.0.1:PORT/0 (bench/run.sh).
# floodwall is loaded as an installed gem; when it is not installed, the gem is built and installed into
# build-ruby/bench-gems first, as packaging/test-ruby.sh does. rack-attack (ruby-rack-attack) needs a
# Redis client for a Redis store: Debian's ruby-redis.
require "etc"
require "fileutils"
require "rbconfig"
require "socket"

ROOT = File.expand_path("../..", __dir__)
QUICK = ENV["QUICK"] == "1"
require_relative "load_floodwall"

load_floodwall
require "floodwall/rack"
require "rack/mock"
begin
  require "redis"
  require "rack/attack"
rescue LoadError => e
  abort "rack-attack with a Redis store needs Debian's ruby-rack-attack and ruby-redis (#{e.message})"
end

def now
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

# Seconds for `calls` calls split over `threads` threads.
def run_once(calls, threads, fn)
  per_thread = calls / threads
  t0 = now
  Array.new(threads) { |t| Thread.new { per_thread.times { |i| fn.call(t, i) } } }.each(&:join)
  now - t0
end

# Runs `calls` calls split over `threads` threads, `rounds` times; returns the best round's seconds (for the
# per-call cost of the memory store, where the least disturbed round is the figure).
def measure(calls, threads: 1, rounds: 5, &fn)
  Array.new(rounds) { run_once(calls, threads, fn) }.min
end

# Each contender once in turn, `rounds` times, so that a busy minute on this shared box falls on all of
# them; returns every contender's seconds per round.
def alternate(cases, calls, threads:, rounds:)
  times = cases.transform_values { [] }
  # Every other round in reverse, so that a drift within a round falls on both sides of a ratio.
  rounds.times do |i|
    order = i.odd? ? cases.to_a.reverse : cases.to_a
    order.each { |name, fn| times[name] << run_once(calls, threads, fn) }
  end
  times
end

def median(xs)
  s = xs.sort
  s.size.odd? ? s[s.size / 2] : (s[s.size / 2 - 1] + s[s.size / 2]) / 2.0
end

ROWS = []
def row(store, name, calls, seconds)
  ROWS << [store, name, calls, seconds]
  printf("  %-7s %-48s %9d  %9.2f us  %11.0f/s\n", store, name, calls, seconds / calls * 1e6, calls / seconds)
end

def start_redis
  port = TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
  pid = Process.spawn("redis-server", "--port", port.to_s, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                      out: File::NULL, err: File::NULL)
  redis = Redis.new(host: "127.0.0.1", port: port)
  100.times do
    break if (redis.ping rescue nil) == "PONG"

    sleep 0.05
  end
  [pid, port, redis]
end

if ENV["FW_BENCH_REDIS"] # bench/run.sh's redis-server
  port = Integer(ENV["FW_BENCH_REDIS"][%r{\Aredis://127\.0\.0\.1:(\d+)(/0)?\z}, 1] ||
                 abort("FW_BENCH_REDIS: expected redis://127.0.0.1:PORT/0"))
  redis = Redis.new(host: "127.0.0.1", port: port)
else
  redis_pid, port, redis = start_redis
  at_exit do
    Process.kill("TERM", redis_pid)
    Process.wait(redis_pid)
  end
end

puts "floodwall #{Floodwall::VERSION} (core #{Floodwall::Native.version}), ruby #{RUBY_VERSION}, " \
     "rack #{Rack.release}, rack-attack #{Gem.loaded_specs["rack-attack"]&.version || "?"}, redis-rb #{Redis::VERSION}, " \
     "redis-server #{redis.info["redis_version"]} on 127.0.0.1:#{port}, #{Etc.nprocessors rescue "?"} cores"
printf("  %-7s %-48s %9s  %12s  %13s\n", "store", "what", "calls", "per call", "rate")

# 1. Memory store: best of several rounds, one tenant of a set of 64, nothing rejected.
memory = Floodwall::Client.new(request_rate: { rate: 1e6, burst: 1_000_000_000 })
tenants = Array.new(64) { |i| "tenant-#{i}" }
n = QUICK ? 100_000 : 500_000
measure(n / 10) { |_t, i| memory.admit(tenant: tenants[i & 63]) } # warm-up
row("memory", "Client#admit", n, measure(n) { |_t, i| memory.admit(tenant: tenants[i & 63]) })
row("memory", "Client#admit + #release", n,
    measure(n) { |_t, i| memory.release(memory.admit(tenant: tenants[i & 63])) })
row("memory", "Client#admit { } (block form, releases)", n,
    measure(n) { |_t, i| memory.admit(tenant: tenants[i & 63]) { nil } })
handle = memory.instance_variable_get(:@handle)
row("memory", "Native.admit (the generated layer alone)", n,
    measure(n) { |_t, i| Floodwall::Native.admit(handle, tenants[i & 63], nil, "GET", 1, false, false) })
row("memory", "empty loop (the measuring loop itself)", n, measure(n) { |_t, _i| nil })

# 2. Redis: the same empty app behind each limiter; every request allowed (the limits are far away).
fw = Floodwall::Client.new(store: "redis://127.0.0.1:#{port}/0", request_rate: { rate: 1e6, burst: 1_000_000_000 })
Rack::Attack.cache.store = Redis.new(host: "127.0.0.1", port: port)
Rack::Attack.throttle("req/tenant", limit: 1_000_000_000, period: 60) { |req| req.get_header("HTTP_X_API_KEY") }
app = ->(_env) { [200, { "Content-Type" => "text/plain" }, ["ok"]] }
floodwall_app = Floodwall::Rack.new(app, client: fw, key: ->(env) { env["HTTP_X_API_KEY"] })
attack_app = Rack::Attack.new(app)
env = Rack::MockRequest.env_for("/stops", "HTTP_X_API_KEY" => "tenant-0")
envs = tenants.map { |t| env.merge("HTTP_X_API_KEY" => t) }
serve = ->(rack_app, i) { rack_app.call(envs[i & 63].dup)[2].tap { |body| body.close if body.respond_to?(:close) } }

r = QUICK ? 5_000 : 20_000
serve.call(floodwall_app, 0) && serve.call(attack_app, 0) # connected, scripts loaded
rounds = QUICK ? 1 : 5
puts "  (Redis rows: medians of #{rounds} rounds, the four contenders alternating in each round)"
results = {}
[1, 4].each do |threads|
  s = threads > 1 ? "s" : ""
  cases = {
    "floodwall Client#admit, #{threads} thread#{s}" => ->(t, i) { fw.admit(tenant: tenants[(i + t) & 63]) },
    "rack-attack cache.count, #{threads} thread#{s}" =>
      ->(t, i) { Rack::Attack.cache.count("req/tenant:#{tenants[(i + t) & 63]}", 60) },
    "Floodwall::Rack middleware, #{threads} thread#{s}" => ->(t, i) { serve.call(floodwall_app, i + t) },
    "Rack::Attack throttle middleware, #{threads} thread#{s}" => ->(t, i) { serve.call(attack_app, i + t) }
  }
  times = alternate(cases, r, threads: threads, rounds: rounds)
  times.each { |name, ts| row("redis", name, r, median(ts)) }
  raw, attack_raw, mw, attack_mw = times.values
  # The median of each round's own ratio: the two contenders ran in the same minute.
  results[threads] = {
    raw: attack_raw.zip(raw).map { |a, f| a / f },
    mw: attack_mw.zip(mw).map { |a, f| a / f }
  }
end

puts
results.each do |threads, ratio|
  printf("  floodwall / rack-attack on Redis, %d thread%s: %.2fx raw (rounds %.2f-%.2f), %.2fx as middleware " \
         "(rounds %.2f-%.2f) (higher is better)\n", threads, threads > 1 ? "s" : "", median(ratio[:raw]),
         ratio[:raw].min, ratio[:raw].max, median(ratio[:mw]), ratio[:mw].min, ratio[:mw].max)
end
memory_admit = ROWS.find { |row| row[0] == "memory" && row[1] == "Client#admit" }
printf("  memory Client#admit: %.2f us per call (goal: under 2 us)\n", memory_admit[3] / memory_admit[2] * 1e6)
fw.close
memory.close
