"""The ``floodwall`` console script the wheel installs: the C library's command (fw_cli_run) run from
Python, against a real redis-server, each change seen by a Python client in another process (this test)
at its next request, a mode at its next flags poll; --json read back; bad input and an unreachable store
said with their exit statuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import floodwall
from conftest import eventually, free_port
from test_redis import redis_policy

# The script pip put beside this interpreter (the venv's bin/): what `floodwall` on a user's PATH runs.
SCRIPT = Path(sys.executable).parent / "floodwall"


def run(*args: str, store: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "FLOODWALL_STORE"}
    if store is not None:
        env["FLOODWALL_STORE"] = store
    return subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)


def test_the_console_script_is_installed_and_says_its_help():
    assert SCRIPT.exists(), f"pip did not install the floodwall console script at {SCRIPT}"
    h = run("--help")
    assert h.returncode == 0, h.stderr
    assert h.stdout.startswith("Usage: floodwall [OPTIONS] COMMAND [ARGS]\n")
    assert "Exit status: 0" in h.stdout and "override set TENANT" in h.stdout
    v = run("--version")
    assert v.stdout == f"floodwall {floodwall.__version__}\n"
    # The module runs the same code in process.
    p = subprocess.run([sys.executable, "-m", "floodwall.cli", "block", "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("Usage: floodwall block TENANT")


def test_changes_reach_a_python_client_in_another_process(redis_server):
    policy = redis_policy(redis_server, request_rate={"rate": 0.001, "burst": 2}, tiers={"pro": {"rate": 1, "burst": 9}})
    policy["redis"]["flags_poll_ms"] = 1000
    store, prefix = policy["store"], policy["prefix"]
    fw = floodwall.Floodwall(policy)
    try:
        assert fw.admit("py-acme").status == 200
        r = run("--prefix", prefix, "block", "py-acme", "--for", "10m", "--json", store=store)
        assert r.returncode == 0, r.stderr
        shown = json.loads(r.stdout)
        assert shown["tenant"] == "py-acme" and shown["blocked"] is True and shown["blocked_until"]
        d = fw.admit("py-acme")
        assert d.status == 403 and d.blocked
        assert abs(d.blocked_until - (time.time() + 600)) < 10
        assert run("--prefix", prefix, "unblock", "py-acme", store=store).returncode == 0
        assert fw.admit("py-acme").status == 200

        r = run("--prefix", prefix, "override", "set", "py-acme", "--rate", "1", "--burst", "7", store=store)
        assert r.returncode == 0 and r.stdout == "py-acme: now rate 1/s, burst 7, from its next request\n", r
        assert fw.admit("py-acme").limit == 7

        policy_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"fw-cli-{prefix}.json"
        policy_file.write_text(json.dumps(policy))
        try:
            r = run("--policy", str(policy_file), "override", "set", "py-acme", "--tier", "pro")
            assert r.returncode == 0, r.stderr
            r = run("--policy", str(policy_file), "override", "list", "--json")
            assert [(e["tenant"], e["tier"]) for e in json.loads(r.stdout)] == [("py-acme", "pro")]
            r = run("--policy", str(policy_file), "status", "--json")
            status = json.loads(r.stdout)
            assert status["controlled"] == 1 and status["overrides"][0]["tenant"] == "py-acme"
            assert status["store"] == store and status["prefix"] == prefix
        finally:
            policy_file.unlink()

        # A mode: this client takes it at its next flags poll.
        for _ in range(3):
            fw.admit("py-moded")
        assert fw.admit("py-moded").status == 429
        assert run("--prefix", prefix, "mode", "request_rate", "off", store=store).returncode == 0

        def unlimited() -> bool:
            d = fw.admit("py-moded")
            return d.allowed and d.limiter is None

        eventually(unlimited, timeout=5, what="the fleet-wide mode off")
        assert run("--prefix", prefix, "mode", "request_rate", "default", store=store).returncode == 0
        eventually(lambda: fw.admit("py-moded").status == 429, timeout=5, what="the mode back to the policy's")
    finally:
        fw.close()


def test_bad_input_and_an_unreachable_store(redis_server):
    r = run("override", "set", "t", "--rate", "-1", "--burst", "3", store=redis_server.url)
    assert r.returncode == 2 and "--rate: must be a positive number" in r.stderr and r.stdout == ""
    r = run("mode", "everything", "off", store=redis_server.url)
    assert r.returncode == 2 and 'LIMITER: unknown limiter "everything"' in r.stderr
    r = run("block", "t", "--for", "a while", store=redis_server.url)
    assert r.returncode == 2 and '--for: "a while" is not a duration' in r.stderr
    port = free_port()
    r = run("status", store=f"redis://admin:s3cret@127.0.0.1:{port}")
    assert r.returncode == 1
    assert f"cannot reach redis://admin:***@127.0.0.1:{port} (connection refused)" in r.stderr
    assert "s3cret" not in r.stderr + r.stdout
    r = run("status")
    assert r.returncode == 2 and "FLOODWALL_STORE" in r.stderr
