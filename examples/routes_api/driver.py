"""Replays the seed's stories as scenes against a running routes-api, over real HTTP.

    python driver.py                      # memory store, one server process
    python driver.py --redis auto         # a throwaway redis-server and three worker processes sharing it
    python driver.py --redis redis://127.0.0.1:6379/0

Prints per scene what was sent and how floodwall answered, with one sample rejection, and draws the timeline
(allowed and rejected per limiter, the utilization shedder's amount and the adaptive limit) into a PNG.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import httpx

import keys

HERE = os.path.dirname(os.path.abspath(__file__))
LIMITERS = ("request_rate", "concurrency", "fleet", "utilization", "adaptive")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Scene:
    number: int
    title: str
    start: float
    end: float = 0.0
    sent: int = 0
    allowed: int = 0
    rejected: Dict[Tuple[int, str], int] = field(default_factory=collections.Counter)
    sample: Optional[httpx.Response] = None
    notes: List[str] = field(default_factory=list)


class Run:
    def __init__(self, bases: List[str], redis: Optional["Redis"]):
        # Several boxes behind a round-robin balancer: each is a process with its own client (and its own
        # utilization shedder); with Redis they share every tenant's bucket and slots.
        self.bases = bases
        self.processes = len(bases)
        self.next_box = 0
        self.redis = redis
        self.t0 = time.monotonic()
        self.events: List[Tuple[float, str]] = []  # (t, outcome) outcome: allowed | <limiter>
        self.amounts: List[Tuple[float, float]] = []
        self.limits: List[Tuple[float, float]] = []  # the adaptive limit, averaged over the boxes
        self.scenes: List[Scene] = []
        self.client = httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=400))

    def now(self) -> float:
        return time.monotonic() - self.t0

    def scene(self, title: str) -> Scene:
        if self.scenes:
            self.scenes[-1].end = self.now()
        s = Scene(len(self.scenes) + 1, title, self.now())
        self.scenes.append(s)
        print(f"\n[{s.number:2}] {title}", flush=True)
        return s

    async def call(self, s: Scene, method: str, path: str, customer: str, key: Optional[str] = None) -> httpx.Response:
        """One request as `customer` with the key routes-api issued it, or with `key` as it is (a made-up one)."""
        base = self.bases[self.next_box % len(self.bases)]
        self.next_box += 1
        token = key if key is not None else keys.issue(customer)
        r = await self.client.request(method, base + path, headers={"Authorization": f"Bearer {token}"})
        s.sent += 1
        if r.status_code < 400:
            s.allowed += 1
            self.events.append((self.now(), "allowed"))
        elif r.status_code in (429, 503):
            limiter = r.json()["error"]["limit_type"]
            s.rejected[(r.status_code, limiter)] += 1
            self.events.append((self.now(), limiter))
            if s.sample is None:
                s.sample = r
        return r

    async def metrics(self) -> dict:
        """The boxes' metrics together: counters summed, the shedding amount averaged."""
        boxes = [(await self.client.get(base + "/metrics.json")).json() for base in self.bases]

        def merge(values):
            if isinstance(values[0], dict):
                return {k: merge([v[k] for v in values]) for k in values[0]}
            if isinstance(values[0], (int, float)) and not isinstance(values[0], bool):
                return sum(values)
            return values[0]

        total = merge(boxes)
        total["shedding_amount"] = sum(b["shedding_amount"] for b in boxes) / len(boxes)
        return total

    async def set_mode(self, limiter: str, mode: str) -> str:
        if self.redis:  # fleet-wide, the way an operator does it: one redis-cli command, no deploy
            self.redis.cli("HSET", "floodwall:flags", limiter, mode)
            await asyncio.sleep(0.6)  # clients poll the flags every 250 ms here (1 s by default)
            return f"redis-cli HSET floodwall:flags {limiter} {mode}"
        for base in self.bases:
            await self.client.post(f"{base}/admin/mode?limiter={limiter}&mode={mode}")
        return f"POST /admin/mode?limiter={limiter}&mode={mode}"

    async def clear_mode(self, limiter: str) -> None:
        if self.redis:
            self.redis.cli("HDEL", "floodwall:flags", limiter)
            await asyncio.sleep(0.6)
        else:
            for base in self.bases:
                await self.client.post(f"{base}/admin/mode?limiter={limiter}&mode=enforce")

    async def sample_amounts(self) -> None:
        while True:
            try:
                m = await self.metrics()
                self.amounts.append((self.now(), m["shedding_amount"]))
                for limit in m.get("adaptive", {}).values():
                    self.limits.append((self.now(), limit["limit"] / self.processes))
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            await asyncio.sleep(0.5)


def report(s: Scene) -> None:
    rejected = ", ".join(f"{n} x {status} {lim}" for (status, lim), n in sorted(s.rejected.items())) or "none"
    print(f"     sent {s.sent}, allowed {s.allowed}, rejected: {rejected}")
    for note in s.notes:
        print(f"     {note}")
    if s.sample is not None:
        r = s.sample
        print(f"     sample: HTTP {r.status_code}")
        for name in ("ratelimit-policy", "ratelimit", "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset",
                     "retry-after", "content-type"):
            if name in r.headers:
                print(f"       {name}: {r.headers[name]}")
        print(f"       {r.text}")


async def flood(run: Run, s: Scene, method: str, path: str, key: str, seconds: float, workers: int) -> None:
    end = time.monotonic() + seconds

    async def one() -> None:
        while time.monotonic() < end:
            await run.call(s, method, path, key)

    await asyncio.gather(*(one() for _ in range(workers)))


async def paced(run: Run, s: Scene, method: str, path: str, key: str, count: int, interval: float) -> None:
    tasks = []
    for _ in range(count):
        tasks.append(asyncio.create_task(run.call(s, method, path, key)))
        await asyncio.sleep(interval)
    await asyncio.gather(*tasks)


async def scenes(run: Run) -> None:
    s = run.scene("A sandbox script in a `while true` loop, re-solving a 50-stop route (5 tokens) for 5 s")
    await flood(run, s, "POST", "/v1/routes?stops=50", "sk_test_looping_script", 5, 8)
    s.notes.append("the burst, then held to 100 tokens/s: the same limits as production")
    report(s)

    s = run.scene("A scraper inventing a new API key for every request, from one address (3 s)")
    end = time.monotonic() + 3

    async def scrape() -> None:
        while time.monotonic() < end:
            await run.call(s, "GET", "/v1/routes/rt_42", "", key=f"sk_live_{os.urandom(8).hex()}_{os.urandom(8).hex()}")

    await asyncio.gather(*(scrape() for _ in range(8)))
    s.notes.append(f"{s.sent} made-up keys, none issued: every request counts against the scraper's address, "
                   "one bucket (the burst, then 100/s), however many keys it invents")
    report(s)

    s = run.scene("An Airflow task retrying a failed job 60 times a minute (8 s)")
    await paced(run, s, "POST", "/v1/routes?stops=5", "sk_live_airflow", 8, 1.0)
    s.notes.append("well inside 100/s: never throttled")
    report(s)

    s = run.scene("A poller hitting GET /v1/routes/:id every 50 ms instead of using webhooks (4 s)")
    await paced(run, s, "GET", "/v1/routes/rt_42", "sk_live_poller", 80, 0.05)
    report(s)

    s = run.scene("A dispatcher's morning burst: 300 route requests in 4 s")
    await paced(run, s, "POST", "/v1/routes?stops=20", "sk_live_dispatcher", 300, 4 / 300)
    s.notes.append("bursting is what the 500-token capacity is for: all allowed")
    report(s)

    s = run.scene("2,000-stop optimisations (200 tokens each) against 5-stop ones (1 token)")
    big = [asyncio.create_task(run.call(s, "POST", "/v1/routes?stops=2000", "sk_live_big_fleet")) for _ in range(5)]
    small = [asyncio.create_task(run.call(s, "POST", "/v1/routes?stops=5", "sk_live_corner_shop")) for _ in range(5)]
    big_r, small_r = await asyncio.gather(asyncio.gather(*big), asyncio.gather(*small))
    s.notes.append(f"2,000 stops: {sum(r.status_code < 400 for r in big_r)} of 5 allowed; "
                   f"5 stops: {sum(r.status_code < 400 for r in small_r)} of 5 allowed")
    report(s)

    s = run.scene("A tenant holding 20 slow solves; the 21st is rejected at once")
    slow = [asyncio.create_task(run.call(s, "POST", "/v1/routes?stops=5&hold_s=3", "sk_live_solver"))
            for _ in range(20)]
    await asyncio.sleep(0.5)
    t = time.monotonic()
    r = await run.call(s, "POST", "/v1/routes?stops=5", "sk_live_solver")
    s.notes.append(f"the 21st: HTTP {r.status_code} after {1000 * (time.monotonic() - t):.0f} ms, not after 3 s in a queue")
    read = await run.call(s, "GET", "/v1/routes/rt_7", "sk_live_solver")
    s.notes.append(f"a cheap read meanwhile: HTTP {read.status_code} (reads are not counted)")
    await asyncio.gather(*slow)
    report(s)

    s = run.scene("An analytics flood: the fleet shedder holds it under its share while route solving passes")
    keys = [f"sk_live_analyst_{i}" for i in range(8)]
    analytics = [asyncio.create_task(run.call(s, "GET", "/v1/analytics/daily?hold_s=1", keys[i % 8])) for i in range(40)]
    await asyncio.sleep(0.3)
    routes = await asyncio.gather(*(run.call(s, "POST", "/v1/routes?stops=5", "sk_live_dispatcher") for _ in range(20)))
    a = await asyncio.gather(*analytics)
    s.notes.append(f"analytics: {sum(r.status_code < 400 for r in a)} of 40 allowed (never more than 16 in flight); "
                   f"route solving: {sum(r.status_code < 400 for r in routes)} of 20 allowed")
    report(s)

    await utilization_scene(run)
    await adaptive_scene(run)

    s = run.scene("A limiter launched dark first (decided and counted, nothing blocked), then enforced")
    before = (await run.metrics())["decisions"]["request_rate"]["dark_rejected"]
    how = await run.set_mode("request_rate", "dark")
    batch = "/v1/routes?stops=600"  # a nightly batch of 600-stop solves: 60 tokens each
    await flood(run, s, "POST", batch, "sk_live_nightly_batch", 3, 8)
    after = (await run.metrics())["decisions"]["request_rate"]["dark_rejected"]
    s.notes.append(f"dark ({how}): {after - before} requests would have been rejected, none was"
                   + (" (counted by the worker that answered /metrics.json)" if run.redis else ""))
    await run.clear_mode("request_rate")
    dark_allowed = s.allowed
    await flood(run, s, "POST", batch, "sk_live_nightly_batch", 2, 8)
    s.notes.append(f"then enforced: {s.allowed - dark_allowed} more allowed, the rest rejected")
    report(s)

    s = run.scene("The kill switch: request_rate flipped off" + (" fleet-wide" if run.redis else "") + ", no deploy")
    looping = "/v1/routes?stops=600"
    await flood(run, s, "POST", looping, "sk_test_looping_script", 2, 8)
    before_allowed, before_sent = s.allowed, s.sent
    s.notes.append(f"enforced: {before_allowed} of {before_sent} allowed")
    how = await run.set_mode("request_rate", "off")
    await flood(run, s, "POST", looping, "sk_test_looping_script", 2, 8)
    s.notes.append(f"then {how}: {s.allowed - before_allowed} of {s.sent - before_sent} allowed")
    if not run.redis:
        s.notes.append("with Redis the same switch is one command for the whole fleet: "
                       "redis-cli HSET floodwall:flags request_rate off (make demo REDIS=auto)")
    await run.clear_mode("request_rate")
    report(s)

    if run.redis and run.redis.pid:
        s = run.scene("Redis stopped mid-run (SIGSTOP, 3 s), then killed and restarted")
        before = (await run.metrics())["sources"]
        run.redis.pause()
        await flood(run, s, "GET", "/v1/routes/rt_1", "sk_live_during_outage", 3, 4)
        run.redis.resume()
        during = (await run.metrics())["sources"]
        s.notes.append(f"while Redis was stopped: {s.allowed} of {s.sent} served, still limited: "
                       f"{during['fallback'] - before['fallback']} decided by the local fallback "
                       f"(the same policy in each process), {during['failed_open'] - before['failed_open']} "
                       "let through unlimited")
        await asyncio.sleep(1.0)
        run.redis.restart()
        sent, allowed = s.sent, s.allowed
        await flood(run, s, "GET", "/v1/routes/rt_1", "sk_live_during_outage", 3, 4)
        m = await run.metrics()
        s.notes.append(f"killed and restarted: {s.allowed - allowed} of {s.sent - sent} served; the clients "
                       f"reconnected by themselves ({m['sources']['store'] - during['store']} decided by Redis "
                       f"again, {m['sources']['fallback'] - during['fallback']} by the fallback meanwhile)")
        why = m["store_failures"]["request_rate"]
        s.notes.append(f"why the store did not decide, counted by the boxes: "
                       + ", ".join(f"{k} {v}" for k, v in why.items() if v))
        report(s)


async def utilization_scene(run: Run) -> None:
    s = run.scene("A box saturated: the utilization shedder ramps up slowly, sheds by tier, then backs off "
                  "(timings scaled 4x down: 7 s delay, 30 s ramp, 2 s samples)")
    tiers = [("sandbox", "GET", "/v1/routes/rt_1", "sk_test_tier"), ("GET", "GET", "/v1/analytics/usage", "sk_live_tier_get"),
             ("POST", "POST", "/v1/analytics/exports", "sk_live_tier_post"),
             ("critical", "POST", "/v1/routes?stops=5", "sk_live_tier_critical")]
    stop_holding = asyncio.Event()

    async def hold(i: int) -> None:  # 36 slow requests in flight on 24 workers: utilization 1.0
        while not stop_holding.is_set():
            await run.call(s, "GET", "/v1/routes/rt_busy?hold_s=1.5", f"sk_live_busy_{i % 4}")

    # Each worker process is a box with its own shedder: saturate every one of them.
    holders = [asyncio.create_task(hold(i)) for i in range(36 * run.processes)]
    print(f"     {'t':>4} {'amount':>7}  shed %: {'sandbox':>7} {'GET':>5} {'POST':>5} {'critical':>8}", flush=True)
    start = time.monotonic()
    window: Dict[str, List[int]] = {t[0]: [0, 0] for t in tiers}
    last_print = start
    while time.monotonic() - start < 60:
        if time.monotonic() - start > 30 and not stop_holding.is_set():
            stop_holding.set()
            print("     -- load removed: utilization falls, the amount ramps back down", flush=True)
        for name, method, path, key in tiers:
            r = await run.call(s, method, path, key)
            window[name][0] += 1
            window[name][1] += r.status_code == 503
        await asyncio.sleep(0.1)
        if time.monotonic() - last_print >= 4:
            last_print = time.monotonic()
            amount = (await run.metrics())["shedding_amount"]
            pct = [100 * w[1] // max(1, w[0]) for w in window.values()]
            print(f"     {last_print - start:4.0f} {amount:7.3f}          {pct[0]:7} {pct[1]:5} {pct[2]:5} {pct[3]:8}",
                  flush=True)
            window = {t[0]: [0, 0] for t in tiers}
    stop_holding.set()
    await asyncio.gather(*holders)
    s.notes.append("sandbox first, then GETs, then other writes; critical last; the amount moves slowly, no flapping")
    report(s)


async def adaptive_scene(run: Run) -> None:
    s = run.scene("The same kind of saturated box with the adaptive limit instead of the hand-set shedder: "
                  "64 callers on 4 ETA workers (50 ms each)")
    await run.set_mode("utilization", "off")
    stop = asyncio.Event()

    async def caller(i: int) -> None:
        while not stop.is_set():
            r = await run.call(s, "GET", f"/v1/eta/rt_{i}", f"sk_live_eta_{i}")
            if r.status_code == 503:
                await asyncio.sleep(float(r.headers.get("retry-after", "1")))  # as a well-behaved client does

    async def box_stats() -> dict:
        """Served/s and 503/s summed, p99 the worst box's: each box measures its own requests, from arrival
        to the end of the response (what a client would see on a fast network)."""
        boxes = [(await run.client.get(base + "/metrics.json")).json()["eta"] for base in run.bases]
        return {"served": sum(b["served_per_s"] for b in boxes), "shed": sum(b["shed_per_s"] for b in boxes),
                "p99": max(b["p99_ms"] for b in boxes)}

    print(f"     {'t':>4} {'adaptive':>8} {'limit':>6} {'served/s':>9} {'p99 ms':>7} {'503/s':>6}", flush=True)
    callers = [asyncio.create_task(caller(i)) for i in range(64)]
    start = time.monotonic()
    summary: Dict[str, dict] = {}
    for mode, seconds in (("dark", 8), ("enforce", 12)):
        await run.set_mode("adaptive", mode)
        phase = time.monotonic()
        while time.monotonic() - phase < seconds:
            await asyncio.sleep(2)
            st = await box_stats()
            limits = [lim for at, lim in run.limits if at > time.monotonic() - run.t0 - 1.0]
            print(f"     {time.monotonic() - start:4.0f} {mode:>8} {limits[-1] if limits else 0:6.1f} "
                  f"{st['served']:9.0f} {st['p99']:7.0f} {st['shed']:6.0f}", flush=True)
            summary[mode] = st  # the phase's last 2 s: settled
    stop.set()
    await asyncio.gather(*callers)
    await run.clear_mode("adaptive")
    await run.clear_mode("utilization")
    dark, enforced = summary["dark"], summary["enforce"]
    s.notes.append(f"dark (measured, nothing shed): {dark['served']:.0f} served/s, p99 {dark['p99']:.0f} ms: "
                   "every caller queues for a worker")
    s.notes.append(f"enforced: {enforced['served']:.0f} served/s "
                   f"({100 * enforced['served'] / max(dark['served'], 1):.0f}%), p99 {enforced['p99']:.0f} ms; the "
                   "rest answered 503 at once (Retry-After: 1), and nobody set a number")
    report(s)


def plot(run: Run, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    end = int(run.now()) + 1
    series = {k: [0] * end for k in ("allowed",) + LIMITERS}
    for t, outcome in run.events:
        series[outcome][min(int(t), end - 1)] += 1
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(14, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    colors = {"allowed": "#4c9a2a", "request_rate": "#d1495b", "concurrency": "#edae49", "fleet": "#00798c",
              "utilization": "#7b3294", "adaptive": "#2b6cb0"}
    labels = {"allowed": "allowed", "request_rate": "429 request rate", "concurrency": "429 concurrency",
              "fleet": "503 fleet shedder", "utilization": "503 utilization shedder", "adaptive": "503 adaptive limit"}
    xs = list(range(end))
    for k in series:
        top.plot(xs, series[k], label=labels[k], color=colors[k], linewidth=1.4)
    top.set_yscale("symlog")
    top.set_ylabel("responses per second")
    top.legend(loc="lower center", bbox_to_anchor=(0.5, 1.01), ncol=6, fontsize=8, frameon=False)
    for s in run.scenes:
        for ax in (top, bottom):
            ax.axvspan(s.start, s.end, color="#000000", alpha=0.04 if s.number % 2 else 0.0)
        top.text((s.start + s.end) / 2, top.get_ylim()[1] * 0.5, str(s.number), fontsize=8, ha="center")
    if run.amounts:
        bottom.plot([a[0] for a in run.amounts], [a[1] for a in run.amounts], color=colors["utilization"])
    bottom.axhline(0, color="#888888", linewidth=0.6)
    bottom.set_ylabel("shedding amount", color=colors["utilization"])
    if run.limits:
        right = bottom.twinx()
        right.plot([a[0] for a in run.limits], [a[1] for a in run.limits], color=colors["adaptive"])
        right.set_ylabel("adaptive limit", color=colors["adaptive"])
    bottom.set_xlabel("seconds (scene numbers above)")
    fig.suptitle("routes-api under pressure: floodwall's decisions over time (numbers: scenes)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


class Redis:
    def __init__(self, url: Optional[str]):
        self.pid = None
        self.proc = None
        if url in (None, "auto"):
            self.port = free_port()
            self.start()
            self.url = f"redis://127.0.0.1:{self.port}/0"
        else:
            self.url = url
            self.port = int(url.split(":")[2].split("/")[0])

    def start(self) -> None:
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--loglevel", "warning"],
                                     stdout=subprocess.DEVNULL)
        self.pid = self.proc.pid
        for _ in range(200):
            if self.cli("PING") == "PONG":
                return
            time.sleep(0.025)
        raise RuntimeError("redis-server did not start")

    def cli(self, *args: str) -> str:
        r = subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, timeout=5)
        return r.stdout.strip()

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def restart(self) -> None:
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.proc:
            os.kill(self.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
            self.proc = None


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis", default=None, help="'auto' for a throwaway redis-server, or a redis:// URL")
    ap.add_argument("--workers", type=int, default=3, help="with Redis: how many boxes (server processes)")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "out", "routes_api_timeline.png"))
    args = ap.parse_args()

    redis = Redis(args.redis) if args.redis else None
    env = dict(os.environ)
    boxes = 1
    if redis:
        env["ROUTES_API_STORE"] = redis.url
        boxes = args.workers
    servers, bases = [], []
    for _ in range(boxes):
        port = free_port()
        servers.append(subprocess.Popen([sys.executable, "-m", "uvicorn", "app:app", "--host", "127.0.0.1", "--port",
                                         str(port), "--log-level", "warning"], cwd=HERE, env=env))
        bases.append(f"http://127.0.0.1:{port}")
    try:
        for base in bases:
            for _ in range(400):
                try:
                    httpx.get(base + "/metrics.json", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.05)
        store = (f"Redis at {redis.url}, shared by {boxes} boxes (server processes) behind a round-robin balancer"
                 if redis else "the embedded memory store")
        print(f"routes-api on {', '.join(bases)}, protected by floodwall's ASGI middleware, on {store}")
        print("policy: 100 requests/s sustained, bursts to 500; 20 solves in flight per tenant; analytics may hold 16"
              " requests fleet-wide; the utilization shedder watches 24 workers per box; the ETA route has an adaptive"
              " concurrency limit")
        run = Run(bases, redis)
        sampler = asyncio.create_task(run.sample_amounts())
        await scenes(run)
        run.scenes[-1].end = run.now()
        sampler.cancel()
        await run.client.aclose()
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        plot(run, args.out)
        print(f"\ntimeline picture: {os.path.abspath(args.out)}")
        return 0
    finally:
        for server in servers:
            server.send_signal(signal.SIGINT)
        for server in servers:
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
        if redis:
            redis.stop()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
