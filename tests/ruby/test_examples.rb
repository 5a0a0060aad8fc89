# frozen_string_literal: true

require_relative "test_helper"

# A new user's path: the README's Rack and Sinatra examples, run as written as real servers (rackup and
# ruby, in child processes, on the gem that packaging/test-ruby.sh installed), hit over HTTP. (The Rails
# example, an initializer, runs in tests/ruby/test_rails.rb's app.)
class TestExamples < Minitest::Test
  include FloodwallTest

  EXAMPLES = File.join(FloodwallTest::ROOT, "bindings/ruby/examples")

  def test_the_readme_shows_the_examples_as_they_are
    readme = File.read(File.join(FloodwallTest::ROOT, "bindings/ruby/README.md"))
    %w[config.ru sinatra_app.rb rails/config/initializers/floodwall.rb].each do |name|
      assert_includes readme, File.read(File.join(EXAMPLES, name)), "README.md should show examples/#{name} verbatim"
    end
  end

  def test_the_rack_example_under_rackup
    port = FloodwallTest.free_port
    run_server(["rackup", "-o", "127.0.0.1", "-p", port.to_s, File.join(EXAMPLES, "config.ru")], port)
  end

  def test_the_sinatra_example
    port = FloodwallTest.free_port
    run_server([RbConfig.ruby, File.join(EXAMPLES, "sinatra_app.rb"), "-o", "127.0.0.1", "-p", port.to_s], port)
  end

  private

  def run_server(command, port)
    log = File.join(Dir.tmpdir, "floodwall-example-#{port}.log")
    pid = Process.spawn(*command, chdir: File.join(FloodwallTest::ROOT, "bindings/ruby"), out: log, err: log)
    begin
      FloodwallTest.wait_for_port(port, pid: pid)
    rescue RuntimeError
      flunk "#{command.join(" ")} did not start:\n#{File.read(log)}"
    end
    Net::HTTP.start("127.0.0.1", port, read_timeout: 10) do |http|
      first = http.get("/", "X-API-Key" => "acme")
      assert_equal "200", first.code, File.read(log)
      assert_equal "hello\n", first.body
      assert_equal '"request_rate";q=10;w=2, "concurrency";q=4;qu="concurrent-requests"', first["RateLimit-Policy"]
      assert_equal "9", first["RateLimit-Remaining"]
      rejected = 100.times.lazy.map { http.get("/", "X-API-Key" => "acme") }.find { |r| r.code == "429" }
      assert rejected, "a burst of 100 requests should meet the limit of 10 (+5/s)"
      assert_operator Integer(rejected["Retry-After"]), :>=, 1
      assert_equal "request_rate", JSON.parse(rejected.body).dig("error", "limit_type")
      assert_equal "application/json", rejected["Content-Type"]
      # The core's tenant: a Bearer token of the same value is the same caller, whose bucket the burst
      # spent (5 tokens a second refill it: on a loaded machine one may be back, never a fresh bucket's 9).
      bearer = http.get("/", "Authorization" => "Bearer acme")
      assert bearer.code == "429" || Integer(bearer["RateLimit-Remaining"]) < 8,
             "a Bearer token of the same value is the same caller: #{bearer.code} #{bearer.to_hash}"
      assert_equal "200", http.get("/", "X-API-Key" => "globex").code, "issued keys are tenants apart"
      made_up = 100.times.lazy.map { |i| http.get("/", "X-API-Key" => "made-up-#{i}") }.find { |r| r.code == "429" }
      assert made_up, "made-up keys all spend one bucket, their address's: 100 of them meet its limit"
      assert_equal "200", http.get("/", "X-API-Key" => "globex").code, "an issued key keeps its own bucket"
      health = http.get("/health")
      assert_equal "200", health.code, "skip: health checks are not limited"
      assert_nil health["RateLimit-Limit"]
    end
  ensure
    if pid
      begin
        Process.kill("TERM", pid)
        Process.wait(pid)
      rescue Errno::ESRCH, Errno::ECHILD # it had exited already (and wait_for_port reaped it)
      end
    end
    File.delete(log) if log && File.exist?(log)
  end
end
