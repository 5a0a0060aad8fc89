# frozen_string_literal: true

module Floodwall
  # The answer to one admit: the core's fw_decision itself (Native::Decision, made by Native.admit), with
  # Ruby names on top. Its headers, content type and body come from the core's formatter
  # (fw_format_response), so that every language answers with the same bytes.
  Decision = Native::Decision

  class Decision
    # Limiter names by enum value, from the core (fw_limiter_name); nil for FW_LIMITER_NONE.
    LIMITERS = Array.new(Native::LIMITER_COUNT) { |i| i.zero? ? nil : Native.limiter_name(i).freeze }.freeze
    private_constant :LIMITERS

    # Also inherited from the native struct: status (200, 403 for a blocked tenant, 429 or 503), limit (the bucket's capacity),
    # remaining (whole tokens left), rate (tokens/s), concurrency_limit, concurrency_remaining, cost (the
    # tokens the request asked for, 0 counted as 1), ticket (what Client#release gives back; 0 when
    # nothing is held), and rule_limit, rule_remaining, rule_reset_s, rule_window_end_s (the limit or quota
    # that RateLimit reports; all 0 when no rule applied).

    # Client#acquire: the seconds the request waited for its turn (0.0: it went at once; 0.0 for admit).
    def waited
      waited_s + wait_s
    end

    def allowed?
      allowed != 0
    end

    # The enforcing limiter that rejected: "request_rate", "concurrency", "fleet", "utilization", "adaptive",
    # or nil.
    def limiter
      LIMITERS[limiter_value]
    end

    # The first limiter in dark mode that would have rejected, or nil.
    def dark_limiter
      LIMITERS[dark_limiter_value]
    end

    # True when the request was let in with no limiter at all: the store could not decide and
    # redis.fallback is "open".
    def failed_open?
      failed_open != 0
    end

    # True when the local fallback table decided, because the store could not answer in time.
    def degraded?
      degraded != 0
    end

    # Why the store did not decide ("timeout", "connection", "breaker", "config", "error", "overload", "cluster"), or nil.
    def fail_reason
      reason = fail_reason_value
      reason.zero? ? nil : Native.fail_reason_name(reason)
    end

    # The name of the limit or quota (the policy's request_rate.limits, quotas) that rejected the request
    # (limiter "request_rate"), a String such as "writes"; nil when none did.
    def rule
      index = rule_value
      index.negative? ? nil : Native.rule_name(self, index)
    end

    # The name of the first limit or quota in dark mode that would have rejected the request, or nil.
    def dark_rule
      index = dark_rule_value
      index.negative? ? nil : Native.rule_name(self, index)
    end

    # The names of the limits and quotas that applied to the request (those RateLimit-Policy lists), an
    # Array of Strings: the limits in policy order, then the quotas; empty when none did.
    def rules
      rules_value.zero? ? [] : Native.rules(self)
    end

    # True when the tenant is blocked through the admin API (Client#admin.block): status 403, limiter nil,
    # nothing consumed.
    def blocked?
      blocked != 0
    end

    # When the block ends, in seconds since the epoch (an Integer); nil when not blocked, or blocked until
    # unblocked.
    def blocked_until
      blocked != 0 && blocked_until_s.positive? ? blocked_until_s : nil
    end

    # Whole seconds until the bucket is full again.
    def reset
      reset_s
    end

    # Whole seconds until a retry can pass (at least 1 on a rejection, else 0).
    def retry_after
      retry_after_s
    end

    # The response headers, in the core's order (fw_format_response): a frozen Hash {"RateLimit-Policy" =>
    # ..., "RateLimit" => ..., "RateLimit-Limit" => ..., "RateLimit-Remaining" => ..., "RateLimit-Reset" =>
    # ..., "Retry-After" => ...} (Retry-After on a rejection only).
    def headers
      response[0]
    end

    # The Content-Type of a rejection's body ("application/json", or "application/problem+json" with the
    # policy's "body_format": "problem+json"); nil for an allowed decision.
    def content_type
      response[1]
    end

    # The body of a rejection (403, 429 or 503), as the core wrote it; nil for an allowed decision.
    def body
      response[2]
    end

    def to_h
      { allowed: allowed?, status: status, limiter: limiter, dark_limiter: dark_limiter,
        failed_open: failed_open?, degraded: degraded?, fail_reason: fail_reason, limit: limit, remaining: remaining, reset: reset,
        retry_after: retry_after, rate: rate, concurrency_limit: concurrency_limit,
        concurrency_remaining: concurrency_remaining, cost: cost, rule: rule, dark_rule: dark_rule, rules: rules,
        blocked: blocked?, blocked_until: blocked_until, ticket: ticket }
    end

    def inspect
      "#<Floodwall::Decision #{to_h.map { |k, v| "#{k}=#{v.inspect}" }.join(" ")}>"
    end

    private

    # [headers, content_type, body] from the core's formatter, made once: the client that made the
    # decision formats it (a closed one raises Floodwall::ClosedError).
    def response
      @response ||= Native.response(self, false).tap { |r| r[0].freeze }.freeze
    end
  end
end
