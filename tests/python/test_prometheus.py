"""A real Prometheus (Debian's `prometheus`) scraping two apps behind floodwall's middleware, each with the
one-line /metrics route of docs/operations.md: a Starlette app under uvicorn and a Flask app under
Werkzeug's threaded server (`flask run`: Flask's own, so the Python suite needs nothing more), two processes on one Redis this test starts. Traffic with refusals goes through both; once
Prometheus has scraped it (polled through its HTTP API, no fixed sleeps), every dashboard query, template
variable and alert expression is evaluated by /api/v1/query: none may be invalid, and the ones the traffic
must fill return data. alerts.yml is loaded as the server's rule_files and must load and evaluate with no
error. A missing `prometheus` binary fails the test (packaging/test-monitoring.sh installs nothing: Debian's
`prometheus` package provides it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from conftest import RedisServer, free_port, wait_for_port
from test_monitoring import ALERTS, alert_expressions, dashboard_expressions, dashboard_variables

STARLETTE_APP = '''
import json, os
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from floodwall import Floodwall
from floodwall.asgi import FloodwallMiddleware

client = Floodwall(json.loads(os.environ["FW_POLICY"]))

async def hello(request):
    return PlainTextResponse("hello\\n")

app = Starlette(routes=[Route("/hello", hello), Route("/items/{item}", hello)])
app.add_middleware(FloodwallMiddleware, client=client, skip=lambda scope: scope["path"] == "/metrics")
app.add_route("/metrics", lambda request: Response(client.prometheus(), media_type="text/plain; version=0.0.4"))
'''

FLASK_APP = '''
import json, os
from flask import Flask
from floodwall import Floodwall
from floodwall.wsgi import FloodwallMiddleware

client = Floodwall(json.loads(os.environ["FW_POLICY"]))
app = Flask(__name__)

@app.get("/hello")
def hello():
    return "hello\\n"

@app.get("/items/<item>")
def item(item):
    return "item\\n"

app.wsgi_app = FloodwallMiddleware(app.wsgi_app, client, skip=lambda environ: environ["PATH_INFO"] == "/metrics")
app.add_url_rule("/metrics", "metrics", lambda: (client.prometheus(), {"Content-Type": "text/plain; version=0.0.4"}))
'''

# Panels whose queries the traffic below must fill (the rest may be empty: no lease policy in the Flask
# app's first seconds, no dark limiter, nothing evicted, ...).
MUST_HAVE_DATA = [
    "Decisions/s by limiter and outcome",
    "Refusals/s by limiter and route family",
    "Refused share by limiter",
    "Mode in force per limiter",
    "Breaker state per process",
    "Share decided without the store",
    "Why the store could not decide",
    "Adaptive concurrency limit",
    "Utilization shedder",
    "In flight",
    "Most refused tenants",
]


def api(port: int, path: str, **params: str) -> Dict[str, Any]:
    url = f"http://127.0.0.1:{port}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:  # 400/422: an invalid query; the body says why
        return json.load(e)


def grafana_to_promql(expr: str) -> str:
    """The dashboard's variables by their "All" value, Grafana's interval by a range that spans several
    1 s scrapes."""
    expr = expr.replace("$__rate_interval", "30s").replace("$__interval", "30s").replace("$__range", "5m")
    return re.sub(r"\$\{?(job|instance|route)\}?", ".*", expr)


def variable_to_promql(query: str) -> str:
    m = re.fullmatch(r"\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*", query)
    assert m, query
    return grafana_to_promql(m.group(1))


def wait_until(check, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout}s")
        time.sleep(0.2)


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=5) as r:
            return r.status == 200
    except urllib.error.HTTPError:  # 503 while the storage opens
        return False


def listening(proc: subprocess.Popen, port: int) -> None:
    """Waits for `proc` to listen on `port`; fails at once if it exits."""
    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[:3]} exited with {proc.returncode} before listening on {port}")
        try:
            wait_for_port(port, timeout=0.2)
            return True
        except RuntimeError:
            return False

    wait_until(up, 30, f"{proc.args[:3]} listening on {port}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[Dict[str, Any]]:
    exe = shutil.which("prometheus")
    if exe is None:
        raise RuntimeError("prometheus is not installed (Debian's `prometheus` package)")
    tmp = tmp_path_factory.mktemp("prometheus")
    redis = RedisServer()
    procs: List[subprocess.Popen] = []
    try:
        common = {"store": redis.url, "prefix": "prom", "redis": {"deadline_ms": 1000, "connect_timeout_ms": 1000},
                  "request_rate": {"rate": 1, "burst": 5}}
        apps = {
            "starlette": (STARLETTE_APP, {**common, "adaptive": {"enabled": True}},
                          ["-m", "uvicorn", "--log-level", "warning", "--host", "127.0.0.1", "--port", "{port}", "app:app"]),
            "flask": (FLASK_APP, {**common, "utilization": {"workers": 4}, "concurrency": {"limit": 2}},
                      ["-m", "flask", "--app", "app", "run", "--host", "127.0.0.1", "--port", "{port}", "--with-threads"]),
        }
        ports = {}
        for job, (source, policy, argv) in apps.items():
            d = tmp / job
            d.mkdir()
            (d / "app.py").write_text(source)
            ports[job] = free_port()
            env = {**os.environ, "FW_POLICY": json.dumps(policy)}
            procs.append(subprocess.Popen([sys.executable, *[a.format(port=ports[job]) for a in argv]], cwd=d, env=env,
                                          start_new_session=True))
        for proc, port in zip(procs, ports.values()):
            listening(proc, port)

        prom_port = free_port()
        (tmp / "prometheus.yml").write_text(json.dumps({  # JSON is YAML
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(ALERTS)],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
                               for job, port in ports.items()],
        }))
        log = open(tmp / "prometheus.log", "wb")
        procs.append(subprocess.Popen(
            [exe, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--web.enable-lifecycle"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        listening(procs[-1], prom_port)
        wait_until(lambda: ready(prom_port), 30, "Prometheus ready")
        yield {"prom": prom_port, "apps": ports, "log": tmp / "prometheus.log"}
    finally:
        for p in procs:
            stop(p)
        redis.stop()


def get(port: int, path: str, key: str) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"X-API-Key": key})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.fixture(scope="module")
def scraped(stack) -> Dict[str, Any]:
    prom = stack["prom"]
    wait_until(lambda: len(api(prom, "/api/v1/query", query='up == 1')["data"]["result"]) == 2, 30,
               "both apps scraped")
    # One request per route family and app, scraped before the burst: a series Prometheus first sees
    # after the burst would show it no increase.
    assert all(get(port, path, "k") == 200 for port in stack["apps"].values() for path in ["/hello", "/items/0"])
    q = 'count by (job, route) (floodwall_decisions_total{route=~"/hello|/items/.*",outcome="allowed"} > 0)'
    wait_until(lambda: len(api(prom, "/api/v1/query", query=q)["data"]["result"]) == 4, 30,
               "the first requests scraped")
    # Both apps: a burst over the bucket (refused), on two route families.
    statuses = [get(port, path, "k") for port in stack["apps"].values() for path in ["/hello", "/items/1"] * 10]
    assert statuses.count(429) >= 10 and set(statuses) <= {200, 429}, statuses
    # Scraped after the traffic: rate() over the refusals needs two samples of them in every app.
    q = 'count by (job) (rate(floodwall_decisions_total{outcome="rejected"}[30s]) > 0)'
    wait_until(lambda: len(api(prom, "/api/v1/query", query=q)["data"]["result"]) == 2, 30,
               "refusals scraped from both apps")
    return stack


def test_the_alert_rules_load_and_evaluate_with_no_error(scraped):
    def evaluated():
        groups = api(scraped["prom"], "/api/v1/rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        return rules if rules and all(r.get("lastEvaluation", "").startswith("20") and r["health"] != "unknown"
                                      for r in rules) else None

    rules = wait_until(evaluated, 30, "every rule evaluated")
    assert sorted(r["name"] for r in rules) == sorted(name.split()[1] for name, _ in alert_expressions())
    bad = [(r["name"], r["health"], r.get("lastError")) for r in rules if r["health"] != "ok" or r.get("lastError")]
    assert not bad, bad
    assert b"error loading rules" not in scraped["log"].read_bytes().lower()


def test_every_dashboard_query_and_alert_expression_is_valid_and_most_return_data(scraped):
    queries: List[Tuple[str, str]] = [(w, grafana_to_promql(e)) for w, e in dashboard_expressions()]
    queries += [(w, variable_to_promql(q)) for w, q in dashboard_variables()]
    queries += [(w, e) for w, e in alert_expressions()]
    empty, with_data = [], set()
    for where, q in queries:
        r = api(scraped["prom"], "/api/v1/query", query=q)
        assert r["status"] == "success", f"{where}: {r.get('error')}\n{q}"
        if r["data"]["result"]:
            with_data.add(where)
        else:
            empty.append(where)
    print("\nqueries with no data:", sorted(set(empty)))
    missing = [t for t in MUST_HAVE_DATA if f"panel {t!r}" not in with_data]
    assert not missing, f"panels with no data: {missing}"
    assert {"variable job", "variable instance", "variable route"} <= with_data
    assert "alert FloodwallTenantRefused" in with_data, "the refused tenant's alert condition holds"
    assert len(empty) <= len(queries) // 3, f"{len(empty)} of {len(queries)} queries returned nothing: {empty}"


def test_the_template_variables_list_both_jobs_and_both_route_families(scraped):
    prom = scraped["prom"]
    jobs = {s["job"] for s in api(prom, "/api/v1/series", **{"match[]": "floodwall_decisions_total"})["data"]}
    assert jobs == {"starlette", "flask"}
    routes = {s["route"] for s in api(prom, "/api/v1/series", **{"match[]": "floodwall_decisions_total"})["data"]}
    # Starlette's "/items/{item}" and Flask's "/items/<item>" are one route family, as the core spells it.
    assert {"/hello", "/items/:item"} <= routes
