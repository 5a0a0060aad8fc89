# Run with: ruby examples/sinatra_app.rb   (then: curl -i -H 'X-API-Key: acme' localhost:4567/)
require "sinatra"
require "floodwall"

API_KEYS = %w[acme globex].freeze # the keys this app issued (yours: a lookup in your own key store)

FLOODWALL = Floodwall::Client.new(request_rate: { rate: 5, burst: 10 }, concurrency: { limit: 4 })
# A key names its own tenant once verify: vouches for it; any other request is its address's.
use Floodwall::Rack, client: FLOODWALL, verify: ->(api_key, _env) { API_KEYS.include?(api_key) },
                     skip: ->(env) { env["PATH_INFO"] == "/health" }

get "/" do
  "hello\n"
end

get "/health" do
  "ok\n"
end
