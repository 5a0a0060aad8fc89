# Run with: ruby examples/sinatra_app.rb   (then: curl -i -H 'X-API-Key: acme' localhost:4567/)
require "sinatra"
require "floodwall"

FLOODWALL = Floodwall::Client.new(request_rate: { rate: 5, burst: 10 }, concurrency: { limit: 4 })
use Floodwall::Rack, client: FLOODWALL, skip: ->(env) { env["PATH_INFO"] == "/health" }

get "/" do
  "hello\n"
end

get "/health" do
  "ok\n"
end
