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
- ``method``: default the request's method. ``cost`` (default 1), ``critical``, ``sandbox`` (default False).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Awaitable, Callable, List, MutableMapping, Optional, Tuple, Union

from . import Decision, Floodwall
from ._middleware import Option, resolve, verifier_of, with_limits

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Skip = Callable[[Scope], Union[bool, Awaitable[bool]]]
OnReject = Callable[[Scope, Decision], Union[Optional[ASGIApp], Awaitable[Optional[ASGIApp]]]]
Verify = Callable[[str, Scope], Union[Any, Awaitable[Any]]]


def _starlette_template(routes: Any, scope: Scope) -> Optional[str]:
    from starlette.routing import Match, Mount

    partial = None
    for r in routes:
        match, child = r.matches(scope)
        if match == Match.NONE:
            continue
        path = getattr(r, "path", "")
        if isinstance(r, Mount) and r.routes:
            inner = _starlette_template(r.routes, {**scope, **child})
            path = path + inner if inner is not None else path
        if match == Match.FULL:
            return path
        if partial is None:
            partial = path  # the path matched but not the method (a 405): still that route's family
    return partial


def default_route(scope: Scope) -> Optional[str]:
    """The pattern of the route that will serve the request, or None when none is known (the core then
    matches the policy's globs against the path)."""
    router = getattr(scope.get("app"), "router", None)
    routes = getattr(router, "routes", None)
    if routes is not None:
        return _starlette_template(routes, scope)
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) and path else None


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
    ) -> None:
        self.app = app
        self.client = client
        self._verifier = verifier_of(client, verify, verify_timeout)
        # A Floodwall batches the loop's writes; anything else with admit_async() (a wrapper) need not.
        self._hold_writes = getattr(client, "_hold_writes", None)
        routes = getattr(getattr(app, "router", None), "routes", None)
        if route is default_route and routes is not None:
            # Wrapping a Starlette app from the outside: scope["app"] is not set yet, the app is known.
            route = lambda scope: _starlette_template(routes, scope)  # noqa: E731
        self.key, self.skip, self.on_reject = key, skip, on_reject
        self.route, self.method = route, method
        self.cost, self.critical, self.sandbox = cost, critical, sandbox

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
        tenant = resolve(self.key, scope)
        headers = peer = verified = None
        if tenant is None:  # the core derives it from the request as the server saw it
            headers = scope.get("headers")
            client = scope.get("client")
            peer = client[0] if client else None
            if self._verifier is not None:
                verified = await self._vouch(scope, headers, peer)
        # verified= only with a hook: a client wrapper written before it (admit_async without the keyword)
        # keeps working as it did.
        checked = {} if verified is None else {"verified": verified}
        decision = await self.client.admit_async(
            tenant,
            headers=headers,
            peer=peer,
            route=resolve(self.route, scope),
            path=scope.get("path"),
            method=resolve(self.method, scope),
            cost=resolve(self.cost, scope),
            critical=resolve(self.critical, scope),
            sandbox=resolve(self.sandbox, scope),
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

    async def _vouch(self, scope: Scope, headers: Any, peer: Any) -> Optional[bool]:
        """The verify hook's answer for the request's credential: None when it carries none (nothing to ask),
        else True or False; False also when the hook raises or is late. Nothing is held yet: a cancelled
        request (a disconnect) leaves nothing behind."""
        v = self._verifier
        assert v is not None
        credential = v.credential(headers, peer)
        if credential is None:
            return None
        started = time.monotonic()
        try:
            answer = v.verify(credential, scope)
            if inspect.isawaitable(answer):
                # What is left of the timeout once the hook returned its awaitable. Not wait_for: it waits
                # for a cancelled hook to finish, and one that cleans up slowly (or swallows the
                # cancellation) would hold the request past the timeout.
                left = v.timeout - (time.monotonic() - started)
                task = asyncio.ensure_future(answer)
                done, _ = await asyncio.wait({task}, timeout=max(left, 0))
                if not done:
                    task.cancel()
                    task.add_done_callback(_retrieve)
                    return v.late()
                answer = task.result()
            vouched = bool(answer)
        except Exception as exc:  # CancelledError (a BaseException) is the request's own: it propagates
            return v.failed(exc)
        if time.monotonic() - started > v.timeout:  # a plain hook cannot be interrupted, only found late
            return v.late()
        return vouched


def _retrieve(task: "asyncio.Future[Any]") -> None:
    """A late hook's end, whatever it is, read so that asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


__all__ = ["FloodwallMiddleware", "default_route"]
