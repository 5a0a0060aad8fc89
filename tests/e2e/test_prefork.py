"""Preforking servers over HTTP: each forks (or spawns) workers that must share one tenant's bucket.
gunicorn --preload (sync workers) on Redis, gunicorn without preload on shm://, uvicorn --workers on
shm://, Puma's cluster mode (preload_app) on Redis and on shm://, Node's cluster module on shm://. In each,
the workers together admit at most burst + rate x elapsed + 1, and more than one worker answered
(each answer, 429s included, names its worker in X-Worker-Pid)."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from test_polyglot_fleet import Redis, free_port, wait_http

HERE = os.path.dirname(os.path.abspath(__file__))
APPS = os.path.join(HERE, "prefork")
RATE, BURST = 2, 10
PY = os.environ.get("FW_E2E_PYTHON", sys.executable)


@pytest.fixture(scope="module")
def redis():
    r = Redis()
    yield r
    r.stop()


@pytest.fixture
def shm_url():
    """shm://NAME for one test; its segment is removed before and after."""
    made = []

    def url(what: str) -> str:
        path = f"/dev/shm/floodwall.fwe2e-{what}-{os.getpid()}"
        made.append(path)
        if os.path.exists(path):
            os.unlink(path)
        return f"shm://fwe2e-{what}-{os.getpid()}"

    yield url
    for path in made:
        if os.path.exists(path):
            os.unlink(path)


def serve(cmd: list[str], store: str, tmp_path, port: int, policy=None, env=None) -> subprocess.Popen:
    """Starts the server in prefork/ with FW_POLICY naming `policy` (a file), else this module's limits on
    `store`, and `env`'s variables besides."""
    if policy is None:
        policy = tmp_path / "policy.json"
        policy.write_text(json.dumps({"store": store, "request_rate": {"rate": RATE, "burst": BURST}}))
    env = dict(os.environ, **(env or {}), FW_POLICY=str(policy))
    proc = subprocess.Popen(cmd, cwd=APPS, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    wait_http(f"http://127.0.0.1:{port}/work", proc, cmd[0])
    return proc


def stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def hammer(port: int, n: int = 60) -> tuple[int, int, set, float]:
    """n requests of one tenant, 6 at a time, each on a new connection so that the workers share them."""
    def one(_):
        r = httpx.get(f"http://127.0.0.1:{port}/work", headers={"X-API-Key": "acme", "Connection": "close"},
                      timeout=10)
        pid = r.headers.get("x-worker-pid")
        if r.status_code == 200:
            assert r.json()["pid"] == int(pid), "X-Worker-Pid names the worker that answered"
        return r.status_code, pid
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(one, range(n)))
    elapsed = time.monotonic() - t0
    allowed = sum(1 for status, _ in results if status == 200)
    rejected = sum(1 for status, _ in results if status == 429)
    return allowed, rejected, {pid for _, pid in results if pid}, elapsed


def check(port: int, what: str) -> None:
    allowed, rejected, pids, elapsed = hammer(port)
    bound = BURST + RATE * elapsed + 1
    print(f"{what}: {allowed} allowed, {rejected} rejected by {len(pids)} workers in {elapsed:.2f}s (bound {bound:.1f})")
    assert allowed <= bound, f"{what}: the workers admitted {allowed}, more than burst + rate x elapsed"
    assert allowed >= BURST, f"{what}: only {allowed} admitted: the burst was not reachable"
    assert allowed + rejected == 60
    assert len(pids) >= 2, f"{what}: one worker served everything ({pids}): the test proves nothing"


def test_gunicorn_preload_sync_workers_on_redis(redis, tmp_path):
    port = free_port()
    proc = serve([PY, "-m", "gunicorn", "--preload", "-w", "2", "-b", f"127.0.0.1:{port}", "wsgi_app:app"],
                 f"redis://127.0.0.1:{redis.port}/0", tmp_path, port)
    try:
        redis.cli("FLUSHALL")
        check(port, "gunicorn --preload -w 2, redis")
        assert redis.cli("EXISTS", "floodwall:{acme}:rate") == "1", "the forked workers decided on Redis"
    finally:
        stop(proc)


def test_gunicorn_workers_on_shm(tmp_path, shm_url):
    port = free_port()
    proc = serve([PY, "-m", "gunicorn", "-w", "4", "-b", f"127.0.0.1:{port}", "wsgi_app:app"], shm_url("gunicorn"),
                 tmp_path, port)
    try:
        check(port, "gunicorn -w 4, shm")
    finally:
        stop(proc)


def test_uvicorn_workers_on_shm(tmp_path, shm_url):
    port = free_port()
    proc = serve([PY, "-m", "uvicorn", "--workers", "2", "--port", str(port), "--log-level", "warning",
                  "asgi_app:app"], shm_url("uvicorn"), tmp_path, port)
    try:
        check(port, "uvicorn --workers 2, shm")
    finally:
        stop(proc)


@pytest.mark.parametrize("store", ["redis", "shm"])
def test_puma_cluster_mode_with_preload(redis, tmp_path, store, shm_url):
    port = free_port()
    url = f"redis://127.0.0.1:{redis.port}/0" if store == "redis" else shm_url("puma")
    if store == "redis":
        redis.cli("FLUSHALL")
    proc = serve(["puma", "-w", "2", "--preload", "-t", "4:4", "-b", f"tcp://127.0.0.1:{port}", "config.ru"], url,
                 tmp_path, port)
    try:
        check(port, f"puma -w 2 --preload, {store}")
        if store == "redis":
            assert redis.cli("EXISTS", "floodwall:{acme}:rate") == "1", "the forked workers decided on Redis"
    finally:
        stop(proc)


def test_node_cluster_on_shm(tmp_path, shm_url):
    port = free_port()
    proc = serve(["node", "cluster.js", str(port)], shm_url("node"), tmp_path, port)
    try:
        check(port, "node cluster, 2 workers, shm")
    finally:
        stop(proc)
