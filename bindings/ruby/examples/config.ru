# Run with: rackup examples/config.ru   (then: curl -i -H 'X-API-Key: acme' localhost:9292/)
require "floodwall"

api_keys = %w[acme globex].freeze # the keys this app issued (yours: a lookup in your own key store)

fw = Floodwall::Client.new(
  request_rate: { rate: 5, burst: 10 },  # per tenant: 5 requests/s, bursts to 10
  concurrency: { limit: 4 }              # and at most 4 in flight at once
)
# The tenant is the core's, as in every language: the X-API-Key or Bearer token once verify: says the app
# issued it, else the client's address (so made-up keys all spend their address's bucket). Health checks
# are not limited.
use Floodwall::Rack, client: fw, verify: ->(api_key, _env) { api_keys.include?(api_key) },
                     skip: ->(env) { env["PATH_INFO"] == "/health" }

run ->(_env) { [200, { "Content-Type" => "text/plain" }, ["hello\n"]] }
