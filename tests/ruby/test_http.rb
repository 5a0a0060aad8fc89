# frozen_string_literal: true

require_relative "test_helper"
require "rack"

# Floodwall::Rack in front of a Rack app served over real HTTP by Puma and by WEBrick.
module HTTPSuite
  include FloodwallTest

  SEED_BODY = '{"error":{"type":"rate_limit_error","limit_type":"request_rate","message":"Request rate limit ' \
              'exceeded: 100 requests/second sustained (bursts to 500). Retry after 3s.","limit":500,' \
              '"rate":100,"retry_after":3}}'

  def serve(policy, inner = ->(_env) { [200, { "Content-Type" => "text/plain" }, ["hello"]] }, &block)
    @fw = Floodwall::Client.new(policy)
    fw = @fw
    app = Rack::Builder.new do
      use Floodwall::Rack, client: fw, key: ->(env) { env["HTTP_X_API_KEY"] },
                           cost: ->(env) { Integer(env.fetch("HTTP_X_COST", "1")) }
      run inner
    end
    FloodwallTest::Server.open(app, server_kind, &block)
  ensure
    @fw&.close
  end

  def test_200_429_and_their_exact_headers_and_body
    serve(request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 }) do |server|
      ok = server.get("/", "X-API-Key" => "acme")
      assert_equal "200", ok.code
      assert_equal "hello", ok.body
      assert_equal '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"', ok["RateLimit-Policy"]
      assert_equal '"request_rate";r=499;t=1, "concurrency";r=19', ok["RateLimit"]
      assert_equal %w[500 499 1], %w[Limit Remaining Reset].map { |h| ok["RateLimit-#{h}"] }
      assert_nil ok["Retry-After"]

      server.get("/", "X-API-Key" => "acme", "X-Cost" => "499")
      rejected = server.get("/", "X-API-Key" => "acme", "X-Cost" => "300")
      assert_equal "429", rejected.code
      assert_equal SEED_BODY, rejected.body
      assert_equal "3", rejected["Retry-After"]
      assert_equal "application/json", rejected["Content-Type"]
      assert_match(/\A\d+\z/, rejected["RateLimit-Remaining"])
      assert_equal SEED_BODY.bytesize.to_s, rejected["Content-Length"]
    end
  end

  def test_503_from_the_fleet_shedder_and_release_after_each_response
    gate = Queue.new
    inner = lambda do |env|
      gate.pop if env["PATH_INFO"] == "/slow"
      [200, { "Content-Type" => "text/plain" }, ["done"]]
    end
    serve({ fleet: { capacity: 1 } }, inner) do |server|
      slow = Thread.new { server.get("/slow", "X-API-Key" => "a") }
      assert eventually { @fw.admit(tenant: "probe").tap { |d| @fw.release(d) }.status == 503 }
      shed = server.get("/", "X-API-Key" => "b")
      assert_equal "503", shed.code
      assert_equal "fleet", JSON.parse(shed.body).dig("error", "limit_type")
      assert_operator Integer(shed["Retry-After"]), :>=, 1
      gate << :go
      assert_equal "200", slow.value.code
      assert eventually { server.get("/", "X-API-Key" => "b").code == "200" }, "the slow request's slot came back"
    end
  end

  def test_the_slot_is_released_when_the_app_raises
    serve({ concurrency: { limit: 1 } }, ->(_env) { raise "boom" }) do |server|
      3.times { assert_equal "500", server.get("/", "X-API-Key" => "acme").code }
      d = @fw.admit(tenant: "acme")
      assert d.allowed?, "no slot leaked by the raising app"
    end
  end
end

class TestHTTPPuma < Minitest::Test
  include HTTPSuite

  def server_kind = :puma

  # The client reads one chunk of a streamed body and hangs up: Puma closes the body, which releases.
  def test_the_slot_is_released_when_the_client_disconnects_mid_stream
    streamed = Enumerator.new do |y|
      1000.times do |i|
        y << ("chunk #{i} " * 1000) << "\n"
        sleep 0.01
      end
    end
    serve({ concurrency: { limit: 1 } }, ->(_env) { [200, { "Content-Type" => "text/plain" }, streamed] }) do |server|
      socket = TCPSocket.new("127.0.0.1", server.port)
      socket.write("GET / HTTP/1.1\r\nHost: x\r\nX-API-Key: acme\r\n\r\n")
      assert_match(%r{\AHTTP/1.1 200}, socket.readpartial(1024))
      refute @fw.admit(tenant: "acme").allowed?, "the slot is held while the body streams"
      socket.close
      assert eventually(timeout: 10) { @fw.admit(tenant: "acme").tap { |d| @fw.release(d) }.allowed? },
             "the slot should come back once Puma sees the disconnect"
    end
  end
end

# Puma's threads admit on Redis in parallel: while Redis holds every reply back (SIGSTOP), four requests
# are all past the middleware's entry and waiting in their admits at the same time.
class TestHTTPPumaRedis < Minitest::Test
  include FloodwallTest

  def test_pumas_threads_do_not_serialise_behind_one_admit
    redis = FloodwallTest::Redis.instance
    redis.command("FLUSHALL") # the Redis suite's tests share this server and may have left "acme" drained
    fw = Floodwall::Client.new(store: redis.url, request_rate: { rate: 100, burst: 100 }, redis: { deadline_ms: 5000 })
    lock = Mutex.new
    entered = []
    admitted = []
    stamp = ->(list) { lock.synchronize { list << Process.clock_gettime(Process::CLOCK_MONOTONIC) } }
    app = Rack::Builder.new do
      use(Class.new do
        define_method(:initialize) { |inner| @inner = inner }
        define_method(:call) { |env| stamp.call(entered) unless env["PATH_INFO"] == "/warm"; @inner.call(env) }
      end)
      use Floodwall::Rack, client: fw, key: ->(_env) { "acme" }
      run(lambda do |env|
        stamp.call(admitted) unless env["PATH_INFO"] == "/warm"
        [200, { "Content-Type" => "text/plain" }, ["ok"]]
      end)
    end
    FloodwallTest::Server.open(app, :puma) do |server|
      assert_equal "200", server.get("/warm").code
      requests = nil
      redis.stopped do
        requests = Array.new(4) { Thread.new { server.get("/").code } }
        all_in = eventually(timeout: 10) { lock.synchronize { entered.size } == 4 }
        assert all_in, "four requests should all be in the middleware while Redis holds their admits back " \
                       "(#{lock.synchronize { entered.size }} are)"
        assert_empty lock.synchronize { admitted.dup }, "no request should pass its admit while Redis is stopped"
      end
      assert_equal %w[200 200 200 200], requests.map(&:value)
      t0 = entered.min
      puts format("\n  Puma on Redis: entered the middleware at %s ms, admitted at %s ms",
                  entered.map { |t| ((t - t0) * 1000).round }, admitted.map { |t| ((t - t0) * 1000).round })
      assert_operator entered.max, :<, admitted.min, "all four requests should have been admitting together"
    end
  ensure
    fw&.close
  end
end

class TestHTTPWEBrick < Minitest::Test
  include HTTPSuite

  def server_kind = :webrick
end
