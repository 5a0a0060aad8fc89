# frozen_string_literal: true

require "floodwall"
require "rack"
require "rack/body_proxy"

module Floodwall
  # Rack middleware:
  #
  #   use Floodwall::Rack, client: fw, key: ->(env) { env["HTTP_X_API_KEY"] }
  #
  # key: the tenant of a request (default: the client's address); nil or "" (a missing or empty API key
  # header, say) lets the request through without a decision, as the core refuses an empty tenant.
  # route, cost, critical, sandbox: a value, or a callable that gets the env.
  # Every decided response carries the core's limit headers; a rejection is answered here with 429/503,
  # the core's JSON body and Retry-After. The ticket is released exactly once: when the response body is
  # closed (as a Rack server does at the end of the response, on a client abort, or when a body is closed
  # early), or at once when the app raises.
  class Rack
    # Rack 3 wants lower-case header names; Rack 2 takes the formatter's names as they are.
    LOWERCASE = Gem::Version.new(::Rack.release) >= Gem::Version.new("3")
    CONTENT_TYPE = LOWERCASE ? "content-type" : "Content-Type"
    CONTENT_LENGTH = LOWERCASE ? "content-length" : "Content-Length"

    def initialize(app, client:, key: ->(env) { env["REMOTE_ADDR"] }, route: nil, cost: 1, critical: false,
                   sandbox: false)
      @app = app
      @client = client
      @key = key
      @route = route
      @cost = cost
      @critical = critical
      @sandbox = sandbox
    end

    def call(env)
      tenant = @key.call(env)&.to_s
      return @app.call(env) if tenant.nil? || tenant.empty?

      decision = @client.admit(tenant: tenant, route: option(@route, env), method: env["REQUEST_METHOD"],
                               cost: option(@cost, env), critical: option(@critical, env),
                               sandbox: option(@sandbox, env))
      return reject(decision) unless decision.allowed?

      begin
        status, headers, body = @app.call(env)
        headers = headers.frozen? ? headers.dup : headers
        headers.merge!(limit_headers(decision))
        # BodyProxy runs the block once, on the first close, even when the body's own close raises.
        [status, headers, ::Rack::BodyProxy.new(body) { @client.release(decision) }]
      rescue Exception # every exception, Interrupt included: release, then re-raise
        @client.release(decision)
        raise
      end
    end

    private

    def option(value, env)
      value.respond_to?(:call) ? value.call(env) : value
    end

    def limit_headers(decision)
      LOWERCASE ? Native.headers(decision, true) : decision.headers
    end

    # A rejection holds no slot (its ticket is 0), so there is nothing to release.
    def reject(decision)
      body = decision.body
      headers = limit_headers(decision).merge(CONTENT_TYPE => "application/json",
                                              CONTENT_LENGTH => body.bytesize.to_s)
      [decision.status, headers, [body]]
    end
  end
end
