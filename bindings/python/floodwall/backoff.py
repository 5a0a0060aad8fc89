"""For callers of a floodwall-protected API: retry 429 and 503 with capped exponential backoff and full
jitter, honouring Retry-After.

    delay = random(0, min(cap, base * 2**attempt))      # "full jitter"
    delay = max(delay, Retry-After)                      # never come back before the server said

Full jitter spreads the retries of many clients over the whole window instead of bunching them at the
same instants; Retry-After is the server's own estimate of when a retry can pass (for a token bucket,
when the tokens exist), so retrying earlier only spends another request on a certain rejection.

    response = send_with_backoff(lambda: httpx.get(url, headers=auth))
    response = await send_with_backoff_async(lambda: client.get(url))

Works with any response object that has ``status_code`` (or ``status``) and ``headers`` (httpx,
requests, aiohttp).
"""

from __future__ import annotations

import asyncio
import email.utils
import random as _random
import time
from typing import Any, Awaitable, Callable, Container, Optional, TypeVar

R = TypeVar("R")

RETRY_STATUSES = (429, 503)


def full_jitter(attempt: int, *, base: float = 0.5, cap: float = 30.0, random: Callable[[], float] = _random.random) -> float:
    """``random(0, min(cap, base * 2**attempt))`` seconds; attempt counts from 0."""
    if attempt < 0:
        raise ValueError("attempt: must be >= 0")
    # min() before the power would overflow for a large attempt: 2**attempt is exact for ints, then capped.
    return random() * min(cap, base * (2 ** min(attempt, 64)))


def parse_retry_after(value: Optional[str], *, now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a Retry-After value: delta-seconds or an HTTP-date; None when absent or invalid."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def delay(
    attempt: int,
    retry_after: Optional[float] = None,
    *,
    base: float = 0.5,
    cap: float = 30.0,
    random: Callable[[], float] = _random.random,
) -> float:
    """The wait before retry number ``attempt`` (0 first): full jitter, but never less than Retry-After."""
    wait = full_jitter(attempt, base=base, cap=cap, random=random)
    return max(wait, retry_after) if retry_after is not None else wait


def _status(response: Any) -> int:
    status = getattr(response, "status_code", None)
    return int(status if status is not None else response.status)


def _retry_after(response: Any) -> Optional[float]:
    headers = getattr(response, "headers", None) or {}
    return parse_retry_after(headers.get("Retry-After") or headers.get("retry-after"))


def send_with_backoff(
    send: Callable[[], R],
    *,
    attempts: int = 5,
    base: float = 0.5,
    cap: float = 30.0,
    statuses: Container[int] = RETRY_STATUSES,
    sleep: Callable[[float], None] = time.sleep,
    random: Callable[[], float] = _random.random,
) -> R:
    """Calls ``send()`` until its response is not in ``statuses`` or ``attempts`` calls were made; returns
    the last response."""
    for attempt in range(attempts):
        response = send()
        if _status(response) not in statuses or attempt == attempts - 1:
            return response
        sleep(delay(attempt, _retry_after(response), base=base, cap=cap, random=random))
    raise ValueError("attempts: must be >= 1")


async def send_with_backoff_async(
    send: Callable[[], Awaitable[R]],
    *,
    attempts: int = 5,
    base: float = 0.5,
    cap: float = 30.0,
    statuses: Container[int] = RETRY_STATUSES,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    random: Callable[[], float] = _random.random,
) -> R:
    """The asyncio twin of send_with_backoff(): waits with ``await asyncio.sleep``."""
    for attempt in range(attempts):
        response = await send()
        if _status(response) not in statuses or attempt == attempts - 1:
            return response
        await sleep(delay(attempt, _retry_after(response), base=base, cap=cap, random=random))
    raise ValueError("attempts: must be >= 1")


__all__ = ["full_jitter", "parse_retry_after", "delay", "send_with_backoff", "send_with_backoff_async"]
