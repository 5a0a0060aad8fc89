# frozen_string_literal: true

require_relative "test_helper"
require "sinatra/base"

# Route rules with Floodwall::Rack mounted app-wide and no route: option, over real HTTP (Puma): a plain
# Rack app and a Sinatra app know no route before they run, so the request's path is what the policy's
# globs match. On memory:// and on Redis. (Rails, whose routes are known before the app runs: test_rails.rb.)
module RouteRules
  include FloodwallTest

  ORDERS = { name: "orders", routes: ["/orders", "/orders/*"], rate: 0.001, burst: 2 }.freeze

  # A report says it is in (RouteRules.entered), then waits for the test's go (RouteRules.gate).
  RACK_APP = lambda do |env|
    RouteRules.hold if env["PATH_INFO"].start_with?("/reports/")
    [200, { "Content-Type" => "text/plain" }, ["rack #{env["PATH_INFO"]}\n"]]
  end

  class SinatraApp < Sinatra::Base
    set :environment, :production
    set :show_exceptions, false
    get("/orders") { "sinatra orders\n" }
    get("/orders/:id") { "sinatra order #{params[:id]}\n" }
    get("/reports/:id") do
      RouteRules.hold
      "sinatra report #{params[:id]}\n"
    end
    get("/other") { "sinatra other\n" }
  end

  class << self
    attr_accessor :gate, :entered

    def hold
      entered << true
      gate.pop
    end
  end

  def setup
    RouteRules.gate = Queue.new
    RouteRules.entered = Queue.new
  end

  def serve(policy, &block)
    @fw = Floodwall::Client.new(store_policy.merge(policy))
    fw = @fw
    inner = app
    rack = Rack::Builder.new do
      use Floodwall::Rack, client: fw
      run inner
    end
    FloodwallTest::Server.open(rack, :puma, &block)
  ensure
    @fw&.close
  end

  def orders_policy
    { request_rate: { rate: 1000, burst: 1000, limits: [ORDERS] } }
  end

  def test_a_limit_on_orders_globs_limits_get_orders_42
    serve(orders_policy) do |server|
      codes = Array.new(3) { server.get("/orders/42").code }
      assert_equal %w[200 200 429], codes
      refused = server.get("/orders/42")
      assert_equal "orders", JSON.parse(refused.body).dig("error", "policy"), refused.body
      assert_match(/"orders";q=2;w=2000/, refused["RateLimit-Policy"])
      assert_equal "429", server.get("/orders").code, "/orders is the same rule's, and its two are spent"
      assert_equal "429", server.get("/orders/7/").code
      other = server.get("/other")
      assert_equal "200", other.code, "a path no glob matches has no rule of its own"
      refute_match(/"orders"/, other["RateLimit-Policy"])
    end
  end

  def test_concurrency_routes_glob_is_honoured
    serve(concurrency: { limit: 1, routes: ["/reports/*"] }) do |server|
      held = Thread.new { server.get("/reports/1") }
      Timeout.timeout(10) { RouteRules.entered.pop } # the first report is in the app, holding the one slot
      assert_equal "429", server.get("/reports/2").code, "the second report waits for none"
      assert_equal "200", server.get("/other").code, "a path outside the glob takes no slot"
      RouteRules.gate << :go
      assert_equal "200", held.value.code
      RouteRules.gate << :go
      assert eventually { server.get("/reports/3").code == "200" }, "the slot came back after the response"
    end
  end

  def test_the_metrics_count_the_policys_globs_not_one_family_per_url
    serve(orders_policy) do |server|
      (1..6).each { |id| server.get("/orders/#{id}", from: "127.0.0.#{id + 1}") }
      server.get("/other")
      families = @fw.metrics.fetch("routes").keys
      assert_includes families, "/orders/*"
      assert_empty families - ["default", "/orders", "/orders/*"], families.inspect
      refute_match(%r{route="/orders/\d}, @fw.prometheus)
    end
  end
end

class TestRouteRulesRackMemory < Minitest::Test
  include RouteRules
  def app = RouteRules::RACK_APP
  def store_policy = { store: "memory://" }
end

class TestRouteRulesSinatraMemory < Minitest::Test
  include RouteRules
  def app = RouteRules::SinatraApp
  def store_policy = { store: "memory://" }
end

class TestRouteRulesRackRedis < Minitest::Test
  include RouteRules
  def app = RouteRules::RACK_APP

  def store_policy
    redis = FloodwallTest::Redis.instance
    redis.command("FLUSHALL")
    { store: redis.url, redis: { deadline_ms: 5000, connect_timeout_ms: 5000 } } # a loaded machine: never the fallback
  end
end

class TestRouteRulesSinatraRedis < Minitest::Test
  include RouteRules
  def app = RouteRules::SinatraApp

  def store_policy
    redis = FloodwallTest::Redis.instance
    redis.command("FLUSHALL")
    { store: redis.url, redis: { deadline_ms: 5000, connect_timeout_ms: 5000 } } # a loaded machine: never the fallback
  end
end
