"""One fleet, three languages: a Python (ASGI), a Node (Express) and a Ruby (Rack) service, each in its own
process, on one Redis and one policy file, driven together over HTTP for one tenant."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RATE, BURST, LIMIT = 50, 60, 6
LIMIT_HEADERS = ("ratelimit-policy", "ratelimit", "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset",
                 "retry-after", "content-type")


def key(credential: str) -> str:
    """The tenant id the core derives from an X-API-Key or Bearer credential (tests/vectors.json has the rule)."""
    return "key:" + hashlib.sha256(credential.encode()).hexdigest()[:32]


def free_port() -> int:
    """A port for a server the test starts: random below the kernel's ephemeral range (32768-60999), checked
    by binding it. bind(0)'s port is one any outgoing connection may take as its local port before the
    server binds it (a cluster node's bus port was taken so once in make test's lanes)."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer on {url}")


class Redis:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--loglevel", "warning"], stdout=subprocess.DEVNULL)
        for _ in range(200):
            if self.cli("PING") == "PONG":
                return
            time.sleep(0.025)
        raise RuntimeError("redis-server did not start (is Debian's redis-server installed?)")

    def cli(self, *args: str) -> str:
        return subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True,
                              timeout=10).stdout.strip()

    def stop(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    redis = Redis()
    policy = {
        "store": f"redis://127.0.0.1:{redis.port}/0",
        "redis": {"deadline_ms": 100, "breaker_open_ms": 300, "flags_poll_ms": 200},
        # The services give no key function: the core derives each tenant from the request (a key their
        # verify hook vouches for: any but "made-up-..."), so the overrides name derived ids, and the test
        # client (127.0.0.1) is the proxy the policy trusts.
        "tenant": {"trusted_proxies": ["127.0.0.1"]},
        "request_rate": {"rate": RATE, "burst": BURST, "overrides": {
            **{key(f"same-{lang}"): {"rate": 0.001, "burst": 3} for lang in ("python", "node", "ruby")},
            key("switch-tenant"): {"rate": 0.001, "burst": 3},
            key("bearer-bucket"): {"rate": 0.001, "burst": 3},
            key("api-key-bucket"): {"rate": 0.001, "burst": 3},
            "ip:198.51.100.23": {"rate": 0.001, "burst": 3},
            "ip:198.51.100.77": {"rate": 0.001, "burst": 3}}},
        "concurrency": {"limit": LIMIT, "ttl_s": 30, "routes": ["/work"]},
        # The fleet view's summaries every half second: written (their keys made) before the tests that count
        # keys, and read back by test_every_service_appears_in_floodwall_top_with_its_language.
        "summary": {"period_s": 0.5},
    }
    path = tmp_path_factory.mktemp("fleet") / "policy.json"
    path.write_text(json.dumps(policy))
    env = dict(os.environ, FW_POLICY=str(path))
    commands = {
        "python": [os.environ.get("FW_E2E_PYTHON", sys.executable), os.path.join(HERE, "services", "py_service.py")],
        "node": ["node", os.path.join(HERE, "services", "node_service.js")],
        "ruby": ["ruby", os.path.join(HERE, "services", "ruby_service.rb")],
    }
    procs, urls = {}, {}
    try:
        for lang, cmd in commands.items():
            port = free_port()
            procs[lang] = subprocess.Popen(cmd + [str(port)], env=env)
            urls[lang] = f"http://127.0.0.1:{port}"
        for lang in commands:
            wait_http(urls[lang] + "/metrics", procs[lang], f"the {lang} service")
        yield redis, urls
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        redis.stop()


def get(url: str, tenant: str, hold_s: float = 0) -> httpx.Response:
    return httpx.get(f"{url}/work", params={"hold_s": hold_s} if hold_s else None, headers={"X-API-Key": tenant},
                     timeout=30)


def floodwall_top(store: str) -> dict:
    """`floodwall top --once --json` through the Python package's console script (the C library's command)."""
    python = os.environ.get("FW_E2E_PYTHON", sys.executable)
    ran = subprocess.run([python, "-c", "import sys, floodwall.cli; sys.exit(floodwall.cli.main(sys.argv[1:]))",
                          "--store", store, "top", "--once", "--json"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def test_every_service_appears_in_floodwall_top_with_its_language(fleet):
    """The fleet view: each service's client writes its summary to the one Redis; one read of `floodwall top`
    shows all three, each with its language (the binding's) and the version, and the decisions it made."""
    redis, urls = fleet
    for lang, url in urls.items():
        for _ in range(2):
            get(url, f"top-{lang}")
    store = f"redis://127.0.0.1:{redis.port}/0"
    deadline = time.monotonic() + 30
    while True:
        view = floodwall_top(store)
        by_lang = {c["language"]: c for c in view["clients"]}
        if (set(by_lang) == {"python", "node", "ruby"} and all(c["decisions_total"] >= 2 for c in by_lang.values())) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert set(by_lang) == {"python", "node", "ruby"}, view
    assert view["fleet"]["languages"] == {"python": 1, "node": 1, "ruby": 1}, view
    assert len(view["fleet"]["versions"]) == 1, "one version of floodwall in the fleet"
    for lang, c in by_lang.items():
        assert c["decisions_total"] >= 2, (lang, c)
        assert c["breaker"] == "closed", (lang, c)


def test_combined_admissions_stay_within_one_bucket(fleet):
    redis, urls = fleet
    start = time.monotonic()
    duration = 3.0

    def hammer(url: str) -> list[int]:
        statuses = []
        with httpx.Client(timeout=30) as c:
            while time.monotonic() - start < duration:
                statuses.append(c.get(f"{url}/work", headers={"X-API-Key": "shared-tenant"}).status_code)
        return statuses

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        results = list(pool.map(hammer, [u for u in urls.values() for _ in range(4)]))
    elapsed = time.monotonic() - start
    statuses = [s for r in results for s in r]
    allowed = statuses.count(200)
    print(f"sent {len(statuses)}, allowed {allowed} in {elapsed:.2f}s across python, node and ruby")
    assert set(statuses) <= {200, 429}
    assert allowed <= BURST + RATE * elapsed + 1
    assert allowed > BURST, "the bucket refilled and all three services drew from it"
    per_lang = [sum(s == 200 for s in r) for r in results]
    assert all(n > 0 for n in per_lang), "every service admitted some of the shared tenant's requests"


def test_concurrency_limit_holds_across_languages(fleet):
    redis, urls = fleet
    with concurrent.futures.ThreadPoolExecutor(30) as pool:
        futures = [pool.submit(get, url, "holding-tenant", 1.5) for url in urls.values() for _ in range(10)]
        statuses = [f.result().status_code for f in futures]
    assert statuses.count(200) <= LIMIT
    assert statuses.count(200) >= 1
    assert statuses.count(429) == len(statuses) - statuses.count(200)
    # Every slot was given back: a new round gets the full limit again.
    with concurrent.futures.ThreadPoolExecutor(LIMIT) as pool:
        again = list(pool.map(lambda url: get(url, "holding-tenant", 0.2).status_code,
                              [list(urls.values())[i % 3] for i in range(LIMIT)]))
    assert again.count(200) == LIMIT


def test_same_decision_same_bytes_in_every_language(fleet):
    redis, urls = fleet
    seen = {}
    for lang, url in urls.items():
        # Each language gets its own tenant with the same override: the same sequence of decisions.
        responses = [get(url, f"same-{lang}") for _ in range(4)]
        assert [r.status_code for r in responses] == [200, 200, 200, 429]
        seen[lang] = [(tuple((h, r.headers.get(h)) for h in LIMIT_HEADERS if h != "content-type" or r.status_code != 200),
                       r.content if r.status_code != 200 else b"") for r in responses]
    assert seen["python"] == seen["node"] == seen["ruby"]
    rejected_headers = dict(seen["python"][3][0])
    assert rejected_headers["retry-after"] is not None and int(rejected_headers["retry-after"]) >= 1
    assert rejected_headers["ratelimit-remaining"] == "0"
    body = json.loads(seen["python"][3][1])
    assert body["error"]["limit_type"] == "request_rate"
    assert seen["python"][0][0][0] == ("ratelimit-policy",
                                       '"request_rate";q=3;w=3000, "concurrency";q=6;qu="concurrent-requests"')


def answer(response: httpx.Response) -> tuple:
    return (response.status_code, tuple((h, response.headers.get(h)) for h in LIMIT_HEADERS), response.content)


@pytest.mark.parametrize("headers", [
    {"Authorization": "Bearer bearer-bucket"},
    {"X-API-Key": "api-key-bucket"},
    {"X-Forwarded-For": "198.51.100.23"},
], ids=["bearer", "api-key", "forwarded-for"])
def test_the_same_request_reaches_one_bucket_and_one_answer_in_every_language(fleet, headers):
    """One client, three services: the core derives one tenant from the same request headers in Python,
    Node and Ruby (a hashed Bearer token or X-API-Key; behind a trusted proxy, the X-Forwarded-For address),
    so the three draw from one bucket of 3 and answer alike."""
    redis, urls = fleet
    order = ["python", "node", "ruby"]
    first = [httpx.get(f"{urls[lang]}/work", headers=headers, timeout=30) for lang in order]
    assert [r.status_code for r in first] == [200, 200, 200], "one bucket of 3 shared by three services"
    assert [r.headers["ratelimit-remaining"] for r in first] == ["2", "1", "0"]
    rejected = {lang: answer(httpx.get(f"{urls[lang]}/work", headers=headers, timeout=30)) for lang in order}
    assert rejected["python"][0] == 429
    assert rejected["python"] == rejected["node"] == rejected["ruby"], rejected
    body = json.loads(rejected["python"][2])
    assert body["error"]["limit_type"] == "request_rate"
    hdrs = dict(rejected["python"][1])
    assert int(hdrs["retry-after"]) >= int(hdrs["ratelimit"].rsplit("t=", 1)[1]), "Retry-After >= the window t"


def test_made_up_keys_from_one_address_share_its_bucket_in_every_language(fleet):
    """A client inventing a key per request, spread over the three services: none of the keys is vouched
    for, so every request is its address's (one bucket of 3 for the whole fleet), while a key the fleet
    issued, sent from that same address, has its own bucket."""
    redis, urls = fleet
    keys_before = int(redis.cli("DBSIZE"))
    statuses = {}
    for i in range(24):
        lang = ("python", "node", "ruby")[i % 3]
        made_up = f"made-up-{os.urandom(8).hex()}"
        credential = {"X-API-Key": made_up} if i % 2 else {"Authorization": f"Bearer {made_up}"}
        r = httpx.get(f"{urls[lang]}/work", headers={**credential, "X-Forwarded-For": "198.51.100.77"}, timeout=30)
        statuses.setdefault(lang, []).append(r.status_code)
    every = [s for lang in statuses for s in statuses[lang]]
    assert every.count(200) == 3 and every.count(429) == 21, statuses
    # 24 made-up keys made one tenant's keys, not 24 tenants'.
    assert int(redis.cli("DBSIZE")) - keys_before <= 3, redis.cli("KEYS", "*")
    issued = [httpx.get(f"{urls[lang]}/work", headers={"X-API-Key": "issued-behind-a-nat",
                                                        "X-Forwarded-For": "198.51.100.77"}, timeout=30)
              for lang in ("python", "node", "ruby")]
    assert [r.status_code for r in issued] == [200, 200, 200], "an issued key is not starved by its address"


def wait_until(predicate, seconds: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if predicate():
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError(f"not within {seconds}s")


def test_fleet_wide_switch_reaches_all_three(fleet):
    redis, urls = fleet
    drained = [get(url, "switch-tenant").status_code for url in urls.values() for _ in range(2)]
    assert drained.count(200) == 3, "three services drew the 3 tokens of one shared bucket"
    redis.cli("HSET", "floodwall:flags", "request_rate", "off")
    try:
        for lang, url in urls.items():
            took = wait_until(lambda: get(url, "switch-tenant").status_code == 200, 2.5)
            print(f"{lang}: off after {took:.2f}s")
        redis.cli("HSET", "floodwall:flags", "request_rate", "dark")
        for url in urls.values():
            wait_until(lambda: get(url, "switch-tenant").status_code == 200, 2.5)
    finally:
        redis.cli("HDEL", "floodwall:flags", "request_rate")
    for url in urls.values():
        wait_until(lambda: get(url, "switch-tenant").status_code == 429, 2.5)


def decided_by(url: str, source: str) -> float:
    text = httpx.get(url + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(f'floodwall_decisions_by_source_total{{source="{source}"}}'))


def test_redis_stopped_all_three_keep_limiting_locally_and_count_it(fleet):
    redis, urls = fleet
    before = {lang: decided_by(url, "fallback") for lang, url in urls.items()}
    os.kill(redis.proc.pid, signal.SIGSTOP)
    try:
        for lang, url in urls.items():
            statuses = [get(url, f"outage-{lang}").status_code for _ in range(8)]
            assert statuses == [200] * 8, f"{lang} failed closed: {statuses}"
            # The local fallback still limits: a tenant with a burst of 3 gets 3, then 429s.
            held = [get(url, "switch-tenant").status_code for _ in range(5)]
            assert held.count(200) <= 3 and 429 in held, f"{lang} stopped limiting: {held}"
    finally:
        os.kill(redis.proc.pid, signal.SIGCONT)
    for lang, url in urls.items():
        assert decided_by(url, "fallback") > before[lang], f"{lang} did not count its fallback decisions"
        assert decided_by(url, "failed_open") == 0, f"{lang} let requests through unlimited"
    for url in urls.values():  # and decisions come from Redis again
        stored = decided_by(url, "store")
        wait_until(lambda: get(url, "after-outage") is not None and decided_by(url, "store") > stored, 5)
