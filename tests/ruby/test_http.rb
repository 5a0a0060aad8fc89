# frozen_string_literal: true

require_relative "test_helper"
require "rack"

# Floodwall::Rack in front of a Rack app served over real HTTP by Puma and by WEBrick.
module HTTPSuite
  include FloodwallTest

  SEED_BODY = '{"error":{"type":"rate_limit_error","limit_type":"request_rate","message":"Request rate limit ' \
              'exceeded: this request costs 300 tokens; the limit is 100 tokens/second sustained (bursts to 500). ' \
              'Retry after 3s.","limit":500,"rate":100,"cost":300,"retry_after":3}}'

  HELLO = ->(_env) { [200, { "Content-Type" => "text/plain" }, ["hello"]] }
  # The app's authentication: the API keys and tokens it issued, the only ones that name a tenant.
  ISSUED = %w[acme a b t0k3n].freeze
  VERIFY = ->(credential, _env) { ISSUED.include?(credential) }

  # The middleware with its defaults (the core derives the tenant) and the app's verify: hook, unless the
  # test gives options.
  def serve(policy, inner = HELLO, options = {}, &block)
    @fw = Floodwall::Client.new(policy)
    fw = @fw
    options = { cost: ->(env) { Integer(env.fetch("HTTP_X_COST", "1")) }, verify: VERIFY }.merge(options)
    app = Rack::Builder.new do
      use Floodwall::Rack, client: fw, **options
      run inner
    end
    FloodwallTest::Server.open(app, server_kind, &block)
  ensure
    @fw&.close
  end

  # The tenant the middleware gives a request with this (issued) X-API-Key, to look at its bucket directly.
  def api_key(key)
    @fw.tenant_key(headers: [["X-API-Key", key]], verified: true)
  end

  def test_200_429_and_their_exact_headers_and_body
    serve(request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 }) do |server|
      ok = server.get("/", "X-API-Key" => "acme")
      assert_equal "200", ok.code
      assert_equal "hello", ok.body
      assert_equal '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"', ok["RateLimit-Policy"]
      assert_equal '"concurrency";r=19', ok["RateLimit"]
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

  def test_the_policys_headers_choose_the_ietf_fields_alone_or_none
    limit_headers = ->(r) { r.to_hash.keys.select { |h| h.start_with?("ratelimit") || h == "retry-after" }.sort }
    serve(request_rate: { rate: 1, burst: 1 }, headers: "ietf") do |server|
      ok = server.get("/", "X-API-Key" => "acme")
      refused = server.get("/", "X-API-Key" => "acme")
      assert_equal ["200", %w[ratelimit ratelimit-policy]], [ok.code, limit_headers.(ok)]
      assert_equal ["429", %w[ratelimit ratelimit-policy retry-after]], [refused.code, limit_headers.(refused)]
    end
    serve(request_rate: { rate: 1, burst: 1 }, headers: "none") do |server|
      ok = server.get("/", "X-API-Key" => "acme")
      refused = server.get("/", "X-API-Key" => "acme")
      assert_equal ["200", []], [ok.code, limit_headers.(ok)]
      assert_equal ["429", %w[retry-after]], [refused.code, limit_headers.(refused)]
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
      d = @fw.admit(tenant: api_key("acme"))
      assert d.allowed?, "no slot leaked by the raising app"
    end
  end

  # The default tenant is the core's: one verified Bearer token is one bucket whatever address it comes
  # from, and without a credential each address (REMOTE_ADDR, here 127.0.0.x) is a bucket of its own.
  def test_one_bearer_token_from_two_addresses_is_one_bucket
    serve(request_rate: { rate: 0.001, burst: 3 }) do |server|
      token = { "Authorization" => "Bearer t0k3n" }
      assert_equal "2", server.get("/", token, from: "127.0.0.2")["RateLimit-Remaining"]
      assert_equal "1", server.get("/", token, from: "127.0.0.3")["RateLimit-Remaining"], "one bucket"
      assert_equal "0", server.get("/", token, from: "127.0.0.4")["RateLimit-Remaining"]
      assert_equal "429", server.get("/", token, from: "127.0.0.5").code
      %w[127.0.0.2 127.0.0.3].each do |addr|
        assert_equal "2", server.get("/", {}, from: addr)["RateLimit-Remaining"],
                     "#{addr}: no credential, its own bucket"
      end
      assert_equal 1, @fw.admit(tenant: "ip:127.0.0.2").remaining, "the peer address is the server's REMOTE_ADDR"
    end
  end

  # A key: that returns nil leaves the tenant to the core; one that returns "" is one anonymous tenant,
  # limited together from every address.
  def test_a_key_returning_nil_or_an_empty_string
    serve({ request_rate: { rate: 0.001, burst: 2 } }, HELLO, key: ->(env) { env["HTTP_X_TENANT"] }) do |server|
      assert_equal "1", server.get("/", { "X-API-Key" => "acme" }, from: "127.0.0.2")["RateLimit-Remaining"]
      assert_equal 0, @fw.admit(tenant: api_key("acme")).remaining, "nil: the core's key (the API key's)"

      assert_equal "1", server.get("/", { "X-Tenant" => "" }, from: "127.0.0.2")["RateLimit-Remaining"]
      assert_equal "0", server.get("/", { "X-Tenant" => "" }, from: "127.0.0.3")["RateLimit-Remaining"]
      rejected = server.get("/", { "X-Tenant" => "" }, from: "127.0.0.4")
      assert_equal "429", rejected.code, "an empty key is limited, as one tenant from every address"
      assert_equal "application/json", rejected["Content-Type"]
      refute @fw.admit(tenant: "").allowed?
    end
  end

  # A limit of its own for POSTs and a daily quota for every request: the 429 names the limit in its body,
  # and RateLimit-Policy lists the limits and quotas that applied.
  def test_a_429_from_a_named_limit_names_it
    policy = { store: "memory://",
               request_rate: { rate: 0.001, burst: 10,
                               limits: [{ name: "writes", routes: ["/*"], methods: ["POST"], rate: 0.001, burst: 1 }] },
               quotas: [{ name: "daily", limit: 100, period: "day" }] }
    serve(policy, HELLO) do |server| # mounted app-wide: the path is what the limit's glob matches
      assert_equal "200", server.post("/orders", "X-API-Key" => "acme").code
      rejected = server.post("/orders", "X-API-Key" => "acme")
      assert_equal "429", rejected.code
      assert_match(/"writes";q=1;.*"daily";q=100;w=86400/, rejected["RateLimit-Policy"])
      assert_equal %w[writes request_rate], JSON.parse(rejected.body)["error"].values_at("policy", "limit_type")
      read = server.get("/orders", "X-API-Key" => "acme")
      assert_equal "200", read.code
      assert_match(/"daily"/, read["RateLimit-Policy"])
      refute_match(/"writes"/, read["RateLimit-Policy"])
    end
  end

  def test_skip_serves_undecided
    health = ->(env) { env["PATH_INFO"] == "/health" }
    serve({ request_rate: { rate: 0.001, burst: 1 } }, HELLO, skip: health) do |server|
      assert_equal "200", server.get("/").code
      assert_equal "429", server.get("/").code
      health = server.get("/health")
      assert_equal ["200", "hello", nil], [health.code, health.body, health["RateLimit-Limit"]]
    end
  end

  def test_on_reject_answers_the_rejection
    on_reject = lambda do |_env, decision|
      [decision.status, { "Content-Type" => "text/plain" }, ["over the limit; back in #{decision.retry_after}s\n"]]
    end
    serve({ request_rate: { rate: 0.001, burst: 1 } }, HELLO, on_reject: on_reject) do |server|
      assert_equal "200", server.get("/").code
      rejected = server.get("/")
      assert_equal "429", rejected.code
      assert_match(/\Aover the limit; back in \d+s\n\z/, rejected.body)
      assert_equal "text/plain", rejected["Content-Type"]
      assert_operator Integer(rejected["Retry-After"]), :>=, 1
      assert_equal %w[1 0], [rejected["RateLimit-Limit"], rejected["RateLimit-Remaining"]]
    end
  end
end

class TestHTTPPuma < Minitest::Test
  include HTTPSuite

  def server_kind = :puma

  # Puma's rack.after_reply releases the ticket: the app's Array body reaches Puma as it is, which then
  # answers with its Content-Length (a Rack::BodyProxy around it would make Puma answer chunked), and the
  # slot is back once each response is over.
  def test_puma_answers_with_a_content_length_and_the_slot_is_back_after_each_response
    seen = []
    inner = lambda do |env|
      seen << env["rack.after_reply"].size
      [200, { "Content-Type" => "text/plain" }, ["hello"]]
    end
    serve({ concurrency: { limit: 1 } }, inner) do |server|
      5.times do
        socket = TCPSocket.new("127.0.0.1", server.port)
        socket.write("GET / HTTP/1.1\r\nHost: x\r\nX-API-Key: acme\r\nConnection: close\r\n\r\n")
        response = socket.read
        socket.close
        head, body = response.split("\r\n\r\n", 2)
        assert_match(%r{\AHTTP/1.1 200}, head)
        assert_match(/^Content-Length: 5$/i, head)
        refute_match(/^Transfer-Encoding:/i, head)
        assert_equal "hello", body
        assert_includes head.split("\r\n"), 'RateLimit: "concurrency";r=0'
        # Puma runs its after-reply hooks once the response is written: the slot comes back then.
        assert eventually { @fw.admit(tenant: api_key("acme")).tap { |d| @fw.release(d) }.allowed? }
      end
    end
    assert_equal [0] * 5, seen, "the middleware registers its release only after the app answered"
  end

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
      refute @fw.admit(tenant: api_key("acme")).allowed?, "the slot is held while the body streams"
      socket.close
      assert eventually(timeout: 10) { @fw.admit(tenant: api_key("acme")).tap { |d| @fw.release(d) }.allowed? },
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
