# frozen_string_literal: true

module Floodwall
  # The gem's version; the core's is Floodwall::Native.version (the C ABI's fw_version).
  VERSION = "0.1.0"
end
