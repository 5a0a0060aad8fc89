# Run with: rackup examples/config.ru   (then: curl -i -H 'X-API-Key: acme' localhost:9292/)
require "floodwall"

fw = Floodwall::Client.new(
  request_rate: { rate: 5, burst: 10 },  # per tenant: 5 requests/s, bursts to 10
  concurrency: { limit: 4 }              # and at most 4 in flight at once
)
# The tenant is the core's, as in every language: a hashed Bearer token or X-API-Key, else the client's
# address. Health checks are not limited.
use Floodwall::Rack, client: fw, skip: ->(env) { env["PATH_INFO"] == "/health" }

run ->(_env) { [200, { "Content-Type" => "text/plain" }, ["hello\n"]] }
