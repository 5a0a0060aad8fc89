# frozen_string_literal: true

require_relative "test_helper"

# The same API against a real redis-server: the same decisions as the memory store, one bucket shared
# by clients, threads and processes, failing open, and admits that wait on Redis without the GVL.
class TestRedis < Minitest::Test
  include FloodwallTest

  def setup
    @redis = FloodwallTest::Redis.instance
    @redis.command("FLUSHALL")
  end

  def client(policy)
    Floodwall::Client.new({ store: @redis.url, redis: { deadline_ms: 5000 } }.merge(policy)).tap { |c| (@clients ||= []) << c }
  end

  def teardown
    (@clients || []).each(&:close)
  end

  def test_the_seed_decision_and_headers_are_the_same_as_on_the_memory_store
    d = client(request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 }).admit(tenant: "acme")
    assert d.allowed?
    refute d.failed_open? || d.degraded?, "redis-server on #{@redis.port} should have answered (#{d.fail_reason})"
    assert_equal({ "RateLimit-Policy" => '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"',
                   "RateLimit" => '"concurrency";r=19',
                   "RateLimit-Limit" => "500", "RateLimit-Remaining" => "499", "RateLimit-Reset" => "1" }, d.headers)
  end

  def test_a_request_rate_rejection_has_the_seed_body
    fw = client(request_rate: { rate: 100, burst: 500 })
    assert fw.admit(tenant: "acme", cost: 500).allowed?
    d = fw.admit(tenant: "acme", cost: 300)
    assert_equal [false, 429, "request_rate", 3], [d.allowed?, d.status, d.limiter, d.retry_after]
    assert_equal '{"error":{"type":"rate_limit_error","limit_type":"request_rate","message":"Request rate limit ' \
                 'exceeded: this request costs 300 tokens; the limit is 100 tokens/second sustained (bursts to 500). ' \
                 'Retry after 3s.","limit":500,"rate":100,"cost":300,"retry_after":3}}', d.body
    assert_equal "application/json", d.content_type
  end

  # A tenant derived from a verified credential is one bucket in Redis from any address, and the
  # credential is hashed: no Redis key holds it.
  def test_a_derived_tenant_shares_one_bucket_and_keeps_its_credential_out_of_redis
    one = client(request_rate: { rate: 0.001, burst: 2 })
    two = client(request_rate: { rate: 0.001, burst: 2 })
    token = [["Authorization", "Bearer s3cr3t-t0k3n"]]
    assert_equal 1, one.admit(headers: token, peer: "192.0.2.1", verified: true).remaining
    assert_equal 0, two.admit(headers: token, peer: "198.51.100.2", verified: true).remaining
    refute one.admit(headers: [["X-API-Key", "s3cr3t-t0k3n"]], verified: true).allowed?
    keys = @redis.command("KEYS", "*")
    refute_empty keys
    assert(keys.none? { |k| k.include?("s3cr3t") }, keys.inspect)
  end

  def test_concurrency_and_fleet_hold_slots_in_redis_until_released
    fw = client(concurrency: { limit: 1 }, fleet: { capacity: 2 })
    a = fw.admit(tenant: "a")
    d = fw.admit(tenant: "a")
    assert_equal [false, 429, "concurrency"], [d.allowed?, d.status, d.limiter]
    b = fw.admit(tenant: "b")
    d = fw.admit(tenant: "c")
    assert_equal [false, 503, "fleet"], [d.allowed?, d.status, d.limiter]
    assert fw.admit(tenant: "c", critical: true).allowed?
    [a, b].each { |x| fw.release(x) }
    assert fw.admit(tenant: "a").allowed?
  end

  def test_two_clients_share_one_bucket_through_redis
    one = client(request_rate: { rate: 0.001, burst: 10 })
    two = client(request_rate: { rate: 0.001, burst: 10 })
    allowed = 20.times.count { |i| (i.even? ? one : two).admit(tenant: "shared").allowed? }
    assert_equal 10, allowed
  end

  def test_binary_tenants_stay_apart_in_redis
    fw = client(request_rate: { rate: 0.001, burst: 1 })
    ["a", "a\0", "{a}", "a\r\nb", "\xff".b, "x" * 100_000].each do |t|
      assert fw.admit(tenant: t).allowed?, t[0, 8].inspect
      refute fw.admit(tenant: t).allowed?, t[0, 8].inspect
    end
  end

  def test_threads_on_one_tenant_get_exactly_the_burst
    fw = client(request_rate: { rate: 0.001, burst: 50 })
    counts = Array.new(8) { Thread.new { 25.times.count { fw.admit(tenant: "hot").allowed? } } }.map(&:value)
    assert_equal 50, counts.sum
  end

  def test_processes_on_one_tenant_get_exactly_the_burst
    policy = { store: @redis.url, request_rate: { rate: 0.001, burst: 40 }, redis: { deadline_ms: 5000 } }
    readers = Array.new(4) do
      reader, writer = IO.pipe
      pid = fork do
        reader.close
        fw = Floodwall::Client.new(policy)
        decisions = Array.new(30) { fw.admit(tenant: "hot") }
        # A decision that failed open (Redis slower than the deadline) was not counted by Redis.
        writer.puts(decisions.count { |d| d.allowed? && !d.failed_open? && !d.degraded? })
        fw.close
        exit!(0)
      end
      writer.close
      [pid, reader]
    end
    total = readers.sum do |pid, reader|
      n = Integer(reader.read)
      Process.wait(pid)
      n
    end
    assert_equal 40, total
  end

  # Puma's cluster mode with preload_app! forks workers after the app (and its client) was made.
  def test_a_client_made_before_fork_decides_in_the_child_on_the_same_bucket
    fw = client(request_rate: { rate: 0.001, burst: 5 }, redis: { deadline_ms: 2000 })
    assert_equal 4, fw.admit(tenant: "acme").remaining
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      d = fw.admit(tenant: "acme")
      writer.puts(JSON.generate([d.remaining, d.failed_open? || d.degraded?]))
      exit!(0)
    end
    writer.close
    child = Timeout.timeout(20) { reader.read }
    assert_equal [3, false], JSON.parse(child), "the child's admit should reach Redis, not hang or fail open"
    assert_equal 2, fw.admit(tenant: "acme").remaining
  ensure
    if pid
      Process.kill("KILL", pid) rescue nil
      Process.wait(pid) rescue nil
    end
  end

  def test_in_flight_requests_across_threads_never_exceed_the_concurrency_limit
    fw = client(concurrency: { limit: 3 })
    lock = Mutex.new
    in_flight = 0
    peak = 0
    served = Array.new(6) do
      Thread.new do
        20.times.count do
          fw.admit(tenant: "acme") do |d|
            next false unless d.allowed?

            lock.synchronize { peak = [peak, in_flight += 1].max }
            sleep 0.001
            lock.synchronize { in_flight -= 1 }
            true
          end
        end
      end
    end.sum(&:value)
    assert_operator peak, :<=, 3
    assert_operator served, :>, 0
    assert fw.admit(tenant: "acme").allowed?, "every slot should have been released"
  end

  def test_an_unreachable_redis_is_decided_by_the_local_fallback
    fw = Floodwall::Client.new(store: "redis://127.0.0.1:#{FloodwallTest.free_port}/0",
                               request_rate: { rate: 1, burst: 1 }, redis: { deadline_ms: 200, connect_timeout_ms: 200 })
    decisions = 3.times.map { fw.admit(tenant: "acme") }
    assert decisions.all?(&:degraded?), "the local table of the same policy decided"
    refute decisions.any?(&:failed_open?)
    assert_equal [true, false, false], decisions.map(&:allowed?), "burst 1, held in this process"
    assert_equal 429, decisions.last.status
    assert_includes %w[timeout connection breaker], decisions.last.fail_reason
    assert_equal 3, fw.metrics.dig("sources", "fallback")
  ensure
    fw&.close
  end

  def test_fallback_open_lets_through_and_says_so
    fw = Floodwall::Client.new(store: "redis://127.0.0.1:#{FloodwallTest.free_port}/0",
                               request_rate: { rate: 1, burst: 1 },
                               redis: { deadline_ms: 200, connect_timeout_ms: 200, fallback: "open" })
    d = 3.times.map { fw.admit(tenant: "acme") }.last
    assert d.allowed?
    assert d.failed_open?
    refute d.degraded?
    assert_equal 3, fw.metrics.dig("decisions", "request_rate", "failed_open")
  ensure
    fw&.close
  end

  # While Redis is stopped (SIGSTOP), eight threads admit: each admit waits on Redis without the GVL, so
  # all eight are in flight together and a ticker thread keeps running meanwhile. Redis goes on only once
  # all eight are seen waiting, so a busy machine makes the test slower, never wrong. Twenty rounds,
  # because an admit that finds an interrupt already pending as it starts (the VM's time-slice timer,
  # set while threads contend for the GVL) happens only in some: it must still give the GVL up, not wait
  # on Redis holding it (which stopped every other thread until the deadline, in about one round in ten).
  def test_admits_waiting_on_redis_release_the_gvl
    fw = client(request_rate: { rate: 1_000_000, burst: 1_000_000 })
    warm_up(fw) # connected, scripts loaded
    ticks = 0
    ticker = Thread.new { loop { ticks += 1; sleep 0.001 } }
    ticks_while_waiting = []
    decisions = []
    20.times do |round|
      returned = Queue.new
      admits = nil
      @redis.stopped do
        admits = Array.new(8) { |i| Thread.new { fw.admit(tenant: "paused-#{i}").tap { returned << true } } }
        assert all_waiting?(admits),
               "round #{round}: eight admits on a stopped Redis should all be waiting at once: #{admits.map(&:status)}"
        before = ticks
        # The ticker runs while the admits wait: waited for (a loaded machine can leave it unscheduled for a
        # 20 ms window), never as long as the deadline, after which an admit holding the GVL would return.
        ticked = eventually(timeout: 2) { ticks > before }
        ticks_while_waiting << ticks - before
        assert ticked, "round #{round}: the ticker thread should run while the admits wait"
        assert returned.empty?, "round #{round}: no admit should return while Redis is stopped (deadline 5 s)"
      end
      decisions.concat(admits.map(&:value))
    end
    ticker.kill
    puts format("\n  8 admits waiting on a stopped Redis, 20 rounds: %d-%d ticks of the other thread while they waited",
                ticks_while_waiting.min, ticks_while_waiting.max)
    assert_equal 160, decisions.size
    assert decisions.all?(&:allowed?)
    assert decisions.none? { |d| d.failed_open? || d.degraded? }, "every decision should come from Redis once it goes on"
    assert ticks_while_waiting.all?(&:positive?), "the ticker thread should have run while the admits waited"
  end

  # An exception sent from another thread while an admit waits on a stopped Redis, as Timeout and
  # Rack::Timeout send one: it reaches the admitting thread once the decision is in hand, and the slot
  # that decision took is given back instead of staying held until its TTL. Both forms of admit.
  def test_an_exception_from_another_thread_during_an_admit_gives_its_slot_back
    fw = client(concurrency: { limit: 1 })
    warm_up(fw) # connected, scripts loaded
    block_ran = false
    admitters = nil
    @redis.stopped do
      admitters = [Thread.new { fw.admit(tenant: "plain") },
                   Thread.new { fw.admit(tenant: "block") { block_ran = true } }]
      assert all_waiting?(admitters), "both admits should be waiting on the stopped Redis: #{admitters.map(&:status)}"
      admitters.each { |t| t.raise(Interrupt, "request timed out") }
    end
    admitters.each do |t|
      error = assert_raises(Interrupt) { t.value }
      assert_equal "request timed out", error.message
    end
    refute block_ran, "the block should not run once the exception is raised"
    %w[plain block].each do |tenant|
      d = fw.admit(tenant: tenant)
      assert d.allowed?, "#{tenant}: the interrupted admit's slot should have been given back (#{d.limiter})"
      refute d.failed_open? || d.degraded?
      fw.release(d)
    end
  end

  def test_closing_a_client_while_another_thread_waits_on_redis_is_safe
    fw = Floodwall::Client.new(store: @redis.url, request_rate: { rate: 100, burst: 100 }, redis: { deadline_ms: 5000 })
    warm_up(fw)
    @redis.command("CLIENT", "PAUSE", "300", "ALL")
    calling = Queue.new
    waiter = Thread.new { calling << true; fw.admit(tenant: "paused") }
    calling.pop
    sleep 0.05 # the waiter is now inside the admit, without the GVL
    fw.close
    assert waiter.value.allowed?
    assert_raises(Floodwall::ClosedError) { fw.admit(tenant: "acme") }
  end

  # Close (fw_client_close) while six threads admit on Redis in a loop, from two threads at once. Redis is
  # stopped first, and each worker seen inside an admit it began after that, when the closes start: they wait
  # for those admits (without the GVL, so the test thread runs meanwhile) and return only once Redis goes on. Every
  # call gives a decision or raises ClosedError, none after a close has returned gives a decision, every
  # worker ends on ClosedError, and later calls, a release of a held slot and a third close included, are
  # refused by the core (FW_ECLOSED) or harmless.
  def test_closing_a_client_while_threads_admit_on_redis
    # A deadline beyond all the stopped Redis' block below may take (up to 10 s for the workers and 10 for
    # the closes): no admit may run out, and the breaker open, while the closes are looked at. (With 5 s the test
    # failed once in five full suite runs here, the closes already returned; that the deadline was the cause
    # is a guess.)
    fw = Floodwall::Client.new(store: @redis.url, request_rate: { rate: 1_000_000, burst: 1_000_000 },
                               concurrency: { limit: 1000 }, redis: { deadline_ms: 30_000 })
    held = fw.admit(tenant: "held") # connected, scripts loaded; holds a concurrency slot
    refute held.failed_open? || held.degraded?
    refute_equal 0, held.ticket
    close_returned = false
    entered = Array.new(6, 0) # admits each worker has begun, and those that returned
    returned = Array.new(6, 0)
    workers = Array.new(6) do |i|
      Thread.new do
        outcomes = []
        loop do
          after_close = close_returned # read before the call starts
          begin
            entered[i] += 1
            d = fw.admit(tenant: "closing-#{i}")
            returned[i] += 1
            outcomes << (after_close ? :decision_after_close : (d.allowed? ? :allowed : :rejected))
            fw.release(d)
          rescue Floodwall::ClosedError => e
            outcomes << (e.code == Floodwall::Native::ECLOSED ? :closed : :bad_code)
            break
          end
        end
        outcomes
      end
    end
    sleep 0.05 # the workers admit and release freely for a while
    closers = nil
    @redis.stopped do
      # Inside an admit that Redis did not answer. A "sleep" status alone does not say so: a thread whose
      # admit was answered just before the stop is "sleep" too while it waits for the GVL, and is in no call
      # (a close then returned at once, about one full run in fifteen). So the GVL is given up for 200 ms:
      # such a thread takes it meanwhile and begins another admit, and each worker must be seen in the same
      # unreturned admit before and after.
      inside = eventually(timeout: 10) do
        before = entered.dup
        sleep 0.2
        workers.each_with_index.all? do |t, i|
          entered[i] == before[i] && entered[i] == returned[i] + 1 && t.status == "sleep"
        end
      end
      assert inside, "every worker should be inside an admit on the stopped Redis: #{workers.map(&:status)}"
      closers = Array.new(2) { Thread.new { fw.close } }
      assert all_waiting?(closers), "both closes should wait without the GVL: #{closers.map(&:status)}"
      sleep 0.05
      assert closers.all?(&:alive?), "a close should wait for the admits in progress on the stopped Redis"
    end
    assert closers.all? { |t| t.join(20) }, "both closes should return once Redis goes on"
    close_returned = true
    assert workers.all? { |t| t.join(20) }, "every worker should end: #{workers.map(&:status)}"
    outcomes = workers.map(&:value)
    outcomes.each_with_index do |o, i|
      assert_equal :closed, o.last, "worker #{i} should end on ClosedError: #{o.tally}"
      assert_equal [:closed], o - %i[allowed], "worker #{i}: only decisions, then one ClosedError: #{o.tally}"
    end
    assert_operator outcomes.sum { |o| o.count(:allowed) }, :>, 6, "the workers should have admitted before the close"
    assert fw.closed?
    assert_nil fw.close, "a third close is harmless"
    [-> { fw.admit(tenant: "after") }, -> { fw.release(held) }, -> { held.headers }, -> { fw.tenant_key(tenant: "x") },
     -> { fw.metrics }].each do |call|
      error = assert_raises(Floodwall::ClosedError) { call.call }
      assert_equal Floodwall::Native::ECLOSED, error.code
    end
  end
end
