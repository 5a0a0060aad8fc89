"""WSGI middleware: Flask or any WSGI application.

    app = Flask(__name__)
    app.wsgi_app = FloodwallMiddleware(app.wsgi_app, Floodwall("policy.json"))

Every response gets the core's limit headers; a rejected request is answered with the decision's status
(429 or 503; 403 for a tenant blocked through the admin API) and the core's body, its Content-Type
(application/json, or application/problem+json under the policy's "body_format") and Retry-After,
without reaching the application. The ticket is released exactly once: when the application raises, or
when the server closes the response iterable (PEP 3333 servers call close() after the last byte, after
an error while iterating, and when the client disconnects or a streaming body is abandoned early). A file
answered through the server's ``wsgi.file_wrapper`` comes back as an instance of the server's own wrapper
(a subclass whose close() also releases), so the server still sends it its fast way (gunicorn: sendfile).

The tenant: by default the middleware hands the core the request's headers (the environ's ``HTTP_*``
keys turned back into header names: ``HTTP_X_API_KEY`` is ``x-api-key``) and the peer address
(``REMOTE_ADDR``), and the core derives the key by the policy's "tenant" section, as every floodwall
language does: the client address (X-Forwarded-For and Forwarded only from ``tenant.trusted_proxies``),
else "anonymous"; or the Authorization bearer token or the X-API-Key header, hashed, once ``verify``
vouches for it. A credential nobody vouched for names no tenant: a client that invents a key per request
is still its address's one tenant.

Hooks:

- ``key``: the tenant id (str or bytes), a constant or a callable of the environ. None (the default), or
  a callable returning None, lets the core derive it. "" is the anonymous tenant: limited as one tenant,
  never skipped.
- ``verify``: ``verify(credential, environ)`` says whether the app knows the request's Bearer token or
  API key (``credential``, as Floodwall.request_credential() names it); truthy: it names the tenant,
  falsy: the request is its address's. Asked only when the core derives the tenant and the request
  carries a credential. A hook that raises, or answers later than ``verify_timeout`` seconds (default: the
  client's deadline_ms; a WSGI hook cannot be interrupted, so a late answer is measured and ignored),
  counts as falsy and is logged once on the "floodwall" logger.
- ``skip``: a predicate of the environ; True lets the request through undecided, with no limit headers
  (health checks, internal callers).
- ``on_reject``: ``on_reject(environ, decision)`` builds the rejection itself and returns a WSGI app to
  answer with, such as a werkzeug/Flask ``Response``; the decision's limit headers are added to it unless
  it set them. Returning None answers with the default rejection.

Options, constants or callables of the WSGI environ:

- ``route``: the route family the policy's rules (limits, quotas, ``concurrency.routes``,
  ``adaptive.routes``, all globs) and the metrics match. Default: for a Flask app (or its
  ``app.wsgi_app``), the rule that will serve the request, e.g. ``/users/<int:user_id>``, matched against
  ``app.url_map``, which the core makes canonical (``/users/:user_id``, the same family as Express' or
  Starlette's). Where no rule is known (a path no rule matches, another WSGI app), None: the policy's globs
  match the request's path, which the middleware always hands the core too (SCRIPT_NAME + PATH_INFO), so
  ``"routes": ["/orders/*"]`` limits GET /orders/42 whatever the app.
- ``max_wait``: None (the default): a request the request-rate bucket refuses is answered 429 at once.
  A number of seconds: such a request waits for its turn instead when that turn is at most ``max_wait``
  away (Floodwall.acquire: the store reserves its tokens in one round trip), then goes on; further away,
  it is answered 429 as before. Under WSGI the wait **blocks the worker thread** (the GIL is released,
  other threads run): give the server threads enough for the requests that may wait at once, or keep
  ``max_wait`` short. Capped at the bucket's full refill (burst / rate).
- ``method``: default REQUEST_METHOD. ``cost`` (default 1), ``critical``, ``sandbox`` (default False).

A Flask view's own settings (``@floodwall.flask.limit(cost=5)``) override ``cost``, ``critical``,
``sandbox`` and add a ``skip`` for the requests it serves; ``floodwall.flask.Floodwall(app, policy)``
installs this middleware for a Flask app.
"""

from __future__ import annotations

import inspect
from http import HTTPStatus
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from . import Decision, Floodwall
from ._middleware import (
    check_max_wait,
    Option,
    PerRequest,
    RouteSettings,
    resolve,
    route_settings,
    skipped_by_route,
    verifier_of,
    vouch,
    with_limits,
)

Environ = dict
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]
OnReject = Callable[[Environ, Decision], Optional[WSGIApp]]


def _latin1(value: str) -> bytes:
    try:
        return value.encode("latin-1")  # PEP 3333: header values are the raw bytes as latin-1 strs
    except UnicodeEncodeError:  # a server that decoded them otherwise
        return value.encode("utf-8", "surrogateescape")


def request_headers(environ: Environ) -> List[Tuple[str, bytes]]:
    """The request's header fields from the environ's ``HTTP_*`` keys: ``HTTP_X_API_KEY`` is ``x-api-key``
    (the server has already joined repeated fields with commas). CONTENT_TYPE and CONTENT_LENGTH are left
    out: no tenant is derived from them."""
    return [
        (name[5:].replace("_", "-").lower(), _latin1(value))
        for name, value in environ.items()
        if name.startswith("HTTP_") and isinstance(value, str)
    ]


def _tenant_fields(client: Any) -> Optional[Tuple[Tuple[str, str], ...]]:
    """(environ key, header name) of each header the client's tenant derivation reads, or None for a client
    that does not say (a wrapper): then every header is handed over."""
    names = getattr(client, "tenant_headers", None)
    if not isinstance(names, tuple):
        return None
    return tuple(("HTTP_" + name.upper().replace("-", "_"), name) for name in names)


def _flask_match(app: Any) -> Callable[[Environ], Tuple[Optional[str], Optional[RouteSettings]]]:
    """The Flask rule that will serve the request (its pattern, e.g. "/users/<int:user_id>") and its view's
    own settings (``@floodwall.flask.limit``), read live from the app's url_map and view_functions (rules
    added after the middleware was installed count too); (None, None) for a path no rule serves."""

    def match(environ: Environ) -> Tuple[Optional[str], Optional[RouteSettings]]:
        try:
            rule, _ = app.url_map.bind_to_environ(environ).match(return_rule=True)
        except Exception:  # NotFound, MethodNotAllowed, RequestRedirect: the path is what the globs match
            return None, None
        return rule.rule, route_settings(app.view_functions.get(rule.endpoint))

    return match


def _no_match(environ: Environ) -> Tuple[Optional[str], Optional[RouteSettings]]:
    return None, None


def request_path(environ: Environ) -> str:
    """The request's path as the client sent it, without its query string: SCRIPT_NAME + PATH_INFO (PEP
    3333 gives them as latin-1 strs of the raw bytes)."""
    return environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")


def _method(environ: Environ) -> str:
    return environ.get("REQUEST_METHOD", "GET")


def _close_then_release(close: Optional[Callable[[], Any]], decision: Optional[Decision]) -> None:
    """Closes what the application answered with, then releases its ticket, even when close() raises."""
    try:
        if close is not None:
            close()
    finally:
        if decision is not None:
            decision.release()


class _Releasing:
    """The application's response iterable, releasing the ticket when the server closes it."""

    def __init__(self, result: Iterable[bytes], decision: Decision) -> None:
        self._result = result
        self._decision: Optional[Decision] = decision

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._result)

    def close(self) -> None:
        # Some servers and wrappers close twice: release once.
        decision, self._decision = self._decision, None
        if decision is not None:
            _close_then_release(getattr(self._result, "close", None), decision)


# The server's wsgi.file_wrapper class -> its subclass that also releases a ticket on close() (None for a
# class that cannot be subclassed): made once per server class.
_releasing_file_wrappers: Dict[type, Optional[type]] = {}


def _releasing_file_wrapper(server_wrapper: type) -> Optional[type]:
    """A subclass of the server's file wrapper whose close() also releases the ticket it carries. A file
    response made with it is an instance of the server's own class, so the server still sends it by its
    platform's fast path (gunicorn: sendfile), which it takes only for its wrapper's instances."""
    if server_wrapper in _releasing_file_wrappers:
        return _releasing_file_wrappers[server_wrapper]
    made: Optional[type] = None
    try:

        class ReleasingFileWrapper(server_wrapper):  # type: ignore[misc, valid-type]
            _fw_decision: Optional[Decision] = None
            # A close() the server's wrapper sets on its instance (gunicorn's and wsgiref's: the file's).
            _fw_close: Optional[Callable[[], Any]] = None

            def _fw_release_on_close(self) -> None:
                decision, self._fw_decision = self._fw_decision, None
                close = self._fw_close if self._fw_close is not None else getattr(super(), "close", None)
                _close_then_release(close, decision)

            # A property, so that the instance attribute the server's __init__ assigns lands in _fw_close
            # instead of hiding the release.
            close = property(lambda self: self._fw_release_on_close, lambda self, f: setattr(self, "_fw_close", f))

        made = ReleasingFileWrapper
    except TypeError:  # a final class
        pass
    _releasing_file_wrappers[server_wrapper] = made
    return made


class FloodwallMiddleware:
    def __init__(
        self,
        app: WSGIApp,
        client: Floodwall,
        *,
        key: Option[Any] = None,
        skip: Optional[Callable[[Environ], bool]] = None,
        on_reject: Optional[OnReject] = None,
        route: Option[Optional[str]] = None,
        method: Option[Optional[str]] = _method,
        cost: Option[int] = 1,
        critical: Option[bool] = False,
        sandbox: Option[bool] = False,
        verify: Optional[Callable[[str, Environ], Any]] = None,
        verify_timeout: Optional[float] = None,
        max_wait: Optional[float] = None,
    ) -> None:
        self.app = app
        self.client = client
        self.max_wait = check_max_wait(max_wait)
        if verify is not None and inspect.iscoroutinefunction(verify):
            raise TypeError("verify: an async function under WSGI (nothing would await it): give a plain function")
        self._verifier = verifier_of(client, verify, verify_timeout)
        # app is a Flask app or its bound wsgi_app method: route by its url_map, and read each view's own
        # settings (@floodwall.flask.limit) from it.
        flask_app = getattr(app, "__self__", app)
        is_flask = hasattr(flask_app, "url_map") and hasattr(flask_app, "view_functions")
        self._match = _flask_match(flask_app) if is_flask else _no_match
        # Only the headers the core reads for the tenant are looked up in the environ (two or three keys),
        # instead of turning every HTTP_* key back into a header: the same tenant, for less per request.
        self._tenant_fields = _tenant_fields(client)
        self.key, self.skip, self.on_reject = key, skip, on_reject
        self.route, self.method = route, method
        self.cost, self.critical, self.sandbox = cost, critical, sandbox

    def _acquire(self, tenant: Any, **request: Any) -> Any:
        return self.client.acquire(tenant, max_wait=self.max_wait, **request)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        if self.skip is not None and self.skip(environ):
            return self.app(environ, start_response)
        pattern, settings = self._match(environ)
        if skipped_by_route(settings, environ):
            return self.app(environ, start_response)
        options = self if settings is None else PerRequest(self, settings)
        tenant = resolve(self.key, environ)
        headers = peer = verified = None
        if tenant is None:  # the core derives it from the request as the server saw it
            fields = self._tenant_fields
            if fields is None:
                headers = request_headers(environ)
            else:
                headers = [(name, _latin1(v)) for key, name in fields if isinstance(v := environ.get(key), str)]
            peer = environ.get("REMOTE_ADDR") or None
            if self._verifier is not None:
                verified = vouch(self._verifier, environ, headers, peer)
        # verified= only with a hook: a client wrapper written before it (admit without the keyword) keeps
        # working as it did.
        checked = {} if verified is None else {"verified": verified}
        # max_wait: the request waits for its turn (Floodwall.acquire) instead of a 429, blocking this
        # worker thread meanwhile.
        decide = self.client.admit if self.max_wait is None else self._acquire
        decision = decide(
            tenant,
            headers=headers,
            peer=peer,
            route=pattern if self.route is None else resolve(self.route, environ),
            path=_latin1(request_path(environ)),
            method=resolve(self.method, environ),
            cost=resolve(options.cost, environ),
            critical=resolve(options.critical, environ),
            sandbox=resolve(options.sandbox, environ),
            **checked,
        )
        try:
            limit_headers: List[Tuple[str, str]] = list(decision.headers.items())

            def start_with_limits(status: str, headers: List[Tuple[str, str]], exc_info: Any = None) -> Any:
                return start_response(status, with_limits(headers, limit_headers), exc_info)

            if not decision.allowed:
                response = self.on_reject(environ, decision) if self.on_reject is not None else None
                if response is not None:
                    # A rejection holds nothing, but the answer may still be streaming: release on close.
                    return _Releasing(response(environ, start_with_limits), decision)
                body = decision.body.encode("utf-8")
                status = HTTPStatus(decision.status)
                start_response(
                    f"{status.value} {status.phrase}",
                    limit_headers + [("Content-Type", decision.content_type), ("Content-Length", str(len(body)))],
                )
                decision.release()  # a rejection holds nothing; releasing keeps "every path" literal
                return [body]

            server_wrapper = environ.get("wsgi.file_wrapper")
            releasing = _releasing_file_wrapper(server_wrapper) if isinstance(server_wrapper, type) else None
            if releasing is None:
                result = self.app(environ, start_with_limits)
            else:
                # A file response reaches the server as its own wrapper's instance (see above); the environ
                # gets the server's class back for whatever looks at it after the application.
                environ["wsgi.file_wrapper"] = releasing
                try:
                    result = self.app(environ, start_with_limits)
                finally:
                    environ["wsgi.file_wrapper"] = server_wrapper
                if type(result) is releasing:
                    result._fw_decision = decision
                    return result
        except BaseException:
            decision.release()
            raise
        return _Releasing(result, decision)


__all__ = ["FloodwallMiddleware", "request_headers", "request_path"]
