# frozen_string_literal: true

require_relative "test_helper"
require "rack"
require "time"

# Floodwall::Backoff: full jitter, Retry-After as a floor, and retries against a real limited server.
class TestBackoff < Minitest::Test
  include FloodwallTest

  def test_full_jitter_stays_within_the_exponential_window_and_the_cap
    backoff = Floodwall::Backoff.new(base: 0.1, cap: 1.0, random: Random.new(42))
    8.times do |attempt|
      window = [1.0, 0.1 * (2**attempt)].min
      delays = Array.new(200) { backoff.delay(attempt) }
      assert delays.all? { |d| d >= 0 && d <= window }, "attempt #{attempt}: within [0, #{window}]"
      assert_operator delays.max - delays.min, :>, window / 2, "attempt #{attempt}: spread over the window"
    end
  end

  def test_retry_after_is_a_floor_with_the_jitter_on_top
    backoff = Floodwall::Backoff.new(base: 0.1, cap: 0.5, random: Random.new(1))
    delays = Array.new(100) { backoff.delay(3, retry_after: "2") }
    assert delays.all? { |d| d >= 2.0 && d <= 2.5 }
    assert_operator Floodwall::Backoff.new(cap: 0.1, base: 0.1).delay(0, retry_after: 30), :>=, 30,
                    "the server's Retry-After wins over the cap"
  end

  def test_retry_after_reads_seconds_and_http_dates
    now = Time.utc(2026, 1, 1, 12, 0, 0)
    assert_equal 7.0, Floodwall::Backoff.retry_after_seconds("7", now: now)
    assert_equal 90.0, Floodwall::Backoff.retry_after_seconds((now + 90).httpdate, now: now)
    assert_equal 0.0, Floodwall::Backoff.retry_after_seconds((now - 90).httpdate, now: now)
    assert_equal 90.0, Floodwall::Backoff.retry_after_seconds((now + 90).httpdate, now: now.to_i), "now: Unix seconds"
    assert_equal 90.0, Floodwall::Backoff.retry_after_seconds("Thursday, 01-Jan-26 12:01:30 GMT", now: now), "RFC 850"
    assert_equal 90.0, Floodwall::Backoff.retry_after_seconds("Thu Jan  1 12:01:30 2026", now: now), "asctime"
    assert_equal 3.0, Floodwall::Backoff.retry_after_seconds(3)
    assert_nil Floodwall::Backoff.retry_after_seconds("soon", now: now)
    assert_nil Floodwall::Backoff.retry_after_seconds("1.5", now: now)
    assert_nil Floodwall::Backoff.retry_after_seconds(nil)
  end

  # The one set of defaults of every language, FW_BACKOFF_INIT, read from the core.
  def test_the_defaults_are_the_cores
    backoff = Floodwall::Backoff.new
    assert_equal [0.1, 20.0, 5], [backoff.base, backoff.cap, backoff.attempts]
    assert_equal [0.1, 20.0, 5], [Floodwall::Backoff::DEFAULT_BASE, Floodwall::Backoff::DEFAULT_CAP,
                                  Floodwall::Backoff::DEFAULT_ATTEMPTS]
  end

  Fixed = Struct.new(:rand)

  # max(Retry-After, 0) + random * min(cap, base * 2**attempt), the random number from random:.
  def test_a_delay_is_the_cores_with_the_random_number_of_random
    backoff = Floodwall::Backoff.new(base: 0.5, cap: 4, random: Fixed.new(0.5))
    assert_in_delta 0.25, backoff.delay(0), 1e-12
    assert_in_delta 1.0, backoff.delay(2), 1e-12
    assert_in_delta 2.0, backoff.delay(10), 1e-12, "the cap"
    assert_in_delta 9.0, backoff.delay(3, retry_after: "7"), 1e-12, "Retry-After and the jitter on top"
    assert_in_delta 7.5, backoff.delay(1, retry_after: 7), 1e-12
    assert_in_delta 0.5, backoff.delay(1, retry_after: "soon"), 1e-12, "an unparseable Retry-After is none"
    error = assert_raises(ArgumentError) { Floodwall::Backoff.new(random: Fixed.new(1.0)).delay(0) }
    assert_match(/random/, error.message)
    assert_raises(ArgumentError) { backoff.delay(-1) }
  end

  def test_bad_settings_are_argument_errors_naming_the_setting
    { { base: 0 } => "base", { base: -1 } => "base", { base: 1, cap: 0.5 } => "cap", { attempts: 0 } => "attempts",
      { attempts: -1 } => "attempts", { attempts: 1.5 } => "attempts", { base: "1" } => "base",
      { base: Float::NAN } => "base" }.each do |settings, name|
      error = assert_raises(ArgumentError, settings.inspect) { Floodwall::Backoff.new(**settings) }
      assert_match(/#{name}/, error.message, settings.inspect)
    end
  end

  def test_it_retries_a_limited_server_and_honours_its_retry_after
    fw = Floodwall::Client.new(request_rate: { rate: 1, burst: 1 })
    app = Rack::Builder.new do
      use Floodwall::Rack, client: fw, key: ->(_env) { "caller" }
      run ->(_env) { [200, { "Content-Type" => "text/plain" }, ["ok"]] }
    end
    FloodwallTest::Server.open(app, :webrick) do |server|
      assert_equal "200", server.get("/").code
      slept = []
      attempts = 0
      backoff = Floodwall::Backoff.new(base: 0.05, cap: 0.2, attempts: 3, sleeper: ->(s) { slept << s; sleep(s) })
      response = backoff.run do |attempt|
        attempts = attempt + 1
        server.get("/")
      end
      assert_equal "200", response.code, "the retry after Retry-After should pass"
      assert_equal 2, attempts
      assert_operator slept.first, :>=, 1.0, "Retry-After: 1 is a floor"
      # With no waiting at all, the attempts run out and the last 429 comes back.
      counting = Floodwall::Backoff.new(attempts: 3, sleeper: ->(_s) {})
      calls = 0
      last = counting.run { calls += 1; server.get("/") }
      assert_equal ["429", 3], [last.code, calls]
    end
  ensure
    fw&.close
  end

  def test_it_understands_rack_triples
    calls = 0
    result = Floodwall::Backoff.new(sleeper: ->(_s) {}).run do
      calls += 1
      calls < 3 ? [503, { "retry-after" => "0" }, []] : [200, {}, []]
    end
    assert_equal [200, 3], [result[0], calls]
  end
end
