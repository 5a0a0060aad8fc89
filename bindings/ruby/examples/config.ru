# Run with: rackup examples/config.ru   (then: curl -i -H 'X-API-Key: acme' localhost:9292/)
require "floodwall"

fw = Floodwall::Client.new(
  request_rate: { rate: 5, burst: 10 },  # per API key: 5 requests/s, bursts to 10
  concurrency: { limit: 4 }              # and at most 4 in flight at once
)
use Floodwall::Rack, client: fw, key: ->(env) { env["HTTP_X_API_KEY"] || env["REMOTE_ADDR"] }

run ->(_env) { [200, { "Content-Type" => "text/plain" }, ["hello\n"]] }
