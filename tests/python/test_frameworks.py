"""floodwall.flask (the extension and its limit decorator) under gunicorn and floodwall.fastapi (the ASGI
middleware and its limit decorator and dependency) under uvicorn, served from tests/python/framework_apps
over real HTTP, on memory:// and on Redis: route rules mounted app-wide, per-route settings, 429/503/403,
release on every path, concurrency never exceeded; and their bad options, refused when they are made."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import socket
import subprocess
import sys
from typing import Any, Dict, Iterator, List

import httpx
import pytest

from conftest import eventually, free_port, wait_for_port

APPS = pathlib.Path(__file__).resolve().parent / "framework_apps"
ORDERS = {"name": "orders", "routes": ["/orders", "/orders/*"], "rate": 0.001, "burst": 2}


class Server:
    def __init__(self, framework: str, policy: Dict[str, Any]) -> None:
        self.framework = framework
        self.port = free_port()
        if framework == "flask":  # one process, threads: the memory store is per process
            argv = [sys.executable, "-m", "gunicorn", "-w", "1", "-k", "gthread", "--threads", "32",
                    "-b", f"127.0.0.1:{self.port}", "flask_site:app"]
        else:
            argv = [sys.executable, "-m", "uvicorn", "--port", str(self.port), "--log-level", "warning",
                    "fastapi_site:app"]
        env = {**os.environ, "FLOODWALL_POLICY": json.dumps(policy), "PYTHONPATH": str(APPS)}
        self.proc = subprocess.Popen(argv, cwd=APPS, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.output = ""
        try:
            wait_for_port(self.port, timeout=30)
        except RuntimeError:
            self.stop()
            raise RuntimeError(f"{framework} did not start: {self.output}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stats(self) -> Dict[str, Any]:
        return httpx.get(self.url + "/_stats").json()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        self.output = out or ""


@pytest.fixture(params=["flask", "fastapi"])
def app(request: Any, store: Dict[str, Any]) -> Iterator[Any]:
    started: List[Server] = []

    def start(policy: Dict[str, Any]) -> Server:
        s = Server(request.param, {**store, **policy})
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def test_a_glob_rule_limits_a_route_mounted_app_wide(app):
    server = app({"request_rate": {"rate": 100, "burst": 100, "limits": [ORDERS]}})
    with httpx.Client(base_url=server.url) as http:
        answers = [http.get("/orders/42") for _ in range(3)]
        assert http.get("/hello").status_code == 200
    assert [r.status_code for r in answers] == [200, 200, 429]
    assert answers[-1].json()["error"]["policy"] == "orders"
    assert answers[-1].headers["ratelimit"].startswith('"orders";')
    assert "/orders/:order_id" in server.stats()["routes"]  # the pattern, canonical: one family


def test_a_routes_own_cost_skip_and_known_key(app):
    server = app({"request_rate": {"rate": 0.001, "burst": 20}})
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/hello").headers["ratelimit-remaining"] == "19"
        assert http.post("/report").headers["ratelimit-remaining"] == "14"  # limit(cost=5)
        if server.framework == "fastapi":
            assert http.post("/report2").headers["ratelimit-remaining"] == "9"  # Depends(limit(cost=5))
        health = http.get("/health")
        known = http.get("/hello", headers={"X-API-Key": "k-known"})
    assert health.status_code == 200 and "ratelimit-limit" not in health.headers  # limit(skip=True)
    assert known.headers["ratelimit-remaining"] == "19"  # a key the verify hook knows: its own bucket


def test_a_503_and_a_critical_route_passes_it(app):
    server = app({"request_rate": {"rate": 100, "burst": 100}, "fleet": {"capacity": 1}})

    async def main():
        async with httpx.AsyncClient(base_url=server.url) as http:
            holder = asyncio.ensure_future(http.get("/slow/1"))
            while (await http.get("/_stats")).json()["now"] < 1:  # the slow route holds the fleet's slot
                await asyncio.sleep(0.01)
            return await http.get("/hello"), await http.get("/critical"), await holder

    shed, critical, held = asyncio.run(main())
    assert shed.status_code == 503 and shed.json()["error"]["limit_type"] == "fleet"
    assert int(shed.headers["retry-after"]) >= 1
    assert critical.status_code == 200 and held.status_code == 200


def test_the_ticket_is_released_when_the_route_raises_or_the_client_goes_away(app):
    server = app({"concurrency": {"limit": 1, "routes": ["/boom", "/stream"]}})
    # A connection each: uvicorn closes one whose app raised.
    assert [httpx.get(server.url + "/boom").status_code for _ in range(3)] == [500, 500, 500]  # never 429
    eventually(lambda: server.stats()["in_flight"] == 0, what="released after the exception")
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST
    eventually(lambda: server.stats()["in_flight"] == 0, timeout=15, what="released after the client left")
    assert httpx.get(server.url + "/stream").status_code == 200


def test_many_concurrent_requests_never_exceed_the_concurrency_limit(app):
    server = app({"concurrency": {"limit": 3, "routes": ["/slow/*"]}})

    async def main():
        async with httpx.AsyncClient(base_url=server.url, limits=httpx.Limits(max_connections=30),
                                     timeout=30) as http:
            return await asyncio.gather(*(http.get(f"/slow/{i}") for i in range(30)))

    statuses = [r.status_code for r in asyncio.run(main())]
    assert set(statuses) <= {200, 429} and statuses.count(200) >= 3 and 429 in statuses
    s = server.stats()
    assert 1 <= s["most"] <= 3, s
    eventually(lambda: server.stats()["in_flight"] == 0, what="every slot released")


# ---------------------------------------------------------------------------------- bad options


@pytest.mark.parametrize("module", ["floodwall.flask", "floodwall.fastapi"])
@pytest.mark.parametrize("kw, named", [
    ({"cost": 0}, "cost"), ({"cost": 2.5}, "cost"), ({"critical": "yes"}, "critical"),
    ({"sandbox": 1}, "sandbox"), ({"skip": "always"}, "skip"),
])
def test_a_bad_limit_option_is_refused_when_the_decorator_is_made(module, kw, named):
    import importlib

    limit = importlib.import_module(module).limit
    with pytest.raises((TypeError, ValueError), match=f"{module}.limit: {named}: "):
        limit(**kw)


def test_the_flask_extension_refuses_an_unknown_option_and_a_bad_policy():
    from flask import Flask

    import floodwall.flask

    with pytest.raises(TypeError, match="frobnicate: unknown option"):
        floodwall.flask.Floodwall(Flask(__name__), {"request_rate": {"rate": 1, "burst": 1}}, frobnicate=1)
    with pytest.raises(ValueError, match=r"floodwall.flask.Floodwall\['policy'\]: .*rate"):
        floodwall.flask.Floodwall(Flask(__name__), {"request_rate": {"rate": -1, "burst": 1}})
    app = Flask(__name__)
    app.config["FLOODWALL"] = {"policy": {"request_rate": {"rate": 1, "burst": 1}}, "costs": 2}
    with pytest.raises(ValueError, match=r"app.config\[\"FLOODWALL\"\]\['costs'\]: unknown key"):
        floodwall.flask.Floodwall(app)


def test_the_flask_extension_reads_app_config_and_shares_one_client_across_apps():
    from flask import Flask

    import floodwall.flask

    ext = floodwall.flask.Floodwall()
    apps = []
    for _ in range(2):
        a = Flask(__name__)
        a.config["FLOODWALL"] = {"policy": {"request_rate": {"rate": 0.001, "burst": 1}}, "key": "one-tenant"}
        a.get("/x")(lambda: "ok")
        ext.init_app(a)
        apps.append(a)
    try:
        assert apps[0].extensions["floodwall"] is ext
        assert apps[0].test_client().get("/x").status_code == 200
        assert apps[1].test_client().get("/x").status_code == 429  # one client, one bucket
    finally:
        ext.client.close()
