# frozen_string_literal: true

require "fileutils"

# floodwall for the Ruby benchmarks (bench/ruby/run.rb, bench/http/config.ru): an installed gem wins; when
# none is installed, the gem is built from this checkout and installed into build-ruby/bench-gems first, as
# packaging/test-ruby.sh does (again only when a source is newer than the gem).
FW_ROOT = File.expand_path("../..", __dir__)

def load_floodwall
  require "floodwall" # an installed gem wins
rescue LoadError
  gems = File.join(FW_ROOT, "build-ruby/bench-gems")
  gem = File.join(gems, "floodwall.gem")
  sources = Dir[File.join(FW_ROOT, "{core,capi,lua,bindings/ruby/lib,bindings/ruby/ext}/**/*"), File.join(FW_ROOT, "CMakeLists.txt")]
            .reject { |f| f.include?("/vendor/") || File.directory?(f) }
  unless File.exist?(gem) && sources.all? { |f| File.mtime(f) <= File.mtime(gem) }
    warn "bench: building and installing the floodwall gem into #{gems}"
    FileUtils.mkdir_p(gems)
    system("rake", "-f", File.join(FW_ROOT, "bindings/ruby/Rakefile"), "gem", "GEM_OUT=#{gem}", out: File::NULL,
           err: File::NULL) or abort "rake gem failed"
    system({ "GEM_HOME" => gems }, "gem", "install", "--local", "--no-document", gem, out: File::NULL) or
      abort "gem install failed"
  end
  Gem.paths = { "GEM_HOME" => gems, "GEM_PATH" => [gems, *Gem.path].join(File::PATH_SEPARATOR) }
  require "floodwall"
end

