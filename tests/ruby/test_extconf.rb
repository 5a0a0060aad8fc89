# frozen_string_literal: true

# The gem's extconf.rb on a machine that lacks what the build needs: one message, first, naming what is
# missing and the Debian, Alpine and Homebrew packages that provide it, before anything is compiled (never
# a raw mkmf or CMake error). pkg-config is real; what it finds is steered by PKG_CONFIG_LIBDIR and PATH.
require "minitest/autorun"
require "open3"
require "tmpdir"
require "rbconfig"

class TestExtconf < Minitest::Test
  EXTCONF = File.expand_path("../../bindings/ruby/ext/floodwall/extconf.rb", __dir__)
  RUBY = RbConfig.ruby

  # Runs extconf.rb in a fresh directory; returns [stderr lines, status, the directory's files].
  def extconf(env)
    Dir.mktmpdir("floodwall-extconf") do |dir|
      _out, err, status = Open3.capture3(env, RUBY, EXTCONF, chdir: dir)
      return [err.lines.map(&:chomp).reject(&:empty?), status, Dir.children(dir)]
    end
  end

  # Ruby's own compiler and pkg-config (target-prefixed on Debian), which mkmf runs by name.
  TOOLCHAIN = (%w[sh cc gcc g++ c++ as ld] + [RbConfig::CONFIG["CC"], RbConfig::CONFIG["CXX"]].compact.map { |c| c.split.first }).uniq

  # A PATH holding only the named tools of this machine (each must exist: the test needs them).
  def path_with(dir, tools)
    bin = File.join(dir, "bin")
    Dir.mkdir(bin)
    tools.each do |tool|
      found = ENV["PATH"].split(File::PATH_SEPARATOR).map { |d| File.join(d, tool) }.find { |f| File.executable?(f) }
      raise "#{tool} is needed by this test and is not installed" unless found

      File.symlink(found, File.join(bin, tool))
    end
    bin
  end

  def test_missing_hiredis_openssl_and_json_are_named_with_their_packages
    Dir.mktmpdir("floodwall-pc") do |empty|
      err, status, files = extconf("PKG_CONFIG_LIBDIR" => empty, "PKG_CONFIG_PATH" => "")
      refute status.success?, "extconf.rb succeeded with no hiredis, OpenSSL or nlohmann-json"
      assert_equal "floodwall: cannot build the extension, missing: hiredis, OpenSSL (rediss://), nlohmann-json. " \
                   "Install them, then the gem again: Debian/Ubuntu: apt-get install libhiredis-dev libssl-dev nlohmann-json3-dev; " \
                   "Alpine: apk add hiredis-dev openssl-dev nlohmann-json; macOS: brew install hiredis openssl@3 nlohmann-json " \
                   "(with PKG_CONFIG_PATH=$(brew --prefix openssl@3)/lib/pkgconfig if OpenSSL is still not found)", err.first
      refute_includes files, "Makefile"
    end
  end

  def test_a_pkg_config_named_by_PKG_CONFIG_is_the_one_asked
    Dir.mktmpdir("floodwall-pc") do |dir|
      fake = File.join(dir, "pkg-config-knows-nothing")
      File.write(fake, "#!/bin/sh\nexit 1\n")
      File.chmod(0o755, fake)
      err, status, = extconf("PKG_CONFIG" => fake)
      refute status.success?
      assert_match(/\Afloodwall: cannot build the extension, missing: hiredis, OpenSSL \(rediss:\/\/\), nlohmann-json\. /, err.first)
    end
  end

  def test_without_cmake_and_pkg_config_the_message_names_them_and_nothing_else
    Dir.mktmpdir("floodwall-path") do |dir|
      # A compiler and the shell are there; cmake and pkg-config are not.
      bin = path_with(dir, TOOLCHAIN)
      err, status, = extconf("PATH" => bin)
      refute status.success?
      assert_match(/\Afloodwall: cannot build the extension, missing: CMake >= 3\.20, pkg-config\. /, err.first)
      assert_includes err.first, "Debian/Ubuntu: apt-get install cmake pkg-config;"
      assert_includes err.first, "Alpine: apk add cmake pkgconf;"
    end
  end

  def test_with_everything_but_cmake_only_cmake_is_missing
    Dir.mktmpdir("floodwall-path") do |dir|
      bin = path_with(dir, TOOLCHAIN + ["pkg-config"])
      err, status, = extconf("PATH" => bin)
      refute status.success?
      assert_match(/\Afloodwall: cannot build the extension, missing: CMake >= 3\.20\. .*apt-get install cmake;/, err.first)
    end
  end
end
