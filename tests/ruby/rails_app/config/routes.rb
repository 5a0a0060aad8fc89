# frozen_string_literal: true

Rails.application.routes.draw do
  resources :orders, only: %i[index show]
  get "/reports/:id", to: "probe#hold"  # concurrency.routes "/reports/*": held until its hold file exists
  get "/slow/:id", to: "probe#hold"     # not a concurrency route: holds a fleet slot
  get "/work/:id", to: "probe#work"     # concurrency.routes "/work/*": in flight for a moment
  get "/boom", to: "probe#boom"
  get "/other", to: "probe#other"
  get "/up", to: "probe#other"          # the health check the README's initializer skips
  get "/sign_in/:account", to: "probe#sign_in"
  get "/floodwall/events", to: "probe#events"
  get "/floodwall/stats", to: "probe#stats"
  post "/floodwall/block", to: "probe#block"
  mount ->(env) { [200, { "Content-Type" => "text/plain" }, ["mounted #{env["PATH_INFO"]}\n"]] }, at: "/mounted"
end
