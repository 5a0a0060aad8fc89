# frozen_string_literal: true

require_relative "lib/floodwall/version"

# The extension builds the core from source. A built gem carries the core's sources (the top-level
# CMakeLists.txt, core/, capi/, lua/) under ext/floodwall/vendor/ and the SWIG wrapper generated from
# floodwall.i: `rake prepare` (or `rake gem`, which builds the gem too) puts them there. This file only
# lists files; it writes nothing. `gem install floodwall-*.gem` then needs cmake, a C++20 compiler,
# pkg-config, libhiredis-dev, libssl-dev and nlohmann-json3-dev, no SWIG and no network.
#
# From a clone, with nothing prepared, Bundler takes the gem as it is (Gemfile: `gem "floodwall", path:
# "<clone>/bindings/ruby"`, or `git: "<url>", glob: "bindings/ruby/floodwall.gemspec"`): extconf.rb builds
# the core from the clone's own tree and generates the wrapper with SWIG (git: builds it at `bundle install`;
# path:, whose extensions Bundler never builds, at the first `require "floodwall"`: lib/floodwall/native_build.rb).

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
  spec.license = "MIT" # LICENSE, vendored with the core
  spec.required_ruby_version = ">= 3.0"
  spec.extensions = ["ext/floodwall/extconf.rb"]
  spec.require_paths = ["lib"]
  spec.bindir = "exe"
  spec.executables = ["floodwall"]  # the floodwall command (fw_cli_run)
  Dir.chdir(__dir__) do
    spec.files = Dir["lib/**/*.rb", "exe/*", "ext/floodwall/extconf.rb", "ext/floodwall/floodwall.i",
                     "ext/floodwall/floodwall_wrap.c", "ext/floodwall/vendor/**/*", "examples/*",
                     "README.md", "floodwall.schema.json"].select { |f| File.file?(f) }
  end
  # A .gem must carry the core and the wrapper; a clone used in place by Bundler has them beside it.
  prepared = spec.files.include?("ext/floodwall/floodwall_wrap.c") && spec.files.include?("ext/floodwall/vendor/CMakeLists.txt")
  if defined?(Gem::Commands::BuildCommand) && !prepared
    raise "floodwall.gemspec: run `rake prepare` in bindings/ruby first (it vendors the core and generates the wrapper)"
  end
  # No runtime dependencies: Rack is loaded only by Floodwall::Rack, from whatever the app runs on.
  spec.add_development_dependency "minitest", "~> 5.0"
  spec.add_development_dependency "rack-test", ">= 1", "< 3"
end
