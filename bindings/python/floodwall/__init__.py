"""floodwall: rate limiting and load shedding for Python services.

A request-rate token bucket and a concurrency cap per tenant (429), a fleet usage shedder and a worker
utilization shedder (503), decided by floodwall's C++ core on an embedded store ("memory://") or shared
through Redis ("redis://host:port/db") with the Node and Ruby services of the same fleet.

    fw = Floodwall({"request_rate": {"rate": 100, "burst": 500}, "concurrency": {"limit": 20}})
    with fw.admit("tenant-42", route="/search") as d:   # the context manager always releases
        if not d.allowed:
            return d.status, d.headers, d.body          # 429 or 503, headers and JSON body from the core
        ...

Middleware: floodwall.asgi (Starlette, FastAPI, any ASGI app) and floodwall.wsgi (Flask, any WSGI app).
Callers of a floodwall-protected API: floodwall.backoff.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import weakref
from typing import Any, Dict, Mapping, Optional, Union

from . import _floodwall
from ._floodwall import (
    ClosedError,
    Decision,
    Error,
    InvalidArgumentError,
    PolicyError,
    StoreError,
)

__all__ = [
    "Floodwall",
    "Decision",
    "Error",
    "PolicyError",
    "InvalidArgumentError",
    "StoreError",
    "ClosedError",
    "LIMITERS",
    "MODES",
    "__version__",
]

__version__ = _floodwall.version()

#: The limiter names of set_mode() and Decision.limiter.
LIMITERS = ("request_rate", "concurrency", "fleet", "utilization")
#: The modes of set_mode().
MODES = ("enforce", "dark", "off")

Tenant = Union[str, bytes]
PolicyLike = Union[Mapping[str, Any], str, bytes, "os.PathLike[str]"]


def _policy_text(policy: PolicyLike) -> str:
    """A policy as JSON text: a mapping is serialised, JSON text is kept, anything else is a file path."""
    if isinstance(policy, Mapping):
        return json.dumps(policy)
    if isinstance(policy, bytes):
        return policy.decode("utf-8")
    if isinstance(policy, str) and policy.lstrip().startswith("{"):
        return policy
    if isinstance(policy, (str, os.PathLike)):
        with open(policy, encoding="utf-8") as f:
            return f.read()
    raise TypeError("policy: must be a dict, a JSON string or a path to a JSON file")


def _store_blocks(text: str) -> bool:
    """Whether admits may wait on I/O (then the GIL is released around them). The core validates the
    policy; this only peeks at the store, and assumes the worst when it cannot tell."""
    try:
        store = json.loads(text).get("store", "memory://")
    except (ValueError, AttributeError):
        return True
    return not (isinstance(store, str) and store.startswith("memory"))


class _LoopWaiter:
    """Where the decisions of one event loop's pending admits arrive from the core's I/O thread."""

    def __init__(self, client: _floodwall.Client, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.queue = _floodwall.CompletionQueue()
        self.futures: Dict[int, asyncio.Future] = {}
        loop.add_reader(self.queue.fileno(), self._on_readable)

    def _on_readable(self) -> None:
        for token, result in self.client.drain(self.queue):
            fut = self.futures.pop(token, None)
            if isinstance(result, BaseException):
                if fut is not None and not fut.done():
                    fut.set_exception(result)
            elif fut is None or fut.done():
                result.release()  # the awaiting task was cancelled: give its slots back
            else:
                fut.set_result(result)


class Floodwall:
    """A floodwall client: one policy, one store, its own I/O thread. Thread-safe; share one per process.

    ``policy`` is a dict, a JSON string or a path to a JSON file (the schema every floodwall language
    shares). A bad policy raises PolicyError (a ValueError) whose message names the field.
    """

    def __init__(self, policy: PolicyLike) -> None:
        text = _policy_text(policy)
        self._c = _floodwall.Client(text, _store_blocks(text))
        self._admit = self._c.admit  # bound once: admit() is the hot path
        self._waiters: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWaiter]" = (
            weakref.WeakKeyDictionary()
        )
        self._tokens = itertools.count(1)

    def admit(
        self,
        tenant: Tenant,
        *,
        route: Optional[str] = None,
        method: Optional[str] = "GET",
        cost: int = 1,
        critical: bool = False,
        sandbox: bool = False,
    ) -> Decision:
        """Decides one request. Blocks for at most the store's deadline (with the GIL released).

        ``tenant`` is any non-empty str (sent as UTF-8) or bytes. ``cost`` 0 counts as 1; a cost above the
        tenant's burst raises InvalidArgumentError. Release the decision when the request ends
        (``with fw.admit(...) as d:`` does it).
        """
        return self._admit(tenant, route, method, cost, critical, sandbox)

    async def admit_async(
        self,
        tenant: Tenant,
        *,
        route: Optional[str] = None,
        method: Optional[str] = "GET",
        cost: int = 1,
        critical: bool = False,
        sandbox: bool = False,
    ) -> Decision:
        """Like admit(), without blocking the event loop: on Redis the decision completes on the core's
        I/O thread and reaches this loop through a pipe it watches; on the memory store it is immediate."""
        loop = asyncio.get_running_loop()
        waiter = self._waiters.get(loop)
        if waiter is None:
            waiter = self._waiters[loop] = _LoopWaiter(self._c, loop)
        token = next(self._tokens)
        d = self._c.admit_async(waiter.queue, token, tenant, route, method, cost, critical, sandbox)
        if d is not None:
            return d
        fut = loop.create_future()
        waiter.futures[token] = fut
        return await fut

    def release(self, decision: Union[Decision, int]) -> None:
        """Releases what a decision holds (concurrency and fleet slots). Idempotent; never raises for a
        decision. Prefer the decision itself (``decision.release()``): it always goes to its own client."""
        if isinstance(decision, Decision):
            decision.release()
        else:
            self._c.release(decision)

    def set_mode(self, limiter: str, mode: str) -> None:
        """Sets a limiter's local mode at run time: limiter in LIMITERS, mode in MODES."""
        self._c.set_mode(limiter, mode)

    def get_mode(self, limiter: str) -> str:
        """The limiter's mode in force (the fleet-wide one from Redis when set)."""
        return self._c.get_mode(limiter)

    def report_utilization(self, u: float) -> None:
        """Reports this box's worker utilization in [0, 1] for the utilization shedder."""
        self._c.report_utilization(u)

    def shedding_amount(self) -> float:
        """The utilization shedder's current shedding amount."""
        return self._c.shedding_amount()

    def metrics(self) -> Dict[str, Any]:
        """The core's counters (decisions by limiter and outcome, routes, top tenants, breaker)."""
        return json.loads(self._c.metrics_json())

    def prometheus(self) -> str:
        """The same counters in Prometheus text exposition format."""
        return self._c.metrics_prometheus()

    def close(self) -> None:
        """Stops the I/O thread; pending admits are decided by the fallback. Further calls raise ClosedError."""
        self._c.close()

    @property
    def closed(self) -> bool:
        return self._c.closed

    def __enter__(self) -> "Floodwall":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
