# frozen_string_literal: true

require "json"
require "floodwall/version"
require "floodwall/native" # the SWIG layer over the C ABI (ext/floodwall/floodwall.i)
require "floodwall/errors"
require "floodwall/decision"
require "floodwall/admin"
require "floodwall/client"
require "floodwall/backoff"

# floodwall: one rate limiter and load shedder for polyglot services. Floodwall::Client decides,
# Floodwall::Rack puts it in front of a Rack app, Floodwall::Backoff is for the callers that get a 429/503.
module Floodwall
  autoload :Rack, "floodwall/rack" # loads Rack itself, so that the gem does not depend on it
end
