# frozen_string_literal: true

require "json"
require "floodwall/version"
begin
  require "floodwall/native" # the SWIG layer over the C ABI (ext/floodwall/floodwall.i)
rescue LoadError => e
  raise unless e.path == "floodwall/native"

  # A source checkout whose extension is not built yet: Bundler's `path:` builds none. Build it once.
  require "floodwall/native_build"
  Floodwall::NativeBuild.build
  require "floodwall/native"
end
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
require "floodwall/railtie" if defined?(Rails::Railtie) # config.floodwall (lib/floodwall/railtie.rb)
