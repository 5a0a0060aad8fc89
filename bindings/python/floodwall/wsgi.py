"""WSGI middleware: Flask or any WSGI application.

    app = Flask(__name__)
    app.wsgi_app = FloodwallMiddleware(app.wsgi_app, Floodwall("policy.json"))

Every response gets the core's limit headers; a rejected request is answered 429 or 503 with the core's
JSON body and Retry-After, without reaching the application. The ticket is released exactly once: when
the application raises, or when the server closes the response iterable (PEP 3333 servers call close()
after the last byte, after an error while iterating, and when the client disconnects or a streaming body
is abandoned early).

Options are constants or callables of the WSGI environ:

- ``key``: the tenant id (str or bytes). Default: the Authorization bearer token or the X-API-Key header,
  hashed, else REMOTE_ADDR. A callable may return None for the default.
- ``route``: the route family. Default: for a Flask app (or its ``app.wsgi_app``), the rule that will
  serve the request, e.g. ``/users/<int:user_id>``, matched against ``app.url_map``; a path no rule
  matches counts as the default route "". For other apps, PATH_INFO.
- ``method``: default REQUEST_METHOD. ``cost`` (default 1), ``critical``, ``sandbox`` (default False).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple

from . import Decision, Floodwall
from ._middleware import Option, address_key, credential_key, resolve

Environ = dict
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]


def default_key(environ: Environ) -> str:
    def header(name: str) -> Optional[bytes]:
        value = environ.get(name)
        return value.encode("latin-1") if value else None  # PEP 3333: header values are latin-1 strs

    return credential_key(header("HTTP_AUTHORIZATION"), header("HTTP_X_API_KEY")) or address_key(
        environ.get("REMOTE_ADDR")
    )


def _flask_route(url_map: Any) -> Callable[[Environ], str]:
    def route(environ: Environ) -> str:
        try:
            rule, _ = url_map.bind_to_environ(environ).match(return_rule=True)
        except Exception:  # NotFound, MethodNotAllowed, RequestRedirect: not a route family of the app
            return ""
        return rule.rule

    return route


def _path(environ: Environ) -> str:
    return environ.get("PATH_INFO", "")


def _method(environ: Environ) -> str:
    return environ.get("REQUEST_METHOD", "GET")


class _Releasing:
    """The application's response iterable, releasing the ticket when the server closes it."""

    def __init__(self, result: Iterable[bytes], decision: Decision) -> None:
        self._result = result
        self._decision = decision
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._result)

    def close(self) -> None:
        if self._closed:  # some servers and wrappers close twice; release once
            return
        self._closed = True
        try:
            close = getattr(self._result, "close", None)
            if close is not None:
                close()
        finally:
            self._decision.release()


class FloodwallMiddleware:
    def __init__(
        self,
        app: WSGIApp,
        client: Floodwall,
        *,
        key: Option[Any] = default_key,
        route: Option[Optional[str]] = None,
        method: Option[Optional[str]] = _method,
        cost: Option[int] = 1,
        critical: Option[bool] = False,
        sandbox: Option[bool] = False,
    ) -> None:
        self.app = app
        self.client = client
        if route is None:
            # app is a Flask app or its bound wsgi_app method: route by its url_map (live, so rules added
            # after the middleware was installed count too).
            url_map = getattr(getattr(app, "__self__", app), "url_map", None)
            route = _flask_route(url_map) if url_map is not None else _path
        self.key, self.route, self.method = key, route, method
        self.cost, self.critical, self.sandbox = cost, critical, sandbox

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        tenant = resolve(self.key, environ)
        if tenant is None:
            tenant = default_key(environ)
        decision = self.client.admit(
            tenant,
            route=resolve(self.route, environ),
            method=resolve(self.method, environ),
            cost=resolve(self.cost, environ),
            critical=resolve(self.critical, environ),
            sandbox=resolve(self.sandbox, environ),
        )
        try:
            limit_headers: List[Tuple[str, str]] = list(decision.headers.items())
            if not decision.allowed:
                body = decision.body.encode("utf-8")
                status = HTTPStatus(decision.status)
                start_response(
                    f"{status.value} {status.phrase}",
                    limit_headers + [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
                )
                decision.release()  # a rejection holds nothing; releasing keeps "every path" literal
                return [body]

            def start_with_limits(status: str, headers: List[Tuple[str, str]], exc_info: Any = None) -> Any:
                return start_response(status, list(headers) + limit_headers, exc_info)

            result = self.app(environ, start_with_limits)
        except BaseException:
            decision.release()
            raise
        return _Releasing(result, decision)


__all__ = ["FloodwallMiddleware", "default_key"]
