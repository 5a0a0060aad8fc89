# frozen_string_literal: true

require "action_dispatch"

module Floodwall
  # The pattern of the Rails route a request will be dispatched to, found before Rails routes it (Floodwall::Rack
  # sits in front of the router): the route set's own matcher, as Rails' router runs it. The core makes the
  # pattern canonical ("/orders/:id(.:format)" is "/orders/:id"), so the metrics count one route family per
  # route, and a policy's globs match it as they match the same route in Express or Starlette.
  class RailsRoutes
    def initialize(route_set)
      @route_set = route_set
    end

    # The first route that matches the request's method, path and constraints, as Rails tries them: its
    # pattern ("/orders/:id(.:format)"); nil when none matches (a 404), or when the match is a mounted app
    # (an engine, a Sinatra app, `mount`), whose own routes Rails does not know: the path then decides.
    def pattern(env)
      # Rails' recognize rewrites a mounted app's SCRIPT_NAME and PATH_INFO, and the request memoizes into its
      # env: a copy keeps the app's env as the server made it.
      request = ActionDispatch::Request.new(env.dup)
      request.path_info = ActionDispatch::Journey::Router::Utils.normalize_path(request.path_info)
      @route_set.router.recognize(request) do |route, _params|
        next if route.app.respond_to?(:matches?) && !route.app.matches?(request) # a constraints: block or object

        return route.path.anchored ? route.path.spec.to_s : nil
      end
      nil
    end
  end
end
