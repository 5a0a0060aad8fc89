# frozen_string_literal: true

# One Rack app behind one limiter (FW_HTTP_LIMITER), for bench/http/run.js, served by Puma: none;
# rack-attack's throttle with a Redis cache store (Debian's ruby-rack-attack and ruby-redis); or floodwall's
# Rack middleware on memory:// or Redis with the README's example policy (100 requests/s per tenant, bursts
# to 500, 20 in flight). The tenant is the X-API-Key header in every variant; no limit is ever reached at the
# load the benchmark offers (1,000 tenants).
require "json"
require "set"

limiter = ENV.fetch("FW_HTTP_LIMITER", "none")
redis_url = ENV.fetch("FW_BENCH_REDIS", "")
fw = nil

case limiter
when "floodwall-memory", "floodwall-redis"
  require_relative "../ruby/load_floodwall"
  load_floodwall
  require "floodwall/rack"
  fw = Floodwall::Client.new(store: limiter == "floodwall-memory" ? "memory://" : redis_url, prefix: "fwhttp",
                             request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 })
  issued = Set.new(Array.new(1000) { |i| "tenant-#{i}" }) # the keys run.js sends: verify: looks them up
  use Floodwall::Rack, client: fw, skip: ->(env) { env["PATH_INFO"] == "/__sources" },
                       verify: ->(key, _env) { issued.include?(key) }
when "rack-attack-redis"
  require "redis"
  require "rack/attack"
  Rack::Attack.cache.store = Redis.new(url: redis_url)
  Rack::Attack.throttle("req/tenant", limit: 30_000, period: 60) { |req| req.get_header("HTTP_X_API_KEY") }
  use Rack::Attack
when "none"
  nil
else
  abort "FW_HTTP_LIMITER: unknown limiter #{limiter}"
end

sources = ->(_env) { [200, { "content-type" => "application/json" }, [JSON.generate(fw&.metrics&.fetch("sources"))]] }
map("/__sources") { run sources }
map("/") { run ->(_env) { [200, { "content-type" => "application/json" }, ['{"ok":true}']] } }
