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
              'exceeded: 100 requests/second sustained (bursts to 500). Retry after 3s.","limit":500,' \
              '"rate":100,"retry_after":3}}'

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
    assert_equal '"request_rate";r=499;t=1, "concurrency";r=19', last_response.headers["RateLimit"]
    assert_equal %w[500 499 1], %w[Limit Remaining Reset].map { |h| last_response.headers["RateLimit-#{h}"] }
    assert_nil last_response.headers["Retry-After"]
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
    remaining, reset = headers.fetch("RateLimit").match(/\A"request_rate";r=(\d+);t=(\d+), "concurrency";r=20\z/)&.captures
    assert remaining, headers["RateLimit"]
    assert_equal({ "RateLimit-Policy" => '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"',
                   "RateLimit" => %("request_rate";r=#{remaining};t=#{reset}, "concurrency";r=20),
                   "RateLimit-Limit" => "500", "RateLimit-Remaining" => remaining, "RateLimit-Reset" => reset,
                   "Retry-After" => "3", "Content-Type" => "application/json",
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

  def test_a_request_without_a_key_or_with_an_empty_one_passes_undecided
    get "/"
    assert_equal 200, last_response.status
    assert_nil last_response.headers["RateLimit-Limit"]
    header "X-API-Key", ""
    get "/"
    assert_equal 200, last_response.status
    assert_nil last_response.headers["RateLimit-Limit"]
    assert_equal 0, @fw.metrics.dig("decisions", "request_rate", "allowed")
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
    @options = { key: ->(env) { env["HTTP_X_API_KEY"] }, route: ->(env) { env["PATH_INFO"] },
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
    [held, critical].each { |r| r[2].close }
  end

  def test_headers_follow_the_rack_version
    assert_equal Gem::Version.new(Rack.release) >= Gem::Version.new("3"), Floodwall::Rack::LOWERCASE
  end

  # Rack 3's lower-case names come from the same native table as Decision#headers, on either Rack.
  def test_lower_case_headers_are_the_decisions_headers_downcased
    fw = Floodwall::Client.new(request_rate: { rate: 1, burst: 2 })
    [fw.admit(tenant: "acme"), fw.admit(tenant: "acme"), fw.admit(tenant: "acme")].each do |d|
      lower = Floodwall::Native.headers(d, true)
      assert_equal d.headers.transform_keys(&:downcase), lower
      assert_equal d.headers.keys.map(&:downcase), lower.keys
      assert(lower.keys.all? { |k| k.frozen? && k.encoding == Encoding::UTF_8 })
    end
    assert_includes Floodwall::Native.headers(fw.admit(tenant: "acme"), true).keys, "retry-after"
  end
end
