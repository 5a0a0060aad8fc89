# A Rack app behind Floodwall::Rack, its client made when the app loads: what Puma's cluster mode
# (preload_app!) forks its workers from.
require "floodwall"
require "json"

fw = Floodwall::Client.new(ENV.fetch("FW_POLICY"))
# Every answer, the 429s too, names the worker that gave it (X-Worker-Pid).
use(Class.new do
  def initialize(app) = @app = app

  def call(env)
    status, headers, body = @app.call(env)
    [status, headers.merge("x-worker-pid" => Process.pid.to_s), body]
  end
end)
use Floodwall::Rack, client: fw, key: ->(env) { env["HTTP_X_API_KEY"] }
run ->(_env) { [200, { "Content-Type" => "application/json" }, [JSON.generate(pid: Process.pid)]] }
