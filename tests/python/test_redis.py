"""One bucket per tenant shared through a real Redis: clients, threads and processes; the GIL released
while a call waits on Redis; failing open when Redis is down or late."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid

import floodwall
from conftest import free_port


def redis_policy(server, prefix=None, **sections):
    return {
        "store": server.url,
        "prefix": prefix or "t" + uuid.uuid4().hex[:12],
        "redis": {"deadline_ms": 3000, "connect_timeout_ms": 3000},
        **sections,
    }


NO_REFILL = {"rate": 0.001, "burst": 150}


def test_two_clients_share_one_bucket(redis_server):
    policy = redis_policy(redis_server, request_rate={"rate": 0.001, "burst": 4})
    with floodwall.Floodwall(policy) as a, floodwall.Floodwall(policy) as b:
        results = [c.admit("acme").allowed for c in (a, b, a, b, a, b)]
    assert results == [True, True, True, True, False, False]


def test_threads_on_one_tenant_get_exactly_the_burst(redis_server):
    fw = floodwall.Floodwall(redis_policy(redis_server, request_rate=NO_REFILL))
    allowed = []
    lock = threading.Lock()

    def worker():
        mine = sum(fw.admit("acme").allowed for _ in range(50))
        with lock:
            allowed.append(mine)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fw.close()
    assert sum(allowed) == NO_REFILL["burst"]  # 400 requests, 150 tokens, none refilled


WORKER = """
import json, sys, floodwall
policy, tenant, n, hold = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "hold"
fw = floodwall.Floodwall(policy)
sys.stdin.readline()  # start together
decisions = [fw.admit(tenant) for _ in range(n)]
print(sum(d.allowed for d in decisions), flush=True)
if hold:
    sys.stdin.readline()  # keep the slots until told
for d in decisions:
    d.release()
"""


def run_processes(policy, count, n, hold=False):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, json.dumps(policy), "acme", str(n), "hold" if hold else "go"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    for p in procs:
        p.stdin.write("\n")
        p.stdin.flush()
    counts = [int(p.stdout.readline()) for p in procs]
    for p in procs:
        if hold:
            p.stdin.write("\n")
        p.stdin.close()
        assert p.wait(timeout=30) == 0
    return counts


def test_processes_on_one_tenant_get_exactly_the_burst(redis_server):
    counts = run_processes(redis_policy(redis_server, request_rate=NO_REFILL), count=4, n=100)
    assert sum(counts) == NO_REFILL["burst"]


def test_processes_holding_slots_never_exceed_the_concurrency_limit(redis_server):
    policy = redis_policy(redis_server, concurrency={"limit": 5, "ttl_s": 60})
    counts = run_processes(policy, count=3, n=10, hold=True)
    assert sum(counts) == 5
    # Every process released its slots before exiting: the tenant has its 5 slots back.
    with floodwall.Floodwall(policy) as fw:
        deadline = time.monotonic() + 5
        while (d := fw.admit("acme")).concurrency_remaining != 4:
            d.release()
            assert time.monotonic() < deadline, d
            time.sleep(0.01)
        d.release()


def max_gap(stamps, start, end):
    """The longest interval in [start, end] without a timestamp."""
    points = [start] + [s for s in stamps if start <= s <= end] + [end]
    return max(b - a for a, b in zip(points, points[1:]))


def test_a_waiting_admit_releases_the_gil(redis_server):
    fw = floodwall.Floodwall(redis_policy(redis_server, request_rate={"rate": 10, "burst": 10}))
    fw.admit("warm-up")  # connected and scripts loaded
    stall = redis_server.stall(0.6)
    span = {}

    def admitter():
        span["start"] = time.monotonic()
        span["decision"] = fw.admit("acme")
        span["end"] = time.monotonic()

    thread = threading.Thread(target=admitter)
    stamps = []
    thread.start()
    while thread.is_alive():
        stamps.append(time.monotonic())  # pure Python: runs only while the admitter does not hold the GIL
    thread.join()
    stall.join()
    d, waited = span["decision"], span["end"] - span["start"]
    gap = max_gap(stamps, span["start"], span["end"])
    print(f"admit waited {waited * 1000:.0f} ms on the stalled Redis; main thread's longest pause {gap * 1000:.1f} ms")
    assert d.allowed and not d.failed_open and not d.degraded  # it waited for Redis' answer, within the deadline
    assert gap < waited / 2  # the main thread kept running while the admit waited
    fw.close()


def test_an_unreachable_redis_is_decided_by_the_local_fallback():
    port = free_port()  # nothing listens there
    fw = floodwall.Floodwall(
        {"store": f"redis://127.0.0.1:{port}/0", "request_rate": {"rate": 1, "burst": 1},
         "redis": {"deadline_ms": 50, "connect_timeout_ms": 50}}
    )
    decisions = [fw.admit("acme") for _ in range(5)]
    assert all(d.degraded and not d.failed_open for d in decisions)
    assert [d.allowed for d in decisions] == [True, False, False, False, False], "burst 1, held locally"
    assert {d.fail_reason for d in decisions} <= {"connection", "timeout", "breaker"}
    m = fw.metrics()
    assert m["decisions"]["request_rate"]["rejected"] == 4
    assert m["sources"]["fallback"] == 5 and m["sources"]["failed_open"] == 0
    fw.close()


def test_fallback_open_lets_everything_through_and_says_so():
    port = free_port()
    fw = floodwall.Floodwall(
        {"store": f"redis://127.0.0.1:{port}/0", "request_rate": {"rate": 1, "burst": 1},
         "redis": {"deadline_ms": 50, "connect_timeout_ms": 50, "fallback": "open"}}
    )
    decisions = [fw.admit("acme") for _ in range(5)]
    assert all(d.allowed and d.failed_open and not d.degraded for d in decisions)
    assert fw.metrics()["decisions"]["request_rate"]["failed_open"] == 5
    fw.close()


def test_a_redis_that_answers_after_the_deadline_is_decided_by_the_fallback(redis_server):
    fw = floodwall.Floodwall(
        {**redis_policy(redis_server, request_rate={"rate": 1, "burst": 1}), "redis": {"deadline_ms": 50}}
    )
    fw.admit("warm-up")
    stall = redis_server.stall(0.5)
    d = fw.admit("acme")
    stall.join()
    assert d.allowed and d.degraded and not d.failed_open and d.fail_reason in ("timeout", "breaker")
    fw.close()


def test_closing_while_threads_admit_neither_crashes_nor_hangs(redis_server):
    fw = floodwall.Floodwall(redis_policy(redis_server, request_rate={"rate": 1000, "burst": 100000},
                                          concurrency={"limit": 1000}))
    outcomes = {"decided": 0, "closed": 0}
    lock = threading.Lock()

    def worker():
        while True:
            try:
                with fw.admit("acme"):
                    pass
                kind = "decided"
            except floodwall.ClosedError:
                kind = "closed"
            with lock:
                outcomes[kind] += 1
            if kind == "closed":
                return

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    fw.close()
    for t in threads:
        t.join(timeout=10)
        assert not t.is_alive()
    assert outcomes["decided"] > 0 and outcomes["closed"] == 6
