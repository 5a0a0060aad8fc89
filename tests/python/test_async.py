"""admit_async: never blocks the event loop, overlaps freely, and gives back what a cancelled admit won."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import floodwall
from conftest import admitted_soon


def redis_policy(server, **sections):
    return {
        "store": server.url,
        "prefix": "t" + uuid.uuid4().hex[:12],
        "redis": {"deadline_ms": 3000, "connect_timeout_ms": 3000},
        **sections,
    }


def test_admit_async_decides_like_admit(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 2}})

    async def main():
        return [await fw.admit_async("acme") for _ in range(3)]

    a, b, c = asyncio.run(main())
    assert (a.allowed, b.allowed, c.allowed) == (True, True, False)
    assert (b.remaining, c.status, c.limiter) == (0, 429, "request_rate")
    assert c.headers["Retry-After"] == str(c.retry_after) and c.body


def test_concurrent_admits_on_one_tenant_get_exactly_the_burst(make_client):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 60}})

    async def main():
        return await asyncio.gather(*(fw.admit_async("acme") for _ in range(200)))

    assert sum(d.allowed for d in asyncio.run(main())) == 60


def test_the_loop_keeps_running_while_redis_is_stalled(redis_server):
    fw = floodwall.Floodwall(redis_policy(redis_server, request_rate={"rate": 10, "burst": 10}))

    async def main():
        await fw.admit_async("warm-up")
        ticks = []

        async def ticker():
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.005)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.02)
        stall = redis_server.stall(0.5)
        start = time.monotonic()
        d = await fw.admit_async("acme")
        end = time.monotonic()
        task.cancel()
        stall.join()
        inside = [t for t in ticks if start <= t <= end]
        return d, end - start, inside

    d, waited, inside = asyncio.run(main())
    print(f"admit_async waited {waited * 1000:.0f} ms; the loop ticked {len(inside)} times meanwhile")
    assert d.allowed and not d.failed_open and not d.degraded  # Redis' own answer, after the stall
    assert len(inside) >= 10  # a blocked loop would not have ticked at all
    fw.close()


def test_many_admits_are_in_flight_at_once(redis_server):
    fw = floodwall.Floodwall(redis_policy(redis_server, request_rate={"rate": 0.001, "burst": 30}))
    in_flight = peak = 0

    async def one():
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            return await fw.admit_async("acme")
        finally:
            in_flight -= 1

    async def main():
        await fw.admit_async("warm-up")
        stall = redis_server.stall(0.3)
        decisions = await asyncio.gather(*(one() for _ in range(100)))
        stall.join()
        return decisions

    decisions = asyncio.run(main())
    assert peak == 100  # all 100 waited on Redis together: nothing serialised them
    assert sum(d.allowed for d in decisions) == 30 and not any(d.failed_open or d.degraded for d in decisions)
    fw.close()


def test_a_cancelled_admit_gives_its_slot_back(redis_server):
    fw = floodwall.Floodwall(redis_policy(redis_server, concurrency={"limit": 1}))

    async def main():
        (await fw.admit_async("warm-up")).release()
        stall = redis_server.stall(0.3)
        task = asyncio.create_task(fw.admit_async("acme"))
        await asyncio.sleep(0.05)
        task.cancel()
        stall.join()
        await asyncio.sleep(0.2)  # the decision arrives after the cancel; the loop releases it

    asyncio.run(main())
    admitted_soon(fw, "acme").release()
    fw.close()


def test_closing_the_client_with_admits_pending_completes_them_first(redis_server):
    fw = floodwall.Floodwall(redis_policy(redis_server, request_rate={"rate": 10, "burst": 10}))

    async def main():
        await fw.admit_async("warm-up")
        stall = redis_server.stall(0.5)
        pending = asyncio.ensure_future(fw.admit_async("acme"))
        await asyncio.sleep(0.05)
        await asyncio.get_running_loop().run_in_executor(None, fw.close)  # waits for the pending admit
        d = await asyncio.wait_for(pending, 5)
        stall.join()
        return d

    d = asyncio.run(main())
    assert d.allowed and not d.failed_open and not d.degraded and d.remaining == 9  # Redis' own answer: close() let it finish
    assert fw.closed


def test_one_client_serves_several_loops_in_several_threads(make_client):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 40}})
    results = []

    def run_loop():
        async def main():
            return await asyncio.gather(*(fw.admit_async("acme") for _ in range(20)))

        results.extend(asyncio.run(main()))

    threads = [threading.Thread(target=run_loop) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 80 and sum(d.allowed for d in results) == 40
