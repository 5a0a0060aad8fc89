# frozen_string_literal: true

module Floodwall
  # Retries for the callers of a floodwall-protected service: capped exponential backoff with full jitter
  # (a random delay in [0, min(cap, base * 2**attempt)), so that rejected clients do not come back in
  # step), never earlier than the server's Retry-After. The numbers are the core's (fw_backoff_delay,
  # fw_parse_retry_after), the same in every language, and so are the defaults (FW_BACKOFF_INIT: base 0.1 s,
  # cap 20 s, 5 attempts); the loop and the sleeping are Ruby's.
  #
  #   backoff = Floodwall::Backoff.new(base: 0.1, cap: 10, attempts: 5)
  #   response = backoff.run { Net::HTTP.get_response(uri) } # retried while it answers 429 or 503
  class Backoff
    RETRY_STATUSES = [429, 503].freeze
    # The core's defaults (FW_BACKOFF_INIT): seconds, seconds, calls.
    DEFAULT_BASE, DEFAULT_CAP, DEFAULT_ATTEMPTS = Native.backoff_defaults

    attr_reader :base, :cap, :attempts

    # base, cap: seconds; attempts: calls in all, the first one included. random (anything with #rand
    # giving a Float in [0, 1)) and sleeper are there for tests and for callers with their own clock.
    # Bad settings raise an ArgumentError naming the setting (the core's checks: base > 0, cap >= base,
    # attempts >= 1).
    def initialize(base: DEFAULT_BASE, cap: DEFAULT_CAP, attempts: DEFAULT_ATTEMPTS, random: Random.new,
                   sleeper: ->(s) { sleep(s) })
      raise ArgumentError, "base: must be a number" unless base.is_a?(Numeric)
      raise ArgumentError, "cap: must be a number" unless cap.is_a?(Numeric)
      raise ArgumentError, "attempts: must be an Integer" unless attempts.is_a?(Integer)

      @base = base.to_f
      @cap = cap.to_f
      @attempts = attempts
      Native.backoff_delay(@base, @cap, @attempts, 0, nil, 0.0) # the core checks the settings
      @random = random
      @sleeper = sleeper
    end

    # Seconds to wait before retry number `attempt` (0 for the first retry), as the core computes it:
    # max(Retry-After, 0) + random * min(cap, base * 2**attempt), with random from the random: object.
    # retry_after: the server's Retry-After (seconds, or a header value: delay-seconds or an HTTP date),
    # honoured as a floor with the jitter on top of it; nil (or one that does not parse) for none.
    def delay(attempt, retry_after: nil)
      floor = retry_after.is_a?(Numeric) ? retry_after : self.class.retry_after_seconds(retry_after)
      Native.backoff_delay(@base, @cap, @attempts, attempt, floor, @random.rand)
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

    # Retry-After as seconds (never negative), parsed by the core: delay-seconds or an HTTP date
    # (IMF-fixdate, RFC 850 or asctime) counted from now (a Time, or Unix seconds); nil when absent or
    # unparseable. A Numeric is taken as seconds already.
    def self.retry_after_seconds(value, now: Time.now)
      case value
      when nil then nil
      when Numeric then [value.to_f, 0.0].max
      else Native.parse_retry_after(value.to_s, now.to_f)
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
