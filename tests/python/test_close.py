"""close() while admits are in flight (#40): the client's life is the C ABI's (fw_client_close). Every call
returns a decision or raises ClosedError, every awaited admit resolves exactly once, nothing hangs or
crashes, and close() decides the async admits still pending on a paused Redis before it returns."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import uuid
from typing import Any, Dict, List

import floodwall
from conftest import RedisServer


def test_closing_while_sync_and_async_admits_are_in_flight(make_client):
    fw = make_client({"request_rate": {"rate": 100000, "burst": 100000}, "concurrency": {"limit": 10000}})
    lock = threading.Lock()
    sync: Dict[str, int] = {"decided": 0, "closed": 0}
    errors: List[BaseException] = []
    submitted = [0]
    resolved: List[str] = []  # one entry per awaited admit: "decided" or "closed"
    loop_errors: List[Dict[str, Any]] = []  # the loop's exception handler: a future resolved twice lands here
    loop_ready = threading.Event()
    stop_async = threading.Event()

    def sync_worker():
        while True:
            try:
                with fw.admit("acme"):
                    pass
                kind = "decided"
            except floodwall.ClosedError:
                kind = "closed"
            except BaseException as e:  # noqa: BLE001 - anything else fails the test below
                with lock:
                    errors.append(e)
                return
            with lock:
                sync[kind] += 1
            if kind == "closed":
                return

    async def one():
        submitted[0] += 1
        try:
            d = await fw.admit_async("acme")
        except floodwall.ClosedError:
            resolved.append("closed")
            return False
        assert isinstance(d, floodwall.Decision)
        d.release()  # harmless after close too
        resolved.append("decided")
        return True

    async def async_worker():
        while not stop_async.is_set():
            results = await asyncio.gather(*(one() for _ in range(25)), return_exceptions=True)
            errors.extend(r for r in results if isinstance(r, BaseException))
            if not all(r is True for r in results):
                return

    async def async_main():
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: loop_errors.append(ctx))
        loop_ready.set()
        await asyncio.gather(*(async_worker() for _ in range(3)))
        await asyncio.sleep(0.1)  # a second resolution of any future would surface by now

    def run_loop():
        try:
            asyncio.run(async_main())
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=sync_worker) for _ in range(4)]
    loop_thread = threading.Thread(target=run_loop)
    for t in threads:
        t.start()
    loop_thread.start()
    assert loop_ready.wait(10)
    time.sleep(0.3)
    fw.close()
    assert fw.closed
    for t in threads + [loop_thread]:
        t.join(timeout=20)  # the workers stop on their own at their first ClosedError
        if t.is_alive():
            stop_async.set()  # let the loop's thread end before failing
            raise AssertionError("a call hangs after close()")
    assert not errors, errors
    assert not loop_errors, loop_errors
    assert sync["decided"] > 0 and sync["closed"] == 4
    assert len(resolved) == submitted[0], "every awaited admit resolves exactly once"
    assert "decided" in resolved and "closed" in resolved
    fw.close()  # a second close is harmless
    for call in (lambda: fw.admit("acme"), lambda: fw.metrics(), lambda: fw.set_mode("request_rate", "dark")):
        try:
            call()
        except floodwall.ClosedError:
            pass
        else:
            raise AssertionError("a call after close() did not raise ClosedError")


def test_close_decides_the_async_admits_pending_on_a_paused_redis():
    server = RedisServer()  # its own server: SIGSTOP must not stall the other tests' Redis
    try:
        fw = floodwall.Floodwall(
            {
                "store": server.url,
                "prefix": "t" + uuid.uuid4().hex[:12],
                "redis": {"deadline_ms": 1000, "connect_timeout_ms": 2000},
                "request_rate": {"rate": 1000, "burst": 1000},
            }
        )
        assert not fw.admit("warm-up").degraded  # connected: Redis decides

        async def main():
            loop = asyncio.get_running_loop()
            twice: List[Dict[str, Any]] = []
            loop.set_exception_handler(lambda loop, ctx: twice.append(ctx))
            os.kill(server.proc.pid, signal.SIGSTOP)
            try:
                tasks = [asyncio.ensure_future(fw.admit_async("paused")) for _ in range(50)]
                await asyncio.sleep(0.1)
                assert not any(t.done() for t in tasks), "they wait on Redis (deadline 1 s)"
                start = time.monotonic()
                fw.close()  # on the loop's thread: the loop runs again only once close() has returned
                took = time.monotonic() - start
                done, pending = await asyncio.wait(tasks, timeout=5)
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            assert not pending, "close() returned with admits still undecided"
            await asyncio.sleep(0.1)
            assert not twice, twice
            return [t.result() for t in tasks], took

        decisions, took = asyncio.run(main())
        assert fw.closed
        assert took < 5, f"close() took {took:.1f}s"
        assert len(decisions) == 50
        for d in decisions:
            # Redis never answered: the fallback (local, the default) decided each one.
            assert d.allowed and d.degraded and d.fail_reason is not None, d
            d.release()  # after close: harmless
    finally:
        server.stop()
