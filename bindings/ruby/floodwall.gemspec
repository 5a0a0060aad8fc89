# frozen_string_literal: true

require_relative "lib/floodwall/version"
require "fileutils"

# The extension builds the core from source, so the gem carries the core's sources (the top-level
# CMakeLists.txt, core/, capi/, lua/) under ext/floodwall/vendor/. Built from the repository, this file
# refreshes that copy first; `gem install floodwall-*.gem` then needs cmake, swig, a C++20 compiler,
# libhiredis-dev and nlohmann-json3-dev, and no network.
repo = File.expand_path("../..", __dir__)
vendor = File.join(__dir__, "ext/floodwall/vendor")
if File.exist?(File.join(repo, "capi/include/floodwall.h"))
  FileUtils.rm_rf(vendor)
  FileUtils.mkdir_p(vendor)
  FileUtils.cp(File.join(repo, "CMakeLists.txt"), vendor)
  %w[core capi lua].each { |dir| FileUtils.cp_r(File.join(repo, dir), vendor) }
end

Gem::Specification.new do |spec|
  spec.name = "floodwall"
  spec.version = Floodwall::VERSION
  spec.summary = "Rate limiting and load shedding for Rack, on one C++ core shared with Python and Node"
  spec.description = <<~TEXT
    floodwall's Ruby binding: a per-tenant token bucket and concurrency cap (429), a fleet usage shedder
    and a worker utilization shedder (503), in process or shared through Redis, with IETF RateLimit
    headers. Floodwall::Client decides, Floodwall::Rack is the middleware, Floodwall::Backoff retries.
  TEXT
  spec.authors = ["floodwall developers"]
  spec.required_ruby_version = ">= 3.0"
  spec.extensions = ["ext/floodwall/extconf.rb"]
  spec.require_paths = ["lib"]
  Dir.chdir(__dir__) do
    spec.files = Dir["lib/**/*.rb", "ext/floodwall/extconf.rb", "ext/floodwall/floodwall.i",
                     "ext/floodwall/vendor/**/*", "examples/*", "README.md"].select { |f| File.file?(f) }
  end
  # No runtime dependencies: Rack is loaded only by Floodwall::Rack, from whatever the app runs on.
  spec.add_development_dependency "minitest", "~> 5.0"
  spec.add_development_dependency "rack-test", ">= 1", "< 3"
end
