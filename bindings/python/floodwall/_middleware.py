"""What the ASGI, WSGI and Django middleware share: options that are constants or callables of the request,
their names and checks for configuration given as a mapping (Django's settings.FLOODWALL, the Flask
extension), per-route settings next to a view (the frameworks' ``limit`` decorators), and the verify hook."""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple, TypeVar, Union

# A verify hook's failures are reported here (the application's logging decides where they go).
logger = logging.getLogger("floodwall")

T = TypeVar("T")
Option = Union[T, Callable[[Any], T]]
H = TypeVar("H", str, bytes)


def resolve(option: Any, request: Any) -> Any:
    """An option's value for one request: call it with the request (ASGI scope, WSGI environ) if callable."""
    return option(request) if callable(option) else option


def with_limits(headers: Iterable[Tuple[H, H]], limits: List[Tuple[H, H]]) -> List[Tuple[H, H]]:
    """A response's headers plus the decision's limit headers, except those it set itself (by name, any
    case): an application or an on_reject handler that writes its own Retry-After keeps it."""
    out = list(headers)
    if not limits:
        return out
    present = {name.lower() for name, _ in out}
    out.extend((name, value) for name, value in limits if name.lower() not in present)
    return out


class Verifier:
    """A middleware's ``verify`` option: ``verify(credential, request)`` says whether the app vouches for the
    request's credential (request_credential(): a Bearer token or API key), which then names its tenant. A
    credential nobody vouched for never does (a client that invents a key per request would get a new
    bucket each time): such a request is the tenant of its address. Every failure of the hook (it raises,
    or answers later than ``timeout`` seconds) counts as no, and is logged once per middleware and kind on
    the "floodwall" logger, never as an error of the request."""

    def __init__(self, client: Any, verify: Callable[..., Any], timeout: Optional[float]) -> None:
        if not callable(verify):
            raise TypeError("verify: must be a callable of (credential, request)")
        if timeout is None:
            # No longer than the store is given: the hook is on the request's path as the store is.
            timeout = client.deadline_ms / 1000
        elif isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError("verify_timeout: must be a number of seconds, or None for the client's deadline")
        elif not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError("verify_timeout: must be a finite number of seconds above 0")
        self.client, self.verify, self.timeout = client, verify, float(timeout)
        self._reported: Set[str] = set()
        self._lock = threading.Lock()  # WSGI servers run requests in threads: each kind once, not once each

    def credential(self, headers: Any, peer: Any) -> Optional[str]:
        """What the hook is asked about, or None when the request carries no credential to vouch for."""
        return self.client.request_credential(headers=headers, peer=peer)

    def failed(self, exc: BaseException) -> bool:
        self._report("raised", f"floodwall: the verify hook raised {type(exc).__name__}: {exc}")
        return False

    def late(self) -> bool:
        self._report("late", f"floodwall: the verify hook took longer than verify_timeout ({self.timeout:g} s)")
        return False

    def _report(self, kind: str, message: str) -> None:
        with self._lock:
            if kind in self._reported:
                return
            self._reported.add(kind)
        logger.warning("%s; such requests are keyed by their address (reported once)", message)


def verifier_of(client: Any, verify: Optional[Callable[..., Any]], timeout: Optional[float]) -> Optional[Verifier]:
    """A middleware's Verifier, or None without a verify hook (then nothing is asked, nothing changes)."""
    if verify is None:
        if timeout is not None:
            raise TypeError("verify_timeout: needs a verify hook")
        return None
    return Verifier(client, verify, timeout)



def vouch(v: Verifier, request: Any, headers: Any, peer: Any) -> Optional[bool]:
    """A plain (WSGI, sync Django) middleware's verify answer for the request's credential: None when it
    carries none (nothing to ask), else True or False; False also when the hook raises or answers late
    (measured: a plain hook cannot be interrupted). Nothing is held yet, so nothing can leak."""
    credential = v.credential(headers, peer)
    if credential is None:
        return None
    started = time.monotonic()
    try:
        answer = v.verify(credential, request)
        if inspect.isawaitable(answer):
            # An async hook where nothing awaits it: a coroutine object is truthy, which would vouch for
            # every made-up key. It counts as a failing hook instead.
            close = getattr(answer, "close", None)
            if close is not None:
                close()
            raise TypeError("verify returned an awaitable: under WSGI the hook must be a plain function")
        vouched = bool(answer)
    except Exception as exc:
        return v.failed(exc)
    if time.monotonic() - started > v.timeout:
        return v.late()
    return vouched


async def vouch_async(v: Verifier, request: Any, headers: Any, peer: Any) -> Optional[bool]:
    """An asyncio (ASGI, async Django) middleware's verify answer: as vouch(), with a plain or async hook;
    an async one is cancelled at the timeout. A cancelled request (a disconnect) leaves nothing behind."""
    credential = v.credential(headers, peer)
    if credential is None:
        return None
    started = time.monotonic()
    try:
        answer = v.verify(credential, request)
        if inspect.isawaitable(answer):
            # What is left of the timeout once the hook returned its awaitable. Not wait_for: it waits for a
            # cancelled hook to finish, and one that cleans up slowly (or swallows the cancellation) would
            # hold the request past the timeout.
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


# ------------------------------------------------------------------------------ configuration as a mapping

#: The middleware options (keyword arguments of every floodwall middleware), which a configuration mapping
#: (Django's settings.FLOODWALL, floodwall.flask.Floodwall's options) may hold besides "policy" or "client".
OPTIONS = ("key", "skip", "on_reject", "route", "method", "cost", "critical", "sandbox", "verify", "verify_timeout")


def client_and_options(config: Any, where: str, error: Callable[[str], Exception]) -> Tuple[Any, Dict[str, Any]]:
    """The client and the middleware options of a configuration mapping: "policy" (a dict, JSON text or a
    path to a JSON file: a new Floodwall) or "client" (a Floodwall the app made), and any of OPTIONS. Every
    mistake raises ``error(message)``, the message naming the key as ``where[key]``."""
    from . import Floodwall  # not at import: floodwall/__init__ imports nothing of the middlewares

    if not isinstance(config, Mapping):
        raise error(f"{where}: must be a dict with a \"policy\" (or a \"client\") and middleware options")
    for name in config:
        if name not in OPTIONS and name not in ("policy", "client"):
            known = ", ".join(("policy", "client") + OPTIONS)
            raise error(f"{where}[{name!r}]: unknown key (known: {known})")
    if ("policy" in config) == ("client" in config):
        raise error(f"{where}: needs exactly one of \"policy\" (a dict or a path to a JSON file) and \"client\"")
    options = {name: config[name] for name in OPTIONS if name in config}
    for name in ("skip", "on_reject", "verify"):
        if options.get(name) is not None and not callable(options[name]):
            raise error(f"{where}[{name!r}]: must be a callable of the request")
    if "client" in config:
        client = config["client"]
        if not hasattr(client, "admit"):
            raise error(f"{where}['client']: must be a floodwall.Floodwall")
        return client, options
    try:
        return Floodwall(config["policy"]), options
    except (ValueError, TypeError, OSError) as exc:
        raise error(f"{where}['policy']: {exc}") from exc


def check_max_wait(value: Any) -> Optional[float]:
    """A middleware's ``max_wait`` option: None (off: a request the bucket refuses is answered 429 at once)
    or the seconds, 0 or more, a request may be delayed for its turn instead."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"max_wait: must be a number of seconds or None, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"max_wait: must be a finite number of seconds, 0 or more (got {value})")
    return float(value)


# --------------------------------------------------------------------------------------- per-route settings


def _check_flag(owner: str, name: str, value: Any) -> None:
    if value is not None and not isinstance(value, bool) and not callable(value):
        raise TypeError(f"{owner}: {name}: must be True, False or a callable of the request (got {value!r})")


class RouteSettings:
    """A view's own floodwall settings, next to it: ``@floodwall.flask.limit(cost=5)`` (and the Django and
    FastAPI ``limit``) returns one, which marks the view (its ``__floodwall__``) for the app-wide middleware
    to read when the request is routed to it. Each setting left None is the middleware's. Checked when the
    decorator is made (at import), never at the first request:

    - ``cost``: tokens the request costs, an int >= 1 or a callable of the request;
    - ``critical``, ``sandbox``: True, False or a callable of the request;
    - ``skip``: True (never limited, no limit headers), False, or a callable of the request."""

    __slots__ = ("cost", "critical", "sandbox", "skip")

    def __init__(self, owner: str, *, cost: Any = None, critical: Any = None, sandbox: Any = None,
                 skip: Any = None) -> None:
        if cost is not None and not callable(cost):
            if isinstance(cost, bool) or not isinstance(cost, int) or cost < 1:
                raise ValueError(f"{owner}: cost: must be an int >= 1 or a callable of the request (got {cost!r})")
        _check_flag(owner, "critical", critical)
        _check_flag(owner, "sandbox", sandbox)
        _check_flag(owner, "skip", skip)
        self.cost, self.critical, self.sandbox, self.skip = cost, critical, sandbox, skip

    def __call__(self, view: T) -> T:
        try:
            view.__floodwall__ = self  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            raise TypeError(f"limit: cannot mark {view!r} (a function or a class is expected)") from None
        return view

    def __repr__(self) -> str:
        return "<floodwall limit " + " ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ">"


def route_settings(view: Any) -> Optional[RouteSettings]:
    """The RouteSettings a view was marked with (a class-based view's own, through Django's view_class),
    or None."""
    found = getattr(view, "__floodwall__", None)
    if found is None:
        found = getattr(getattr(view, "view_class", None), "__floodwall__", None)
    return found if isinstance(found, RouteSettings) else None


class PerRequest:
    """A request's options: the middleware's, each overridden by its route's settings where they say."""

    __slots__ = ("cost", "critical", "sandbox")

    def __init__(self, middleware: Any, settings: Optional[RouteSettings]) -> None:
        self.cost = middleware.cost if settings is None or settings.cost is None else settings.cost
        self.critical = middleware.critical if settings is None or settings.critical is None else settings.critical
        self.sandbox = middleware.sandbox if settings is None or settings.sandbox is None else settings.sandbox


def skipped_by_route(settings: Optional[RouteSettings], request: Any) -> bool:
    """Whether the route's own skip setting lets the request through undecided."""
    return settings is not None and settings.skip is not None and bool(resolve(settings.skip, request))
