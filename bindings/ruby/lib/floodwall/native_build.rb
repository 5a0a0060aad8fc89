# frozen_string_literal: true

require "fileutils"
require "rbconfig"

module Floodwall
  # Builds floodwall/native in a source checkout: `rake compile`, and the first `require "floodwall"` of a
  # gem that Bundler took from a `path:` (Bundler builds the extensions of git: and registry gems, never a
  # path: gem's). The same extconf.rb as `gem install`, run in tmp/<platform>/<ruby>/ of the gem's tree;
  # the library lands in lib/floodwall/, where `require "floodwall/native"` finds it. A lock file makes the
  # processes of a preforking server that start together build it once.
  module NativeBuild
    ROOT = File.expand_path("../..", __dir__)
    EXTCONF = File.join(ROOT, "ext/floodwall/extconf.rb")
    TARGET = File.join(ROOT, "lib/floodwall/native.#{RbConfig::CONFIG["DLEXT"]}")

    module_function

    def source_tree?
      File.file?(EXTCONF)
    end

    # Builds the extension unless it is there; raises LoadError naming the log and what to run on failure.
    def build(out: $stderr)
      raise LoadError, "floodwall: the native extension is not built and #{ROOT} has no ext/ to build it from; reinstall the gem" unless source_tree?

      dir = File.join(ROOT, "tmp", RUBY_PLATFORM, RbConfig::CONFIG["ruby_version"])
      FileUtils.mkdir_p(dir)
      File.open(File.join(dir, ".lock"), File::RDWR | File::CREAT, 0o644) do |lock|
        lock.flock(File::LOCK_EX)
        return TARGET if File.file?(TARGET) # another process built it while this one waited

        out&.puts "floodwall: building the native extension in #{dir} (once; a minute or two)"
        log = File.join(dir, "build.log")
        ok = run([RbConfig.ruby, EXTCONF], dir, log) && run([make, "-j#{ENV.fetch("FLOODWALL_JOBS", "2")}"], dir, log)
        built = File.join(dir, File.basename(TARGET))
        unless ok && File.file?(built)
          tail = File.exist?(log) ? File.readlines(log).last(15).join : ""
          raise LoadError, "floodwall: building the native extension failed (#{log}):\n#{tail}" \
                           "Fix what it names (a missing compiler, CMake, libhiredis-dev, libssl-dev, swig), then run " \
                           "`rake compile` in #{ROOT}"
        end
        FileUtils.cp(built, "#{TARGET}.tmp")
        File.rename("#{TARGET}.tmp", TARGET)
      end
      TARGET
    end

    def make
      ENV["MAKE"] || RbConfig::CONFIG["MAKE"] || "make"
    end

    def run(cmd, dir, log)
      File.open(log, "a") { |f| f.puts("$ #{cmd.join(" ")}") }
      system(*cmd, chdir: dir, out: [log, "a"], err: [:child, :out])
    rescue SystemCallError => e
      File.open(log, "a") { |f| f.puts(e.message) }
      false
    end
  end
end
