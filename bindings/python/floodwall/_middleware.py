"""What the ASGI and WSGI middleware share: options that are constants or callables of the request, and the
verify hook's bookkeeping."""

from __future__ import annotations

import logging
import math
import threading
from typing import Any, Callable, Iterable, List, Optional, Set, Tuple, TypeVar, Union

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

