# frozen_string_literal: true

# A minimal Rails app (Debian's ruby-rails) with floodwall installed the Rails way: the gem required after
# Rails (its Railtie), and config.floodwall set by the README's initializer,
# bindings/ruby/examples/rails/config/initializers/floodwall.rb, run from there. FLOODWALL_POLICY is the
# policy file; FW_BOGUS_OPTION=1 adds an option floodwall does not know, which must stop the boot.
require "rails"
require "action_controller/railtie"
require "floodwall"

module FloodwallRailsTest
  class Application < Rails::Application
    config.root = File.expand_path("..", __dir__)
    config.eager_load = false
    config.logger = Logger.new(File::NULL)
    config.secret_key_base = "a" * 64
    config.hosts.clear
    config.session_store :cookie_store, key: "_fw_test"

    paths["config/initializers"] << File.expand_path("../../../../bindings/ruby/examples/rails/config/initializers", __dir__)
    config.floodwall.bogus = 1 if ENV["FW_BOGUS_OPTION"] == "1"
  end

  # What the app saw: the floodwall events of this process, and the requests in flight at once.
  EVENTS = []
  LOCK = Mutex.new
  IN_FLIGHT = { now: 0, max: 0 }
  ActiveSupport::Notifications.subscribe(/\.floodwall\z/) do |name, _start, _finish, _id, payload|
    d = payload.fetch(:decision)
    LOCK.synchronize do
      EVENTS << { "name" => name, "path" => payload.fetch(:request).path, "status" => d.status,
                  "rule" => d.rule, "fail_reason" => d.fail_reason }
    end
  end
end

class OrdersController < ActionController::Base
  def index = render(plain: "orders\n")
  def show = render(plain: "order #{params[:id]} #{Process.pid}\n")
end

class ProbeController < ActionController::Base
  include FloodwallRailsTest

  # Waits (at most 20 s) until the file named by ?hold= exists; says it is in by making "<hold>.<id>.in".
  def hold
    File.write("#{params[:hold]}.#{params[:id]}.in", "") if params[:hold]
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
    sleep 0.01 until params[:hold].nil? || File.exist?(params[:hold]) ||
                     Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    render plain: "held #{request.path}\n"
  end

  def work
    LOCK.synchronize { IN_FLIGHT[:max] = [IN_FLIGHT[:max], IN_FLIGHT[:now] += 1].max }
    sleep 0.02
    render plain: "worked\n"
  ensure
    LOCK.synchronize { IN_FLIGHT[:now] -= 1 }
  end

  def boom = raise("boom")
  def other = render(plain: "other #{Process.pid}\n")

  def sign_in
    session[:account_id] = params[:account]
    render plain: "signed in\n"
  end

  def events = render(json: LOCK.synchronize { EVENTS.dup })

  def stats
    fw = Floodwall::Railtie.client
    render json: { "pid" => Process.pid, "in_flight_max" => LOCK.synchronize { IN_FLIGHT[:max] },
                   "route_families" => fw.metrics.fetch("routes").keys,
                   "middleware" => Rails.application.middleware.map(&:name) }
  end

  def block
    Floodwall::Railtie.client.admin.block(params.fetch(:tenant), seconds: 60)
    render plain: "blocked\n"
  end
end
