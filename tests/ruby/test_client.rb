# frozen_string_literal: true

require_relative "test_helper"
require "pathname"
require "tempfile"

# Floodwall::Client and Floodwall::Decision on the embedded memory store.
class TestClient < Minitest::Test
  SEED = { request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 } }.freeze

  def setup
    @fw = Floodwall::Client.new(SEED)
  end

  def teardown
    @fw.close
  end

  def test_the_gem_under_test_is_the_installed_one_over_the_core_of_the_same_version
    assert_equal Floodwall::VERSION, Floodwall::Native.version
    if ENV["GEM_HOME"]
      assert Gem.loaded_specs.fetch("floodwall").full_gem_path.start_with?(ENV["GEM_HOME"]),
             "floodwall should be loaded from GEM_HOME, not from the source tree"
    end
  end

  def test_an_allowed_request_carries_the_seed_headers
    d = @fw.admit(tenant: "acme")
    assert d.allowed?
    assert_equal 200, d.status
    assert_nil d.limiter
    assert_equal [500, 499, 1, 0], [d.limit, d.remaining, d.reset, d.retry_after]
    # RateLimit reports the policy closest to exhaustion: 19 of 20 slots is nearer than 499 of 500 tokens.
    assert_equal({ "RateLimit-Policy" => '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"',
                   "RateLimit" => '"concurrency";r=19',
                   "RateLimit-Limit" => "500", "RateLimit-Remaining" => "499", "RateLimit-Reset" => "1" }, d.headers)
    assert_equal %w[RateLimit-Policy RateLimit RateLimit-Limit RateLimit-Remaining RateLimit-Reset], d.headers.keys
    assert d.headers.frozen?
    assert(d.headers.all? { |k, v| k.frozen? && v.frozen? })
    assert_nil d.body
    assert_nil d.content_type
    assert_equal 1, d.cost
    refute d.failed_open?
    assert_nil d.fail_reason
    assert_operator d.ticket, :>, 0
    @fw.release(d)
  end

  def test_a_request_rate_rejection_is_a_429_with_the_seed_body
    assert @fw.admit(tenant: "acme", cost: 500).allowed?
    d = @fw.admit(tenant: "acme", cost: 300)
    refute d.allowed?
    assert_equal 429, d.status
    assert_equal "request_rate", d.limiter
    assert_equal 3, d.retry_after
    assert_equal 0, d.ticket
    assert_equal "3", d.headers["Retry-After"]
    assert_equal '"request_rate";r=0;t=3', d.headers["RateLimit"], "Retry-After is never earlier than t"
    assert_equal "Retry-After", d.headers.keys.last
    assert_equal 300, d.cost
    assert_equal "application/json", d.content_type
    assert_equal '{"error":{"type":"rate_limit_error","limit_type":"request_rate","message":"Request rate limit ' \
                 'exceeded: this request costs 300 tokens; the limit is 100 tokens/second sustained (bursts to 500). ' \
                 'Retry after 3s.","limit":500,"rate":100,"cost":300,"retry_after":3}}', d.body
    assert d.body.frozen?
  end

  def test_a_problem_json_rejection_has_its_content_type
    fw = Floodwall::Client.new(request_rate: { rate: 1, burst: 1 }, body_format: "problem+json")
    fw.admit(tenant: "p")
    d = fw.admit(tenant: "p")
    assert_equal [429, "application/problem+json"], [d.status, d.content_type]
    assert_equal 429, JSON.parse(d.body)["status"]
  ensure
    fw&.close
  end

  # With no tenant, the core derives it (policy section "tenant"): a Bearer token or X-API-Key that the app
  # verified, hashed, the same bucket from any address; else the peer address; else one anonymous tenant.
  def test_the_core_derives_the_tenant_from_the_headers_and_the_peer
    fw = Floodwall::Client.new(request_rate: { rate: 0.001, burst: 3 })
    bearer = [["Authorization", "Bearer t0k3n"]]
    key = fw.tenant_key(headers: bearer, peer: "192.0.2.1", verified: true)
    assert_match(/\Akey:\h{32}\z/, key)
    refute_includes key, "t0k3n", "a credential is hashed, never kept raw"
    assert_equal key, fw.tenant_key(headers: { "authorization" => "bearer t0k3n" }, peer: "198.51.100.9", verified: true),
                 "a Hash of headers, any case, any address: the same key"
    assert_equal key, fw.tenant_key(headers: [%w[X-API-Key t0k3n]], verified: true),
                 "an API key of the same value is the same tenant"
    assert_equal 2, fw.admit(headers: bearer, peer: "192.0.2.1", verified: true).remaining
    assert_equal 1, fw.admit(headers: [["authorization", "Bearer t0k3n"]], peer: "192.0.2.2", verified: true).remaining
    assert_equal 0, fw.admit(tenant: key).remaining, "the derived key is the tenant id admit used"
    refute fw.admit(headers: { authorization: "Bearer t0k3n" }, verified: true).allowed?, "Symbol names are header names too"

    assert_equal "ip:192.0.2.1", fw.tenant_key(headers: [%w[Host example]], peer: "192.0.2.1")
    assert_equal "ip:192.0.2.1", fw.tenant_key(peer: "::ffff:192.0.2.1"), "IPv4-mapped IPv6 is IPv4"
    assert_equal "anonymous", fw.tenant_key
    assert_equal "acme", fw.tenant_key(tenant: "acme", headers: bearer), "a tenant given is the tenant"
  ensure
    fw&.close
  end

  # A credential nobody vouched for names no tenant: unchecked (nil, the default policy) and rejected
  # (false) are the address; made-up keys from one address all spend that address's bucket.
  def test_a_credential_names_its_tenant_only_once_verified
    fw = Floodwall::Client.new(request_rate: { rate: 0.001, burst: 2 })
    bearer = [["Authorization", "Bearer t0k3n"]]
    assert_equal "ip:192.0.2.1", fw.tenant_key(headers: bearer, peer: "192.0.2.1"), "nil: the address"
    assert_equal "ip:192.0.2.1", fw.tenant_key(headers: bearer, peer: "192.0.2.1", verified: false)
    assert_match(/\Akey:\h{32}\z/, fw.tenant_key(headers: bearer, peer: "192.0.2.1", verified: true))

    made_up = %w[k-1 k-2 k-3].map { |k| fw.admit(headers: [["X-API-Key", k]], peer: "192.0.2.1").status }
    assert_equal [200, 200, 429], made_up, "three made-up keys from one address: one bucket of 2"
    assert_equal 200, fw.admit(headers: [["X-API-Key", "k-4"]], peer: "192.0.2.1", verified: true).status,
                 "a verified key has its own bucket"
    assert_equal 429, fw.admit(headers: [["X-API-Key", "k-5"]], peer: "192.0.2.1", verified: false).status
  ensure
    fw&.close
  end

  # tenant.credentials "unverified" is the opt-in to the old behaviour (a gateway in front refuses unknown
  # keys): an unchecked credential names its tenant; a rejected one still does not.
  def test_credentials_unverified_lets_an_unchecked_credential_name_its_tenant
    fw = Floodwall::Client.new(tenant: { credentials: "unverified" })
    bearer = [["Authorization", "Bearer t0k3n"]]
    assert_equal fw.tenant_key(headers: bearer, verified: true), fw.tenant_key(headers: bearer, peer: "192.0.2.1")
    assert_equal "ip:192.0.2.1", fw.tenant_key(headers: bearer, peer: "192.0.2.1", verified: false)
  ensure
    fw&.close
  end

  def test_request_credential_names_what_a_verify_hook_is_asked
    fw = Floodwall::Client.new({})
    assert_equal "t0k3n", fw.request_credential(headers: [["Authorization", "  Bearer t0k3n "]], peer: "192.0.2.1")
    assert_equal "k-42", fw.request_credential(headers: { "x-api-key" => "k-42" })
    assert_equal "t1", fw.request_credential(headers: [%w[X-API-Key k2], ["Authorization", "Bearer t1"]]),
                 "the policy's order: authorization first"
    assert_nil fw.request_credential(headers: [%w[Host example]], peer: "192.0.2.1")
    assert_nil fw.request_credential
  ensure
    fw&.close
  end

  def test_deadline_ms_is_the_policys_redis_deadline
    assert_equal 50, Floodwall::Client.open({}, &:deadline_ms)
    assert_equal 250, Floodwall::Client.open({ redis: { deadline_ms: 250 } }, &:deadline_ms)
  end

  def test_an_empty_tenant_and_a_request_with_nothing_to_go_by_are_one_anonymous_tenant
    fw = Floodwall::Client.new(request_rate: { rate: 0.001, burst: 3 })
    assert_equal [2, 1, 0], [fw.admit(tenant: ""), fw.admit, fw.admit(headers: [], peer: "")].map(&:remaining)
    refute fw.admit(tenant: "").allowed?
    assert_equal "anonymous", fw.tenant_key(tenant: "")
  ensure
    fw&.close
  end

  # Only a store that does I/O (Redis) makes admits give up the GVL: the core says which (fw_client_can_block).
  def test_tenant_headers_are_the_ones_the_policy_reads
    names = ->(tenant) { Floodwall::Client.open(tenant ? { "tenant" => tenant } : {}, &:tenant_headers) }
    assert_equal %w[authorization x-api-key], names.call(nil)
    assert_predicate names.call(nil), :frozen?
    assert_equal %w[x-api-key], names.call({ "from" => %w[x-api-key ip] })
    # The forwarded header only once a proxy is trusted, and the one the policy names.
    proxied = { "trusted_proxies" => ["10.0.0.0/8"] }
    assert_equal %w[authorization x-api-key x-forwarded-for], names.call(proxied)
    assert_equal %w[authorization x-api-key forwarded], names.call(proxied.merge("forwarded_header" => "forwarded"))
  end

  def test_the_in_process_stores_do_not_block
    segment = "/dev/shm/floodwall.fw-rb-#{Process.pid}" # shm://NAME's segment, removed afterwards
    ["memory://", "shm://fw-rb-#{Process.pid}"].each do |store|
      Floodwall::Client.open(store: store) { |fw| refute fw.instance_variable_get(:@handle).blocking?, store }
    end
    Floodwall::Client.open(store: "redis://127.0.0.1:1/0") { |fw| assert fw.instance_variable_get(:@handle).blocking? }
  ensure
    File.delete(segment) if segment && File.exist?(segment)
  end

  def test_a_rejected_request_spends_no_tokens
    fw = Floodwall::Client.new(request_rate: { rate: 0.001, burst: 500 })
    fw.admit(tenant: "acme", cost: 499)
    refute fw.admit(tenant: "acme", cost: 2).allowed?
    assert_equal 0, fw.admit(tenant: "acme", cost: 1).remaining
  ensure
    fw&.close
  end

  def test_cost_zero_costs_one_token
    assert_equal 499, @fw.admit(tenant: "acme", cost: 0).remaining
  end

  def test_tenants_have_their_own_buckets_and_overrides_apply
    fw = Floodwall::Client.new(request_rate: { rate: 1, burst: 2, overrides: { vip: { rate: 10, burst: 50 } } })
    2.times { fw.admit(tenant: "small") }
    refute fw.admit(tenant: "small").allowed?
    assert_equal 49, fw.admit(tenant: "vip").remaining
  ensure
    fw&.close
  end

  def test_concurrency_caps_in_flight_requests_until_released
    fw = Floodwall::Client.new(concurrency: { limit: 2 })
    held = Array.new(2) { fw.admit(tenant: "acme") }
    assert(held.all?(&:allowed?))
    d = fw.admit(tenant: "acme")
    refute d.allowed?
    assert_equal [429, "concurrency"], [d.status, d.limiter]
    assert_equal "concurrency", JSON.parse(d.body).dig("error", "limit_type")
    assert d.headers.key?("Retry-After")
    fw.release(held.shift)
    assert fw.admit(tenant: "acme").allowed?
  ensure
    fw&.close
  end

  def test_concurrency_counts_only_the_listed_routes
    fw = Floodwall::Client.new(concurrency: { limit: 1, routes: ["/reports"] })
    fw.admit(tenant: "acme", route: "/reports")
    refute fw.admit(tenant: "acme", route: "/reports").allowed?
    assert fw.admit(tenant: "acme", route: "/stops").allowed?
    assert fw.admit(tenant: "acme").allowed?
  ensure
    fw&.close
  end

  def test_the_fleet_shedder_answers_503_to_non_critical_traffic_only
    fw = Floodwall::Client.new(fleet: { capacity: 1 })
    assert fw.admit(tenant: "a").allowed?
    d = fw.admit(tenant: "b")
    assert_equal [false, 503, "fleet"], [d.allowed?, d.status, d.limiter]
    assert_equal "fleet", JSON.parse(d.body).dig("error", "limit_type")
    assert fw.admit(tenant: "b", critical: true).allowed?
  ensure
    fw&.close
  end

  def test_the_utilization_shedder_answers_503_once_it_has_ramped_up
    fw = Floodwall::Client.new(utilization: { delay_s: 0, ramp_s: 0.001, sample_s: 0.001 })
    fw.report_utilization(1.0)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
    d = fw.admit(tenant: "acme", sandbox: true)
    while d.allowed? && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      sleep 0.005
      d = fw.admit(tenant: "acme", sandbox: true)
    end
    assert_equal [503, "utilization"], [d.status, d.limiter]
    assert_operator fw.shedding_amount, :>, 0
  ensure
    fw&.close
  end

  def test_dark_mode_lets_everything_through_and_names_who_would_have_blocked
    fw = Floodwall::Client.new(request_rate: { rate: 1, burst: 1 })
    fw.set_mode("request_rate", "dark")
    assert_equal "dark", fw.mode(:request_rate)
    fw.admit(tenant: "acme")
    d = fw.admit(tenant: "acme")
    assert d.allowed?
    assert_nil d.limiter
    assert_equal "request_rate", d.dark_limiter
    fw.set_mode(:request_rate, :enforce)
    refute fw.admit(tenant: "acme").allowed?
    fw.set_mode(:request_rate, :off)
    assert fw.admit(tenant: "acme").allowed?
  ensure
    fw&.close
  end

  RULES = { store: "memory://",
            request_rate: { rate: 0.001, burst: 10,
                            limits: [{ name: "writes", routes: ["/*"], methods: ["POST"], rate: 0.001, burst: 1 }] },
            quotas: [{ name: "daily", limit: 100, period: "day" }] }.freeze

  def test_a_decision_names_the_limits_and_quotas_that_applied_and_the_one_that_rejected
    fw = Floodwall::Client.new(RULES)
    first = fw.admit(tenant: "acme", route: "/orders", method: "POST")
    assert first.allowed?
    assert_equal %w[writes daily], first.rules, "the limits in policy order, then the quotas"
    assert_nil first.rule
    assert_nil first.dark_rule
    second = fw.admit(tenant: "acme", route: "/orders", method: "POST")
    assert_equal [false, 429, "request_rate", "writes"], [second.allowed?, second.status, second.limiter, second.rule]
    assert_equal %w[writes daily], second.rules
    assert second.rule.frozen?
    assert_match(/"writes";q=1;.*"daily";q=100;w=86400/, second.headers["RateLimit-Policy"])
    assert_match(/\A"writes";r=0;/, second.headers["RateLimit"])
    assert_equal ["writes", 1], JSON.parse(second.body)["error"].values_at("policy", "limit")
    assert_equal({ rule: "writes", dark_rule: nil, rules: %w[writes daily] },
                 second.to_h.slice(:rule, :dark_rule, :rules))
    read = fw.admit(tenant: "acme", route: "/orders", method: "GET")
    assert read.allowed?
    assert_equal %w[daily], read.rules
    assert_nil read.rule
    refute_match(/"writes"/, read.headers["RateLimit-Policy"])
    # No rules in the policy: nothing to name.
    plain = @fw.admit(tenant: "acme", route: "/orders", method: "POST")
    assert_equal [[], nil, nil], [plain.rules, plain.rule, plain.dark_rule]
    # A dark limit lets the request in and names itself as the one that would have rejected it.
    dark = Floodwall::Client.new(RULES.merge(request_rate: RULES[:request_rate].merge(
      limits: [RULES[:request_rate][:limits][0].merge(mode: "dark")]
    )))
    dark.admit(tenant: "acme", route: "/orders", method: "POST")
    d = dark.admit(tenant: "acme", route: "/orders", method: "POST")
    assert_equal [true, nil, "writes", "request_rate"], [d.allowed?, d.rule, d.dark_rule, d.dark_limiter]
  ensure
    fw&.close
    dark&.close
  end

  def test_the_block_form_releases_and_returns_the_blocks_value
    fw = Floodwall::Client.new(concurrency: { limit: 1 })
    assert_equal :served, fw.admit(tenant: "acme") { |d| d.allowed? ? :served : :rejected }
    assert_raises(RuntimeError) { fw.admit(tenant: "acme") { raise "boom" } }
    assert fw.admit(tenant: "acme").allowed?, "both block forms should have released their slot"
  ensure
    fw&.close
  end

  def test_release_is_idempotent_and_takes_a_decision_or_a_ticket
    fw = Floodwall::Client.new(concurrency: { limit: 1 })
    d = fw.admit(tenant: "acme")
    3.times { fw.release(d) }
    fw.release(0)
    d = fw.admit(tenant: "acme")
    fw.release(d.ticket)
    assert fw.admit(tenant: "acme").allowed?
    refute fw.admit(tenant: "acme").allowed?
  ensure
    fw&.close
  end

  def test_threads_sharing_a_client_get_exactly_the_burst
    fw = Floodwall::Client.new(request_rate: { rate: 0.001, burst: 300 })
    counts = Array.new(8) { Thread.new { 100.times.count { fw.admit(tenant: "hot").allowed? } } }.map(&:value)
    assert_equal 300, counts.sum
  ensure
    fw&.close
  end

  def test_tenants_are_binary_safe
    fw = Floodwall::Client.new(request_rate: { rate: 1, burst: 1 })
    tenants = ["a", "a\0b", "a\0c", "{a}", "a\r\nX-Evil: 1", "\xff\xfe".b, "é", "x" * 1_000_000]
    tenants.each { |t| assert fw.admit(tenant: t).allowed?, "#{t[0, 10].inspect} should have its own bucket" }
    tenants.each do |t|
      d = fw.admit(tenant: t)
      refute d.allowed?
      refute_match(/Evil/, d.headers.to_a.join)
      refute_match(/Evil/, d.body)
    end
  ensure
    fw&.close
  end

  def test_a_policy_can_be_a_hash_a_json_string_a_path_or_a_pathname
    json = JSON.generate(request_rate: { rate: 5, burst: 7 })
    Tempfile.create(["policy", ".json"]) do |f|
      f.write(json)
      f.flush
      [{ "request_rate" => { "rate" => 5, "burst" => 7 } }, json, f.path, Pathname(f.path)].each do |policy|
        Floodwall::Client.open(policy) { |fw| assert_equal 7, fw.admit(tenant: "t").limit }
      end
    end
  end

  def test_metrics_count_decisions_and_prometheus_exposes_them
    @fw.admit(tenant: "acme", cost: 500)
    @fw.admit(tenant: "acme")
    m = @fw.metrics
    assert_kind_of Hash, m["decisions"]
    assert_equal 1, m.dig("decisions", "request_rate", "rejected")
    assert_includes %w[closed open half_open], m["breaker"]
    text = @fw.prometheus
    assert_match(/^# TYPE \S+ counter$/, text)
    assert_match(/request_rate/, text)
  end

  def test_a_closed_client_refuses_every_call_and_close_is_idempotent
    fw = Floodwall::Client.new(SEED)
    d = fw.admit(tenant: "acme")
    fw.close
    fw.close
    assert fw.closed?
    [-> { fw.admit(tenant: "acme") }, -> { fw.admit(headers: []) }, -> { fw.tenant_key }, -> { fw.release(d) }, -> { fw.metrics }, -> { fw.prometheus },
     -> { fw.set_mode(:fleet, :off) }, -> { fw.report_utilization(0.5) }, -> { d.headers }].each do |call|
      error = assert_raises(Floodwall::ClosedError) { call.call }
      assert_kind_of Floodwall::Error, error
      assert_equal Floodwall::Native::ECLOSED, error.code
    end
  end

  def test_client_open_closes_after_the_block
    client = Floodwall::Client.open(SEED) { |fw| fw }
    assert client.closed?
  end

  def test_the_adaptive_limit_sheds_with_its_own_503_and_dark_mode_says_so
    fw = Floodwall::Client.new(adaptive: { enabled: true, min_limit: 2, max_limit: 2, initial_limit: 2,
                                           critical_reserve: 0 })
    held = Array.new(2) { fw.admit(tenant: "acme") }
    assert held.all?(&:allowed?)
    shed = fw.admit(tenant: "acme")
    assert_equal [false, 503, "adaptive"], [shed.allowed?, shed.status, shed.limiter]
    assert_equal "1", shed.headers["Retry-After"]
    assert_equal "adaptive", JSON.parse(shed.body)["error"]["limit_type"]
    fw.set_mode("adaptive", "dark")
    dark = fw.admit(tenant: "acme")
    assert_equal [true, "adaptive"], [dark.allowed?, dark.dark_limiter]
    fw.set_mode("adaptive", "enforce")
    held.each { |d| fw.release(d) }
    assert fw.admit(tenant: "acme").allowed?
    assert_includes fw.prometheus, %(floodwall_adaptive_limit{route="*"} 2\n)
  ensure
    fw&.close
  end
end
