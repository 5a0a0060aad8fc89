# frozen_string_literal: true

# Shared by every suite: loads the installed gem (packaging/test-ruby.sh installs it into a throwaway
# GEM_HOME), starts one throwaway redis-server for the run, and serves Rack apps over real sockets.
require "minitest/autorun"
require "floodwall"
require "json"
require "net/http"
require "socket"
require "securerandom"
require "timeout"

module FloodwallTest
  ROOT = File.expand_path("../..", __dir__)

  module_function

  # A port for a server the test starts: random below the kernel's ephemeral range (32768-60999), checked
  # by binding it. Port 0's port is one any outgoing connection may take as its local port before the server
  # binds it (a cluster node's bus port was taken so once in make test's lanes).
  def free_port
    200.times do
      port = 20_000 + SecureRandom.random_number(12_000)
      begin
        TCPServer.new("127.0.0.1", port).close
        return port
      rescue SystemCallError
        next
      end
    end
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end

  def wait_for_port(port, pid: nil, timeout: 30)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      TCPSocket.new("127.0.0.1", port).close
      return
    rescue SystemCallError
      raise "process #{pid} exited before listening on #{port}" if pid && Process.waitpid(pid, Process::WNOHANG)
      raise "nothing listens on #{port} after #{timeout}s" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.05
    end
  end

  # One redis-server on a free port for the whole run; a missing redis-server fails the tests using it.
  class Redis
    def self.instance
      @instance ||= new.tap { |redis| Minitest.after_run { redis.stop } }
    end

    attr_reader :port

    def initialize
      @port = FloodwallTest.free_port
      @pid = Process.spawn(ENV.fetch("REDIS_SERVER", "redis-server"), "--port", @port.to_s, "--bind", "127.0.0.1",
                           "--save", "", "--appendonly", "no", out: File::NULL, err: File::NULL)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
      until (command("PING") rescue nil) == "PONG"
        raise "redis-server exited" if Process.waitpid(@pid, Process::WNOHANG)
        raise "redis-server did not answer PING" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        sleep 0.05
      end
    end

    def url(db = 0)
      "redis://127.0.0.1:#{@port}/#{db}"
    end

    # One command over a fresh connection (RESP), for test set-up: FLUSHALL, CLIENT PAUSE, KEYS.
    def command(*args)
      TCPSocket.open("127.0.0.1", @port) do |s|
        s.write("*#{args.size}\r\n" + args.map { |a| "$#{a.to_s.bytesize}\r\n#{a}\r\n" }.join)
        read_reply(s)
      end
    end

    # Holds every reply back (SIGSTOP) while the block runs, then lets Redis go on (SIGCONT), whatever
    # the block raised. Unlike CLIENT PAUSE it has no fixed length: a test waits for what it wants to see
    # (every thread inside its admit, say) instead of racing a timer on a busy machine.
    def stopped
      Process.kill("STOP", @pid)
      yield
    ensure
      Process.kill("CONT", @pid)
    end

    def stop
      return unless @pid

      Process.kill("TERM", @pid)
      Process.wait(@pid)
      @pid = nil
    end

    private

    def read_reply(s)
      line = s.gets("\r\n").chomp("\r\n")
      case line[0]
      when "+" then line[1..]
      when "-" then raise "redis: #{line[1..]}"
      when ":" then line[1..].to_i
      when "$" then line[1..].to_i.negative? ? nil : s.read(line[1..].to_i + 2).chomp("\r\n")
      when "*" then Array.new(line[1..].to_i) { read_reply(s) }
      end
    end
  end

  # Serves a Rack app over a real socket on 127.0.0.1 with Puma or WEBrick (both from Debian), in this
  # process, so that a test can look at the client's state after each HTTP exchange.
  class Server
    attr_reader :port

    def self.open(app, kind)
      server = new(app, kind)
      yield server
    ensure
      server&.stop
    end

    def initialize(app, kind)
      @port = FloodwallTest.free_port
      @kind = kind
      case kind
      when :puma
        require "puma"
        require "puma/server"
        @puma = Puma::Server.new(app, Puma::Events.null, min_threads: 1, max_threads: 8)
        @puma.add_tcp_listener("127.0.0.1", @port)
        @thread = @puma.run
      when :webrick
        require "webrick"
        require "rack/handler/webrick"
        @webrick = WEBrick::HTTPServer.new(BindAddress: "127.0.0.1", Port: @port, AccessLog: [],
                                           Logger: WEBrick::Log.new(File::NULL))
        @webrick.mount("/", ::Rack::Handler::WEBrick, app)
        @thread = Thread.new { @webrick.start }
      else raise ArgumentError, kind.to_s
      end
      FloodwallTest.wait_for_port(@port)
    end

    # from: the client's own address, any of 127.0.0.0/8 (Linux answers them all on the loopback), so
    # that the server sees requests from different REMOTE_ADDRs.
    # (Header names given without braces are Ruby keywords: `more` takes them.)
    def get(path, headers = {}, from: nil, **more)
      http = Net::HTTP.new("127.0.0.1", @port)
      http.read_timeout = 10
      http.local_host = from if from
      http.start { http.get(path, headers.merge(more)) }
    end

    # A POST with an empty body, from 127.0.0.1.
    def post(path, headers = {})
      http = Net::HTTP.new("127.0.0.1", @port)
      http.read_timeout = 10
      http.start { http.post(path, "", headers) }
    end

    def stop
      @puma&.stop(true)
      @webrick&.shutdown
      @thread&.join(10)
    end
  end

  # True once every thread of +threads+ sleeps (a Ruby thread inside a call that released the GVL and
  # waits, or one blocked on I/O), false if that has not happened within +timeout+ seconds.
  # Admits until one is decided by Redis itself: on a loaded machine a fresh client's first connect can
  # take longer than its connect_timeout_ms, and the admits meanwhile are the fallback's (with the breaker
  # open for a second), which a test about waiting on Redis must not start from.
  def warm_up(fw)
    answered = eventually(timeout: 10) do
      d = fw.admit(tenant: "warm-up")
      fw.release(d)
      !d.degraded? && !d.failed_open?
    end
    assert answered, "Redis should answer a warm-up admit within 10 s"
  end

  def all_waiting?(threads, timeout: 10)
    eventually(timeout: timeout) { threads.all? { |t| t.status == "sleep" } }
  end

  # Waits (boundedly) until the block is true: the server closes a body after the client has its bytes.
  def eventually(timeout: 5)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until (result = yield)
      return result if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.01
    end
    result
  end
end
