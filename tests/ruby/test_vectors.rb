# frozen_string_literal: true

require_relative "test_helper"

# tests/vectors.json, the vectors that the core, Python, Node and Ruby suites all check: every vector of
# every section, through the gem's public API (Client#tenant_key, Client#request_credential, Client#admit
# and the Decision's status, headers, content type and body, Client#request_route, Backoff#delay,
# Backoff.retry_after_seconds).
# A missing file, section or an empty section fails.
class TestVectors < Minitest::Test
  PATH = File.join(FloodwallTest::ROOT, "tests/vectors.json")
  SECTIONS = %w[tenant_keys backoff retry_after decisions routes policy_text].freeze
  # A vector's "check" as the verified: keyword takes it (absent: the app said nothing).
  VERIFIED = { nil => nil, "verified" => true, "rejected" => false }.freeze

  # A random: for Floodwall::Backoff that always draws the vector's number.
  Fixed = Struct.new(:rand)

  def vectors
    flunk "#{PATH} is missing" unless File.file?(PATH)
    @vectors ||= JSON.parse(File.read(PATH))
  end

  def section(name)
    list = vectors[name]
    flunk "#{PATH}: no #{name.inspect} section" if list.nil?
    assert_kind_of Array, list, "#{PATH}: #{name} should be a list"
    refute_empty list, "#{PATH}: #{name} is empty"
    list
  end

  def test_the_file_has_every_section
    SECTIONS.each { |name| section(name) }
  end

  def verified(vector)
    VERIFIED.fetch(vector["check"]) { flunk "#{vector["name"]}: check #{vector["check"].inspect}" }
  end

  def test_tenant_keys
    failures = section("tenant_keys").filter_map do |v|
      policy = v.key?("tenant") ? { "tenant" => v["tenant"] } : {}
      key = Floodwall::Client.open(policy) do |fw|
        fw.tenant_key(headers: v.fetch("headers"), peer: v.fetch("peer"), verified: verified(v))
      end
      "#{v["name"]}: #{key.inspect}, expected #{v["key"].inspect}" unless key == v.fetch("key")
    end
    assert_empty failures, failures.join("\n")
  end

  # The credential a verify hook would be asked about, for every tenant_keys vector (null: none).
  def test_request_credential
    failures = section("tenant_keys").filter_map do |v|
      flunk "#{v["name"]}: no \"credential\"" unless v.key?("credential")
      policy = v.key?("tenant") ? { "tenant" => v["tenant"] } : {}
      got = Floodwall::Client.open(policy) { |fw| fw.request_credential(headers: v.fetch("headers"), peer: v.fetch("peer")) }
      "#{v["name"]}: #{got.inspect}, expected #{v["credential"].inspect}" unless got == v["credential"]
    end
    assert_empty failures, failures.join("\n")
  end

  # Floodwall::Rack looks up only the headers the policy reads (Client#tenant_headers) among the env's,
  # beside a cookie, a user agent and the rest: the tenant it charges is the vector's key, with a verify:
  # hook that answers as the vector's check says (no hook when it has none).
  def test_tenant_keys_through_the_rack_middleware
    failures = section("tenant_keys").filter_map do |v|
      policy = { "request_rate" => { "rate" => 0.001, "burst" => 1 } }
      policy["tenant"] = v["tenant"] if v.key?("tenant")
      env = { "REQUEST_METHOD" => "GET", "PATH_INFO" => "/", "HTTP_COOKIE" => "session=#{"c" * 900}",
              "HTTP_USER_AGENT" => "Mozilla/5.0", "HTTP_ACCEPT_LANGUAGE" => "en" }
      v.fetch("headers").each do |name, value|
        key = "HTTP_#{name.upcase.tr("-", "_")}"
        env[key] = env.key?(key) ? "#{env[key]},#{value}" : value # as a server joins them
      end
      env["REMOTE_ADDR"] = v["peer"] unless v["peer"].nil?
      answer = verified(v)
      asked = []
      hook = answer.nil? ? {} : { verify: ->(credential, _env) { asked << credential; answer } }
      Floodwall::Client.open(policy) do |fw|
        Floodwall::Rack.new(->(_env) { [200, {}, ["ok"]] }, client: fw, route: "/", **hook).call(env)
        every_header = fw.tenant_key(headers: Floodwall::Rack.headers(env), peer: v["peer"], verified: answer)
        status = fw.admit(tenant: v.fetch("key")).status
        if every_header != v["key"] || status != 429
          "#{v["name"]}: #{v["key"]} not charged (#{status}; every header names #{every_header})"
        elsif !answer.nil? && asked != [v["credential"]].compact
          "#{v["name"]}: the hook was asked about #{asked.inspect}, not #{v["credential"].inspect}"
        end
      end
    end
    assert_empty failures, failures.join("\n")
  end

  # The route family every framework's pattern (or, with none, the request's path) comes to.
  def test_routes
    failures = Floodwall::Client.open({}) do |fw|
      section("routes").filter_map do |v|
        got = fw.request_route(route: v["route"], path: v["path"])
        "#{v["name"]}: #{got.inspect}, expected #{v["route_family"].inspect}" unless got == v.fetch("route_family")
      end
    end
    assert_empty failures, failures.join("\n")
  end

  # A policy given as a String is JSON text or a file's path by one rule; a Pathname is always a path.
  # Through the constructor, as a user gives it: JSON text gets the core's own verdict, never a file's.
  def test_policy_text
    failures = section("policy_text").filter_map do |v|
      policy = v["is_path"] ? Pathname.new(v.fetch("input")) : v.fetch("input")
      begin
        Floodwall::Client.new(policy).close
        "#{v["name"]}: constructed, expected #{v["error"].inspect}" if v.key?("error")
      rescue Floodwall::PolicyError => e
        if v.key?("error")
          "#{v["name"]}: #{e.message.inspect}, expected #{v["error"].inspect}" unless e.message == v["error"]
        elsif e.message.include?("cannot read the file")
          "#{v["name"]}: read as a file: #{e.message}"
        end
      end
    end
    assert_empty failures, failures.join("\n")
  end

  # A policy limit on a vector's route family limits its request, given as the middleware gives it: the
  # pattern (where the framework knows one) and the path. A policy's globs are read as patterns, so a
  # family that is not one as it stands (a path's "(bar)" would be an optional part) and the default
  # route ("") are left out.
  def test_a_limit_on_the_route_family_limits_each_routes_vector
    as_globs = Floodwall::Client.open({}) do |fw|
      section("routes").map { |v| v.fetch("route_family") }.select { |f| !f.empty? && fw.request_route(route: f) == f }
    end
    assert_operator as_globs.size, :>=, 25, "most route families are globs as they stand"
    failures = section("routes").filter_map do |v|
      family = v.fetch("route_family")
      next unless as_globs.include?(family)

      policy = { request_rate: { rate: 1000, burst: 1000, limits: [{ name: "it", routes: [family], rate: 0.001, burst: 1 }] } }
      Floodwall::Client.open(policy) do |fw|
        got = Array.new(2) { fw.admit(tenant: "t", route: v["route"], path: v["path"]) }
        "#{v["name"]}: #{got.map { |d| [d.status, d.rule] }.inspect}" unless got.map(&:status) == [200, 429] && got[1].rule == "it"
      end
    end
    assert_empty failures, failures.join("\n")
  end

  def test_backoff
    defaults = Floodwall::Backoff.new
    failures = section("backoff").filter_map do |v|
      backoff = Floodwall::Backoff.new(base: v.fetch("base_s", defaults.base), cap: v.fetch("cap_s", defaults.cap),
                                       random: Fixed.new(v.fetch("random")))
      retry_after = v.fetch("retry_after_s")
      delay = backoff.delay(v.fetch("attempt"), retry_after: retry_after.negative? ? nil : retry_after)
      "#{v.inspect}: #{delay}, expected #{v["delay_s"]}" unless (delay - v.fetch("delay_s")).abs <= 1e-9
    end
    assert_empty failures, failures.join("\n")
  end

  def test_retry_after
    failures = section("retry_after").filter_map do |v|
      seconds = Floodwall::Backoff.retry_after_seconds(v.fetch("value"), now: v.fetch("now"))
      expected = v.fetch("seconds")
      ok = expected.nil? ? seconds.nil? : !seconds.nil? && (seconds - expected).abs <= 1e-9
      "#{v.inspect}: #{seconds.inspect}" unless ok
    end
    assert_empty failures, failures.join("\n")
  end

  def test_decisions
    failures = section("decisions").flat_map do |c|
      Floodwall::Client.open(c.fetch("policy")) { |fw| decide(fw, c) }
    end
    assert_empty failures, failures.join("\n")
  end

  private

  # Admits the case's requests in order and returns its mismatches; each decision is released at once,
  # or at the end of the case when the request says "hold".
  def decide(fw, c)
    held = []
    requests = c.fetch("requests")
    refute_empty requests, "#{c["name"]}: no requests"
    requests.each_with_index.filter_map do |r, i|
      who = r.key?("tenant") ? { tenant: r["tenant"] } : { headers: r["headers"], peer: r["peer"], verified: verified(r) }
      d = fw.admit(**who, route: r["route"], method: r.fetch("method", "GET"), cost: r.fetch("cost", 1))
      r["hold"] ? held << d : fw.release(d)
      want = %w[status headers content_type body].to_h { |k| [k, r.fetch("expect").fetch(k)] }
      got = { "status" => d.status, "headers" => d.headers.to_a, "content_type" => d.content_type.to_s,
              "body" => d.body.to_s }
      "#{c["name"]}, request #{i}:\n  got      #{got.inspect}\n  expected #{want.inspect}" unless got == want
    end
  ensure
    held&.each { |d| fw.release(d) }
  end
end
