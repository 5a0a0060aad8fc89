# frozen_string_literal: true

require_relative "test_helper"
require "rack"

# Floodwall::Rack's max_wait: option (#57 part 2) over real HTTP (Puma), on memory:// and a real
# redis-server: a request the bucket would refuse waits for its turn instead of a 429 when that turn is
# within max_wait; off by default; beyond max_wait a 429; a bad value named.
module RackWaitTests
  HELLO = ->(_env) { [200, { "content-type" => "text/plain" }, ["hello"]] }

  def serve(policy, **options, &block)
    fw = client(policy)
    app = Rack::Builder.new do
      use Floodwall::Rack, client: fw, key: ->(_env) { "acme" }, routes: false, **options
      run HELLO
    end
    FloodwallTest::Server.open(app, :puma, &block)
  end

  def test_off_by_default_a_refusal_comes_at_once
    serve({ request_rate: { rate: 5, burst: 1 } }) do |server|
      assert_equal "200", server.get("/hello").code
      assert_equal "429", server.get("/hello").code
    end
  end

  def test_with_max_wait_the_request_waits_for_its_turn
    serve({ request_rate: { rate: 5, burst: 1 } }, max_wait: 1) do |server|
      assert_equal "200", server.get("/hello").code
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      r = server.get("/hello")
      took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      assert_equal "200", r.code
      assert_equal "hello", r.body
      assert_equal "1", r["ratelimit-limit"]
      assert_operator took, :>=, 0.15, "it waited for its token (200 ms at 5/s, less the time since the first)"
    end
  end

  def test_beyond_max_wait_it_is_still_a_429
    serve({ request_rate: { rate: 1, burst: 1 } }, max_wait: 0.2) do |server|
      assert_equal "200", server.get("/hello").code
      r = server.get("/hello") # its turn is a second away
      assert_equal "429", r.code
      assert_operator r["retry-after"].to_i, :>=, 1
    end
  end

  def test_concurrent_requests_are_all_served_in_turn
    rate = 20.0
    burst = 10 # max_wait caps at burst / rate: 0.5 s
    serve({ request_rate: { rate: rate, burst: burst } }, max_wait: 2) do |server|
      results = Queue.new
      Array.new(8) { Thread.new { results << [server.get("/hello").code, Process.clock_gettime(Process::CLOCK_MONOTONIC)] } }
           .each(&:join)
      all = Array.new(results.size) { results.pop }
      assert_equal ["200"] * 8, all.map(&:first), "nothing refused within max_wait"
    end
  end

  def test_a_bad_max_wait_is_refused_naming_it
    fw = client(request_rate: { rate: 5, burst: 1 })
    [-1, Float::NAN, Float::INFINITY, "1", true].each do |bad|
      err = assert_raises(ArgumentError) { Floodwall::Rack.new(HELLO, client: fw, max_wait: bad) }
      assert_match(/max_wait/, err.message)
    end
  end
end

class TestRackWaitMemory < Minitest::Test
  include RackWaitTests

  def client(policy)
    Floodwall::Client.new({ store: "memory://" }.merge(policy)).tap { |c| (@clients ||= []) << c }
  end

  def teardown
    (@clients || []).each(&:close)
  end
end

class TestRackWaitRedis < Minitest::Test
  include RackWaitTests

  def client(policy)
    Floodwall::Client.new({ store: FloodwallTest::Redis.instance.url, prefix: "rw#{SecureRandom.hex(6)}",
                            redis: { deadline_ms: 5000 } }.merge(policy)).tap { |c| (@clients ||= []) << c }
  end

  def teardown
    (@clients || []).each(&:close)
  end
end
