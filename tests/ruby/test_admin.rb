# frozen_string_literal: true

require_relative "test_helper"
require "rack"
require "securerandom"

# Client#admin: tenants' overrides, tiers, blocks and resets kept in the store and applied to the next
# request, on the memory store and on the suite's redis-server (there also from another client than the one
# that admits, and without the GVL while Redis holds the reply back); and a blocked tenant's 403 through
# Floodwall::Rack over real HTTP (Puma and WEBrick), with an admin endpoint that blocks and lifts it.
module AdminSuite
  include FloodwallTest

  TIERS = {
    request_rate: { rate: 0.001, burst: 2 },
    tiers: { pro: { rate: 0.001, burst: 10, limits: [{ name: "search", routes: ["/search"], rate: 0.001, burst: 3 }] } }
  }.freeze

  def client(policy = TIERS)
    Floodwall::Client.new(store_policy.merge(policy)).tap { |c| (@clients ||= []) << c }
  end

  def teardown
    (@clients || []).each(&:close)
  end

  def allowed(fw, tenant, count, **request)
    Array.new(count) { fw.admit(tenant: tenant, **request) }.count(&:allowed?)
  end

  def test_admin_is_one_admin_per_client
    fw = client
    assert_kind_of Floodwall::Admin, fw.admin
    assert_same fw.admin, fw.admin
  end

  def test_an_override_raises_the_tenants_limit_on_its_next_request_and_goes_away
    fw = client
    assert_equal 2, allowed(fw, "acct", 3)
    assert_nil fw.admin.set_override("acct", rate: 0.001, burst: 6)
    d = fw.admit(tenant: "acct")
    assert_equal [true, 6, 3], [d.allowed?, d.limit, d.remaining] # 2 of the 6 spent already
    assert_equal 3, allowed(fw, "acct", 5)
    fw.admin.remove_override("acct")
    back = fw.admit(tenant: "acct")
    assert_equal [false, 2], [back.allowed?, back.limit]
    assert_equal 2, allowed(fw, "other", 3)
  end

  def test_a_tier_gives_its_bucket_and_its_limits_and_nil_takes_the_tenant_out
    fw = client
    fw.admin.set_tier("acct", "pro")
    assert_equal 3, allowed(fw, "acct", 5, route: "/search")
    assert_equal 7, allowed(fw, "acct", 10, route: "/other")
    shown = fw.admin.show("acct")
    assert_equal ["pro", false], shown.values_at("tier", "blocked")
    assert_equal [10, 0], shown["request_rate"].values_at("limit", "remaining")
    assert_equal [["search", 0]], shown["limits"].map { |l| l.values_at("name", "remaining") }
    fw.admin.set_tier("acct", nil)
    d = fw.admit(tenant: "acct", route: "/search")
    assert_equal [false, 2, []], [d.allowed?, d.limit, d.rules]
    assert_nil fw.admin.show("acct")["tier"]
    fw.admin.set_tier("acct", :pro) # a Symbol names a tier too
    assert_equal "pro", fw.admin.show("acct")["tier"]
  end

  def test_a_block_answers_403_consumes_nothing_and_unblock_lifts_it
    fw = client
    plain = fw.admit(tenant: "acct")
    assert_equal [false, nil], [plain.blocked?, plain.blocked_until]
    fw.admin.block("acct")
    d = fw.admit(tenant: "acct")
    assert_equal [false, 403, nil, true, nil, 0], [d.allowed?, d.status, d.limiter, d.blocked?, d.blocked_until, d.ticket]
    assert_equal({}, d.headers) # until unblocked: no Retry-After
    assert_equal "application/json", d.content_type
    error = JSON.parse(d.body)["error"]
    assert_equal ["forbidden", "blocked", nil], error.values_at("type", "limit_type", "until")
    assert_equal [true, nil], d.to_h.values_at(:blocked, :blocked_until)
    assert fw.admin.show("acct")["blocked"]

    before = Time.now.to_i
    fw.admin.block("acct", seconds: 120)
    d = fw.admit(tenant: "acct")
    assert_equal 403, d.status
    assert_includes (before + 119)..(Time.now.to_i + 121), d.blocked_until
    retry_after = Integer(d.headers.fetch("Retry-After"))
    assert_includes 119..121, retry_after
    error = JSON.parse(d.body)["error"]
    assert_equal ["blocked", retry_after], error.values_at("limit_type", "retry_after")
    assert_equal error["until"], fw.admin.show("acct")["blocked_until"]

    fw.admin.unblock("acct")
    refute fw.admin.show("acct")["blocked"]
    assert_equal 1, allowed(fw, "acct", 3) # the plain admit spent 1 of 2; the 403s nothing
  end

  def test_show_names_the_tier_the_block_the_request_rate_and_the_concurrency
    fw = client(TIERS.merge(concurrency: { limit: 3 }))
    shown = fw.admit(tenant: "acct") { fw.admin.show("acct") }
    assert_equal ["acct", nil, nil, false, nil], shown.values_at("tenant", "tier", "override", "blocked", "blocked_until")
    assert_equal %w[full_in_s limit rate remaining], shown["request_rate"].keys.sort
    assert_equal [2, 1, 0.001], shown["request_rate"].values_at("limit", "remaining", "rate")
    assert_equal({ "limit" => 3, "in_flight" => 1 }, shown["concurrency"])
    assert_equal [[], []], shown.values_at("limits", "quotas")
    assert_match(/Z\z/, shown["store_time"])
    assert_equal 0, fw.admin.show("acct")["concurrency"]["in_flight"] # released after the block
  end

  def test_reset_fills_the_buckets_and_keeps_the_record_and_list_names_the_tenants_with_one
    fw = client
    fw.admin.set_override("big", rate: 5, burst: 50)
    fw.admin.set_tier("paid", "pro")
    fw.admin.block("bad", seconds: 60)
    fw.admit(tenant: "plain")
    assert_equal 10, allowed(fw, "paid", 11)
    fw.admin.reset("paid")
    assert_equal "pro", fw.admin.show("paid")["tier"]
    assert_equal 10, allowed(fw, "paid", 11)
    listed = fw.admin.list.to_h { |t| [t["tenant"], t] }
    assert_equal %w[bad big paid], listed.keys.sort
    assert_equal({ "tenant" => "big", "tier" => nil, "override" => { "rate" => 5, "burst" => 50 }, "blocked" => false,
                   "blocked_until" => nil }, listed["big"])
    assert_equal "pro", listed["paid"]["tier"]
    assert listed["bad"]["blocked"]
    assert_match(/Z\z/, listed["bad"]["blocked_until"])
    assert_equal 2, fw.admin.list(limit: 2).size
  end

  def test_a_fleet_wide_mode_and_back_to_each_clients_own
    fw = client
    fw.admin.set_mode("request_rate", "dark")
    assert_equal "dark", fw.mode("request_rate")
    assert_equal 4, allowed(fw, "acct", 4)
    fw.admin.set_mode(:request_rate, nil)
    assert_equal "enforce", fw.mode("request_rate")
  end

  def test_bad_arguments_raise_invalid_argument_errors_naming_them
    fw = client
    {
      -> { fw.admin.set_tier("acct", "gold") } => /\Atier: the policy has no tier named "gold" \(it has: pro\)\z/,
      -> { fw.admin.set_override("acct", rate: -1, burst: 5) } => /\Arate: /,
      -> { fw.admin.set_override("acct", rate: 1, burst: 0) } => /\Aburst: /,
      -> { fw.admin.set_override("acct", rate: Float::NAN, burst: 5) } => /\Arate: /,
      -> { fw.admin.block("acct", seconds: 0) } => /\Aseconds: /,
      -> { fw.admin.block("acct", seconds: -1) } => /\Aseconds: /,
      -> { fw.admin.block("acct", seconds: Float::INFINITY) } => /\Aseconds: /,
      -> { fw.admin.block("acct", seconds: 20 * 365 * 86_400) } => /\Aseconds: /,
      -> { fw.admin.show("") } => /\Atenant: /,
      -> { fw.admin.unblock("a\nb") } => /\Atenant: contains a control character\z/,
      -> { fw.admin.set_mode("bogus", "dark") } => /\Alimiter: /,
      -> { fw.admin.set_mode("fleet", "loud") } => /\Amode: /,
      -> { fw.admin.list(limit: 0) } => /\Alimit: /
    }.each do |call, message|
      error = assert_raises(Floodwall::InvalidArgumentError) { call.call }
      assert_kind_of ArgumentError, error
      assert_equal Floodwall::Native::EINVAL, error.code
      assert_match message, error.message
    end
    assert_raises(TypeError) { fw.admin.show(42) }
    assert_raises(TypeError) { fw.admin.block("acct", seconds: "60") }
    assert_raises(TypeError) { fw.admin.set_override("acct", rate: "1", burst: 5) }
    assert_equal [], fw.admin.list # nothing above wrote a record
    untiered = client(request_rate: { rate: 1, burst: 2 })
    assert_match(/\Atier: .*it has no tiers/, assert_raises(Floodwall::InvalidArgumentError) { untiered.admin.set_tier("acct", "pro") }.message)
  end

  def test_a_closed_client_refuses_admin_calls
    fw = client
    fw.close
    assert_raises(Floodwall::ClosedError) { fw.admin.block("acct") }
    assert_raises(Floodwall::ClosedError) { fw.admin.list }
  end
end

class TestAdminMemory < Minitest::Test
  include AdminSuite

  def store_policy = { store: "memory://" }
end

class TestAdminRedis < Minitest::Test
  include AdminSuite

  def setup
    @redis = FloodwallTest::Redis.instance
    @prefix = "adm#{SecureRandom.hex(6)}"
  end

  def store_policy = { store: @redis.url, prefix: @prefix, redis: { deadline_ms: 3000 } }

  def test_a_change_made_by_another_client_applies_to_the_next_request
    app = client
    ops = client
    assert_equal 2, allowed(app, "acct", 3)
    ops.admin.set_override("acct", rate: 0.001, burst: 5)
    assert_equal 3, allowed(app, "acct", 5)
    ops.admin.block("acct", seconds: 30)
    d = app.admit(tenant: "acct")
    assert_equal [403, true], [d.status, d.blocked?]
    assert_kind_of Integer, d.blocked_until
    ops.admin.unblock("acct")
    ops.admin.set_tier("acct", "pro")
    assert_equal ["search"], app.admit(tenant: "acct", route: "/search").rules
    assert_equal ["acct"], app.admin.list.map { |t| t["tenant"] }
  end

  # While Redis holds every reply back (SIGSTOP), the admin call waits without the GVL: another thread runs.
  def test_an_admin_call_waiting_on_redis_releases_the_gvl
    fw = client
    fw.admin.show("warm-up") # connected
    ticks = 0
    ticker = Thread.new { loop { ticks += 1; sleep 0.001 } }
    caller = nil
    @redis.stopped do
      caller = Thread.new { fw.admin.block("acct", seconds: 60) }
      assert all_waiting?([caller]), "the admin call should be waiting on the stopped Redis: #{caller.status}"
      before = ticks
      sleep 0.05
      assert_operator ticks - before, :>, 0, "the ticker thread should run while the admin call waits"
      assert caller.alive?, "the block should not return while Redis is stopped (deadline 3 s)"
    end
    assert_nil caller.value
    ticker.kill
    assert fw.admin.show("acct")["blocked"]
  end

  def test_an_unreachable_store_raises_store_error_naming_it_within_a_bound
    port = FloodwallTest.free_port # nothing listens there
    fw = Floodwall::Client.new(store: "redis://127.0.0.1:#{port}/0", request_rate: { rate: 1, burst: 1 },
                               redis: { deadline_ms: 50, connect_timeout_ms: 50 })
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    error = assert_raises(Floodwall::StoreError) { fw.admin.block("acct") }
    assert_match(/\Astore: .*#{port}/, error.message)
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 5
  ensure
    fw&.close
  end
end

# A blocked tenant's 403 through Floodwall::Rack over real HTTP, with an admin endpoint the middleware skips.
module AdminHTTPSuite
  include FloodwallTest

  def test_a_blocked_tenant_gets_the_cores_403_and_an_admin_endpoint_lifts_it
    fw = Floodwall::Client.new(request_rate: { rate: 0.001, burst: 20 })
    admin = lambda do |env|
      req = ::Rack::Request.new(env)
      tenant = req.params.fetch("tenant")
      if req.post?
        fw.admin.block(tenant, seconds: req.params["seconds"]&.to_f)
      else
        fw.admin.unblock(tenant)
      end
      [200, { "Content-Type" => "application/json" }, [JSON.generate(fw.admin.show(tenant))]]
    end
    app = ::Rack::Builder.new do
      use Floodwall::Rack, client: fw, skip: ->(env) { env["PATH_INFO"] == "/admin/block" },
                           verify: ->(api_key, _env) { %w[k-blocked someone-else].include?(api_key) }
      map("/admin/block") { run admin }
      map("/") { run ->(_env) { [200, { "Content-Type" => "text/plain" }, ["hello"]] } }
    end
    tenant = fw.tenant_key(headers: [["X-API-Key", "k-blocked"]], verified: true) # the tenant the middleware derives
    query = URI.encode_www_form(tenant: tenant)
    limit_headers = ->(r) { r.each_header.map { |name, _| name }.grep(/\A(ratelimit|retry-after)/i) }
    FloodwallTest::Server.open(app, server_kind) do |server|
      assert_equal "200", server.get("/", "X-API-Key" => "k-blocked").code
      blocked = server.post("/admin/block?#{query}")
      assert_equal "200", blocked.code
      assert JSON.parse(blocked.body)["blocked"]

      r = server.get("/", "X-API-Key" => "k-blocked")
      assert_equal "403", r.code
      assert_equal "application/json", r["Content-Type"]
      assert_equal r.body.bytesize.to_s, r["Content-Length"]
      assert_equal [], limit_headers.call(r) # blocked until unblocked: no Retry-After
      assert_equal %w[forbidden blocked], JSON.parse(r.body)["error"].values_at("type", "limit_type")
      assert_equal "200", server.get("/", "X-API-Key" => "someone-else").code

      timed = server.post("/admin/block?#{query}&seconds=90")
      assert_match(/Z\z/, JSON.parse(timed.body)["blocked_until"])
      r = server.get("/", "X-API-Key" => "k-blocked")
      assert_equal "403", r.code
      assert_equal ["retry-after"], limit_headers.call(r).map(&:downcase)
      assert_includes 89..91, Integer(r["Retry-After"])
      assert_equal ["blocked", Integer(r["Retry-After"])], JSON.parse(r.body)["error"].values_at("limit_type", "retry_after")

      http = Net::HTTP.new("127.0.0.1", server.port)
      lifted = http.start { http.delete("/admin/block?#{query}") }
      refute JSON.parse(lifted.body)["blocked"]
      r = server.get("/", "X-API-Key" => "k-blocked")
      assert_equal "200", r.code
      assert_equal "18", r["RateLimit-Remaining"] # the 403s spent nothing
    end
  ensure
    fw&.close
  end
end

class TestAdminHTTPPuma < Minitest::Test
  include AdminHTTPSuite

  def server_kind = :puma
end

class TestAdminHTTPWEBrick < Minitest::Test
  include AdminHTTPSuite

  def server_kind = :webrick
end
