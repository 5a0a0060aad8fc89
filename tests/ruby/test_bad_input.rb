# frozen_string_literal: true

require_relative "test_helper"

# Every bad input gets a clear error naming what is wrong, and nothing else.
class TestBadInput < Minitest::Test
  BAD_POLICIES = {
    "request_rate.rate" => { request_rate: { rate: -1, burst: 10 } },
    "request_rate.burst" => { request_rate: { rate: 1, burst: 0 } },
    "request_rate.rate: must be a finite number" => { request_rate: { rate: Float::NAN, burst: 10 } },
    "request_rate.burst: is required" => { request_rate: { rate: 1 } },
    "request_rate.burst: must be a whole number" => { request_rate: { rate: 1, burst: 1.5 } },
    "request_rate.overrides.vip.burst" => { request_rate: { rate: 1, burst: 1, overrides: { vip: { rate: 1, burst: -1 } } } },
    "request_rate.mode" => { request_rate: { rate: 1, burst: 1, mode: "loud" } },
    "bogus: unknown key" => { bogus: 1 },
    "request_rate.bogus: unknown key" => { request_rate: { rate: 1, burst: 1, bogus: 1 } },
    "concurrency.limit" => { concurrency: { limit: 0 } },
    "concurrency.routes" => { concurrency: { limit: 1, routes: "/x" } },
    "concurrency.routes[0]" => { concurrency: { limit: 1, routes: [""] } },
    "fleet.capacity" => { fleet: { capacity: -5 } },
    "utilization.bad" => { utilization: { good: 0.9, bad: 0.5 } },
    "prefix" => { prefix: "a b" },
    "max_tenants" => { max_tenants: 0 },
    "store: must be a string" => { store: 5 },
    "tenant.trusted_proxies[0]" => { tenant: { trusted_proxies: ["10.0.0.0/33"] } },
    "tenant.trusted_proxies[1]" => { tenant: { trusted_proxies: ["10.0.0.0/8", "not-an-ip"] } },
    "tenant.ipv6_prefix: must be between 1 and 128 (got 0)" => { tenant: { ipv6_prefix: 0 } },
    "tenant.ipv6_prefix: must be between 1 and 128 (got 129)" => { tenant: { ipv6_prefix: 129 } },
    "tenant.from[0]" => { tenant: { from: ["cookie"] } },
    "tenant.credentials" => { tenant: { credentials: "trusted" } },
    "tenant.bogus: unknown key" => { tenant: { bogus: 1 } }
  }.freeze

  BAD_POLICIES.each_with_index do |(field, policy), i|
    define_method("test_bad_policy_#{i}_#{field.tr("^a-z0-9", "_")}") do
      error = assert_raises(Floodwall::PolicyError) { Floodwall::Client.new(policy) }
      assert_kind_of ArgumentError, error
      assert_kind_of Floodwall::Error, error
      assert_equal Floodwall::Native::EPOLICY, error.code
      assert error.message.start_with?(field), "#{error.message.inspect} should start with #{field.inspect}"
    end
  end

  def test_a_policy_that_is_not_json_names_the_policy
    ["{not json", "{}}", "{\"request_rate\": [1, 2]}"].each do |text|
      error = assert_raises(Floodwall::PolicyError) { Floodwall::Client.new(text) }
      assert_match(/\A(policy|request_rate)/, error.message)
    end
  end

  def test_a_bad_store_is_a_store_error_which_is_a_policy_error
    ["zz://x", "redis://127.0.0.1:notaport/0", "redis://127.0.0.1:6379/x"].each do |url|
      error = assert_raises(Floodwall::StoreError) { Floodwall::Client.new(store: url) }
      assert_kind_of Floodwall::PolicyError, error
      assert_equal Floodwall::Native::ESTORE, error.code
      assert error.message.start_with?("store"), error.message
    end
  end

  def test_a_policy_of_the_wrong_type_or_a_missing_file
    assert_raises(TypeError) { Floodwall::Client.new(42) }
    assert_raises(TypeError) { Floodwall::Client.new(nil) }
    ["/nonexistent/policy.json", Pathname.new("/nonexistent/policy.json")].each do |policy|
      error = assert_raises(Floodwall::PolicyError) { Floodwall::Client.new(policy) }
      assert_equal 'policy: cannot read the file "/nonexistent/policy.json" (No such file or directory)', error.message
    end
    error = assert_raises(Floodwall::PolicyError) { Floodwall::Client.new("policy\0.json") }
    assert_equal "policy: holds a NUL byte", error.message
  end

  class WithClient < Minitest::Test
    def setup
      @fw = Floodwall::Client.new(request_rate: { rate: 10, burst: 5 }, concurrency: { limit: 2 })
    end

    def teardown
      @fw.close
    end

    # An empty tenant is not an error any more: it is the anonymous tenant, limited like any other.
    def test_an_empty_tenant_is_the_anonymous_tenant_not_an_error
      d = @fw.admit(tenant: "")
      assert d.allowed?
      assert_equal 4, d.remaining
      assert_equal "anonymous", @fw.tenant_key(tenant: "")
      @fw.release(d)
    end

    def test_a_tenant_that_is_not_a_string_or_nil
      [42, :acme, ["acme"]].each do |t|
        error = assert_raises(TypeError) { @fw.admit(tenant: t) }
        assert error.message.start_with?("tenant"), error.message
        assert_raises(TypeError) { @fw.tenant_key(tenant: t) }
      end
    end

    # No tenant keyword (or tenant: nil) is not a mistake: the core derives the tenant, here from nothing.
    def test_a_missing_tenant_keyword_is_the_cores_derivation
      d = @fw.admit
      assert d.allowed?
      assert_equal 4, d.remaining
      assert_equal 3, @fw.admit(tenant: "anonymous").remaining, "nothing to go by: the anonymous tenant"
    end

    def test_headers_of_the_wrong_shape_name_headers
      [["x-api-key: acme", "a String"], [[["x-api-key"]], "a pair of one"], [[%w[a b c]], "a triple"],
       [[["x-api-key", 5]], "a value that is not a String"], [{ 5 => "acme" }, "a name that is not a String"],
       [[nil], "nil for a pair"], [{ "x-api-key" => ["a", "b"] }, "an Array value"]].each do |headers, what|
        error = assert_raises(TypeError, what) { @fw.admit(headers: headers) }
        assert error.message.start_with?("headers"), "#{what}: #{error.message}"
        assert_raises(TypeError, what) { @fw.tenant_key(headers: headers) }
      end
      assert_raises(TypeError) { @fw.admit(peer: 127) }
      assert_raises(TypeError) { @fw.tenant_key(peer: :localhost) }
      held = Array.new(2) { @fw.admit(tenant: "anonymous") }
      assert(held.all?(&:allowed?), "the refused admits held no slot")
      held.each { |d| @fw.release(d) }
    end

    # What a caller sends never reaches a response header: a credential is hashed, an address that does
    # not parse is not an address.
    def test_cr_and_lf_in_headers_never_reach_the_response
      ["Bearer a\r\nX-Evil: 1", "a\nX-Evil: 1"].each do |credential|
        key = @fw.tenant_key(headers: [["Authorization", credential], ["X-API-Key", credential]], verified: true)
        assert_match(/\A(key:\h{32}|anonymous)\z/, key)
      end
      refute_match(/Evil/, @fw.tenant_key(peer: "1.2.3.4\r\nX-Evil: 1"))
      evil = [["X-API-Key", "k\r\nX-Evil: 1"]]
      @fw.release(@fw.admit(headers: evil, peer: "\r\nX-Evil: 1", cost: 5))
      d = @fw.admit(headers: evil, peer: "\r\nX-Evil: 1")
      refute d.allowed?
      refute_match(/Evil|\r|\n/, d.headers.to_a.join)
      refute_match(/Evil/, d.body)
    end

    # verified: is true, false or nil: a truthy String or 1 must not pass for a verification.
    def test_verified_of_the_wrong_type_names_verified_and_holds_no_slot
      ["yes", 1, :true].each do |verified|
        error = assert_raises(TypeError) { @fw.admit(headers: [%w[X-API-Key k]], verified: verified) }
        assert error.message.start_with?("verified"), error.message
        assert_raises(TypeError) { @fw.tenant_key(headers: [%w[X-API-Key k]], verified: verified) }
      end
      held = Array.new(2) { @fw.admit(tenant: "anonymous") }
      assert(held.all?(&:allowed?), "the refused admits held no slot")
      held.each { |d| @fw.release(d) }
    end

    def test_request_credential_takes_the_headers_admit_takes
      assert_raises(TypeError) { @fw.request_credential(headers: "x-api-key: k") }
      assert_raises(TypeError) { @fw.request_credential(headers: [["x-api-key", 5]]) }
      assert_raises(TypeError) { @fw.request_credential(peer: 127) }
    end

    def test_the_rack_middlewares_verify_options
      require "floodwall/rack"
      app = ->(_env) { [200, {}, ["ok"]] }
      error = assert_raises(ArgumentError) { Floodwall::Rack.new(app, client: @fw, verify: "nope") }
      assert error.message.start_with?("verify"), error.message
      [0, -1, Float::NAN, Float::INFINITY, "0.1"].each do |timeout|
        error = assert_raises(ArgumentError, timeout.inspect) do
          Floodwall::Rack.new(app, client: @fw, verify: ->(*) { true }, verify_timeout: timeout)
        end
        assert error.message.start_with?("verify_timeout"), error.message
      end
      error = assert_raises(ArgumentError) { Floodwall::Rack.new(app, client: @fw, verify_timeout: 0.1) }
      assert error.message.start_with?("verify_timeout: needs a verify: hook"), error.message
    end

    def test_the_rack_middlewares_routes_option_is_a_route_set_or_false
      require "floodwall/rack"
      app = ->(_env) { [200, {}, ["ok"]] }
      ["/orders/*", {}, true].each do |routes|
        error = assert_raises(ArgumentError, routes.inspect) { Floodwall::Rack.new(app, client: @fw, routes: routes) }
        assert error.message.start_with?("routes: must be a Rails route set"), error.message
      end
      status, = Floodwall::Rack.new(app, client: @fw, routes: false).call(Rack::MockRequest.env_for("/orders/1"))
      assert_equal 200, status
    end

    def test_a_cost_above_the_burst_names_cost_and_consumes_nothing
      error = assert_raises(Floodwall::InvalidArgumentError) { @fw.admit(tenant: "acme", cost: 6) }
      assert error.message.start_with?("cost"), error.message
      d = @fw.admit(tenant: "acme", cost: 5)
      assert d.allowed?, "the failed admit must not have spent tokens"
      @fw.release(d)
    end

    def test_a_negative_cost_names_cost
      error = assert_raises(Floodwall::InvalidArgumentError) { @fw.admit(tenant: "acme", cost: -1) }
      assert error.message.start_with?("cost"), error.message
      assert_raises(Floodwall::InvalidArgumentError) { @fw.admit(tenant: "acme", cost: -(2**70)) }
    end

    def test_a_cost_that_is_not_an_integer_or_too_big_for_64_bits
      [1.5, "1", nil].each { |c| assert_raises(TypeError) { @fw.admit(tenant: "acme", cost: c) } }
      assert_raises(RangeError) { @fw.admit(tenant: "acme", cost: 2**64) }
      error = assert_raises(Floodwall::InvalidArgumentError) { @fw.admit(tenant: "acme", cost: 2**64 - 1) }
      assert error.message.start_with?("cost"), error.message
    end

    def test_a_route_or_method_with_a_nul_byte_or_of_the_wrong_type
      assert_raises(ArgumentError) { @fw.admit(tenant: "acme", route: "/a\0b") }
      assert_raises(ArgumentError) { @fw.admit(tenant: "acme", method: "GE\0T") }
      assert_raises(TypeError) { @fw.admit(tenant: "acme", route: 5) }
      assert_raises(TypeError) { @fw.admit(tenant: "acme", method: :get) }
    end

    # A path is the client's bytes (a NUL among them too); anything but a String or nil is refused by name.
    def test_a_path_or_route_of_the_wrong_type_is_named
      [[{ path: 5 }, "path:"], [{ path: :orders }, "path:"], [{ route: 5 }, "route:"]].each do |bad, name|
        error = assert_raises(TypeError) { @fw.admit(tenant: "acme", **bad) }
        assert error.message.start_with?(name), error.message
        error = assert_raises(TypeError) { @fw.request_route(**bad) }
        assert error.message.start_with?(name), error.message
      end
      assert_equal "/a\0b", @fw.request_route(path: "/a\0b/")
      assert @fw.admit(tenant: "acme", path: "/a\0b").allowed?
    end

    def test_no_bad_admit_held_a_slot
      5.times { assert_raises(Floodwall::InvalidArgumentError) { @fw.admit(tenant: "acme", cost: 99) } }
      held = Array.new(2) { @fw.admit(tenant: "acme") }
      assert(held.all?(&:allowed?), "bad admits must not hold concurrency slots")
      held.each { |d| @fw.release(d) }
    end

    def test_an_unknown_limiter_or_mode_names_it
      error = assert_raises(Floodwall::InvalidArgumentError) { @fw.set_mode(:nope, :dark) }
      assert error.message.start_with?("limiter"), error.message
      error = assert_raises(Floodwall::InvalidArgumentError) { @fw.set_mode(:fleet, :loud) }
      assert error.message.start_with?("mode"), error.message
      assert_raises(Floodwall::InvalidArgumentError) { @fw.set_mode("none", :dark) }
      assert_raises(Floodwall::InvalidArgumentError) { @fw.mode(:nope) }
    end

    def test_a_utilization_outside_zero_to_one_or_nan_names_utilization
      [-0.1, 1.1, Float::NAN, Float::INFINITY].each do |u|
        error = assert_raises(Floodwall::InvalidArgumentError) { @fw.report_utilization(u) }
        assert error.message.start_with?("utilization"), error.message
      end
      assert_raises(TypeError) { @fw.report_utilization("0.5") }
    end

    def test_release_of_something_that_is_not_a_ticket
      assert_raises(TypeError) { @fw.release("ticket") }
      assert_nil @fw.release(123_456_789) # an unknown ticket is a no-op
    end
  end
end
