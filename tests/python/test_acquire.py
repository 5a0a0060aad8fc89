"""fw.acquire and fw.acquire_async (#57 part 2): wait for the turn instead of a 429, on memory:// and a real
redis-server; the GIL released while waiting; a cancelled wait gives its reservation back."""

from __future__ import annotations

import asyncio
import math
import threading
import time

import pytest

import floodwall


def test_acquire_waits_for_its_turn_and_returns_admits_decision(make_client):
    fw = make_client({"request_rate": {"rate": 20, "burst": 1}})
    with fw.acquire("acme", max_wait=1.0) as first:
        assert first.allowed and first.waited == 0
    with fw.acquire("acme", max_wait=1.0) as second:
        assert second.allowed and second.status == 200
        assert 0 < second.waited <= 0.05  # one token at 20/s
        assert second.headers  # the same decision object admit returns, headers and all
    refused = fw.admit("acme")
    assert not refused.allowed, "the acquired tokens were spent"


def test_beyond_max_wait_is_admits_refusal_with_nothing_consumed(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 1}})
    assert fw.acquire("acme", max_wait=0.5).allowed
    refused = fw.acquire("acme", max_wait=0.5)  # its turn is a second away
    assert (refused.allowed, refused.status, refused.limiter) == (False, 429, "request_rate")
    assert refused.retry_after >= 1 and refused.waited == 0


def test_bad_max_wait_and_cost_are_refused_naming_them(make_client):
    fw = make_client({"request_rate": {"rate": 10, "burst": 2}})
    for bad in (-1, -0.5, math.nan, math.inf):
        with pytest.raises(floodwall.InvalidArgumentError, match="max_wait"):
            fw.acquire("acme", max_wait=bad)
        with pytest.raises(floodwall.InvalidArgumentError, match="max_wait"):
            asyncio.run(fw.acquire_async("acme", max_wait=bad))
    for bad in ("1", None, True, [1]):
        with pytest.raises(TypeError, match="max_wait"):
            fw.acquire("acme", max_wait=bad)
    with pytest.raises(floodwall.InvalidArgumentError, match="cost"):
        fw.acquire("acme", cost=3)
    assert fw.admit("acme").allowed and fw.admit("acme").allowed, "nothing was consumed by the refusals"


def test_the_gil_is_released_while_waiting(make_client):
    fw = make_client({"request_rate": {"rate": 5, "burst": 1}})
    fw.admit("acme").release()
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    try:
        d = fw.acquire("acme", max_wait=1.0)  # about 200 ms of wait
    finally:
        stop.set()
        t.join()
    assert d.allowed and d.waited > 0
    assert len(ticks) > 10, "another thread ran while acquire waited"


def test_threads_acquiring_go_in_turn_and_within_the_bound(make_client):
    rate, burst = 50.0, 10  # a burst of at least the callers that wait at once (max_wait caps at burst / rate)
    fw = make_client({"request_rate": {"rate": rate, "burst": burst}})
    went = []
    lock = threading.Lock()

    def caller():
        for _ in range(10):
            d = fw.acquire("acme", max_wait=5.0)
            at = time.monotonic()
            assert d.allowed, "nothing refused within max_wait"
            with lock:
                went.append(at)
            d.release()

    threads = [threading.Thread(target=caller) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    went.sort()
    assert len(went) == 60
    # In any window, no more went than the bucket allows (a little slack for when a thread noted its time).
    for i in range(len(went)):
        for j in range(i, len(went)):
            window = went[j] - went[i]
            assert j - i + 1 <= burst + rate * (window + 0.01) + 1


def test_acquire_async_waits_without_blocking_the_loop(make_client):
    fw = make_client({"request_rate": {"rate": 10, "burst": 1}})

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        t = asyncio.ensure_future(ticker())
        first = await fw.acquire_async("acme", max_wait=1.0)
        second = await fw.acquire_async("acme", max_wait=1.0)
        t.cancel()
        return first, second, ticks

    first, second, ticks = asyncio.run(main())
    assert first.allowed and second.allowed
    assert second.waited > 0 and second.waited == second.wait, "the second one waited for its turn"
    assert ticks > 5, "the loop ran while acquire_async waited"
    second.release()


def test_concurrent_acquire_async_are_served_in_turn(make_client):
    fw = make_client({"request_rate": {"rate": 200, "burst": 30}})  # max_wait caps at 0.15 s

    async def one():
        d = await fw.acquire_async("acme", max_wait=2.0)
        return d, time.monotonic()

    async def main():
        return await asyncio.gather(*(one() for _ in range(60)))

    results = asyncio.run(main())
    assert all(d.allowed for d, _ in results), "nothing refused within max_wait"
    times = sorted(at for _, at in results)
    assert times[-1] - times[0] >= 30 / 200 * 0.9, "30 of them waited a token apart"
    for d, _ in results:
        d.release()


def test_a_cancelled_wait_gives_its_reservation_back(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 2}})

    async def main():
        assert (await fw.acquire_async("acme")).allowed
        assert (await fw.acquire_async("acme")).allowed  # the bucket is empty now
        task = asyncio.ensure_future(fw.acquire_async("acme", max_wait=1.9))  # reserves a second ahead
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Given back: the next reservation has the cancelled one's turn, not a second after it, so it
        # fits within 1.5 s where without the give-back its turn would be 2 s away.
        return await fw.acquire_async("acme", max_wait=1.5)

    after = asyncio.run(main())
    assert after.allowed, "the cancelled reservation's token came back"
    after.release()


def test_a_reservation_given_up_with_one_behind_it_keeps_its_tokens(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 3}})

    async def main():
        for _ in range(3):
            (await fw.acquire_async("acme")).release()
        first = asyncio.ensure_future(fw.acquire_async("acme", max_wait=2.9))  # a second ahead
        await asyncio.sleep(0.02)
        second = asyncio.ensure_future(fw.acquire_async("acme", max_wait=2.9))  # two seconds ahead
        await asyncio.sleep(0.02)
        first.cancel()  # the second one stands behind it: nothing can go back
        with pytest.raises(asyncio.CancelledError):
            await first
        third = await fw.acquire_async("acme", max_wait=2.5)  # three seconds ahead: beyond 2.5
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        return third

    third = asyncio.run(main())
    assert not third.allowed and third.status == 429


def test_acquire_waits_for_a_concurrency_slot_until_one_is_released(make_client):
    """A full concurrency limit is the only reason: acquire waits for a release (woken by it) instead of a 429."""
    fw = make_client({"concurrency": {"limit": 1, "ttl_s": 60}})
    first = fw.acquire("acme", max_wait=1.0)
    assert first.allowed
    released = threading.Event()
    got = []

    def wait():
        d = fw.acquire("acme", max_wait=30.0)
        got.append((d, released.is_set()))

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.2)
    assert not got, "admitted while the only slot was held"
    released.set()
    first.release()
    t.join(30)
    (d, after_release), = got
    assert d.allowed and after_release
    timed_out = fw.acquire("acme", max_wait=0.05)  # the slot is held again: refused after the wait
    assert (timed_out.allowed, timed_out.status, timed_out.limiter) == (False, 429, "concurrency")
    d.release()
