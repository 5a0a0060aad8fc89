# frozen_string_literal: true

require_relative "test_helper"

# Client#acquire (#57 part 2): waits for the turn instead of a 429, on memory:// and a real redis-server;
# other threads run while it sleeps; an exception from another thread before the turn gives the
# reservation back; bad input named.
module AcquireTests
  def test_waits_for_its_turn_and_returns_admits_decision
    fw = client(request_rate: { rate: 20, burst: 1 })
    first = fw.acquire(tenant: "acme", max_wait: 1)
    assert first.allowed?
    assert_equal 0.0, first.waited
    second = fw.acquire(tenant: "acme", max_wait: 1.0)
    assert second.allowed?
    assert_equal 200, second.status
    assert second.waited.positive? && second.waited <= 0.05, "one token at 20/s: #{second.waited}"
    refute_empty second.headers
    fw.release(second)
    refute fw.admit(tenant: "acme").allowed?, "the acquired token was spent"
  end

  def test_a_block_gets_the_decision_and_releases_it
    fw = client(request_rate: { rate: 20, burst: 1 }, concurrency: { limit: 1 })
    fw.acquire(tenant: "acme") { |d| assert d.allowed? }
    fw.acquire(tenant: "acme") { |d| assert d.allowed? && d.waited.positive? }
  end

  def test_beyond_max_wait_is_admits_refusal_with_nothing_consumed
    fw = client(request_rate: { rate: 1, burst: 1 })
    assert fw.acquire(tenant: "acme", max_wait: 0.5).allowed?
    refused = fw.acquire(tenant: "acme", max_wait: 0.5)
    refute refused.allowed?
    assert_equal 429, refused.status
    assert_equal "request_rate", refused.limiter
    assert_operator refused.retry_after_s, :>=, 1
  end

  def test_bad_max_wait_and_cost_are_refused_naming_them
    fw = client(request_rate: { rate: 10, burst: 2 })
    [-1, -0.5, Float::NAN, Float::INFINITY].each do |bad|
      err = assert_raises(Floodwall::InvalidArgumentError) { fw.acquire(tenant: "acme", max_wait: bad) }
      assert_match(/max_wait/, err.message)
    end
    ["1", nil, true].each do |bad|
      err = assert_raises(TypeError) { fw.acquire(tenant: "acme", max_wait: bad) }
      assert_match(/max_wait/, err.message)
    end
    err = assert_raises(Floodwall::InvalidArgumentError) { fw.acquire(tenant: "acme", cost: 3) }
    assert_match(/cost/, err.message)
    assert fw.admit(tenant: "acme").allowed?
    assert fw.admit(tenant: "acme").allowed?, "the refusals took nothing"
  end

  def test_other_threads_run_while_it_waits
    fw = client(request_rate: { rate: 5, burst: 1 })
    fw.admit(tenant: "acme")
    ticks = 0
    stop = false
    ticker = Thread.new do
      until stop
        ticks += 1
        sleep 0.001
      end
    end
    d = fw.acquire(tenant: "acme", max_wait: 1) # about 200 ms
    stop = true
    ticker.join
    assert d.allowed? && d.waited.positive?
    assert_operator ticks, :>, 10, "another thread ran while acquire waited"
  end

  def test_threads_acquiring_go_in_turn_within_the_bound
    rate = 50.0
    burst = 10 # at least the callers that wait at once: max_wait caps at burst / rate
    fw = client(request_rate: { rate: rate, burst: burst })
    went = Queue.new
    refused = Queue.new
    threads = Array.new(6) do
      Thread.new do
        10.times do
          d = fw.acquire(tenant: "acme", max_wait: 5)
          went << Process.clock_gettime(Process::CLOCK_MONOTONIC)
          refused << d unless d.allowed?
          fw.release(d)
        end
      end
    end
    threads.each(&:join)
    assert refused.empty?, "nothing refused within max_wait"
    times = Array.new(went.size) { went.pop }.sort
    assert_equal 60, times.size
    times.each_index do |i|
      (i...times.size).each do |j|
        assert_operator j - i + 1, :<=, burst + rate * (times[j] - times[i] + 0.01) + 1, "window #{i}..#{j}"
      end
    end
  end

  def test_an_exception_before_the_turn_gives_the_reservation_back
    fw = client(request_rate: { rate: 1, burst: 2 })
    fw.acquire(tenant: "acme")
    fw.acquire(tenant: "acme") # the bucket is empty now
    waiter = Thread.new { fw.acquire(tenant: "acme", max_wait: 1.9) } # a second ahead
    waiter.report_on_exception = false
    sleep 0.05 until waiter.status == "sleep" && waiter.stop?
    sleep 0.05
    waiter.raise(RuntimeError, "gave up")
    assert_raises(RuntimeError) { waiter.value }
    # Given back: the next one has its turn (within 1.5 s), not a second after it (2 s).
    after = fw.acquire(tenant: "acme", max_wait: 1.5)
    assert after.allowed?, "the reservation's token came back"
  end

  def test_one_given_up_with_a_later_reservation_behind_it_keeps_its_tokens
    fw = client(request_rate: { rate: 1, burst: 3 })
    3.times { fw.release(fw.acquire(tenant: "acme")) }
    first = Thread.new { fw.acquire(tenant: "acme", max_wait: 2.9) } # a second ahead
    first.report_on_exception = false
    sleep 0.05
    second = Thread.new { fw.acquire(tenant: "acme", max_wait: 2.9) } # two seconds ahead
    second.report_on_exception = false
    sleep 0.05
    first.raise(RuntimeError, "gave up")
    assert_raises(RuntimeError) { first.value }
    third = fw.acquire(tenant: "acme", max_wait: 2.5) # three seconds ahead: beyond 2.5
    refute third.allowed?
    second.raise(RuntimeError, "gave up")
    assert_raises(RuntimeError) { second.value }
  end
end

class TestAcquireMemory < Minitest::Test
  include AcquireTests

  def client(policy)
    Floodwall::Client.new({ store: "memory://" }.merge(policy)).tap { |c| (@clients ||= []) << c }
  end

  def teardown
    (@clients || []).each(&:close)
  end
end

class TestAcquireRedis < Minitest::Test
  include AcquireTests

  def setup
    @redis = FloodwallTest::Redis.instance
  end

  def client(policy)
    prefix = "acq#{SecureRandom.hex(6)}"
    Floodwall::Client.new({ store: @redis.url, prefix: prefix, redis: { deadline_ms: 5000 } }.merge(policy))
                     .tap { |c| (@clients ||= []) << c }
  end

  def teardown
    (@clients || []).each(&:close)
  end
end
