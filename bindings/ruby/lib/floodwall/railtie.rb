# frozen_string_literal: true

require "rails/railtie"

module Floodwall
  # Rails: floodwall in front of the app once config/application.rb (or an environment's file) names a
  # policy:
  #
  #   config.floodwall.policy = Rails.root.join("config/floodwall.json") # or a Hash
  #   config.floodwall.key = ->(request) { request.env["warden"]&.user&.account_id&.to_s } # nil: the core's key
  #   config.floodwall.skip = ->(request) { request.path == "/up" }
  #
  # The middleware (Floodwall::Rack) goes at the end of the stack, after the session and cookies, so the key
  # can name the signed-in account; it matches each request with the app's routes, so a policy's globs and
  # names see "/orders/:id" for GET /orders/42. The other options are Floodwall::Rack's (verify,
  # verify_timeout, on_reject, route, cost, critical, sandbox), and their callables get the request
  # (ActionDispatch::Request) where Floodwall::Rack's get the env. An unknown option raises at boot.
  #
  # Events (ActiveSupport::Notifications, as rack-attack publishes its own), with the request and the decision
  # in the payload:
  #   "reject.floodwall"    a request refused (429, 503, or 403 for a blocked tenant)
  #   "degraded.floodwall"  a request the store did not decide (decision.degraded?, failed_open? or a
  #                         fail_reason): Redis slow or down
  #
  # Puma's cluster mode (preload_app!) forks workers from the booted app: the client made here is usable in
  # each worker, which opens its own connections to Redis on its first request (the core does this for every
  # binding); memory:// counts per process, shm:// and Redis per fleet.
  class Railtie < ::Rails::Railtie
    OPTIONS = %i[policy key skip verify verify_timeout on_reject route cost critical sandbox].freeze
    # The options whose callables get the request.
    REQUEST_HOOKS = %i[key skip route cost critical sandbox].freeze

    config.floodwall = ActiveSupport::OrderedOptions.new

    # After config/initializers/*.rb, so that one of them may set config.floodwall too.
    initializer "floodwall.middleware", after: :load_config_initializers do |app|
      options = Railtie.options(app.config.floodwall)
      next unless options

      require "floodwall/rails_middleware" # Floodwall::Rack's subclass, loaded once floodwall.rb is
      client = Railtie.client = Floodwall::Client.new(options.delete(:policy))
      app.middleware.use(Floodwall::RailsMiddleware, client: client, routes: app.routes, **options)
    end

    class << self
      # The client the middleware decides with (nil until the app is initialized with a policy): for the
      # admin API (client.admin.block(tenant)) and the metrics (client.prometheus).
      attr_accessor :client
    end

    # config.floodwall as Floodwall::Rack's options, with the policy; nil when no policy is set. Raises
    # ArgumentError naming an unknown option.
    def self.options(config)
      given = config.to_h.transform_keys(&:to_sym)
      unknown = given.keys - OPTIONS
      unless unknown.empty?
        raise ArgumentError, "config.floodwall.#{unknown.first}: unknown option (the options are " \
                             "#{OPTIONS.join(", ")})"
      end
      return nil if given[:policy].nil?

      REQUEST_HOOKS.each do |name|
        hook = given[name]
        given[name] = ->(env) { hook.call(ActionDispatch::Request.new(env)) } if hook.respond_to?(:call)
      end
      if (verify = given[:verify]).respond_to?(:call)
        given[:verify] = ->(credential, env) { verify.call(credential, ActionDispatch::Request.new(env)) }
      end
      if (on_reject = given[:on_reject]).respond_to?(:call)
        given[:on_reject] = ->(env, decision) { on_reject.call(ActionDispatch::Request.new(env), decision) }
      end
      given
    end
  end
end
