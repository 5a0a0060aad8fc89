"""ASGI middleware: Starlette, FastAPI or any ASGI 3 application.

    app = FastAPI()
    app.add_middleware(FloodwallMiddleware, client=Floodwall("policy.json"))

Every HTTP response gets the core's limit headers; a rejected request is answered with the decision's
status (429 or 503; 403 for a tenant blocked through the admin API) and the core's body, its
Content-Type (application/json, or application/problem+json under the policy's "body_format") and
Retry-After, without reaching the application. The ticket is released when the application returns,
raises, or is cancelled (a client that disconnects mid-stream: the server or Starlette's
StreamingResponse cancels or ends the app), exactly once. Non-HTTP scopes (lifespan, websocket) pass
through untouched.

The tenant: by default the middleware hands the core every header of the request (``scope["headers"]``
as they are) and the peer address (``scope["client"][0]``), and the core derives the key by the policy's
"tenant" section, as every floodwall language does: the client address (X-Forwarded-For and Forwarded
only from ``tenant.trusted_proxies``), else "anonymous"; or the Authorization bearer token or the
X-API-Key header, hashed, once ``verify`` vouches for it. A credential nobody vouched for names no tenant:
a client that invents a key per request is still its address's one tenant.

Hooks:

- ``key``: the tenant id (str or bytes), a constant or a callable of the scope. None (the default), or a
  callable returning None, lets the core derive it. "" is the anonymous tenant: limited as one tenant,
  never skipped.
- ``verify``: ``verify(credential, scope)`` (plain or async) says whether the app knows the request's
  Bearer token or API key (``credential``, as Floodwall.request_credential() names it); truthy: it names
  the tenant, falsy: the request is its address's. Asked only when the core derives the tenant and the
  request carries a credential. A hook that raises or answers later than ``verify_timeout`` seconds
  (default: the client's deadline_ms) counts as falsy and is logged once on the "floodwall" logger; an
  async hook is cancelled at the timeout.
- ``skip``: a predicate of the scope (plain or async); True lets the request through undecided, with no
  limit headers (health checks, internal callers).
- ``on_reject``: ``on_reject(scope, decision)`` (plain or async) builds the rejection itself and returns
  an ASGI app to answer with, such as a Starlette ``Response``; the decision's limit headers are added to
  it unless it set them. Returning None answers with the default rejection.

Options, constants or callables of the ASGI scope:

- ``route``: the route family the policy's rules (limits, quotas, ``concurrency.routes``,
  ``adaptive.routes``, all globs) and the metrics match. Default: the path template of the
  Starlette/FastAPI route that will serve the request, e.g. ``/users/{user_id}``, which the core makes
  canonical (``/users/:user_id``, the same family as Express' ``/users/:user_id`` or Flask's
  ``/users/<int:user_id>``). Starlette only sets ``scope["route"]`` after routing, which happens inside
  the middleware stack, so this middleware matches the app's routes itself (``scope["app"].router.routes``
  under ``app.add_middleware``, the wrapped app's router when it wraps a Starlette app; Mounts included).
  For other ASGI apps: ``scope["route"].path`` when a framework set it. Where no route is known (a path
  no route matches, a plain ASGI app), None: the policy's globs match the request's path, which the
  middleware always hands the core too (``scope["path"]``), so ``"routes": ["/orders/*"]`` limits
  GET /orders/42 whatever the app.
- ``max_wait``: None (the default): a request the request-rate bucket refuses is answered 429 at once.
  A number of seconds: such a request waits for its turn instead when that turn is at most ``max_wait``
  away (Floodwall.acquire_async: the store reserves its tokens in one round trip, and the wait is a
  timer, so the event loop serves other requests meanwhile), then goes on with the same headers; further
  away, it is answered 429 as before. A task cancelled while it waits (a server or a timeout that cancels
  it) gives its reservation back; a server that does not cancel on a disconnect (uvicorn) lets it wait
  out its turn. Capped at the bucket's full refill (burst / rate).
- ``method``: default the request's method. ``cost`` (default 1), ``critical``, ``sandbox`` (default False).

A route's own settings (``@floodwall.fastapi.limit(cost=5)`` on its endpoint, or
``Depends(floodwall.fastapi.limit(...))`` among a FastAPI route's dependencies) override ``cost``,
``critical``, ``sandbox`` and add a ``skip`` for the requests the route serves.
"""

from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable, List, MutableMapping, Optional, Tuple, Union

from . import Decision, Floodwall
from ._middleware import (
    check_max_wait,
    Option,
    PerRequest,
    RouteSettings,
    resolve,
    route_settings,
    verifier_of,
    vouch_async,
    with_limits,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Skip = Callable[[Scope], Union[bool, Awaitable[bool]]]
OnReject = Callable[[Scope, Decision], Union[Optional[ASGIApp], Awaitable[Optional[ASGIApp]]]]
Verify = Callable[[str, Scope], Union[Any, Awaitable[Any]]]


Match = Tuple[Optional[str], Optional[RouteSettings]]


def _route_settings_of(route: Any) -> Optional[RouteSettings]:
    """A route's own settings: its endpoint's (``@floodwall.fastapi.limit`` under ``@app.get``), else a
    FastAPI route's dependency made by ``floodwall.fastapi.limit`` (``dependencies=[Depends(limit(...))]``)."""
    found = route_settings(getattr(route, "endpoint", None))
    if found is None:
        for dep in getattr(route, "dependencies", None) or ():
            if isinstance(getattr(dep, "dependency", None), RouteSettings):
                return dep.dependency
    return found


def _starlette_match(routes: Any, scope: Scope) -> Match:
    from starlette.routing import Match as M, Mount

    partial: Match = (None, None)
    for r in routes:
        match, child = r.matches(scope)
        if match == M.NONE:
            continue
        path = getattr(r, "path", "")
        settings = None
        if isinstance(r, Mount) and r.routes:
            inner, settings = _starlette_match(r.routes, {**scope, **child})
            path = path + inner if inner is not None else path
        else:
            settings = _route_settings_of(r)
        if match == M.FULL:
            return path, settings
        if partial[0] is None:
            partial = (path, settings)  # the path matched but not the method (a 405): still that route's family
    return partial


def _starlette_template(routes: Any, scope: Scope) -> Optional[str]:
    return _starlette_match(routes, scope)[0]


def default_route(scope: Scope) -> Optional[str]:
    """The pattern of the route that will serve the request, or None when none is known (the core then
    matches the policy's globs against the path)."""
    return _default_match(scope)[0]


def _default_match(scope: Scope) -> Match:
    router = getattr(scope.get("app"), "router", None)
    routes = getattr(router, "routes", None)
    if routes is not None:
        return _starlette_match(routes, scope)
    route = scope.get("route")
    path = getattr(route, "path", None)
    return (path if isinstance(path, str) and path else None), _route_settings_of(route)


def _method(scope: Scope) -> str:
    return scope.get("method", "GET")


class FloodwallMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        client: Floodwall,
        *,
        key: Option[Any] = None,
        skip: Optional[Skip] = None,
        on_reject: Optional[OnReject] = None,
        route: Option[Optional[str]] = default_route,
        method: Option[Optional[str]] = _method,
        cost: Option[int] = 1,
        critical: Option[bool] = False,
        sandbox: Option[bool] = False,
        verify: Optional[Verify] = None,
        verify_timeout: Optional[float] = None,
        max_wait: Optional[float] = None,
    ) -> None:
        self.app = app
        self.client = client
        self.max_wait = check_max_wait(max_wait)
        self._verifier = verifier_of(client, verify, verify_timeout)
        # A Floodwall batches the loop's writes; anything else with admit_async() (a wrapper) need not.
        self._hold_writes = getattr(client, "_hold_writes", None)
        routes = getattr(getattr(app, "router", None), "routes", None)
        self._match: Callable[[Scope], Match] = _default_match
        if routes is not None:
            # Wrapping a Starlette app from the outside: scope["app"] is not set yet, the app is known.
            self._match = lambda scope: _starlette_match(routes, scope)  # noqa: E731
        self.key, self.skip, self.on_reject = key, skip, on_reject
        self.route, self.method = route, method
        self.cost, self.critical, self.sandbox = cost, critical, sandbox

    async def _acquire(self, tenant: Any, **request: Any) -> Any:
        return await self.client.acquire_async(tenant, max_wait=self.max_wait, **request)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.skip is not None:
            skipped = self.skip(scope)
            if inspect.isawaitable(skipped):
                skipped = await skipped
            if skipped:
                await self.app(scope, receive, send)
                return
        pattern, settings = self._match(scope)
        if settings is not None and settings.skip is not None:
            skipped = resolve(settings.skip, scope)
            if inspect.isawaitable(skipped):
                skipped = await skipped
            if skipped:
                await self.app(scope, receive, send)
                return
        options = self if settings is None else PerRequest(self, settings)
        tenant = resolve(self.key, scope)
        headers = peer = verified = None
        if tenant is None:  # the core derives it from the request as the server saw it
            headers = scope.get("headers")
            client = scope.get("client")
            peer = client[0] if client else None
            if self._verifier is not None:
                verified = await vouch_async(self._verifier, scope, headers, peer)
        # verified= only with a hook: a client wrapper written before it (admit_async without the keyword)
        # keeps working as it did.
        checked = {} if verified is None else {"verified": verified}
        # max_wait: the request waits for its turn (Floodwall.acquire_async: a timer, the loop runs on)
        # instead of a 429; a task cancelled meanwhile gives it back.
        decide = self.client.admit_async if self.max_wait is None else self._acquire
        decision = await decide(
            tenant,
            headers=headers,
            peer=peer,
            route=pattern if self.route is default_route else resolve(self.route, scope),
            path=scope.get("path"),
            method=resolve(self.method, scope),
            cost=resolve(options.cost, scope),
            critical=resolve(options.critical, scope),
            sandbox=resolve(options.sandbox, scope),
            **checked,
        )
        try:
            limit_headers: List[Tuple[bytes, bytes]] = [
                (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in decision.headers.items()
            ]

            async def send_with_limits(message: Message) -> None:
                if message["type"] == "http.response.start":
                    message = dict(message)
                    message["headers"] = with_limits(message.get("headers", ()), limit_headers)
                await send(message)

            if not decision.allowed:
                response = None
                if self.on_reject is not None:
                    response = self.on_reject(scope, decision)
                    if inspect.isawaitable(response):
                        response = await response
                if response is not None:
                    await response(scope, receive, send_with_limits)
                    return
                body = decision.body.encode("utf-8")
                await send(
                    {
                        "type": "http.response.start",
                        "status": decision.status,
                        "headers": limit_headers
                        + [
                            (b"content-type", decision.content_type.encode("latin-1")),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return

            await self.app(scope, receive, send_with_limits)
        finally:
            if self._hold_writes is not None:
                self._hold_writes()  # sent with the loop iteration's other admits and releases
            decision.release()  # normal end, exception, cancellation (disconnect): always, once


__all__ = ["FloodwallMiddleware", "default_route"]
