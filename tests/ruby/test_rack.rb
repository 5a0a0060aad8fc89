# frozen_string_literal: true

require_relative "test_helper"
require "rack"
require "rack/test"
require "rack/mock"

# Floodwall::Rack through rack-test, and called directly where a test needs to hold the body.
class TestRack < Minitest::Test
  include Rack::Test::Methods

  SEED = { request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 } }.freeze
  SEED_BODY = '{"error":{"type":"rate_limit_error","limit_type":"request_rate","message":"Request rate limit ' \
              'exceeded: this request costs 300 tokens; the limit is 100 tokens/second sustained (bursts to 500). ' \
              'Retry after 3s.","limit":500,"rate":100,"cost":300,"retry_after":3}}'

  # Counts releases, to show that each ticket is given back exactly once.
  class CountingClient < Floodwall::Client
    attr_reader :releases

    def initialize(*)
      super
      @releases = Hash.new(0)
    end

    def release(decision)
      @releases[decision.ticket] += 1 if decision.is_a?(Floodwall::Decision)
      super
    end
  end

  def setup
    @fw = CountingClient.new(SEED)
    @inner = ->(_env) { [200, { "Content-Type" => "text/plain", "X-App" => "yes" }, ["hello"]] }
    @options = { key: ->(env) { env["HTTP_X_API_KEY"] }, cost: ->(env) { Integer(env.fetch("HTTP_X_COST", "1")) } }
  end

  def teardown
    @fw.close
  end

  def app
    fw = @fw
    inner = @inner
    options = @options
    Rack::Builder.new do
      use Floodwall::Rack, client: fw, **options
      run inner
    end
  end

  def test_a_200_keeps_the_apps_headers_and_gets_the_limit_headers
    header "X-API-Key", "acme"
    get "/"
    assert_equal 200, last_response.status
    assert_equal "hello", last_response.body
    assert_equal "yes", last_response.headers["X-App"]
    assert_equal '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"',
                 last_response.headers["RateLimit-Policy"]
    assert_equal '"concurrency";r=19', last_response.headers["RateLimit"]
    assert_equal %w[500 499 1], %w[Limit Remaining Reset].map { |h| last_response.headers["RateLimit-#{h}"] }
    assert_nil last_response.headers["Retry-After"]
  end

  # An app that sets a limit header itself keeps its own value, as it does behind the Python and Node
  # middleware; the ones it did not set are still added.
  def test_a_limit_header_the_app_set_itself_is_kept
    @inner = ->(_env) { [200, { "ratelimit-policy" => "app's own" }, ["hello"]] }
    header "X-API-Key", "acme"
    get "/"
    assert_equal "app's own", last_response.headers["RateLimit-Policy"]
    assert_equal '"concurrency";r=19', last_response.headers["RateLimit"]
  end

  def test_a_429_has_the_cores_body_headers_and_retry_after
    header "X-API-Key", "acme"
    header "X-Cost", "500"
    get "/"
    header "X-Cost", "300"
    get "/"
    assert_equal 429, last_response.status
    assert_equal SEED_BODY, last_response.body
    headers = last_response.headers.to_h
    # A token may have come back between the two requests (100/s): remaining and reset are read, not fixed.
    remaining, reset = headers.fetch("RateLimit").match(/\A"request_rate";r=(\d+);t=(\d+)\z/)&.captures
    assert remaining, headers["RateLimit"]
    assert_equal({ "RateLimit-Policy" => '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"',
                   "RateLimit" => %("request_rate";r=#{remaining};t=#{reset}),
                   "RateLimit-Limit" => "500", "RateLimit-Remaining" => remaining, "RateLimit-Reset" => reset,
                   "Retry-After" => reset, "Content-Type" => "application/json",
                   "Content-Length" => SEED_BODY.bytesize.to_s }, headers)
    assert_equal %w[RateLimit-Policy RateLimit RateLimit-Limit RateLimit-Remaining RateLimit-Reset Retry-After
                    Content-Type Content-Length], headers.keys
  end

  def test_a_503_from_the_fleet_shedder
    @fw.close
    @fw = CountingClient.new(fleet: { capacity: 1 })
    held = app.call(Rack::MockRequest.env_for("/", "HTTP_X_API_KEY" => "a"))
    header "X-API-Key", "b"
    get "/"
    assert_equal 503, last_response.status
    assert_equal "application/json", last_response.content_type
    assert_equal "fleet", JSON.parse(last_response.body).dig("error", "limit_type")
    assert last_response.headers.key?("Retry-After")
    held[2].close
    get "/"
    assert_equal 200, last_response.status
  end

  def test_a_rejection_takes_its_content_type_from_the_decision
    @fw.close
    @fw = CountingClient.new(request_rate: { rate: 0.001, burst: 1 }, body_format: "problem+json")
    2.times { get "/", {}, "HTTP_X_API_KEY" => "acme" }
    assert_equal 429, last_response.status
    assert_equal "application/problem+json", last_response.headers["Content-Type"]
    assert_equal 429, JSON.parse(last_response.body)["status"]
  end

  # The new contract: a key: that returns nil hands the request to the core's derivation (here: no
  # credential, so the peer address); one that returns "" is the anonymous tenant, limited as one tenant
  # whatever the address. Neither passes undecided any more.
  def test_a_key_of_nil_is_the_cores_derivation_and_an_empty_key_the_anonymous_tenant
    @fw.close
    @fw = CountingClient.new(request_rate: { rate: 0.001, burst: 3 })
    get "/", {}, "REMOTE_ADDR" => "192.0.2.1"
    assert_equal 200, last_response.status
    assert_equal "2", last_response.headers["RateLimit-Remaining"], "no key: decided all the same"
    assert_equal 1, @fw.admit(tenant: "ip:192.0.2.1").remaining, "the core's key of a request with no credential"

    %w[10.0.0.1 10.0.0.2 10.0.0.3].each_with_index do |addr, i|
      get "/", {}, "HTTP_X_API_KEY" => "", "REMOTE_ADDR" => addr
      assert_equal 200, last_response.status
      assert_equal (2 - i).to_s, last_response.headers["RateLimit-Remaining"], "one anonymous bucket from every address"
    end
    get "/", {}, "HTTP_X_API_KEY" => "", "REMOTE_ADDR" => "10.0.0.4"
    assert_equal 429, last_response.status
    refute @fw.admit.allowed?, "the empty key is the core's anonymous tenant"
    decided = @fw.metrics.dig("decisions", "request_rate").values_at("allowed", "rejected").sum
    assert_equal 5 + 2, decided, "the five requests and the two admits of the test were all decided"
  end

  # With no key: at all, the core derives the tenant from the env's HTTP_* headers and REMOTE_ADDR: one
  # Bearer token the verify: hook vouched for is one bucket from any address; without a credential each
  # address has its own.
  def test_the_default_key_is_the_cores_derivation_from_headers_and_remote_addr
    @fw.close
    @fw = CountingClient.new(request_rate: { rate: 0.001, burst: 3 })
    @options = { verify: ->(credential, _env) { credential == "t0k3n" } }
    get "/", {}, "HTTP_AUTHORIZATION" => "Bearer t0k3n", "REMOTE_ADDR" => "192.0.2.1"
    assert_equal "2", last_response.headers["RateLimit-Remaining"]
    get "/", {}, "HTTP_AUTHORIZATION" => "Bearer t0k3n", "REMOTE_ADDR" => "198.51.100.7"
    assert_equal "1", last_response.headers["RateLimit-Remaining"], "the same token from another address: one bucket"
    get "/", {}, "HTTP_X_API_KEY" => "t0k3n", "REMOTE_ADDR" => "203.0.113.9"
    assert_equal "0", last_response.headers["RateLimit-Remaining"], "an API key of the same value: the same tenant"
    refute @fw.admit(tenant: @fw.tenant_key(headers: [["Authorization", "Bearer t0k3n"]], verified: true)).allowed?,
           "the middleware's tenant is the key the core derives"

    %w[192.0.2.1 192.0.2.2].each do |addr|
      get "/", {}, "REMOTE_ADDR" => addr
      assert_equal "2", last_response.headers["RateLimit-Remaining"], "#{addr}: a bucket of its own"
    end
  end

  # The defaults as the README shows them (no key:, no verify:): a credential nobody vouched for names no
  # tenant, so made-up keys and tokens from one address all spend that address's bucket.
  def test_without_verify_made_up_credentials_spend_their_addresss_bucket
    @fw.close
    @fw = CountingClient.new(request_rate: { rate: 0.001, burst: 3 })
    @options = {}
    statuses = Array.new(6) do |i|
      credential = i.even? ? { "HTTP_X_API_KEY" => "made-up-#{i}" } : { "HTTP_AUTHORIZATION" => "Bearer made-up-#{i}" }
      get "/", {}, credential.merge("REMOTE_ADDR" => "192.0.2.1")
      last_response.status
    end
    assert_equal [200, 200, 200, 429, 429, 429], statuses
    refute @fw.admit(tenant: "ip:192.0.2.1").allowed?, "the address's bucket is the one spent"
    get "/", {}, "HTTP_X_API_KEY" => "made-up-7", "REMOTE_ADDR" => "192.0.2.2"
    assert_equal 200, last_response.status, "another address, another bucket"
  end

  # verify: is asked about the raw credential (Client#request_credential) with the env: truthy, the
  # credential is the tenant; falsy (nil included), the address. It is not asked when there is no
  # credential, nor when key: chose the tenant.
  def test_verify_is_asked_about_the_credential_and_its_answer_chooses_the_tenant
    @fw.close
    @fw = CountingClient.new(request_rate: { rate: 0.001, burst: 5 })
    asked = []
    @options = { key: ->(env) { env["HTTP_X_TENANT"] },
                 verify: ->(credential, env) { asked << [credential, env["PATH_INFO"]]; credential.start_with?("real") && 1 } }
    get "/a", {}, "HTTP_AUTHORIZATION" => "Bearer  real-1 ", "REMOTE_ADDR" => "192.0.2.1"
    assert_equal "4", last_response.headers["RateLimit-Remaining"]
    real = @fw.tenant_key(headers: [["Authorization", "Bearer real-1"]], verified: true)
    assert_equal 3, @fw.admit(tenant: real).remaining, "a truthy answer: the credential's bucket"
    get "/b", {}, "HTTP_X_API_KEY" => "fake-1", "REMOTE_ADDR" => "192.0.2.1"
    assert_equal 3, @fw.admit(tenant: "ip:192.0.2.1").remaining, "a falsy answer: the address's bucket"
    get "/c", {}, "REMOTE_ADDR" => "192.0.2.1"
    get "/d", {}, "HTTP_X_API_KEY" => "real-2", "HTTP_X_TENANT" => "acme", "REMOTE_ADDR" => "192.0.2.1"
    assert_equal 3, @fw.admit(tenant: "acme").remaining, "key: chose the tenant"
    assert_equal [["real-1", "/a"], ["fake-1", "/b"]], asked, "not asked without a credential, nor when key: chose"
    assert_empty @fw.releases.values.reject { |n| n == 1 }
  end

  # A hook that raises counts as not vouched: the request is keyed by its address, answered as any other
  # (never a 500 from the limiter), and the middleware (one instance, as a server runs it) says so once on
  # stderr, naming the exception.
  def test_a_verify_hook_that_raises_is_not_vouched_and_reported_once
    @fw.close
    @fw = CountingClient.new(request_rate: { rate: 0.001, burst: 2 }, concurrency: { limit: 5 })
    @options = { verify: ->(_credential, _env) { raise KeyError, "key store down" } }
    one_middleware = Rack::MockRequest.new(app.to_app)
    statuses = nil
    _out, err = capture_io do
      statuses = Array.new(4) do |i|
        one_middleware.get("/", "HTTP_X_API_KEY" => "real-#{i}", "REMOTE_ADDR" => "192.0.2.1").status
      end
    end
    assert_equal [200, 200, 429, 429], statuses
    assert_equal 1, err.scan(/floodwall: the verify hook raised KeyError: key store down/).size, err
    assert_equal 1, err.lines.size, err
    assert(@fw.releases.values.all? { |n| n == 1 }, "every slot given back once")
    assert_equal 2, @fw.releases.size
  end

  # A hook slower than verify_timeout counts as not vouched (a Rack hook cannot be cut short: its late
  # answer is not taken), reported once.
  def test_a_verify_hook_slower_than_verify_timeout_is_not_vouched_and_reported_once
    @fw.close
    @fw = CountingClient.new(request_rate: { rate: 0.001, burst: 2 })
    @options = { verify: ->(_credential, _env) { sleep 0.06; true }, verify_timeout: 0.02 }
    one_middleware = Rack::MockRequest.new(app.to_app)
    statuses = nil
    _out, err = capture_io do
      statuses = Array.new(3) do |i|
        one_middleware.get("/", "HTTP_X_API_KEY" => "real-#{i}", "REMOTE_ADDR" => "192.0.2.1").status
      end
    end
    assert_equal [200, 200, 429], statuses, "three keys the hook accepted, too late: one address"
    assert_equal 1, err.scan(/floodwall: the verify hook answered after [\d.]+s, later than verify_timeout \(0\.020s\)/).size, err
  end

  # The README's login route: keyed by the address whatever credential the request carries (verified:
  # false), the forwarded client behind a trusted proxy.
  def test_a_login_route_keyed_by_address_whatever_the_credential
    @fw.close
    @fw = CountingClient.new(request_rate: { rate: 0.001, burst: 2 }, tenant: { trusted_proxies: ["10.0.0.0/8"] })
    fw = @fw
    @options = { key: ->(env) { fw.tenant_key(headers: Floodwall::Rack.headers(env), peer: env["REMOTE_ADDR"], verified: false) },
                 verify: ->(*) { flunk "verify: is not asked when key: chose the tenant" } }
    codes = %w[k-1 k-2 k-3].map do |key|
      get "/login", {}, "HTTP_X_API_KEY" => key, "HTTP_X_FORWARDED_FOR" => "203.0.113.9", "REMOTE_ADDR" => "10.0.0.5"
      last_response.status
    end
    assert_equal [200, 200, 429], codes
    refute @fw.admit(tenant: "ip:203.0.113.9").allowed?, "the forwarded client's bucket"
  end

  # verify_timeout defaults to the client's deadline_ms (the store's per-admit deadline).
  def test_verify_timeout_defaults_to_the_clients_deadline
    @fw.close
    @fw = CountingClient.new(request_rate: { rate: 0.001, burst: 2 }, redis: { deadline_ms: 20 })
    @options = { verify: ->(_credential, _env) { sleep 0.06; true } }
    _out, err = capture_io { get "/", {}, "HTTP_X_API_KEY" => "real", "REMOTE_ADDR" => "192.0.2.1" }
    assert_equal 0, @fw.admit(tenant: "ip:192.0.2.1").remaining, "keyed by the address"
    assert_match(/later than verify_timeout \(0\.020s\)/, err)
  end

  def test_rack_headers_turns_the_env_back_into_header_names
    env = Rack::MockRequest.env_for("/", "HTTP_X_API_KEY" => "acme", "HTTP_AUTHORIZATION" => "Bearer t",
                                         "CONTENT_TYPE" => "text/plain", "REMOTE_ADDR" => "192.0.2.1", "HTTP_" => "x")
    headers = Floodwall::Rack.headers(env)
    assert_equal({ "x-api-key" => "acme", "authorization" => "Bearer t" }, headers)
    assert(headers.keys.all?(&:frozen?))
  end

  def test_skip_lets_a_request_through_undecided
    @fw.close
    @fw = CountingClient.new(request_rate: { rate: 0.001, burst: 1 })
    @options = { skip: ->(env) { env["PATH_INFO"] == "/health" } }
    get "/"
    get "/"
    assert_equal 429, last_response.status
    3.times do
      get "/health"
      assert_equal 200, last_response.status, "a skipped request is not limited"
      assert_nil last_response.headers["RateLimit-Limit"], "nor decided"
    end
    assert_equal 2, @fw.metrics.dig("decisions", "request_rate").values_at("allowed", "rejected").sum
    assert_equal 0, @fw.releases.values.sum, "nothing to release: the allowed decision held no slot, the skipped ones had none"
  end

  # on_reject builds the rejection; the limit headers it did not set are added (names without case), the
  # ones it set are its own.
  def test_on_reject_builds_the_rejection_and_gets_the_limit_headers_it_did_not_set
    @fw.close
    @fw = CountingClient.new(request_rate: { rate: 0.001, burst: 1 })
    seen = []
    @options = { on_reject: lambda do |env, decision|
      seen << [env["PATH_INFO"], decision.limiter]
      [decision.status, { "Content-Type" => "text/plain", "retry-after" => "60" }.freeze, ["slow down\n"]]
    end }
    get "/"
    assert_equal 200, last_response.status
    get "/reports"
    assert_equal 429, last_response.status
    assert_equal "slow down\n", last_response.body
    assert_equal "text/plain", last_response.headers["Content-Type"]
    assert_equal "60", last_response.headers["Retry-After"], "the handler's own Retry-After stays"
    assert_equal ["1", "0"], last_response.headers.values_at("RateLimit-Limit", "RateLimit-Remaining")
    assert_equal '"request_rate";q=1;w=1000', last_response.headers["RateLimit-Policy"]
    assert_equal [["/reports", "request_rate"]], seen
  end

  def test_hooks_must_be_callable
    %i[key skip on_reject verify].each do |hook|
      assert_raises(ArgumentError) { Floodwall::Rack.new(@inner, client: @fw, hook => "nope") }
    end
  end

  def test_a_key_that_is_not_a_string_is_used_as_one
    @fw.close
    @fw = CountingClient.new(request_rate: { rate: 0.001, burst: 10 })
    @options = { key: ->(_env) { 42 } }
    get "/"
    assert_equal "9", last_response.headers["RateLimit-Remaining"]
    assert_equal 8, @fw.admit(tenant: "42").remaining, "the key 42 is the tenant \"42\""
  end

  def test_the_ticket_is_released_once_when_the_response_is_done
    header "X-API-Key", "acme"
    3.times { get "/" }
    assert_equal 3, @fw.releases.size
    assert(@fw.releases.values.all? { |n| n == 1 })
  end

  def test_the_ticket_is_released_when_the_body_is_closed_early_and_only_once
    @fw.close
    @fw = CountingClient.new(concurrency: { limit: 1 })
    env = -> { Rack::MockRequest.env_for("/", "HTTP_X_API_KEY" => "acme") }
    streamed = Enumerator.new { |y| 100.times { |i| y << "chunk #{i}\n" } }
    @inner = ->(_env) { [200, { "Content-Type" => "text/plain" }, streamed] }
    status, _headers, body = app.call(env.call)
    assert_equal 200, status
    assert_equal 429, app.call(env.call)[0], "the slot is held while the body is open"
    body.close # before a single chunk was read
    body.close
    status, = app.call(env.call)
    assert_equal 200, status, "closing the body released the slot"
    assert_equal [1], @fw.releases.values.uniq
  end

  def test_the_ticket_is_released_when_the_app_raises
    @fw.close
    @fw = CountingClient.new(concurrency: { limit: 1 })
    @inner = ->(_env) { raise ArgumentError, "boom" }
    env = Rack::MockRequest.env_for("/", "HTTP_X_API_KEY" => "acme")
    2.times { assert_raises(ArgumentError) { app.call(env.dup) } } # the second would be a 429 if the first leaked
    assert_equal [1, 1], @fw.releases.values, "two tickets, each released once"
  end

  def test_route_cost_critical_and_sandbox_reach_the_core
    @fw.close
    @fw = CountingClient.new(request_rate: { rate: 0.001, burst: 10 }, concurrency: { limit: 1, routes: ["/reports"] },
                             fleet: { capacity: 1 })
    seen = []
    @options = { key: ->(env) { env["HTTP_X_API_KEY"] }, # no route: the path is what concurrency.routes matches
                 cost: ->(env) { env["PATH_INFO"] == "/reports" ? 4 : 1 }, critical: ->(env) { env["HTTP_X_CRITICAL"] == "1" },
                 sandbox: false }
    @inner = ->(env) { seen << env["PATH_INFO"]; [200, {}, ["ok"]] }
    held = app.call(Rack::MockRequest.env_for("/reports", "HTTP_X_API_KEY" => "acme"))
    assert_equal "6", held[1]["RateLimit-Remaining"], "a report costs 4 tokens"
    assert_equal 429, app.call(Rack::MockRequest.env_for("/reports", "HTTP_X_API_KEY" => "acme"))[0]
    assert_equal 503, app.call(Rack::MockRequest.env_for("/stops", "HTTP_X_API_KEY" => "acme"))[0]
    critical = app.call(Rack::MockRequest.env_for("/stops", "HTTP_X_API_KEY" => "acme", "HTTP_X_CRITICAL" => "1"))
    assert_equal 200, critical[0]
    assert_equal %w[/reports /stops], seen
    assert_respond_to held[2], :close, "the held slot is released when the body is closed (no after-reply hook here)"
    held[2].close
    assert_equal 1, @fw.releases.values.sum, "released once, on close"
    assert_equal ["ok"], critical[2], "a critical request held no slot: its body is the app's own"
  end

  # A server's after-the-response hook (Rack 3's rack.response_finished, Puma's rack.after_reply) releases
  # the ticket, once, and the app's body is handed on as it is.
  def test_a_servers_after_response_hook_releases_the_ticket_and_leaves_the_body_alone
    @fw.close
    @fw = CountingClient.new(concurrency: { limit: 1 })
    @inner = ->(_env) { [200, {}, ["ok"]] }
    [["rack.response_finished", [Rack::MockRequest.env_for("/"), 200, {}, nil]], ["rack.after_reply", []]].each do |hook, args|
      env = Rack::MockRequest.env_for("/", "HTTP_X_API_KEY" => "acme", hook => [])
      status, headers, body = app.call(env)
      assert_equal 200, status
      assert_equal ["ok"], body, "#{hook}: the app's Array body, unwrapped"
      assert_equal '"concurrency";r=0', headers["RateLimit"] || headers["ratelimit"]
      assert_equal 1, env[hook].size
      tenant = "acme" # the key option of setup
      refute @fw.admit(tenant: tenant).allowed?, "#{hook}: held until the hook runs"
      before = @fw.releases.values.sum
      env[hook].each { |hook_fn| hook_fn.call(*args) }
      assert_equal before + 1, @fw.releases.values.sum, "#{hook}: one release"
      assert @fw.admit(tenant: tenant).tap { |d| @fw.release(d) }.allowed?, "#{hook}: released by the hook"
    end
  end

  def test_headers_follow_the_rack_version
    assert_equal Gem::Version.new(Rack.release) >= Gem::Version.new("3"), Floodwall::Rack::LOWERCASE
  end

  # Rack 3's lower-case names come from the same native response as Decision#headers, on either Rack.
  def test_lower_case_headers_are_the_decisions_headers_downcased
    fw = Floodwall::Client.new(request_rate: { rate: 1, burst: 2 })
    [fw.admit(tenant: "acme"), fw.admit(tenant: "acme"), fw.admit(tenant: "acme")].each do |d|
      lower = Floodwall::Native.response(d, true)[0]
      assert_equal d.headers.transform_keys(&:downcase), lower
      assert_equal d.headers.keys.map(&:downcase), lower.keys
      assert(lower.keys.all? { |k| k.frozen? && k.encoding == Encoding::UTF_8 })
    end
    assert_includes Floodwall::Native.response(fw.admit(tenant: "acme"), true)[0].keys, "retry-after"
  end
end
