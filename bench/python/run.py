"""floodwall from Python, measured in one run:

1. Per-call overhead of Floodwall.admit on the memory store against the C ABI itself, called from a tiny
   C++ program (capi_admit.cpp, linked with libfloodwall_static.a, -O2, the wheel's Release flags).
2. Admits per second from Python on one real Redis: floodwall (sync admit from 1 and 4 threads, and
   admit_async from one event loop) against the `limits` library (pip) on the same Redis, with its
   fixed-window (the cheapest) and moving-window strategies, from 1 and 4 threads.

Run:  build-python/venv/bin/python bench/python/run.py   (`make bench` makes that venv with floodwall and
      `limits[redis]` in it). It starts its own redis-server on a free port.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import timeit

import floodwall

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = REPO / "build-python" / "bench"
MEMORY_POLICY = '{"request_rate": {"rate": 1000000, "burst": 1000000000}}'


def build_capi_program() -> pathlib.Path:
    """libfloodwall_static.a through CMake (the Lua scripts are generated there), then the program."""
    if not (BUILD / "build.ninja").exists():
        subprocess.run(
            ["cmake", "-S", str(REPO), "-B", str(BUILD), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
             "-DFW_BUILD_TESTS=OFF", "-DFW_BUILD_BENCH=OFF", "-DFW_BUILD_EXAMPLES=OFF"],
            check=True, stdout=subprocess.DEVNULL,
        )
    subprocess.run(["ninja", "-C", str(BUILD), "-j2", "floodwall_static"], check=True, stdout=subprocess.DEVNULL)
    exe = BUILD / "capi_admit"
    src = pathlib.Path(__file__).with_name("capi_admit.cpp")
    lib = BUILD / "libfloodwall_static.a"
    if not exe.exists() or exe.stat().st_mtime < max(src.stat().st_mtime, lib.stat().st_mtime):
        # What libfloodwall_static.a needs beside it: hiredis and OpenSSL (rediss://).
        libs = subprocess.run(["pkg-config", "--libs", "hiredis", "openssl"], check=True, capture_output=True,
                              text=True).stdout.split()
        subprocess.run(["c++", "-std=c++20", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(REPO / "capi" / "include"),
                        str(src), str(lib), *libs, "-lpthread", "-o", str(exe)], check=True)
    return exe


def capi_ns(exe: pathlib.Path, n: int) -> float:
    runs = [float(subprocess.run([str(exe), str(n), MEMORY_POLICY], check=True, capture_output=True,
                                 text=True).stdout) for _ in range(3)]
    return min(runs)


def python_ns(stmt: str, fw: floodwall.Floodwall, n: int) -> float:
    best = min(timeit.repeat(stmt, globals={"fw": fw, "admit": fw.admit}, number=n, repeat=5))
    return best / n * 1e9


# ---------------------------------------------------------------------------------------------- Redis


class Redis:
    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        exe = shutil.which("redis-server")
        if exe is None:
            sys.exit("redis-server is not installed")
        self.proc = subprocess.Popen([exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no"], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit("redis-server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


TENANTS = [f"tenant-{i}" for i in range(1000)]


def per_second(fn, seconds: float, threads: int) -> float:
    """Calls fn(i) from `threads` threads for about `seconds`; returns calls per second in total."""
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def worker(k: int) -> None:
        i = k
        n = 0
        while time.monotonic() < stop:
            for _ in range(50):
                fn(i)
                i += 1
            n += 50
        counts[k] = n

    start = time.monotonic()
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts) / (time.monotonic() - start)


def floodwall_async_per_second(fw: floodwall.Floodwall, seconds: float, concurrency: int) -> float:
    async def main() -> float:
        stop = time.monotonic() + seconds
        done = 0

        async def lane(k: int) -> None:
            nonlocal done
            i = k
            while time.monotonic() < stop:
                await fw.admit_async(TENANTS[i % len(TENANTS)])
                i += concurrency
                done += 1

        start = time.monotonic()
        await asyncio.gather(*(lane(k) for k in range(concurrency)))
        return done / (time.monotonic() - start)

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per Redis measurement")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the Redis contenders")
    parser.add_argument("-n", type=int, default=300_000, help="admits per memory measurement")
    args = parser.parse_args()

    print(f"floodwall {floodwall.__version__}, Python {sys.version.split()[0]}, {os.cpu_count()} cores\n")
    exe = build_capi_program()
    c_ns = capi_ns(exe, args.n * 4)
    fw = floodwall.Floodwall(MEMORY_POLICY)
    rows = [
        ("C ABI fw_admit (C++ program, -O2)", c_ns),
        ("Python Floodwall.admit", python_ns('admit("tenant-1")', fw, args.n)),
        ("Python admit + headers", python_ns('admit("tenant-1").headers', fw, args.n // 3)),
        ("Python with admit(): (release on exit)", python_ns('with admit("tenant-1"): pass', fw, args.n)),
        ("(reference: a Python call of len(x))", python_ns('len("tenant-1")', fw, args.n)),
    ]
    print("Memory store, one tenant, request_rate only (best of repeats)")
    print(f"  {'':44} {'ns/admit':>9} {'over C':>9}")
    for name, ns in rows:
        over = "" if name.startswith("(") else f"{ns - c_ns:+9.0f}"
        print(f"  {name:44} {ns:9.0f} {over:>9}")
    py_ns = rows[1][1]
    print(f"  Python overhead per admit: {(py_ns - c_ns) / 1000:.2f} us; "
          f"total {py_ns / 1000:.2f} us per admit (goal: under 1.5 us)\n")

    from limits import parse, storage, strategies

    redis = Redis()
    try:
        url = f"redis://127.0.0.1:{redis.port}"
        # The shipped Redis options (deadline, breaker, fallback), as users get them.
        policy = {"store": url + "/0", "prefix": "bench", "request_rate": {"rate": 1000000, "burst": 1000000000}}
        fw_redis = floodwall.Floodwall(policy)
        item = parse("1000000000/hour")
        fixed = strategies.FixedWindowRateLimiter(storage.RedisStorage(url, key_prefix="fixed"))
        moving = strategies.MovingWindowRateLimiter(storage.RedisStorage(url, key_prefix="moving"))
        fw_admit = lambda i: fw_redis.admit(TENANTS[i % len(TENANTS)])  # noqa: E731
        fixed_hit = lambda i: fixed.hit(item, TENANTS[i % len(TENANTS)])  # noqa: E731
        moving_hit = lambda i: moving.hit(item, TENANTS[i % len(TENANTS)])  # noqa: E731
        for f in (fw_admit, fixed_hit, moving_hit):  # connections, scripts, keys
            for i in range(2000):
                f(i)
        # Rounds alternate the contenders, so that a noisy machine shows as spread, not as a ratio.
        rounds: dict[str, list[float]] = {}
        for k in range(args.rounds):
            for threads in (1, 4):
                contenders = [(f"floodwall admit, {threads} thread(s)", fw_admit),
                              (f"limits fixed window, {threads} thread(s)", fixed_hit),
                              (f"limits moving window, {threads} thread(s)", moving_hit)]
                if k % 2:  # every other round in reverse: a drift within a round falls on both sides
                    contenders.reverse()
                for name, f in contenders:
                    rounds.setdefault(name, []).append(per_second(f, args.seconds, threads))
            rounds.setdefault("floodwall admit_async, 1 loop, 64 in flight", []).append(
                floodwall_async_per_second(fw_redis, args.seconds, 64))
        results = [(name, statistics.median(v), min(v), max(v)) for name, v in rounds.items()]
        fw_redis.close()
    finally:
        redis.stop()
    base = {t: v for name, v, _, _ in results for t in ("1", "4") if name.startswith("limits fixed") and f"{t} thread" in name}
    print(f"Redis (same redis-server, 1000 tenants, every request allowed; median of {args.rounds} alternating rounds)")
    print(f"  {'':44} {'admits/s':>9} {'min-max':>15} {'vs limits fixed':>16}")
    for name, v, lo, hi in results:
        ref = base["4" if "4 thread" in name else "1"]
        print(f"  {name:44} {v:9.0f} {f'{lo:.0f}-{hi:.0f}':>15} {v / ref:15.2f}x")


if __name__ == "__main__":
    main()
