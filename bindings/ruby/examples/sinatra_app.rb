# Run with: ruby examples/sinatra_app.rb   (then: curl -i -H 'X-API-Key: acme' localhost:4567/)
require "sinatra"
require "floodwall"

FLOODWALL = Floodwall::Client.new(request_rate: { rate: 5, burst: 10 }, concurrency: { limit: 4 })
use Floodwall::Rack, client: FLOODWALL, key: ->(env) { env["HTTP_X_API_KEY"] || env["REMOTE_ADDR"] }

get "/" do
  "hello\n"
end
