# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "securerandom"

# The floodwall command as the gem installs it (exe/floodwall, in GEM_HOME's bin/): the C library's own
# (fw_cli_run). Against the suite's redis-server: each change seen by a Ruby client in another process (this
# test) at its next request; --json read back; bad input and an unreachable store said with their exit
# statuses.
class CliTest < Minitest::Test
  include FloodwallTest

  def command
    exe = File.join(ENV.fetch("GEM_HOME", ""), "bin", "floodwall")
    assert File.executable?(exe), "gem install put no floodwall executable at #{exe}"
    exe
  end

  def floodwall(*args, store: nil)
    env = { "FLOODWALL_STORE" => store }
    out, err, status = Open3.capture3(env, command, *args)
    [status.exitstatus, out, err]
  end

  def test_help_and_version_are_the_commands
    code, out, = floodwall("--help")
    assert_equal 0, code
    assert out.start_with?("Usage: floodwall [OPTIONS] COMMAND [ARGS]\n"), out
    assert_equal [0, "floodwall #{Floodwall::Native.version}\n", ""], floodwall("--version")
  end

  def test_block_and_override_reach_a_ruby_client_of_the_same_store
    redis = Redis.instance
    prefix = "cli#{SecureRandom.hex(4)}"
    fw = Floodwall::Client.new(store: redis.url, prefix: prefix, redis: { deadline_ms: 2000 },
                               request_rate: { rate: 0.001, burst: 2 })
    assert_equal 200, fw.admit(tenant: "rb-acme").status
    code, out, err = floodwall("--prefix", prefix, "block", "rb-acme", "--for", "2h", "--json", store: redis.url)
    assert_equal 0, code, err
    shown = JSON.parse(out)
    assert_equal ["rb-acme", true], [shown["tenant"], shown["blocked"]]
    d = fw.admit(tenant: "rb-acme")
    assert_equal 403, d.status
    assert d.blocked?
    assert_equal 0, floodwall("--prefix", prefix, "unblock", "rb-acme", store: redis.url).first
    assert_equal 200, fw.admit(tenant: "rb-acme").status
    code, out, = floodwall("--prefix", prefix, "override", "set", "rb-acme", "--rate", "1", "--burst", "6",
                           store: redis.url)
    assert_equal [0, "rb-acme: now rate 1/s, burst 6, from its next request\n"], [code, out]
    assert_equal 6, fw.admit(tenant: "rb-acme").limit
  ensure
    fw&.close
  end

  def test_bad_input_and_an_unreachable_store
    code, out, err = floodwall("block", "t", "--for", "forever", store: Redis.instance.url)
    assert_equal [2, ""], [code, out]
    assert_includes err, '--for: "forever" is not a duration'
    port = free_port
    code, out, err = floodwall("status", store: "redis://ops:r00t@127.0.0.1:#{port}")
    assert_equal 1, code
    assert_includes err, "cannot reach redis://ops:***@127.0.0.1:#{port} (connection refused)"
    refute_includes out + err, "r00t"
  end
end
