# frozen_string_literal: true

# The Rails app of tests/ruby/test_rails.rb, served by Puma: FLOODWALL_POLICY is the policy's file.
require_relative "config/environment"
# FW_ADMIT_AT_BOOT=1: the client decides once before Puma forks its workers (preload_app!), so that they
# are forked from a client with a live Redis connection and I/O thread.
if ENV["FW_ADMIT_AT_BOOT"] == "1"
  fw = Floodwall::Railtie.client
  decision = fw.admit(tenant: "preload")
  fw.release(decision)
  raise "the admit at boot was not decided by the store: #{decision.fail_reason}" if decision.degraded?
end
run Rails.application
