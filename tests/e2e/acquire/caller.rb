# frozen_string_literal: true

# One Ruby process of the polyglot acquire test: THREADS threads, each acquiring EACH times from one limit
# on Redis, from START (epoch seconds) on; one line per acquire: "ruby <went_us> <allowed> <waited_s>".
require "floodwall"
require "json"

policy = JSON.parse(ARGV[0])
start = ARGV[1].to_f
threads = ARGV[2].to_i
each = ARGV[3].to_i
fw = Floodwall::Client.new(policy)
lines = Queue.new
sleep 0.001 while Time.now.to_f < start
Array.new(threads) do
  Thread.new do
    each.times do
      d = fw.acquire(tenant: "partner-api", max_wait: 5)
      went = Process.clock_gettime(Process::CLOCK_REALTIME, :microsecond)
      lines << format("ruby %d %d %.6f", went, d.allowed? ? 1 : 0, d.waited)
      fw.release(d)
    end
  end
end.each(&:join)
fw.close
puts Array.new(lines.size) { lines.pop }
