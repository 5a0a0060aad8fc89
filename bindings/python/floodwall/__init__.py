"""floodwall: rate limiting and load shedding for Python services.

A request-rate token bucket and a concurrency cap per tenant (429), a fleet usage shedder and a worker
utilization shedder (503), decided by floodwall's C++ core on an embedded store ("memory://") or shared
through Redis ("redis://host:port/db") with the Node and Ruby services of the same fleet.

    fw = Floodwall({"request_rate": {"rate": 100, "burst": 500}, "concurrency": {"limit": 20}})
    with fw.admit("tenant-42", route="/search") as d:   # the context manager always releases
        if not d.allowed:
            return d.status, d.headers, d.content_type, d.body   # 403, 429 or 503, all from the core
        ...

The tenant may also be left to the core, which derives it from the request's headers and peer address
(policy section "tenant"), the same way in every floodwall language: the client address, or a hashed
Bearer token or X-API-Key once the app vouches for it (``verified=True``; a credential nobody vouched for
names no tenant, so a client cannot mint itself buckets by inventing keys):

    d = fw.admit(headers=[(b"authorization", b"Bearer t0ken")], peer="203.0.113.7")   # "ip:203.0.113.7"
    fw.request_credential(headers=[("X-API-Key", "k")])                      # "k": the one to check
    fw.tenant_key(headers=[("X-API-Key", "k")], verified=True)               # "key:<32 hex digits>"

Middleware: floodwall.asgi (Starlette, FastAPI, any ASGI app), floodwall.wsgi (Flask, any WSGI app),
floodwall.django (settings.FLOODWALL); per-route settings: floodwall.fastapi.limit, floodwall.flask.limit
(and its extension floodwall.flask.Floodwall), floodwall.django.limit.
Callers of a floodwall-protected API: floodwall.backoff.

The admin API (``fw.admin``) changes a tenant's limits at run time, in the store, for the next request of
every client sharing it: an override, a tier of the policy's "tiers", a block (403), a reset:

    fw.admin.set_override("tenant-42", rate=50, burst=100)
    fw.admin.block("abuser", seconds=3600)
    fw.admin.show("tenant-42")["request_rate"]["remaining"]
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import weakref
import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

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
    "Admin",
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
LIMITERS: Tuple[str, ...] = _floodwall.LIMITERS  # the core's names: request_rate ... adaptive
#: The modes of set_mode().
MODES = ("enforce", "dark", "off")

Tenant = Union[str, bytes]
#: A request's header fields: (name, value) pairs of str or bytes in arrival order (a name may repeat, any
#: case), as ASGI's scope["headers"]; or a mapping, whose items() are taken.
Headers = Union[Iterable[Tuple[Union[str, bytes], Union[str, bytes]]], Mapping[Any, Any]]
PolicyLike = Union[Mapping[str, Any], str, bytes, "os.PathLike[str]"]


def _policy_text(policy: PolicyLike) -> str:
    """A policy as JSON text: a mapping is serialised and bytes are JSON text; a str is read by the rule of
    every floodwall language (fw_policy_text: JSON text when it starts with "{" or "[", else a file's path);
    an os.PathLike is always a path."""
    if isinstance(policy, Mapping):
        return json.dumps(policy)
    if isinstance(policy, bytes):
        return policy.decode("utf-8")
    if isinstance(policy, str):
        return _floodwall.policy_text(policy.encode("utf-8", "surrogateescape"), False)
    if isinstance(policy, os.PathLike):
        return _floodwall.policy_text(os.fsencode(policy), True)
    raise TypeError("policy: must be a dict, a JSON string or a path to a JSON file")


def _max_wait(value: Any) -> float:
    """max_wait checked where it is read: a number of seconds (the core refuses a negative, NaN or infinite
    one, naming max_wait too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"max_wait: must be a number of seconds, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise InvalidArgumentError(f"max_wait: must be a finite number of seconds, 0 or more (got {value})")
    return value


class _LoopWaiter:
    """Where the decisions of one event loop's pending admits arrive from the core's I/O thread.

    It also batches what the loop sends (a network store only): the first admit of a loop iteration holds
    the store's writes (fw_client_hold: this thread's admits and releases are queued, not sent) and
    schedules the flush with call_soon, which runs first in the next iteration, before the loop waits on
    I/O (a ready callback makes its select return at once): one write for an iteration's requests."""

    def __init__(self, client: _floodwall.Client, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = loop
        self.queue = _floodwall.CompletionQueue()
        self.futures: Dict[int, asyncio.Future] = {}
        self.batching = client.can_block
        self.held = False
        loop.add_reader(self.queue.fileno(), self._on_readable)

    def hold(self) -> None:
        if self.batching and not self.held:
            self.held = True
            self.client.hold()
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self.held = False
        self.client.flush()

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


class Admin:
    """A client's admin API (``Floodwall.admin``): each tenant's control record, kept in the store, so that a
    change applies to the next request of every client of that store (Redis: every process of the fleet;
    shm://: this machine's; memory://: this process), with no poll and no deploy. Expose it on an admin
    endpoint behind your own authentication.

    The tenant is an id as admit() takes it (str or bytes; tenant_key() gives the one the middleware derives
    from a request). Every call blocks for at most the store's deadline (at least a second), with the GIL
    released; from an asyncio app call them from a thread (a plain ``def`` endpoint in FastAPI, or
    ``await asyncio.to_thread(fw.admin.block, tenant)``). A bad argument raises InvalidArgumentError (a
    ValueError) whose message names it ("rate: ...", "tier: the policy has no tier named ..."); a store that
    cannot be reached raises StoreError; a closed client ClosedError.
    """

    __slots__ = ("_c",)

    def __init__(self, client: _floodwall.Client) -> None:
        self._c = client

    def set_override(self, tenant: Tenant, *, rate: float, burst: float) -> None:
        """Gives the tenant its own request-rate bucket (rate tokens/second, burst tokens), checked as the
        policy's are, in place of its tier's or the policy's."""
        self._c.admin_set_override(tenant, rate, burst)

    def remove_override(self, tenant: Tenant) -> None:
        """Removes the tenant's own bucket: its tier's, or the policy's, applies again."""
        self._c.admin_remove_override(tenant)

    def set_tier(self, tenant: Tenant, tier: Optional[str]) -> None:
        """Puts the tenant in a tier of the policy's "tiers" (its bucket, and its limits and quotas when it
        has its own); None takes it out of any. A tier the policy does not have raises InvalidArgumentError."""
        self._c.admin_set_tier(tenant, tier)

    def block(self, tenant: Tenant, seconds: Optional[float] = None) -> None:
        """Blocks the tenant: its requests are answered 403 (Decision.blocked) and consume nothing, for
        ``seconds`` (rounded up to whole seconds), or until unblock() when None."""
        if seconds is None:
            seconds = 0.0
        elif isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError("seconds: must be a number, or None to block until unblocked")
        elif not seconds > 0:  # also NaN; 0 would mean "until unblocked" to the core: say None for that
            raise InvalidArgumentError("seconds: must be more than 0 (None blocks until unblocked)")
        elif math.isinf(seconds):
            raise InvalidArgumentError("seconds: must be finite (None blocks until unblocked)")
        self._c.admin_block(tenant, float(seconds))

    def unblock(self, tenant: Tenant) -> None:
        """Lifts the tenant's block; a tenant that is not blocked is left as it is."""
        self._c.admin_unblock(tenant)

    def show(self, tenant: Tenant) -> Dict[str, Any]:
        """The tenant as the store has it: {"tenant", "tier" (or None), "override" ({"rate", "burst"} or
        None), "blocked", "blocked_until" (RFC 3339, or None), "request_rate" ({"limit", "remaining",
        "rate", "full_in_s"}, with a request_rate section), "concurrency" ({"limit", "in_flight"}, with a
        concurrency section), "limits" and "quotas" (those of its tier, with what each has left),
        "store_time"}."""
        return json.loads(self._c.admin_show(tenant))

    def reset(self, tenant: Tenant) -> None:
        """Forgets the tenant's buckets and quotas (full again); its control record and in-flight slots stay."""
        self._c.admin_reset(tenant)

    def set_mode(self, limiter: str, mode: Optional[str]) -> None:
        """Sets a limiter's mode for every client of the store (limiter in LIMITERS, mode in MODES), over
        each one's own (Floodwall.set_mode); None goes back to each one's own."""
        self._c.admin_set_mode(limiter, mode)

    def list(self, limit: int = 1000) -> List[Dict[str, Any]]:
        """The tenants with a control record (an override, a tier or a block), at most ``limit`` of them:
        [{"tenant", "tier", "override", "blocked", "blocked_until"}, ...]."""
        return json.loads(self._c.admin_list(limit))

    def __repr__(self) -> str:
        return "<floodwall.Admin>"


class Floodwall:
    """A floodwall client: one policy, one store, its own I/O thread. Thread-safe; share one per process.

    ``policy`` is a dict, a JSON string or a path to a JSON file (the schema every floodwall language
    shares). A bad policy raises PolicyError (a ValueError) whose message names the field.
    """

    def __init__(self, policy: PolicyLike) -> None:
        text = _policy_text(policy)
        self._c = _floodwall.Client(text)
        self._admit = self._c.admit  # bound once: admit() is the hot path
        self._admin = Admin(self._c)
        self._waiters: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWaiter]" = (
            weakref.WeakKeyDictionary()
        )
        self._tokens = itertools.count(1)

    def admit(
        self,
        tenant: Optional[Tenant] = None,
        *,
        headers: Optional[Headers] = None,
        peer: Optional[Union[str, bytes]] = None,
        route: Optional[str] = None,
        path: Optional[Union[str, bytes]] = None,
        method: Optional[str] = "GET",
        cost: int = 1,
        critical: bool = False,
        sandbox: bool = False,
        verified: Optional[bool] = None,
    ) -> Decision:
        """Decides one request. Blocks for at most the store's deadline (with the GIL released when the
        store can block, see can_block).

        ``tenant`` is any str (sent as UTF-8) or bytes; "" is the anonymous tenant, limited like any other.
        ``tenant=None`` lets the core derive it (see tenant_key()) from ``headers``, the request's header
        fields as (name, value) pairs of str or bytes (all of them, in arrival order, any case), ``peer``,
        the connection's peer address (None when unknown), and ``verified``, what the app says of the
        request's credential (request_credential()): True, the app verified it and it names the tenant;
        False, it did not (the request is keyed as if it had none: its address); None, the app says
        nothing and the policy's tenant.credentials decides (by default: the address). All three are
        ignored when a tenant is given. ``route`` is the framework's matched route pattern in its own syntax
        ("/orders/{id}", "/orders/<int:id>", "/orders/:id"; the core makes it canonical, see request_route())
        or a route family's name; ``path`` the request's path without its query string (str or bytes), which
        the policy's route globs match when no route is given. ``cost`` 0 counts as 1; a cost above the tenant's burst raises
        InvalidArgumentError. Release the decision when the request ends (``with fw.admit(...) as d:``).
        """
        return self._admit(tenant, headers, peer, route, path, method, cost, critical, sandbox, verified)

    async def admit_async(
        self,
        tenant: Optional[Tenant] = None,
        *,
        headers: Optional[Headers] = None,
        peer: Optional[Union[str, bytes]] = None,
        route: Optional[str] = None,
        path: Optional[Union[str, bytes]] = None,
        method: Optional[str] = "GET",
        cost: int = 1,
        critical: bool = False,
        sandbox: bool = False,
        verified: Optional[bool] = None,
    ) -> Decision:
        """Like admit(), without blocking the event loop: on Redis the decision completes on the core's
        I/O thread and reaches this loop through a pipe it watches; on the memory store it is immediate."""
        loop = asyncio.get_running_loop()
        waiter = self._waiters.get(loop)
        if waiter is None:
            waiter = self._waiters[loop] = _LoopWaiter(self._c, loop)
        token = next(self._tokens)
        waiter.hold()
        d = self._c.admit_async(
            waiter.queue, token, tenant, headers, peer, route, path, method, cost, critical, sandbox, verified
        )
        if d is not None:
            return d
        fut = loop.create_future()
        waiter.futures[token] = fut
        return await fut

    def acquire(
        self,
        tenant: Optional[Tenant] = None,
        *,
        route: Optional[str] = None,
        cost: int = 1,
        max_wait: float = 10.0,
        headers: Optional[Headers] = None,
        peer: Optional[Union[str, bytes]] = None,
        path: Optional[Union[str, bytes]] = None,
        method: Optional[str] = "GET",
        critical: bool = False,
        sandbox: bool = False,
        verified: Optional[bool] = None,
    ) -> Decision:
        """Waits for the request's turn instead of refusing it (docs/concepts/acquire.md): when the tenant's
        bucket would have the tokens within ``max_wait`` seconds (capped at its full refill, burst / rate),
        the store reserves them at once (one round trip, first come first served) and this call sleeps
        until the turn, with the GIL released, then returns the Decision admit() gives an allowed request
        (``decision.waited``: the seconds it waited). A request whose turn is further away, or that another
        limiter refuses, gets admit()'s refusal at once, with nothing consumed. Release it as admit()'s
        (``with fw.acquire(...) as d:``). The other arguments are admit()'s. A negative, NaN or infinite
        ``max_wait`` raises InvalidArgumentError naming max_wait, a non-numeric one TypeError; a cost
        above the burst raises InvalidArgumentError."""
        return self._c.acquire(
            tenant, headers, peer, route, path, method, cost, critical, sandbox, verified, _max_wait(max_wait)
        )

    async def acquire_async(
        self,
        tenant: Optional[Tenant] = None,
        *,
        route: Optional[str] = None,
        cost: int = 1,
        max_wait: float = 10.0,
        headers: Optional[Headers] = None,
        peer: Optional[Union[str, bytes]] = None,
        path: Optional[Union[str, bytes]] = None,
        method: Optional[str] = "GET",
        critical: bool = False,
        sandbox: bool = False,
        verified: Optional[bool] = None,
    ) -> Decision:
        """acquire() for asyncio: the reservation is made without blocking the loop (fw_reserve_async) and
        its wait is an ``asyncio.sleep`` (``decision.wait``: the seconds it waited). Cancellable: a task
        cancelled before its turn releases its reservation, which gives its tokens back when no later
        reservation was made (see acquire.md)."""
        wait = _max_wait(max_wait)
        loop = asyncio.get_running_loop()
        waiter = self._waiters.get(loop)
        if waiter is None:
            waiter = self._waiters[loop] = _LoopWaiter(self._c, loop)
        token = next(self._tokens)
        waiter.hold()
        d = self._c.reserve_async(
            waiter.queue, token, tenant, headers, peer, route, path, method, cost, critical, sandbox, verified, wait
        )
        if d is None:
            fut = loop.create_future()
            waiter.futures[token] = fut
            d = await fut  # cancelled here: _LoopWaiter releases the decision when it arrives
        if d.allowed and d.wait > 0:
            turn = loop.time() + d.wait
            try:
                # call_later may run a little early (the loop's clock resolution): slept again until the turn.
                while loop.time() < turn:
                    await asyncio.sleep(turn - loop.time())
            except BaseException:
                d.release()  # gave up before its turn: the reservation goes back
                raise
        return d

    def _hold_writes(self) -> None:
        """From a coroutine of this client's loop: what this thread sends the store until the loop's next
        iteration goes out in one write (see _LoopWaiter); the ASGI middleware calls it before a release."""
        waiter = self._waiters.get(asyncio.get_running_loop())
        if waiter is not None:
            waiter.hold()

    def tenant_key(
        self,
        tenant: Optional[Tenant] = None,
        *,
        headers: Optional[Headers] = None,
        peer: Optional[Union[str, bytes]] = None,
        verified: Optional[bool] = None,
    ) -> str:
        """The tenant id admit() would use for these arguments: ``tenant`` itself when given (a bytes tenant
        that is not UTF-8 comes back with surrogate escapes), else the key the core derives from ``headers``,
        ``peer`` and ``verified`` by the policy's "tenant" section: "key:<32 hex digits>" (the SHA-256 of a
        Bearer token or X-API-Key, never the secret itself) when the credential is vouched for (verified=True,
        or None under tenant.credentials "unverified"), "ip:<address>" (IPv6 grouped to ipv6_prefix bits;
        behind trusted_proxies, the client that X-Forwarded-For or Forwarded names), else "anonymous"."""
        return self._c.tenant_key(tenant, headers, peer, verified)

    def request_credential(
        self,
        *,
        headers: Optional[Headers] = None,
        peer: Optional[Union[str, bytes]] = None,
    ) -> Optional[str]:
        """The credential the app is asked to vouch for before it names the request's tenant: the Bearer
        token or API key (raw, trimmed; bytes that are not UTF-8 as surrogate escapes) that the policy's
        tenant.from reads first, or None when the request carries none before its address. Check it
        against your own key store, then admit with ``verified=`` your answer (the middlewares' ``verify``
        option does this). Same ``headers`` and ``peer`` as admit()."""
        return self._c.request_credential(headers, peer)

    def request_route(
        self, route: Optional[str] = None, path: Optional[Union[str, bytes]] = None
    ) -> str:
        """The route the policy's rules match for a request admitted with this ``route`` and ``path``, in the
        one spelling every floodwall language shares: the route pattern made canonical (a parameter of any
        syntax is ":name": "/orders/{id}", "/orders/<int:id>" and "/orders/:id" are all "/orders/:id"; an
        optional part such as "(.:format)" is dropped, and a trailing "/"), else the path without a
        trailing "/", else "" (the default route)."""
        return self._c.request_route(route, path)

    @property
    def deadline_ms(self) -> int:
        """The longest an admit waits for the store, in milliseconds (the policy's redis.deadline_ms, 50 by
        default, whatever the store): the middlewares give a verify hook no longer by default."""
        return self._c.deadline_ms

    @property
    def can_block(self) -> bool:
        """Whether admit() may wait on I/O with this client's store: True for Redis, False for the
        in-process stores (memory://, shm://), whose admits take well under a microsecond. admit()
        releases the GIL exactly when this is True."""
        return self._c.can_block

    @property
    def tenant_headers(self) -> Tuple[str, ...]:
        """The request header names (lower case) that the policy's tenant derivation reads: authorization
        and x-api-key, and the forwarded header when tenant.trusted_proxies is set. admit() and tenant_key()
        read no other header, so a middleware may hand them only these (the WSGI one does)."""
        return self._c.tenant_headers

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

    @property
    def admin(self) -> Admin:
        """The admin API: tenants' overrides, tiers, blocks and resets, and fleet-wide modes (see Admin)."""
        return self._admin

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
