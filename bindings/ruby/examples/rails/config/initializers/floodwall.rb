# config/initializers/floodwall.rb, with gem "floodwall" in the Gemfile: floodwall in front of every action.
Rails.application.configure do
  # The policy: a Hash, or the path of a JSON file (the same file your Python and Node services read).
  config.floodwall.policy = ENV.fetch("FLOODWALL_POLICY") { Rails.root.join("config/floodwall.json") }
  # The tenant: the signed-in account; nil (signed out) leaves it to floodwall: the API key once verified,
  # else the client's address.
  config.floodwall.key = ->(request) { request.session[:account_id]&.to_s }
  config.floodwall.skip = ->(request) { request.path == "/up" } # the health check
end

# A refused request, in the log (or your metrics); "degraded.floodwall" says Redis did not decide one.
ActiveSupport::Notifications.subscribe("reject.floodwall") do |*, payload|
  decision = payload[:decision]
  Rails.logger.warn("floodwall: #{decision.status} for #{payload[:request].path} " \
                    "(#{decision.rule || decision.limiter}, retry after #{decision.retry_after}s)")
end
