# frozen_string_literal: true

require_relative "test_helper"
require "fileutils"
require "tmpdir"

# floodwall in a real Rails app (Debian's ruby-rails; tests/ruby/rails_app) installed the Rails way (the
# gem's Railtie and config.floodwall), served by Puma (Debian's) in a process of its own, over real HTTP:
# route rules matched against Rails' own route patterns, 429/503/403 with the core's headers and body,
# release on every path, the key the app names, the ActiveSupport::Notifications events, memory:// and
# Redis, and Puma's cluster mode with preload_app!. Rails is never loaded into this process: the other
# suites' Floodwall::Rack would otherwise match requests with its routes.
module RailsApp
  DIR = File.join(__dir__, "rails_app")
  ORDERS = { name: "orders", routes: ["/orders", "/orders/*"], rate: 0.001, burst: 2 }.freeze

  # The hold files (a held request waits for its file), the Puma logs: removed after the run.
  def self.tmp
    @tmp ||= Dir.mktmpdir("floodwall-rails").tap { |dir| Minitest.after_run { FileUtils.rm_rf(dir) } }
  end

  # (No fleet section beside the limits: with both, Redis refuses tenant_admit.lua's second call (it reads
  # the first rule's key as the fleet's reports, a core bug reported with this test); TestRailsFleet* test
  # the fleet shedder.)
  def self.policy(store, limits: [ORDERS])
    # Generous time-outs: on a loaded machine a Redis decision is still Redis', never the fallback's.
    { store: store, redis: { deadline_ms: 5000, connect_timeout_ms: 5000 },
      request_rate: { rate: 1000, burst: 1000, limits: limits },
      concurrency: { limit: 2, routes: ["/reports/*", "/work/*", "/boom"] } }
  end

  # A Puma serving the app; stopped (TERM, and waited for) by #stop.
  class Server
    attr_reader :port, :log

    def initialize(policy, workers: 0, env: {})
      @port = FloodwallTest.free_port
      @log = File.join(RailsApp.tmp, "puma-#{@port}.log")
      cluster = workers.positive? ? ["-w", workers.to_s, "--preload"] : []
      File.write(policy_file = File.join(RailsApp.tmp, "policy-#{@port}.json"), JSON.generate(policy))
      @pid = Process.spawn({ "FLOODWALL_POLICY" => policy_file, "RAILS_ENV" => "production" }.merge(env),
                           ENV.fetch("PUMA", "puma"), "-b", "tcp://127.0.0.1:#{@port}", "-t", "1:8",
                           "-e", "production", *cluster, "config.ru",
                           chdir: DIR, out: @log, err: @log, pgroup: true)
      FloodwallTest.wait_for_port(@port, pid: @pid, timeout: 90)
    rescue StandardError
      stop
      raise "puma did not start: #{File.exist?(@log) ? File.read(@log) : "no log"}"
    end

    def stop
      return unless @pid

      Process.kill("TERM", @pid)
      Process.wait(@pid)
      @pid = nil
    end

    def get(path, from: "127.0.0.1", headers: {})
      http = Net::HTTP.new("127.0.0.1", @port)
      http.read_timeout = 30
      http.local_host = from
      http.start { http.get(path, headers) }
    end

    def post(path)
      http = Net::HTTP.new("127.0.0.1", @port)
      http.read_timeout = 30
      http.start { http.post(path, "") }
    end

    def json(path) = JSON.parse(get(path).body)

    # Sends a GET and leaves without reading the answer: a client gone while the app works.
    def get_and_leave(path, from:)
      socket = Socket.tcp("127.0.0.1", @port, from, 0)
      socket.write("GET #{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
      socket
    end

    # GET <route>/<id>?hold=<hold> for each id, one after the other, each once the app runs the one before
    # (it makes "<hold>.<id>.in"): the requests in flight, in the app, until <hold> exists. The sockets.
    def hold(route, ids, hold, from:)
      ids.map do |id|
        socket = get_and_leave("#{route}/#{id}?hold=#{hold}", from: from)
        raise "#{route}/#{id} never reached the app" unless FloodwallTest.eventually(timeout: 20) { File.exist?("#{hold}.#{id}.in") }

        socket
      end
    end
  end
end

# The tests one Puma (single mode) runs, on the store its class names. Each test speaks from an address
# (a tenant) of its own, so the tests share one server and still do not share buckets.
module RailsSingleMode
  include FloodwallTest

  def server
    self.class.server
  end

  def hold_file
    @hold_file ||= File.join(RailsApp.tmp, "hold-#{self.class.name}-#{name}")
  end

  def teardown
    FileUtils.touch(hold_file) if @hold_file # lets every held request go
    super
  end

  def test_a_limit_on_orders_globs_limits_get_orders_42_by_its_rails_route
    assert_equal %w[200 200 429], Array.new(3) { server.get("/orders/42", from: "127.0.1.1").code }
    refused = server.get("/orders/42", from: "127.0.1.1")
    assert_equal "application/json", refused["Content-Type"]
    assert_equal %w[orders request_rate], JSON.parse(refused.body)["error"].values_at("policy", "limit_type")
    assert_match(/"orders";q=2;w=2000/, refused["RateLimit-Policy"])
    assert_operator Integer(refused["Retry-After"]), :>=, 1
    assert_equal "429", server.get("/orders/7.json", from: "127.0.1.1").code, "the same rule, with a format"
    assert_equal "429", server.get("/orders", from: "127.0.1.1").code, "/orders is the same rule's"
    other = server.get("/other", from: "127.0.1.1")
    assert_equal "200", other.code
    refute_match(/"orders"/, other["RateLimit-Policy"])
    assert_equal "200", server.get("/mounted/orders/1", from: "127.0.1.1").code, "a mounted app: its path, no glob"
  end

  def test_the_route_families_are_the_apps_route_patterns
    (1..5).each { |id| assert_equal "200", server.get("/orders/#{id}", from: "127.0.2.#{id}").code }
    families = server.json("/floodwall/stats").fetch("route_families")
    assert_includes families, "/orders/:id", "Rails' pattern, made canonical"
    assert(families.none? { |f| f.match?(/\d/) }, families.inspect)
  end

  def test_the_health_check_is_skipped
    up = server.get("/up", from: "127.0.12.1")
    assert_equal "200", up.code
    assert_nil up["RateLimit-Limit"], "skip: no decision, no limit headers"
    assert_equal "1000", server.get("/other", from: "127.0.12.1")["RateLimit-Limit"]
  end

  def test_the_middleware_is_last_in_the_stack_after_the_session
    stack = server.json("/floodwall/stats").fetch("middleware")
    assert_equal "Floodwall::RailsMiddleware", stack.last
    assert_operator stack.index("ActionDispatch::Session::CookieStore"), :<, stack.index("Floodwall::RailsMiddleware")
  end

  # Two reports hold the two slots of concurrency.routes "/reports/*"; their clients leave before the
  # answer; the slots come back once Puma is done with the responses.
  def test_a_concurrency_glob_holds_and_clients_that_leave_give_their_slots_back
    sockets = server.hold("/reports", [1, 2], hold_file, from: "127.0.3.1")
    refused = server.get("/reports/4", from: "127.0.3.1")
    assert_equal "429", refused.code
    assert_equal "concurrency", JSON.parse(refused.body).dig("error", "limit_type")
    assert_equal "200", server.get("/other", from: "127.0.3.1").code, "a path outside the globs takes no slot"
    sockets.each(&:close)
    FileUtils.touch(hold_file)
    back = eventually(timeout: 20) { server.get("/reports/5", from: "127.0.3.1").code == "200" }
    assert back, "the slots of the clients that left came back"
    # The probe's own slot goes back when Puma closes its body, a moment after its client has the answer
    # (the next request came first once in make test): waited for, not raced.
    assert eventually(timeout: 20) { server.get("/reports/6", from: "127.0.3.1").code == "200" },
           "the slot of a request that was answered came back"
  end

  def test_the_slot_is_released_when_the_action_raises
    codes = Array.new(4) { server.get("/boom", from: "127.0.4.1").code }
    assert_equal %w[500 500 500 500], codes, "a leaked slot would make the third a 429"
  end

  def test_the_concurrency_limit_is_never_exceeded
    codes = Queue.new
    threads = Array.new(6) do |t|
      Thread.new { 5.times { |i| codes << server.get("/work/#{t}-#{i}", from: "127.0.5.1").code } }
    end
    threads.each(&:join)
    all = Array.new(codes.size) { codes.pop }
    assert_empty all - %w[200 429 503], all.tally.inspect
    assert_includes all, "200"
    in_flight = server.json("/floodwall/stats").fetch("in_flight_max")
    assert_operator in_flight, :<=, 2, "concurrency.limit 2"
    assert_operator in_flight, :>=, 1
  end

  def test_403_for_a_tenant_blocked_through_the_admin_api
    assert_equal "200", server.post("/floodwall/block?tenant=ip:127.0.7.1").code
    blocked = server.get("/other", from: "127.0.7.1")
    assert_equal "403", blocked.code
    assert_equal "application/json", blocked["Content-Type"]
    refute_nil JSON.parse(blocked.body)["error"]
    assert_equal "200", server.get("/other", from: "127.0.7.2").code
  end

  def test_the_key_is_the_signed_in_account_the_app_names
    cookie = server.get("/sign_in/alice", from: "127.0.8.1")["Set-Cookie"][/\A[^;]+/]
    signed_in = %w[127.0.8.2 127.0.8.3 127.0.8.4].map { |from| server.get("/orders/1", from: from, headers: { "Cookie" => cookie }).code }
    assert_equal %w[200 200 429], signed_in, "one account, one bucket, from any address"
    assert_equal "200", server.get("/orders/1", from: "127.0.8.2").code, "signed out: the address's own bucket"
  end

  def test_a_refusal_publishes_reject_floodwall
    3.times { server.get("/orders/9001", from: "127.0.9.1") }
    events = server.json("/floodwall/events").select { |e| e["path"] == "/orders/9001" }
    assert_equal [{ "name" => "reject.floodwall", "path" => "/orders/9001", "status" => 429, "rule" => "orders",
                    "fail_reason" => nil }], events
  end
end

# The fleet shedder's 503: three requests in flight fill fleet.capacity 3.
module RailsFleet
  include FloodwallTest

  def test_503_from_the_fleet_shedder
    server = RailsApp::Server.new({ store: store, redis: { deadline_ms: 5000, connect_timeout_ms: 5000 },
                                    fleet: { capacity: 3 } })
    hold_file = File.join(RailsApp.tmp, "hold-#{self.class.name}-#{name}")
    sockets = server.hold("/slow", [1, 2, 3], hold_file, from: "127.0.6.1")
    shed = server.get("/other", from: "127.0.6.9")
    assert_equal "503", shed.code
    assert_equal "application/json", shed["Content-Type"]
    assert_equal "fleet", JSON.parse(shed.body).dig("error", "limit_type")
    assert_operator Integer(shed["Retry-After"]), :>=, 1
    FileUtils.touch(hold_file)
    sockets.each(&:close)
    assert eventually(timeout: 20) { server.get("/other", from: "127.0.6.9").code == "200" }
    rejects = server.json("/floodwall/events").select { |e| e["name"] == "reject.floodwall" }
    refute_empty rejects
    assert_equal [[503, "/other"]], rejects.map { |e| [e["status"], e["path"]] }.uniq
  ensure
    server&.stop
  end
end

class TestRailsFleetMemory < Minitest::Test
  include RailsFleet
  def store = "memory://"
end

class TestRailsFleetRedis < Minitest::Test
  include RailsFleet
  def store = FloodwallTest::Redis.instance.url(5)
end

class TestRailsMemory < Minitest::Test
  include RailsSingleMode

  def self.server
    @server ||= RailsApp::Server.new(RailsApp.policy("memory://")).tap { |s| Minitest.after_run { s.stop } }
  end
end

class TestRailsRedis < Minitest::Test
  include RailsSingleMode

  def self.server
    @server ||= begin
      redis = FloodwallTest::Redis.instance
      RailsApp::Server.new(RailsApp.policy(redis.url(3))).tap { |s| Minitest.after_run { s.stop } }
    end
  end
end

class TestRailsBoot < Minitest::Test
  include FloodwallTest

  def boot(env, policy: RailsApp.policy("memory://"))
    File.write(policy_file = File.join(RailsApp.tmp, "policy-boot-#{name}.json"), JSON.generate(policy))
    env = { "FLOODWALL_POLICY" => policy_file, "RAILS_ENV" => "production" }.merge(env)
    out = IO.popen(env, [RbConfig.ruby, "-e", 'require "./config/environment"; puts Floodwall::Railtie.client.class'],
                   chdir: RailsApp::DIR, err: %i[child out], &:read)
    [$?.success?, out]
  end

  def test_an_unknown_config_floodwall_option_stops_the_boot_naming_it
    ok, out = boot({ "FW_BOGUS_OPTION" => "1" })
    refute ok, out
    assert_match(/config\.floodwall\.bogus: unknown option/, out)
  end

  def test_a_bad_policy_stops_the_boot_naming_its_field
    ok, out = boot({}, policy: { request_rate: { rate: -1, burst: 1 } })
    refute ok, out
    assert_match(/request_rate\.rate/, out)
  end

  def test_the_app_boots_with_the_client
    ok, out = boot({})
    assert ok, out
    assert_equal "Floodwall::Client", out.lines.last.chomp
  end

  # Redis unreachable: the requests are decided by the fallback (allowed here), and each says so in a
  # degraded.floodwall event.
  def test_a_request_the_store_did_not_decide_publishes_degraded_floodwall
    dead = FloodwallTest.free_port
    server = RailsApp::Server.new({ store: "redis://127.0.0.1:#{dead}/0", redis: { deadline_ms: 200, connect_timeout_ms: 200 },
                                    request_rate: { rate: 1000, burst: 1000 } })
    assert_equal "200", server.get("/other").code
    events = server.json("/floodwall/events")
    refute_empty events
    assert_equal ["degraded.floodwall"], events.map { |e| e["name"] }.uniq
    assert_includes events.map { |e| e["path"] }, "/other"
    refute_nil events.first["fail_reason"]
  ensure
    server&.stop
  end
end

# Puma's cluster mode: the app (and its client, which has decided once on Redis) is booted in the master
# and forked into two workers (preload_app!); both decide on the one Redis.
class TestRailsPumaCluster < Minitest::Test
  include FloodwallTest

  def setup
    @redis = FloodwallTest::Redis.instance
    # "others": a bucket that the requests to /other spend (the policy's own refills faster than they come).
    others = { name: "others", routes: ["/other"], rate: 0.001, burst: 200 }
    @server = RailsApp::Server.new(RailsApp.policy(@redis.url(4), limits: [RailsApp::ORDERS, others]), workers: 2,
                                   env: { "FW_ADMIT_AT_BOOT" => "1" })
  end

  def teardown
    @server&.stop
  end

  def test_both_forked_workers_decide_on_one_redis_bucket
    seen = []
    both = eventually(timeout: 60) do
      r = @server.get("/other", from: "127.0.10.1")
      seen << [r.body[/\d+/].to_i, Integer(r["RateLimit-Remaining"])] if r.code == "200"
      seen.map(&:first).uniq.size == 2
    end
    assert both, "two workers should answer (#{seen.map(&:first).uniq})"
    remaining = seen.map(&:last)
    assert_equal remaining.sort.reverse, remaining, "one bucket in Redis, spent by both workers in turn"
    assert_equal remaining.size, remaining.uniq.size, "no token counted twice"
    assert_equal %w[200 200 429], Array.new(3) { @server.get("/orders/42", from: "127.0.10.2").code }
    codes = Array.new(8) { @server.get("/orders/42", from: "127.0.10.2").code }
    assert_equal ["429"], codes.uniq, "every worker refuses the spent rule"
  end

  def test_the_concurrency_limit_holds_across_workers
    hold = File.join(RailsApp.tmp, "hold-cluster")
    sockets = @server.hold("/reports", [1, 2], hold, from: "127.0.11.1")
    assert_equal "429", @server.get("/reports/3", from: "127.0.11.1").code, "two held in the workers' threads"
    FileUtils.touch(hold)
    sockets.each(&:close)
    assert eventually(timeout: 20) { @server.get("/reports/4", from: "127.0.11.1").code == "200" }
  end
end
