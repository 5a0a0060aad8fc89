# A Rack app behind Floodwall::Rack, its client made when the app loads: what Puma's cluster mode
# (preload_app!) forks its workers from.
require "floodwall"
require "json"

fw = Floodwall::Client.new(ENV.fetch("FW_POLICY"))
use Floodwall::Rack, client: fw, key: ->(env) { env["HTTP_X_API_KEY"] }
run ->(_env) { [200, { "Content-Type" => "application/json" }, [JSON.generate(pid: Process.pid)]] }
