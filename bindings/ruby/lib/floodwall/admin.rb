# frozen_string_literal: true

require "json"

module Floodwall
  # A client's admin API (Client#admin): each tenant's control record, kept in the store, so that a change
  # applies to the next request of every client of that store (Redis: every process of the fleet, in every
  # language; shm://: this machine's; memory://: this client), with no poll and no deploy. Expose it on an
  # admin endpoint behind your own authentication.
  #
  #   fw.admin.set_override("tenant-42", rate: 50, burst: 100)
  #   fw.admin.block("abuser", seconds: 3600)          # 403s; no seconds: until unblock
  #   fw.admin.show("tenant-42")["request_rate"]["remaining"]
  #
  # The tenant is an id as Client#admit takes it (a String of any bytes; Client#tenant_key gives the one
  # Floodwall::Rack derives from a request). Every call waits on the store for at most its deadline (at least
  # a second) without the GVL, so the other threads run meanwhile. A bad argument raises
  # Floodwall::InvalidArgumentError (an ArgumentError) naming it ("rate: ...", "tier: the policy has no tier
  # named ..."); a store that cannot be reached raises Floodwall::StoreError; a closed client
  # Floodwall::ClosedError.
  class Admin
    def initialize(handle)
      @handle = handle
    end

    # Gives the tenant its own request-rate bucket (rate tokens/second, burst tokens), checked as the
    # policy's are, in place of its tier's or the policy's.
    def set_override(tenant, rate:, burst:)
      Native.admin_set_override(@handle, tenant, rate, burst)
    end

    # Removes the tenant's own bucket: its tier's, or the policy's, applies again.
    def remove_override(tenant)
      Native.admin_remove_override(@handle, tenant)
    end

    # Puts the tenant in a tier of the policy's "tiers" (a String or Symbol); nil takes it out of any.
    def set_tier(tenant, tier)
      Native.admin_set_tier(@handle, tenant, tier.is_a?(Symbol) ? tier.to_s : tier)
    end

    # Blocks the tenant: its requests are answered 403 (Decision#blocked?) and consume nothing, for
    # +seconds+ (rounded up to whole seconds), or until #unblock when nil.
    def block(tenant, seconds: nil)
      unless seconds.nil?
        raise TypeError, "seconds: must be a Numeric or nil, not #{seconds.class}" unless seconds.is_a?(Numeric)
        # 0 would mean "until unblocked" to the core: nil says that here.
        unless seconds.positive? && seconds.finite?
          Error.raise_for_status(Native::EINVAL, "seconds: must be a finite number above 0 (nil blocks until unblocked)")
        end
      end
      Native.admin_block(@handle, tenant, seconds.nil? ? 0.0 : seconds.to_f)
    end

    # Lifts the tenant's block.
    def unblock(tenant)
      Native.admin_unblock(@handle, tenant)
    end

    # The tenant as the store has it, a Hash: {"tenant", "tier" (or nil), "override" ({"rate", "burst"} or
    # nil), "blocked", "blocked_until" (RFC 3339, or nil), "request_rate" ({"limit", "remaining", "rate",
    # "full_in_s"}, with a request_rate section), "concurrency" ({"limit", "in_flight"}), "limits" and
    # "quotas" (those of its tier, with what each has left), "store_time"}.
    def show(tenant)
      JSON.parse(Native.admin_show(@handle, tenant))
    end

    # Forgets the tenant's buckets and quotas (full again); its control record and in-flight slots stay.
    def reset(tenant)
      Native.admin_reset(@handle, tenant)
    end

    # Sets a limiter's mode ("enforce", "dark", "off") for every client of the store, over each one's own
    # (Client#set_mode); nil goes back to each one's own.
    def set_mode(limiter, mode)
      Native.admin_set_mode(@handle, Native.limiter_from_name(limiter.to_s),
                            mode.nil? ? -1 : Native.mode_from_name(mode.to_s))
    end

    # The tenants with a control record (an override, a tier or a block), at most +limit+ of them: an Array
    # of Hashes {"tenant", "tier", "override", "blocked", "blocked_until"}.
    def list(limit: 1000)
      JSON.parse(Native.admin_list(@handle, limit))
    end

    def inspect
      "#<Floodwall::Admin>"
    end
  end
end
