# frozen_string_literal: true

require_relative "test_helper"
require "rack"
require "securerandom"

# Issue #50 replayed over real HTTP (Puma, in this process), on memory:// and on a throwaway redis-server:
# a client that invents a new X-API-Key or Bearer token per request gets no bucket of its own. With the
# middleware's defaults it is admitted no more than one tenant's allowance, its address's; with a verify:
# hook the keys the app issued keep their own buckets behind that same address, and a hook that raises or
# answers too late counts as "not vouched" (the address), reported once, never a 500.
module TenantFloodSuite
  include FloodwallTest

  HELLO = ->(_env) { [200, { "Content-Type" => "text/plain" }, ["hello"]] }
  ISSUED = Array.new(5) { |i| "issued-key-#{i}" }.freeze
  VERIFY = ->(credential, _env) { ISSUED.include?(credential) }
  FLOOD = { request_rate: { rate: 1, burst: 3 } }.freeze
  TENANT_SECTION = { from: %w[x-api-key authorization ip] }.freeze

  def serve(policy, inner = HELLO, **options, &block)
    @fw = Floodwall::Client.new(store_policy.merge(policy))
    warm_up(@fw) if redis?
    fw = @fw
    app = Rack::Builder.new do
      use Floodwall::Rack, client: fw, **options
      run inner
    end
    FloodwallTest::Server.open(app.to_app, :puma, &block) # one middleware for every request, as rackup makes it
  ensure
    @fw&.close
  end

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def made_up_key = { "X-API-Key" => SecureRandom.hex(16) }

  def made_up_token = { "Authorization" => "Bearer #{SecureRandom.hex(16)}" }

  # 40 requests from one address, each with a new X-API-Key, then 40 each with a new Bearer token: the
  # allowed ones are no more than the address's bucket gives over the time they took, burst 3 plus 1 a
  # second (and one for rounding).
  def assert_one_allowance(server)
    started = now
    codes = Array.new(40) { server.get("/", made_up_key).code } + Array.new(40) { server.get("/", made_up_token).code }
    elapsed = now - started
    assert_equal %w[200 429], codes.uniq.sort, "only 200s and 429s: #{codes.tally}"
    allowed = codes.count("200")
    bound = 3 + (1 * elapsed).ceil + 1
    assert_operator allowed, :<=, bound, "#{allowed} of 80 made-up credentials allowed in #{elapsed.round(2)} s"
    assert_no_bucket_per_credential
  end

  # On Redis, the flood made no bucket for any credential: every key it left is an address's (or the
  # warm-up's).
  def assert_no_bucket_per_credential
    return unless redis?

    keys = FloodwallTest::Redis.instance.command("KEYS", "#{@prefix}:*")
    refute_empty keys
    assert(keys.none? { |k| k.include?("key:") }, "made-up credentials made buckets: #{keys.inspect}")
  end

  def test_made_up_credentials_from_one_address_get_one_allowance
    serve(FLOOD) { |server| assert_one_allowance(server) }
  end

  def test_made_up_credentials_get_one_allowance_with_a_tenant_section_too
    serve(FLOOD.merge(tenant: TENANT_SECTION)) { |server| assert_one_allowance(server) }
  end

  # Honest tenants behind one NAT address: made-up keys spend the address's bucket, and each of the five
  # keys the app issued still gets its own 3. (A rate of 0.001/s: nothing refills while the test runs, so
  # every count is exact.)
  def test_issued_keys_keep_their_own_buckets_behind_an_address_that_made_up_keys_spent
    serve({ request_rate: { rate: 0.001, burst: 3 } }, HELLO, verify: VERIFY) do |server|
      spent = Array.new(4) { |i| server.get("/", i.even? ? made_up_key : made_up_token).code }
      assert_equal %w[200 200 200 429], spent, "made-up credentials: the address's bucket of 3"
      ISSUED.each_with_index do |key, i|
        credential = i.even? ? { "X-API-Key" => key } : { "Authorization" => "Bearer #{key}" }
        codes = Array.new(4) { server.get("/", credential).code }
        assert_equal %w[200 200 200 429], codes, "#{key}: a bucket of its own, from the spent address"
      end
      assert_equal %w[429 429 429], Array.new(3) { |i| server.get("/", i.even? ? made_up_key : made_up_token).code },
                   "made-up credentials still share the spent bucket"
      assert_no_bucket_per_credential_but_the_issued
    end
  end

  # The concurrency limiter alike: 8 simultaneous requests with made-up keys from one address hold at
  # most its 2 slots (the app holds each request until the test lets it go), and every slot comes back.
  def test_made_up_credentials_share_their_addresss_concurrency_slots
    gate = { open: false }
    inner = lambda do |_env|
      deadline = now + 10
      sleep 0.01 until gate[:open] || now > deadline
      [200, { "Content-Type" => "text/plain" }, ["done"]]
    end
    serve({ concurrency: { limit: 2 } }, inner) do |server|
      requests = Array.new(8) { Thread.new { server.get("/", made_up_key).code } }
      rejected_at_once = eventually(timeout: 10) { requests.count { |t| !t.alive? } >= 6 }
      gate[:open] = true
      codes = requests.map(&:value)
      assert rejected_at_once, "six of the eight should have been answered while two were held: #{codes.tally}"
      assert_equal({ "200" => 2, "429" => 6 }, codes.tally)
      both_back = eventually(timeout: 10) do
        held = Array.new(2) { @fw.admit(tenant: "ip:127.0.0.1") }
        held.each { |d| @fw.release(d) }
        held.all?(&:allowed?)
      end
      assert both_back, "both of the address's slots should come back"
      assert_equal "200", server.get("/", made_up_key).code
    end
  end

  # A hook that raises: every request is keyed by its address (429 once its bucket is spent, never a 500),
  # and the middleware warns once, naming the exception.
  def test_a_verify_hook_that_raises_keys_by_address_and_warns_once
    raising = ->(_credential, _env) { raise IOError, "key store unreachable" }
    codes = nil
    _out, err = capture_io do
      serve({ request_rate: { rate: 0.001, burst: 3 } }, HELLO, verify: raising) do |server|
        codes = ISSUED.map { |key| server.get("/", "X-API-Key" => key).code }
      end
    end
    assert_equal %w[200 200 200 429 429], codes
    assert_equal 1, err.scan(/floodwall: the verify hook raised IOError: key store unreachable/).size, err
  end

  # A hook slower than verify_timeout: its (yes) answer is not taken, the address is, warned once.
  def test_a_verify_hook_slower_than_verify_timeout_keys_by_address_and_warns_once
    slow = ->(credential, _env) { sleep 0.2; ISSUED.include?(credential) }
    codes = nil
    _out, err = capture_io do
      serve({ request_rate: { rate: 0.001, burst: 3 } }, HELLO, verify: slow, verify_timeout: 0.05) do |server|
        codes = ISSUED.map { |key| server.get("/", "X-API-Key" => key).code }
      end
    end
    assert_equal %w[200 200 200 429 429], codes
    assert_equal 1, err.scan(/floodwall: the verify hook answered after .*later than verify_timeout \(0\.050s\)/).size,
                 err
  end

  private

  def assert_no_bucket_per_credential_but_the_issued
    return unless redis?

    issued = ISSUED.map { |key| @fw.tenant_key(headers: [["X-API-Key", key]], verified: true) }
    keys = FloodwallTest::Redis.instance.command("KEYS", "#{@prefix}:*")
    credentials = keys.filter_map { |k| k[/\{(key:\h+)\}/, 1] }.uniq
    assert_equal issued.sort, credentials.sort, "buckets for the issued keys alone"
  end
end

class TestHTTPTenantFloodMemory < Minitest::Test
  include TenantFloodSuite

  def redis? = false

  def store_policy = { store: "memory://" }
end

class TestHTTPTenantFloodRedis < Minitest::Test
  include TenantFloodSuite

  def redis? = true

  # A prefix of its own per test on the run's redis-server, and a deadline that a loaded machine meets
  # (so that Redis, not the local fallback, decides).
  def store_policy
    @prefix = "flood-#{SecureRandom.hex(4)}"
    { store: FloodwallTest::Redis.instance.url, prefix: @prefix, redis: { deadline_ms: 2000 } }
  end
end
