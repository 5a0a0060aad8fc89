# The Ruby member of the e2e fleet: a Rack app behind Floodwall::Rack, on Puma.
require "floodwall"
require "json"
require "puma"
require "puma/configuration"
require "puma/launcher"
require "rack"

fw = Floodwall::Client.new(ENV.fetch("FW_POLICY"))
work = lambda do |env|
  hold = Rack::Utils.parse_query(env["QUERY_STRING"]).fetch("hold_s", "0").to_f
  sleep hold if hold.positive?
  [200, { "Content-Type" => "application/json" }, [JSON.generate(lang: "ruby")]]
end
# No key: the core derives the tenant from the request, as the Python and Node services do; every key but the
# test's made-up ones is one the fleet issued.
limited = Floodwall::Rack.new(work, client: fw, route: "/work", verify: ->(key, _env) { !key.start_with?("made-up-") })
app = lambda do |env|
  return [200, { "Content-Type" => "text/plain" }, [fw.prometheus]] if env["PATH_INFO"] == "/metrics"

  limited.call(env)
end

config = Puma::Configuration.new do |c|
  c.bind "tcp://127.0.0.1:#{ARGV.fetch(0)}"
  c.threads 16, 16
  c.workers 0
  c.app app
  c.quiet
end
Puma::Launcher.new(config).run
