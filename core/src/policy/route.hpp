// The route a request's rules match, one spelling for every framework: a policy's globs mean one thing
// fleet-wide whichever language and framework served the request.
//
// A middleware passes the matched route's pattern where its framework knows it (Express, Koa, Fastify and
// Rails write "/orders/:id", Starlette and FastAPI "/orders/{id}", Flask "/orders/<int:id>", Django
// "orders/<int:id>/", to which its middleware adds the leading '/'), else the request's path. A pattern is made
// canonical so:
//   - a trailing '/' is dropped from a route that starts with '/' (except the root, "/");
//   - a parameter of any syntax is ":name": "{id}", "{id:int}", "<id>", "<int:id>", "<path:rest>" and
//     "<regex('[a-z]+'):slug>" become ":id", ":rest", ":slug"; a parameter's regex, "(\\d+)", and its
//     modifier, "?", "*" or "+", are dropped (":id(\\d+)?" is ":id");
//   - an optional part, "(.:format)" (Rails) or "{/:id}" (Express 5), is dropped;
//   - everything else ('*' and "*splat" wildcards, literal text, a name such as "checkout") is kept.
// A path (the request's own, when no pattern is known) only loses its trailing '/': its bytes are the
// client's, and "(" or "{" in it are text. A policy's globs are made canonical as patterns, except that
// '?' and '*' after a parameter stay glob characters.
// So GET /orders/42 matches the globs "/orders/*" and "/orders/:id" in every framework: as "/orders/:id"
// where the framework knows its pattern, as "/orders/42" where it does not.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace floodwall {

enum class RouteText : uint8_t { pattern, path, glob };

// The canonical form of a route pattern, path or glob. Returns `in` itself when it is canonical already
// (the common case: no allocation), else a view of `buf`, which then holds it.
std::string_view canonical_route(std::string_view in, RouteText kind, std::string &buf);

inline std::string canonical_route(std::string_view in, RouteText kind = RouteText::pattern) {
  std::string buf;
  return std::string(canonical_route(in, kind, buf));
}

// The route a request's rules match: its route (a pattern) made canonical when it has one, else its path,
// else "". A view of `route`, `path` or `buf`.
inline std::string_view request_route(std::string_view route, std::string_view path, std::string &buf) {
  if (!route.empty()) return canonical_route(route, RouteText::pattern, buf);
  return canonical_route(path, RouteText::path, buf);
}

}  // namespace floodwall
