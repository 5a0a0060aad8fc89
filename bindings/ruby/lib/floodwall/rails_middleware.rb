# frozen_string_literal: true

require "floodwall/rack"
require "action_dispatch"
require "active_support/notifications"

module Floodwall
  # Floodwall::Rack as the Railtie inserts it: it also publishes ActiveSupport::Notifications events,
  # "reject.floodwall" for a refused request and "degraded.floodwall" for one the store did not decide, with
  # the request (ActionDispatch::Request) and the decision in the payload.
  class RailsMiddleware < Floodwall::Rack
    private

    def admit(env)
      decision = super
      degraded = decision.degraded? || decision.failed_open? || !decision.fail_reason.nil?
      return decision if decision.allowed? && !degraded

      begin
        payload = { request: ActionDispatch::Request.new(env), decision: decision }
        ActiveSupport::Notifications.instrument("degraded.floodwall", payload) if degraded
        ActiveSupport::Notifications.instrument("reject.floodwall", payload) unless decision.allowed?
      rescue Exception # a subscriber that raises (Interrupt included): the slot is given back, then it goes on
        @client.release(decision)
        raise
      end
      decision
    end
  end
end
