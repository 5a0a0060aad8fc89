"""Django: ``floodwall.django.FloodwallMiddleware`` in ``settings.MIDDLEWARE``, configured by
``settings.FLOODWALL``, for sync (WSGI) and async (ASGI) stacks alike.

    MIDDLEWARE = ["floodwall.django.FloodwallMiddleware", ...]   # first, or after SecurityMiddleware
    FLOODWALL = {"policy": BASE_DIR / "floodwall.json"}            # or a dict; or "client": a Floodwall

``settings.FLOODWALL`` holds "policy" (a dict, JSON text or a path to a JSON file; the process makes one
Floodwall of it, shared by every instance of the middleware: ``floodwall.django.client()``) or "client" (a
Floodwall the project made), and the options of the ASGI and WSGI middlewares, each a constant or a
callable of the ``HttpRequest``: ``key``, ``skip``, ``on_reject`` (``on_reject(request, decision)`` returns
an HttpResponse, or None for the default rejection), ``route``, ``method``, ``cost``, ``critical``,
``sandbox``, ``verify`` (``verify(credential, request)``; plain, or async on an async stack) and
``verify_timeout``. A missing setting, an unknown key or a bad value raises ImproperlyConfigured naming it
when Django loads its middleware (at startup), never at a request.

The route family is the URL pattern that will serve the request, ``resolve(request.path_info).route`` with
a leading "/" ("/orders/<int:id>/", which the core makes "/orders/:id", the family Express, Flask or
Starlette give the same URL); for a path no pattern serves, or a ``re_path`` regex, the policy's globs
match the request's path, which the middleware always hands the core. A view's own settings sit next to
it: ``@floodwall.django.limit(cost=5)`` (also ``critical``, ``sandbox``, ``skip``), checked at import.

The tenant is derived by the core from the request's headers (``request.META``'s ``HTTP_*``) and
``REMOTE_ADDR`` as in every floodwall language, or is what ``key`` returns. Every response gets the limit
headers (unless it set one itself); a rejected request gets the core's status (429, 503, 403), headers,
Content-Type and body without reaching the view. The ticket is released on every path: when the view
returns a whole response (its work is done; a client that sends its next request as soon as it has the
answer finds the slot free, though the server closes the response later), when a streaming response is
closed (after its last byte, or when the client goes away mid-stream: the server closes it), when the view
raises, or when an async request is cancelled.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any, Callable, Dict, Optional, Tuple

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.urls import Resolver404, resolve

from . import Decision, Floodwall
from ._middleware import (
    PerRequest,
    RouteSettings,
    client_and_options,
    resolve as resolve_option,
    route_settings,
    skipped_by_route,
    verifier_of,
    vouch,
    vouch_async,
)
from .wsgi import _latin1, _tenant_fields

__all__ = ["FloodwallMiddleware", "limit", "client"]

SETTING = "settings.FLOODWALL"

_lock = threading.Lock()
_configured: Optional[Tuple[Any, Dict[str, Any]]] = None


def _configuration() -> Tuple[Any, Dict[str, Any]]:
    """The process's client and middleware options, made from settings.FLOODWALL once."""
    global _configured
    with _lock:
        if _configured is None:
            if not hasattr(settings, "FLOODWALL"):
                raise ImproperlyConfigured(
                    f"{SETTING}: missing; floodwall.django.FloodwallMiddleware needs "
                    'FLOODWALL = {"policy": {...} or a path to a JSON file}'
                )
            _configured = client_and_options(settings.FLOODWALL, SETTING, ImproperlyConfigured)
        return _configured


def _forget(*, setting: str, **kwargs: Any) -> None:
    """override_settings(FLOODWALL=...) in a test: the next middleware made reads the new setting."""
    global _configured
    if setting == "FLOODWALL":
        with _lock:
            _configured = None


setting_changed.connect(_forget)


def client() -> Floodwall:
    """The Floodwall the middleware uses (made from settings.FLOODWALL), for the project's own admin or
    metrics views."""
    return _configuration()[0]


def limit(*, cost: Any = None, critical: Any = None, sandbox: Any = None, skip: Any = None) -> RouteSettings:
    """A view's own settings, over the middleware's: ``@floodwall.django.limit(cost=5)`` on a function view,
    on a class-based view (the class), or around ``View.as_view()`` in urls.py. ``cost`` an int >= 1,
    ``critical``, ``sandbox`` and ``skip`` True/False; each may also be a callable of the request. A bad
    value raises at import."""
    return RouteSettings("floodwall.django.limit", cost=cost, critical=critical, sandbox=sandbox, skip=skip)


def _is_regex(route: str) -> bool:
    return route.startswith("^") or route.endswith("$") or "(?" in route or "\\" in route


def url_pattern(request: HttpRequest) -> Tuple[Optional[str], Optional[RouteSettings]]:
    """The URL pattern that will serve the request, with a leading "/", and its view's own settings; None
    for a path no pattern serves and for a re_path regex (then the path is what the globs match)."""
    try:
        match = resolve(request.path_info, getattr(request, "urlconf", None))
    except Resolver404:
        return None, None
    settings_ = route_settings(match.func)
    route = match.route
    if not route:
        return ("/" if request.path_info == "/" else None), settings_
    if _is_regex(route):
        return None, settings_
    return "/" + route, settings_


def _add_limits(response: HttpResponseBase, decision: Decision) -> None:
    for name, value in decision.headers.items():
        if not response.has_header(name):  # a view or an on_reject that set its own keeps it
            response[name] = value


def _release_when_done(response: HttpResponseBase, decision: Decision) -> HttpResponseBase:
    """Releases the ticket now for a whole response (the view's work is done: under uvicorn Django closes
    the response on a thread after the client has its last byte, and a client's next request could find the
    slot still held), and for a streaming one when the server closes it (after its last byte, or when the
    client went away), even when the response's own close() raises."""
    if not response.streaming:
        decision.release()
        return response
    close = response.close

    def close_then_release() -> None:
        try:
            close()
        finally:
            decision.release()

    response.close = close_then_release  # type: ignore[method-assign]
    return response


class FloodwallMiddleware:
    """The middleware; Django makes it with ``get_response`` and reads the rest from settings.FLOODWALL."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[..., Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
        self.client, options = _configuration()
        self.key = options.get("key")
        self.skip = options.get("skip")
        self.on_reject = options.get("on_reject")
        self.route = options.get("route")
        self.method = options.get("method", lambda request: request.method)
        self.cost = options.get("cost", 1)
        self.critical = options.get("critical", False)
        self.sandbox = options.get("sandbox", False)
        verify = options.get("verify")
        if verify is not None and not self.is_async and inspect.iscoroutinefunction(verify):
            raise ImproperlyConfigured(
                f"{SETTING}['verify']: an async function on a sync middleware stack (nothing would await it)"
            )
        try:
            self._verifier = verifier_of(self.client, verify, options.get("verify_timeout"))
        except (TypeError, ValueError) as exc:
            raise ImproperlyConfigured(f"{SETTING}: {exc}") from exc
        self._tenant_fields = _tenant_fields(self.client)

    # What the sync and the async path share: everything up to the admit, nothing that blocks.

    def _prepare(self, request: HttpRequest) -> Tuple[Any, Dict[str, Any], Optional[RouteSettings]]:
        pattern, settings_ = url_pattern(request)
        options = self if settings_ is None else PerRequest(self, settings_)
        tenant = resolve_option(self.key, request)
        kw: Dict[str, Any] = {
            "route": pattern if self.route is None else resolve_option(self.route, request),
            "path": request.path,
            "method": resolve_option(self.method, request),
            "cost": resolve_option(options.cost, request),
            "critical": resolve_option(options.critical, request),
            "sandbox": resolve_option(options.sandbox, request),
        }
        if tenant is None:  # the core derives it from the request as the server saw it
            meta = request.META
            fields = self._tenant_fields
            if fields is None:
                kw["headers"] = [(k[5:].replace("_", "-").lower(), _latin1(v)) for k, v in meta.items()
                                 if k.startswith("HTTP_") and isinstance(v, str)]
            else:
                kw["headers"] = [(name, _latin1(v)) for key, name in fields if isinstance(v := meta.get(key), str)]
            kw["peer"] = meta.get("REMOTE_ADDR") or None
        return tenant, kw, settings_

    def _rejection(self, decision: Decision, response: Optional[HttpResponseBase]) -> HttpResponseBase:
        decision.release()  # a rejection holds nothing; releasing keeps "every path" literal
        if response is None:
            response = HttpResponse(decision.body, status=decision.status, content_type=decision.content_type)
        _add_limits(response, decision)
        return response

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        if self.skip is not None and self.skip(request):
            return self.get_response(request)
        tenant, kw, settings_ = self._prepare(request)
        if skipped_by_route(settings_, request):
            return self.get_response(request)
        if tenant is None and self._verifier is not None:
            verified = vouch(self._verifier, request, kw["headers"], kw["peer"])
            if verified is not None:
                kw["verified"] = verified
        decision = self.client.admit(tenant, **kw)
        try:
            if not decision.allowed:
                custom = self.on_reject(request, decision) if self.on_reject is not None else None
                return self._rejection(decision, custom)
            response = self.get_response(request)
            _add_limits(response, decision)
        except BaseException:
            decision.release()
            raise
        return _release_when_done(response, decision)

    async def __acall__(self, request: HttpRequest) -> Any:
        if self.skip is not None and await _maybe_await(self.skip(request)):
            return await self.get_response(request)
        tenant, kw, settings_ = self._prepare(request)
        if settings_ is not None and settings_.skip is not None:
            if await _maybe_await(resolve_option(settings_.skip, request)):
                return await self.get_response(request)
        if tenant is None and self._verifier is not None:
            verified = await vouch_async(self._verifier, request, kw["headers"], kw["peer"])
            if verified is not None:
                kw["verified"] = verified
        decision = await self.client.admit_async(tenant, **kw)
        try:
            if not decision.allowed:
                custom = None
                if self.on_reject is not None:
                    custom = await _maybe_await(self.on_reject(request, decision))
                return self._rejection(decision, custom)
            response = await self.get_response(request)
            _add_limits(response, decision)
        except BaseException:  # the view raised, or the request was cancelled (the client went away)
            decision.release()
            raise
        return _release_when_done(response, decision)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
