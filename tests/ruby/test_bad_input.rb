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
    "store: must be a string" => { store: 5 }
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
    assert_raises(Errno::ENOENT) { Floodwall::Client.new("/nonexistent/policy.json") }
  end

  class WithClient < Minitest::Test
    def setup
      @fw = Floodwall::Client.new(request_rate: { rate: 10, burst: 5 }, concurrency: { limit: 2 })
    end

    def teardown
      @fw.close
    end

    def test_an_empty_tenant_names_tenant
      error = assert_raises(Floodwall::InvalidArgumentError) { @fw.admit(tenant: "") }
      assert_kind_of ArgumentError, error
      assert_equal Floodwall::Native::EINVAL, error.code
      assert error.message.start_with?("tenant"), error.message
    end

    def test_a_tenant_that_is_not_a_string
      [nil, 42, :acme].each { |t| assert_raises(TypeError) { @fw.admit(tenant: t) } }
    end

    def test_a_missing_tenant_keyword
      assert_raises(ArgumentError) { @fw.admit }
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
