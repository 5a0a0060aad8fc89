# frozen_string_literal: true

require "time"

module Floodwall
  # Retries for the callers of a floodwall-protected service: exponential backoff with full jitter
  # (a random delay in [0, min(cap, base * 2**attempt)], so that rejected clients do not come back in
  # step), never earlier than the server's Retry-After.
  #
  #   backoff = Floodwall::Backoff.new(base: 0.1, cap: 10, attempts: 5)
  #   response = backoff.run { Net::HTTP.get_response(uri) } # retried while it answers 429 or 503
  class Backoff
    RETRY_STATUSES = [429, 503].freeze

    attr_reader :base, :cap, :attempts

    # base, cap: seconds; attempts: calls in all, the first one included. random and sleeper are there
    # for tests and for callers with their own clock.
    def initialize(base: 0.1, cap: 10.0, attempts: 5, random: Random.new, sleeper: ->(s) { sleep(s) })
      raise ArgumentError, "base: must be positive" unless base.is_a?(Numeric) && base.positive?
      raise ArgumentError, "cap: must be at least base" unless cap.is_a?(Numeric) && cap >= base
      raise ArgumentError, "attempts: must be a positive Integer" unless attempts.is_a?(Integer) && attempts.positive?

      @base = base.to_f
      @cap = cap.to_f
      @attempts = attempts
      @random = random
      @sleeper = sleeper
    end

    # Seconds to wait before retry number `attempt` (0 for the first retry). retry_after: the server's
    # Retry-After (seconds or an HTTP date), honoured as a floor, with the jitter added on top of it.
    def delay(attempt, retry_after: nil)
      jitter = @random.rand * [@cap, @base * (2**attempt)].min
      floor = self.class.retry_after_seconds(retry_after)
      floor ? floor + jitter : jitter
    end

    # Calls the block (with the attempt number) until its response is not a 429 or 503, or the attempts
    # are used up; returns the last response. Understands Net::HTTP responses, Rack triples and anything
    # with #status and #headers.
    def run
      attempt = 0
      loop do
        response = yield attempt
        status, retry_after = self.class.status_and_retry_after(response)
        return response unless RETRY_STATUSES.include?(status) && attempt + 1 < @attempts

        @sleeper.call(delay(attempt, retry_after: retry_after))
        attempt += 1
      end
    end

    # Retry-After as seconds: delta-seconds or an HTTP date; nil when absent or unreadable.
    def self.retry_after_seconds(value, now: Time.now)
      case value
      when nil then nil
      when Numeric then [value.to_f, 0.0].max
      when /\A\s*\d+\s*\z/ then value.to_f
      else
        begin
          [Time.httpdate(value.to_s.strip) - now, 0.0].max
        rescue ArgumentError
          nil
        end
      end
    end

    def self.status_and_retry_after(response)
      if response.is_a?(Array) # [status, headers, body]
        headers = response[1] || {}
        [response[0].to_i, headers["Retry-After"] || headers["retry-after"]]
      elsif response.respond_to?(:code) && response.respond_to?(:[]) # Net::HTTPResponse
        [response.code.to_i, response["Retry-After"]]
      else
        headers = response.headers
        [response.status.to_i, headers["Retry-After"] || headers["retry-after"]]
      end
    end
  end
end
