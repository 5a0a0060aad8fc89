# frozen_string_literal: true

require "floodwall"
require "rack"
require "rack/body_proxy"

module Floodwall
  # Rack middleware:
  #
  #   use Floodwall::Rack, client: fw                      # each request keyed by its address
  #   use Floodwall::Rack, client: fw, verify: ->(api_key, env) { ApiKey.active?(api_key) } # by API key
  #   use Floodwall::Rack, client: fw, skip: ->(env) { env["PATH_INFO"] == "/health" },
  #                        on_reject: ->(env, d) { [d.status, { "Content-Type" => "text/plain" }, ["slow down\n"]] }
  #
  # The tenant: by default the core derives it from the request's headers (the env's HTTP_* entries,
  # turned back into header names) and its peer address (REMOTE_ADDR), as the policy's "tenant" section
  # says: a Bearer token or X-API-Key (hashed) once the verify: hook vouched for it, else "ip:<address>"
  # (X-Forwarded-For only from the policy's trusted_proxies), else "anonymous". This is the same key as
  # Python's and Node's middleware make, so one caller lands in one bucket behind every service of a
  # fleet. A credential nobody vouched for names no tenant: a client that invents a key per request
  # spends its address's bucket, not a new one each time.
  #
  # Options:
  #   key:       ->(env) { tenant } to choose the tenant yourself. nil means "the core's derivation"; ""
  #              is the anonymous tenant, limited as one tenant (never skipped); anything else is
  #              turned into a String (to_s).
  #   verify:    ->(credential, env) { true or false }: whether the request's Bearer token or API key
  #              (Client#request_credential, raw) is one the app issued. Asked only when the core derives
  #              the tenant (no key:, or it returned nil) and the request carries a credential: truthy
  #              (Ruby's: 0 and [] are truthy too), the credential names the tenant; falsy, the address does. A hook that raises, or answers
  #              later than verify_timeout, counts as falsy and is reported once (Kernel#warn).
  #   verify_timeout: seconds the hook may take (default: the client's deadline_ms). A Rack hook runs
  #              on the request's thread and cannot be cut short: a later answer is not taken.
  #   skip:      ->(env) { true } lets a request through undecided (health checks, internal callers):
  #              no admit, no limit headers.
  #   on_reject: ->(env, decision) { [status, headers, body] } builds the response to a rejection; the
  #              decision's limit headers are added to what it returns unless it set them itself.
  #   route, cost, critical, sandbox: a value, or a callable that gets the env. route: is the route family
  #              the policy's rules match; without it, the route the app would match: in a Rails app the
  #              pattern Rails' router matches for the request ("/orders/:id(.:format)", which the core
  #              spells "/orders/:id"), else (Sinatra and a plain Rack app, whose route is known only once
  #              the app runs) the request's path ("/orders/42"). The path is always passed, so a glob such
  #              as "/orders/*" matches the request either way.
  #   routes:    the Rails route set to match requests with (default: Rails.application.routes when Rails
  #              is loaded; false: none, the path alone).
  #   max_wait:  nil (the default): a request the request-rate bucket refuses is answered 429 at once.
  #              Seconds: such a request waits for its turn instead when that turn is within max_wait
  #              (Client#acquire: the store reserves its tokens in one round trip), then goes on; further
  #              away, a 429 as before. The wait blocks the server thread (Kernel#sleep: the GVL is
  #              released, other threads run): give Puma threads enough for the requests that may wait at
  #              once, or keep max_wait short. Capped at the bucket's full refill (burst / rate).
  # Every decided response carries the core's limit headers; a rejection is answered (unless on_reject
  # does) with the decision's status (429/503, or 403 for a tenant blocked through Client#admin), the core's
  # body and its Content-Type, and Retry-After.
  # The ticket is released exactly once: once the response is over, or at once when the app raises. "Over"
  # is the server's own after-the-response hook when it has one (Rack 3's rack.response_finished; Puma's
  # rack.after_reply), which it calls after the body is written and closed, a client abort included; with
  # neither, when the response body is closed (as a Rack server does at the end of the response, on a
  # client abort, or when a body is closed early). The hooks leave the app's body as it is: a
  # Rack::BodyProxy around it hides an Array body, and Puma then answers with chunked encoding instead of
  # a Content-Length (three writes instead of one; it costs more than everything else floodwall does).
  class Rack
    # Rack 3 wants lower-case header names; Rack 2 takes the formatter's names as they are.
    LOWERCASE = Gem::Version.new(::Rack.release) >= Gem::Version.new("3")
    CONTENT_TYPE = LOWERCASE ? "content-type" : "Content-Type"
    CONTENT_LENGTH = LOWERCASE ? "content-length" : "Content-Length"

    # The request's header fields of a Rack env, as the core wants them for its tenant derivation: a Hash
    # of lower-case header names (HTTP_X_API_KEY -> "x-api-key") to the env's values. CONTENT_TYPE and
    # CONTENT_LENGTH are left out. For a key: callable of your own that wants the core's key for part of
    # the traffic: fw.tenant_key(headers: Floodwall::Rack.headers(env), peer: env["REMOTE_ADDR"]).
    def self.headers(env)
      Native.rack_headers(env)
    end

    def initialize(app, client:, key: nil, skip: nil, on_reject: nil, verify: nil, verify_timeout: nil, route: nil,
                   routes: nil, cost: 1, critical: false, sandbox: false, max_wait: nil)
      { key: key, skip: skip, on_reject: on_reject, verify: verify }.each do |name, hook|
        raise ArgumentError, "#{name}: must respond to #call" unless hook.nil? || hook.respond_to?(:call)
      end
      unless routes.nil? || routes == false || routes.respond_to?(:router)
        raise ArgumentError, "routes: must be a Rails route set (Rails.application.routes) or false, not #{routes.class}"
      end
      # A timeout with no hook to time is a mistake (a verify: left out), as in Python and Node.
      raise ArgumentError, "verify_timeout: needs a verify: hook" if verify.nil? && !verify_timeout.nil?
      unless verify_timeout.nil? || (verify_timeout.is_a?(Numeric) && verify_timeout.to_f.positive? &&
                                     verify_timeout.to_f.finite?)
        raise ArgumentError, "verify_timeout: must be a number of seconds above 0, not #{verify_timeout.inspect}"
      end
      unless max_wait.nil? || ((max_wait.is_a?(Integer) || max_wait.is_a?(Float)) && max_wait.to_f.finite? &&
                               max_wait >= 0)
        raise ArgumentError, "max_wait: must be a finite number of seconds, 0 or more, or nil, not #{max_wait.inspect}"
      end
      @app = app
      @client = client
      @max_wait = max_wait
      # The env keys of the headers the core reads for the tenant (HTTP_X_API_KEY for "x-api-key"): two or
      # three lookups per request instead of every HTTP_* entry. A client that does not say (a wrapper)
      # gets every header.
      @tenant_fields = if client.respond_to?(:tenant_headers)
                         client.tenant_headers.map { |name| ["HTTP_#{name.upcase.tr("-", "_")}".freeze, name] }.freeze
                       end
      @key = key
      @verify = verify
      @verify_timeout = verify_timeout&.to_f || (client.deadline_ms / 1000.0 if verify)
      @verify_warned = {} # what has been reported: :raised, :late (once each per middleware)
      @verify_lock = Mutex.new
      @skip = skip
      @on_reject = on_reject
      @route = route
      @routes = routes # resolved at the first request that needs it (Rails' routes are drawn after the stack)
      @cost = cost
      @critical = critical
      @sandbox = sandbox
    end

    def call(env)
      return @app.call(env) if @skip&.call(env)

      decision = admit(env)
      return reject(env, decision) unless decision.allowed?

      begin
        status, headers, body = @app.call(env)
        headers = with_limit_headers(headers, decision)
      rescue Exception # every exception, Interrupt included: release, then re-raise
        @client.release(decision)
        raise
      end
      [status, headers, release_when_over(env, body, decision)]
    end

    private

    # The body, and the ticket's release registered for when the response is over (see the class's notes).
    def release_when_over(env, body, decision)
      return body if decision.ticket.zero? # nothing held (request rate alone)

      if (finished = env["rack.response_finished"]).is_a?(Array)
        finished << ->(*) { @client.release(decision) }
      elsif (after_reply = env["rack.after_reply"]).is_a?(Array)
        after_reply << -> { @client.release(decision) }
      else
        # BodyProxy runs the block once, on the first close, even when the body's own close raises.
        return ::Rack::BodyProxy.new(body) { @client.release(decision) }
      end
      body
    end

    def admit(env)
      tenant = @key&.call(env)
      options = { route: route(env), path: path(env), method: env["REQUEST_METHOD"], cost: option(@cost, env),
                  critical: option(@critical, env), sandbox: option(@sandbox, env) }
      if tenant.nil? # the core's derivation, from the same inputs as in every language
        headers = tenant_headers(env)
        peer = env["REMOTE_ADDR"]
        return decide(headers: headers, peer: peer, **options) unless @verify

        decide(headers: headers, peer: peer, verified: verified(env, headers, peer), **options)
      else
        decide(tenant: tenant.to_s, **options)
      end
    end

    # max_wait: the request waits for its turn (Client#acquire: one round trip, then a sleep that blocks
    # this server thread, the GVL released) instead of a 429, when the turn is within max_wait seconds.
    def decide(**request)
      @max_wait.nil? ? @client.admit(**request) : @client.acquire(max_wait: @max_wait, **request)
    end

    # What the verify: hook says of the request's credential: nil when it carries none (the hook is not
    # asked), else true or false. The hook runs before the admit, so a slow or raising one holds no slot.
    def verified(env, headers, peer)
      credential = @client.request_credential(headers: headers, peer: peer)
      return nil if credential.nil?

      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      begin
        answer = @verify.call(credential, env)
      rescue StandardError, ScriptError => e # a failed require in the hook too: never a 500
        report_once(:raised, "the verify hook raised #{e.class}: #{e.message}")
        return false
      end
      elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      if elapsed > @verify_timeout
        report_once(:late, format("the verify hook answered after %.3fs, later than verify_timeout (%.3fs)",
                                  elapsed, @verify_timeout))
        return false
      end
      answer ? true : false
    end

    def report_once(kind, what)
      first = @verify_lock.synchronize { !@verify_warned[kind] && (@verify_warned[kind] = true) }
      return unless first

      warn "floodwall: #{what}; its credentials are treated as not verified: the requests are keyed by their " \
           "address (reported once)"
    end

    def tenant_headers(env)
      return Native.rack_headers(env) unless @tenant_fields

      headers = {}
      @tenant_fields.each do |key, name|
        value = env[key]
        headers[name] = value if value.is_a?(String)
      end
      headers
    end

    # The route option's value, else the pattern of the Rails route the request matches, else nil (the core
    # then matches the globs against the path).
    def route(env)
      return option(@route, env) unless @route.nil?

      rails_routes&.pattern(env)
    end

    # The request's path as the app's clients see it: the mount point (SCRIPT_NAME) and PATH_INFO.
    def path(env)
      path = "#{env["SCRIPT_NAME"]}#{env["PATH_INFO"]}"
      path.empty? ? "/" : path
    end

    def rails_routes
      return @rails_routes if defined?(@rails_routes)

      set = @routes.nil? && defined?(::Rails.application) && ::Rails.application ? ::Rails.application.routes : @routes
      @rails_routes = if set
                        require "floodwall/rails_routes"
                        RailsRoutes.new(set)
                      end
    end

    def option(value, env)
      value.respond_to?(:call) ? value.call(env) : value
    end

    def limit_headers(decision)
      LOWERCASE ? Native.response(decision, true)[0] : decision.headers
    end

    # A rejection holds no slot (its ticket is 0), so there is nothing to release.
    def reject(env, decision)
      return custom_reject(env, decision) if @on_reject

      headers, content_type, body =
        LOWERCASE ? Native.response(decision, true) : [decision.headers, decision.content_type, decision.body]
      [decision.status, headers.merge(CONTENT_TYPE => content_type, CONTENT_LENGTH => body.bytesize.to_s), [body]]
    end

    def custom_reject(env, decision)
      status, headers, body = @on_reject.call(env, decision)
      [status, with_limit_headers(headers, decision), body]
    end

    # The response's headers with the limit headers it did not set itself (names compared without case),
    # for the app's responses and on_reject's alike: what the app sets wins, as in Python and Node.
    def with_limit_headers(headers, decision)
      headers = headers.nil? || headers.frozen? ? (headers || {}).dup : headers
      own = headers.keys.map { |name| name.to_s.downcase }
      limit_headers(decision).each { |name, value| headers[name] = value unless own.include?(name.downcase) }
      headers
    end
  end
end
