"""For callers of a floodwall-protected API: retry 429 and 503 with capped exponential backoff and full
jitter, never earlier than the server's Retry-After.

    delay = max(Retry-After, 0) + random(0, min(cap, base * 2**attempt))

Retry-After is the server's own estimate of when a retry can pass (for a token bucket, when the tokens
exist): retrying earlier only spends another request on a certain rejection. The jitter on top of it
spreads the retries of many clients over a window instead of bunching them all at the instant the server
named. Every delay and every Retry-After value is computed by floodwall's core (fw_backoff_delay,
fw_parse_retry_after), with its defaults (DEFAULTS), so a Python, Node and Ruby client of one service
come back alike.

    response = send_with_backoff(lambda: httpx.get(url, headers=auth))
    response = await send_with_backoff_async(lambda: client.get(url))

Works with any response object that has ``status_code`` (or ``status``) and ``headers`` (httpx,
requests, aiohttp). Times are in seconds.
"""

from __future__ import annotations

import asyncio
import random as _random
import time
from typing import Any, Awaitable, Callable, Container, NamedTuple, Optional, TypeVar, Union

from . import InvalidArgumentError, _floodwall

R = TypeVar("R")

RETRY_STATUSES = (429, 503)


class Defaults(NamedTuple):
    """The backoff defaults every floodwall language shares (the core's FW_BACKOFF_INIT)."""

    base: float  #: seconds: the first retry waits up to base (plus Retry-After)
    cap: float  #: seconds: the jitter window never grows beyond cap
    attempts: int  #: calls in all, the first one included


#: Read from the native module, which reads FW_BACKOFF_INIT: not restated here.
DEFAULTS = Defaults(
    base=float(_floodwall.BACKOFF_DEFAULTS["base_s"]),
    cap=float(_floodwall.BACKOFF_DEFAULTS["cap_s"]),
    attempts=int(_floodwall.BACKOFF_DEFAULTS["attempts"]),
)


def delay(
    attempt: int,
    retry_after: Optional[float] = None,
    *,
    base: float = DEFAULTS.base,
    cap: float = DEFAULTS.cap,
    random: Callable[[], float] = _random.random,
) -> float:
    """The wait in seconds before retry number ``attempt`` (0 first): ``max(retry_after, 0) + random() *
    min(cap, base * 2**attempt)``. ``retry_after`` None (or negative) means the server sent none.
    ``random()`` must return a number in [0, 1). Bad arguments (a negative attempt, base <= 0, cap < base,
    a random number outside [0, 1)) raise InvalidArgumentError, a ValueError naming the argument."""
    retry_after_s = -1.0 if retry_after is None else retry_after
    return _floodwall.backoff_delay(base, cap, DEFAULTS.attempts, attempt, retry_after_s, random())


def full_jitter(
    attempt: int,
    *,
    base: float = DEFAULTS.base,
    cap: float = DEFAULTS.cap,
    random: Callable[[], float] = _random.random,
) -> float:
    """The jitter alone: ``random() * min(cap, base * 2**attempt)`` seconds; attempt counts from 0."""
    return delay(attempt, None, base=base, cap=cap, random=random)


def parse_retry_after(value: Union[str, bytes, None], *, now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a Retry-After field value: delay-seconds, or an HTTP-date (IMF-fixdate, RFC 850
    or asctime) counted from ``now`` (Unix seconds, default the current time; never negative). None when
    the value is absent or neither."""
    if value is None:
        return None
    try:
        return _floodwall.parse_retry_after(value, time.time() if now is None else now)
    except InvalidArgumentError:
        return None


def _status(response: Any) -> int:
    status = getattr(response, "status_code", None)
    return int(status if status is not None else response.status)


def _retry_after(response: Any) -> Optional[float]:
    headers = getattr(response, "headers", None) or {}
    return parse_retry_after(headers.get("Retry-After") or headers.get("retry-after"))


def _check(attempts: int, base: float, cap: float) -> None:
    """The core validates the settings before the first call (its message names the field)."""
    _floodwall.backoff_delay(base, cap, attempts, 0, -1.0, 0.0)


def send_with_backoff(
    send: Callable[[], R],
    *,
    attempts: int = DEFAULTS.attempts,
    base: float = DEFAULTS.base,
    cap: float = DEFAULTS.cap,
    statuses: Container[int] = RETRY_STATUSES,
    sleep: Callable[[float], None] = time.sleep,
    random: Callable[[], float] = _random.random,
) -> R:
    """Calls ``send()`` until its response is not in ``statuses`` or ``attempts`` calls were made; returns
    the last response. Waits delay(attempt, Retry-After) between calls. ``attempts`` below 1 (or a bad
    base or cap) raises InvalidArgumentError before any call."""
    _check(attempts, base, cap)
    for attempt in range(attempts):
        response = send()
        if _status(response) not in statuses or attempt == attempts - 1:
            return response
        sleep(delay(attempt, _retry_after(response), base=base, cap=cap, random=random))
    raise AssertionError("unreachable: attempts >= 1")


async def send_with_backoff_async(
    send: Callable[[], Awaitable[R]],
    *,
    attempts: int = DEFAULTS.attempts,
    base: float = DEFAULTS.base,
    cap: float = DEFAULTS.cap,
    statuses: Container[int] = RETRY_STATUSES,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    random: Callable[[], float] = _random.random,
) -> R:
    """The asyncio twin of send_with_backoff(): waits with ``await asyncio.sleep``."""
    _check(attempts, base, cap)
    for attempt in range(attempts):
        response = await send()
        if _status(response) not in statuses or attempt == attempts - 1:
            return response
        await sleep(delay(attempt, _retry_after(response), base=base, cap=cap, random=random))
    raise AssertionError("unreachable: attempts >= 1")


__all__ = [
    "DEFAULTS",
    "Defaults",
    "RETRY_STATUSES",
    "full_jitter",
    "parse_retry_after",
    "delay",
    "send_with_backoff",
    "send_with_backoff_async",
]
