# frozen_string_literal: true

require "json"
require "pathname"

module Floodwall
  # A floodwall client: one policy, one store ("memory://" or "redis://host:port/db"). Thread-safe; share
  # one per process. Admits release the GVL while they wait on Redis, so server threads run in parallel.
  #
  #   fw = Floodwall::Client.new(request_rate: { rate: 100, burst: 500 }, concurrency: { limit: 20 })
  #   fw.admit(tenant: "acme", route: "/stops", method: "POST", cost: 3) do |decision|
  #     decision.allowed? ? serve : reject(decision.status, decision.headers, decision.body)
  #   end # the block form always releases
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
      json = policy_json(policy)
      @waits = !memory_store?(json)
      @handle = Native::Handle.new(json, @waits)
    end

    # Decides one request. tenant is any non-empty String (binary-safe); route is the route family
    # (nil: the default route); cost is the tokens it costs. With a block: yields the Decision, releases
    # it afterwards whatever happens, and returns the block's value.
    #
    # On Redis, an exception sent from another thread (Timeout, Rack::Timeout, Thread#raise or #kill)
    # while the admit waits is held until the decision is in hand, then raised with the decision given
    # back, so it cannot drop a decision that holds a slot. With a block, it is held until the block runs,
    # and the release after the block cannot be cut short by it either. (The memory store never waits, so
    # nothing can arrive during its admit, and it skips the masks: they would triple its cost.)
    def admit(tenant:, route: nil, method: "GET", cost: 1, critical: false, sandbox: false, &block)
      return admit_deferring_interrupts(tenant, route, method, cost, critical, sandbox, &block) if @waits

      decision = Native.admit(@handle, tenant, route, method, cost, critical, sandbox)
      return decision unless block_given?

      begin
        yield decision
      ensure
        release(decision)
      end
    end

    # Gives back what a decision (or a ticket) holds. Idempotent, never fails.
    def release(decision)
      Native.release(@handle, decision.is_a?(Decision) ? decision.ticket : decision)
      nil
    end

    # Switches a limiter ("request_rate", "concurrency", "fleet", "utilization") to "enforce", "dark" or
    # "off" at run time. A fleet-wide mode set in Redis overrides it.
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

    # Frees the client; later calls raise Floodwall::ClosedError. Admits still waiting on Redis in other
    # threads finish first. Idempotent.
    def close
      @handle.close
      nil
    end

    def closed?
      @handle.closed?
    end

    private

    # Client#admit on Redis: interrupts held while the admit waits and raised only where the decision
    # can still be given back.
    def admit_deferring_interrupts(tenant, route, method, cost, critical, sandbox)
      Thread.handle_interrupt(DEFER) do
        decision = Native.admit(@handle, tenant, route, method, cost, critical, sandbox)
        begin
          Thread.handle_interrupt(DELIVER) {} if Thread.pending_interrupt?
        rescue Exception # every exception, Interrupt included: give the decision back, then re-raise
          release(decision)
          raise
        end
        return decision unless block_given?

        begin
          Thread.handle_interrupt(DELIVER) { yield decision }
        ensure
          release(decision)
        end
      end
    end

    # Admits give up the GVL only when they can wait on I/O: the embedded memory store (the default)
    # answers in well under a microsecond, less than a GVL hand-over costs.
    def memory_store?(json)
      store = JSON.parse(json, allow_nan: true)["store"]
      store.nil? || store.start_with?("memory")
    rescue StandardError # not JSON, not an object, not a string: the core names the error
      false
    end

    def policy_json(policy)
      case policy
      when Hash then JSON.generate(policy, allow_nan: true) # a NaN reaches the core, which names its field
      when Pathname then File.read(policy)
      when String then policy.lstrip.start_with?("{") ? policy : File.read(policy)
      else raise TypeError, "policy: expected a Hash, a JSON string or a path, not #{policy.class}"
      end
    end
  end
end
