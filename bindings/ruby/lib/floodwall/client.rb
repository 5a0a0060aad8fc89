# frozen_string_literal: true

require "json"
require "pathname"

module Floodwall
  # A floodwall client: one policy, one store ("memory://", "shm://NAME" or "redis://host:port/db").
  # Thread-safe; share one per process. Admits release the GVL while they wait on Redis, so server threads
  # run in parallel.
  #
  #   fw = Floodwall::Client.new(request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 })
  #   fw.admit(tenant: "acme", route: "/stops", method: "POST", cost: 3) do |decision|
  #     decision.allowed? ? serve : reject(decision.status, decision.headers, decision.body)
  #   end # the block form always releases
  #   fw.admit(headers: [["Authorization", "Bearer t0k3n"]], peer: "203.0.113.7") # keyed by the address
  #   fw.admit(headers: [["Authorization", "Bearer t0k3n"]], peer: "203.0.113.7", verified: true) # by the token
  class Client
    DEFER = { Object => :never }.freeze # Thread.handle_interrupt masks: see #admit
    DELIVER = { Object => :immediate }.freeze
    private_constant :DEFER, :DELIVER

    # Yields a client and closes it afterwards.
    def self.open(policy)
      client = new(policy)
      return client unless block_given?

      begin
        yield client
      ensure
        client.close
      end
    end

    # policy: a Hash (symbol or string keys), a JSON document, or the path of a JSON file. A bad policy
    # raises Floodwall::PolicyError naming the field.
    def initialize(policy)
      @handle = Native::Handle.new(policy_json(policy))
      # Whether admits can wait on I/O (a Redis store), as the core says (fw_client_can_block): only then
      # do they give up the GVL and take the interrupt-deferring path below.
      @waits = @handle.blocking?
      @admin = Admin.new(@handle)
    end

    # The admin API (Floodwall::Admin): tenants' overrides, tiers, blocks and resets, and fleet-wide modes,
    # kept in the store and applied to the next request of every client of it.
    attr_reader :admin

    # Decides one request. With a block: yields the Decision, releases it afterwards whatever happens,
    # and returns the block's value.
    #
    # The tenant: a String (any bytes; "" is the anonymous tenant, limited like any other), or nil to
    # let the core derive it from the request's headers and peer address as the policy's "tenant"
    # section says, the same in every language: a Bearer token or X-API-Key (hashed) once the app vouched
    # for it, else "ip:<peer>", else "anonymous". headers: the request's header fields, an Array of
    # [name, value] pairs (in arrival order, repeats allowed, any case) or a Hash; peer: the connection's
    # peer address (Rack's REMOTE_ADDR); verified: what the app said of the request's credential (the one
    # #request_credential names): true, it checked it and it names the tenant; false, it did not (the
    # address, as if there were none); nil, nothing (the policy's tenant.credentials decides: by default
    # "verified", so the address). All three are read only when tenant is nil. route is the matched route's
    # pattern in the framework's syntax ("/orders/:id(.:format)", made canonical as #request_route says) or
    # a route family's name; path is the request's path (no query string), which the policy's route globs
    # match when route is nil or "" (a middleware mounted app-wide, before any route is matched); with
    # neither, the default route. cost is the tokens it costs.
    #
    # On Redis, an exception sent from another thread (Timeout, Rack::Timeout, Thread#raise or #kill)
    # while the admit waits is held until the decision is in hand, then raised with the decision given
    # back, so it cannot drop a decision that holds a slot. With a block, it is held until the block runs,
    # and the release after the block cannot be cut short by it either. (The in-process stores never wait,
    # so nothing can arrive during their admit, and they skip the masks: they would triple its cost.)
    def admit(tenant: nil, headers: nil, peer: nil, verified: nil, route: nil, path: nil, method: "GET", cost: 1,
              critical: false, sandbox: false, &block)
      if @waits
        return deferring_interrupts(block) do
          Native.admit(@handle, tenant, route, method, cost, critical, sandbox, headers, peer, verified, path)
        end
      end

      decision = Native.admit(@handle, tenant, route, method, cost, critical, sandbox, headers, peer, verified, path)
      return decision unless block_given?

      begin
        yield decision
      ensure
        release(decision)
      end
    end

    # Waits for the request's turn instead of refusing it (docs/concepts/acquire.md): when the tenant's
    # bucket would have the tokens within max_wait seconds (capped at its full refill, burst / rate), the
    # store reserves them at once (one round trip, first come first served) and this call sleeps until the
    # turn (Kernel#sleep: the GVL is released, other threads run), then returns the Decision #admit gives an
    # allowed request (Decision#waited: the seconds it waited). A request whose turn is further away, or
    # that another limiter refuses, gets #admit's refusal at once, with nothing consumed. Release it as
    # #admit's, or pass a block (released after it). An exception sent from another thread (Timeout,
    # Thread#raise) while it waits releases the reservation, which gives its tokens back (when no later
    # reservation was made), then is raised. A negative, NaN or infinite max_wait raises
    # InvalidArgumentError naming max_wait, a non-numeric one TypeError; a cost above the burst
    # InvalidArgumentError. The other arguments are #admit's (tenant: nil lets the core derive it).
    def acquire(tenant: nil, route: nil, cost: 1, max_wait: 10, headers: nil, peer: nil, verified: nil, path: nil,
                method: "GET", critical: false, sandbox: false, &block)
      raise TypeError, "max_wait: must be a number of seconds" unless max_wait.is_a?(Integer) || max_wait.is_a?(Float)

      deferring_interrupts(block) do
        Native.reserve(@handle, max_wait, tenant, route, method, cost, critical, sandbox, headers, peer, verified, path)
      end
    end

    # The tenant id that #admit would use for the same arguments: tenant itself when given, else the key
    # the core derives from headers, peer and verified ("key:<32 hex digits>" for a hashed credential,
    # "ip:<address>", or "anonymous").
    def tenant_key(tenant: nil, headers: nil, peer: nil, verified: nil)
      Native.tenant_key(@handle, tenant, headers, peer, verified)
    end

    # The route a request's rules match, as every language spells it: route (a framework's pattern) made
    # canonical, a parameter of any syntax becoming ":name" and an optional part such as Rails' "(.:format)"
    # dropped ("/orders/:id(.:format)" -> "/orders/:id"), else the path without a trailing "/", else "".
    # The same arguments as #admit takes.
    def request_route(route: nil, path: nil)
      Native.request_route(@handle, route, path)
    end

    # The credential the app is asked to vouch for before it names the request's tenant: its Bearer token
    # or API key (raw, trimmed, by the policy's tenant.from), or nil when it has none that comes before its
    # address. The same header forms as #admit takes. Floodwall::Rack's verify: hook gets this String.
    def request_credential(headers: nil, peer: nil)
      Native.request_credential(@handle, headers, peer)
    end

    # The longest an admit waits for the store, in milliseconds (the policy's redis.deadline_ms, 50 by
    # default, whatever the store): Floodwall::Rack gives a verify: hook no longer by default.
    def deadline_ms
      Native.client_deadline_ms(@handle)
    end

    # The request header names (lower case, frozen) that the policy's tenant derivation reads:
    # "authorization" and "x-api-key", and the forwarded header when tenant.trusted_proxies is set. #admit
    # and #tenant_key read no other header, so a middleware may hand them only these (Floodwall::Rack does).
    def tenant_headers
      @tenant_headers ||= Native.tenant_headers(@handle)
    end

    # Gives back what a decision (or a ticket) holds. Idempotent, never fails.
    def release(decision)
      Native.release(@handle, decision.is_a?(Decision) ? decision.ticket : decision)
      nil
    end

    # Switches a limiter ("request_rate", "concurrency", "fleet", "utilization", "adaptive") to "enforce",
    # "dark" or "off" at run time. A fleet-wide mode set in Redis overrides it.
    def set_mode(limiter, mode)
      Native.set_mode(@handle, Native.limiter_from_name(limiter.to_s), Native.mode_from_name(mode.to_s))
      nil
    end

    # The limiter's mode in force: "enforce", "dark" or "off".
    def mode(limiter)
      Native.mode_name(Native.get_mode(@handle, Native.limiter_from_name(limiter.to_s)))
    end

    # Reports this box's worker utilization in [0, 1]; the utilization shedder samples it from now on.
    def report_utilization(utilization)
      Native.report_utilization(@handle, utilization)
      nil
    end

    # The utilization shedder's shedding amount (0.0 when it is not configured).
    def shedding_amount
      Native.shedding_amount(@handle)
    end

    # The core's counters as a Hash ({"decisions" => ..., "breaker" => ..., ...}).
    def metrics
      JSON.parse(Native.metrics_json(@handle))
    end

    # The same counters in the Prometheus text format.
    def prometheus
      Native.metrics_prometheus(@handle)
    end

    # Closes the client (fw_client_close); later calls raise Floodwall::ClosedError. Admits still waiting
    # on Redis in other threads finish first (this waits for them without the GVL). Idempotent. The GC
    # frees what is left.
    def close
      @handle.close
      nil
    end

    def closed?
      @handle.closed?
    end

    private

    # The decision the block makes (an admit on Redis, or a reservation), with interrupts (Timeout,
    # Thread#raise, #kill) held while it is made and raised only where it can still be given back: during a
    # reservation's wait for its turn, or once it is in hand; either way the decision is released first.
    # With the caller's block (user_block), the decision is released after it, which an interrupt cannot
    # cut short either.
    def deferring_interrupts(user_block)
      Thread.handle_interrupt(DEFER) do
        decision = yield
        begin
          Thread.handle_interrupt(DELIVER) { wait_for_turn(decision.wait_s) } if decision.allowed? && decision.wait_s.positive?
          Thread.handle_interrupt(DELIVER) {} if Thread.pending_interrupt?
        rescue Exception # every exception, Interrupt included: give the decision back, then re-raise
          release(decision)
          raise
        end
        return decision unless user_block

        begin
          Thread.handle_interrupt(DELIVER) { user_block.call(decision) }
        ensure
          release(decision)
        end
      end
    end

    # Sleeps until `seconds` from now on the monotonic clock (a Thread#wakeup or #run may end a sleep
    # early: the rest is slept again), so that the caller never goes before its turn.
    def wait_for_turn(seconds)
      turn = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
      loop do
        left = turn - Process.clock_gettime(Process::CLOCK_MONOTONIC)
        break if left <= 0

        sleep(left)
      end
    end

    def policy_json(policy)
      case policy
      when Hash then JSON.generate(policy, allow_nan: true) # a NaN reaches the core, which names its field
      # A String by the rule of every floodwall language (fw_policy_text: JSON text when it starts with "{"
      # or "[", else a file's path); a Pathname always a path.
      when Pathname then Native.policy_text(policy.to_s, true)
      when String then Native.policy_text(policy, false)
      else raise TypeError, "policy: expected a Hash, a JSON string or a path, not #{policy.class}"
      end
    end
  end
end
