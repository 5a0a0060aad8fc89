"""The ACL rule the docs print (docs/redis/production.md, "The ACL rule") is enough for everything floodwall
sends: a Redis user made with exactly that rule, read from the page (so the two cannot drift), runs
admits, releases, token and slot leases, fleet reports, the admin API and `floodwall status`, on a single
node, a Redis Cluster (3 masters) and behind Sentinel (a master, a replica, a sentinel with the page's
sentinel rule). Every node's
`ACL LOG` stays empty (Redis logs each command it refused a user), and no decision is the fallback's.

A control: the same rule without `+evalsha` makes every admit the fallback's with reason config and fills
the ACL LOG, so the user the client runs as is the documented one, not Redis' open default user.

Real redis-server processes (Debian's, as every suite); a missing redis-server or redis-cli fails."""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional

import pytest

import floodwall
from conftest import eventually, free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs/redis/production.md"
SCRIPT = pathlib.Path(sys.executable).parent / "floodwall"  # the console script pip put beside this python
USER, PASSWORD = "floodwall", "acl-" + uuid.uuid4().hex[:16]


def documented_rule(marker: str = "acl-rule") -> List[str]:
    """A documented rule as Redis arguments: the one `ACL SETUSER` line of the block after the page's
    marker (acl-rule: the data nodes'; acl-rule-sentinel: the sentinels'), with its password placeholder
    replaced (nothing else changed)."""
    text = DOC.read_text()
    at = text.index(f"<!-- {marker}:")
    block = text[at:].split("```text\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ACL SETUSER floodwall "), lines
    args = shlex.split(lines[0])
    assert args.count(">CHANGE-ME") == 1, "the documented rule should carry the password placeholder >CHANGE-ME"
    return [f">{PASSWORD}" if a == ">CHANGE-ME" else a for a in args]


# --- raw RESP, as an operator's redis-cli (the default user) --------------------------------------------


def _read_reply(f: Any) -> Any:
    line = f.readline()
    if not line:
        raise ConnectionError("redis closed the connection")
    kind, rest = line[:1], line[1:-2].decode(errors="replace")
    if kind == b"+":
        return rest
    if kind == b"-":
        return RuntimeError(rest)
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode(errors="replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise ValueError(f"unexpected reply {line!r}")


def command(port: int, *args: str, timeout: float = 5.0) -> Any:
    payload = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload.encode())
        reply = _read_reply(s.makefile("rb"))
    if isinstance(reply, RuntimeError):
        raise reply
    return reply


class Node:
    """One throwaway redis-server (or sentinel) in a directory of its own."""

    def __init__(self, workdir: pathlib.Path, args: List[str], sentinel_conf: Optional[str] = None) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not installed (packaging/install-deps.sh installs it)")
        self.port = free_port()
        self.dir = workdir / str(self.port)
        self.dir.mkdir(parents=True)
        if sentinel_conf is not None:
            conf = self.dir / "sentinel.conf"
            conf.write_text(f"port {self.port}\nbind 127.0.0.1\ndir {self.dir}\n" + sentinel_conf)
            argv = [exe, str(conf), "--sentinel"]
        else:
            argv = [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                    "--dir", str(self.dir), *args]
        self.log = open(self.dir / "log", "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while True:
            try:
                if command(self.port, "PING") == "PONG":
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server {argv} did not answer PING: {(self.dir / 'log').read_text()}")
            time.sleep(0.02)

    def command(self, *args: str) -> Any:
        return command(self.port, *args)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Topology:
    """A deployment: its data nodes (each gets the documented user), its sentinels, and the store URL a
    client of that user takes."""

    def __init__(self) -> None:
        self.workdir = pathlib.Path(tempfile.mkdtemp(prefix="floodwall-acl-"))
        self.data: List[Node] = []
        self.sentinels: List[Node] = []
        self.url = ""

    def add_user(self, rule: List[str], sentinel_rule: Optional[List[str]] = None) -> None:
        for node in self.data:
            assert node.command(*rule) == "OK"
        for node in self.sentinels:
            assert node.command(*(sentinel_rule or documented_rule("acl-rule-sentinel"))) == "OK"
        for node in self.data + self.sentinels:
            assert node.command("ACL", "LOG", "RESET") == "OK"

    def acl_log(self) -> Dict[int, Any]:
        return {node.port: node.command("ACL", "LOG") for node in self.data + self.sentinels}

    def stop(self) -> None:
        for node in self.sentinels + self.data:
            node.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def single(t: Topology) -> None:
    t.data.append(Node(t.workdir, []))
    t.url = f"redis://{USER}:{PASSWORD}@127.0.0.1:{t.data[0].port}/0"


def cluster(t: Topology) -> None:
    if shutil.which("redis-cli") is None:
        raise RuntimeError("redis-cli is not installed (packaging/install-deps.sh installs it)")
    for _ in range(3):
        t.data.append(Node(t.workdir, ["--cluster-enabled", "yes", "--cluster-port", str(free_port()),
                                       "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000"]))
    p = subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in t.data],
                        "--cluster-replicas", "0", "--cluster-yes"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr

    def settled() -> bool:
        return all("cluster_state:ok" in n.command("CLUSTER", "INFO") for n in t.data) and all(
            len(n.command("CLUSTER", "SLOTS")) == 3 for n in t.data)

    eventually(settled, timeout=30, what="the cluster's state ok on every node")
    t.url = f"redis+cluster://{USER}:{PASSWORD}@" + ",".join(f"127.0.0.1:{n.port}" for n in t.data)


def sentinel(t: Topology) -> None:
    master = Node(t.workdir, [])
    replica = Node(t.workdir, ["--replicaof", "127.0.0.1", str(master.port)])
    t.data += [master, replica]
    eventually(lambda: "master_link_status:up" in replica.command("INFO", "replication"), timeout=30,
               what="the replica's link to its master")
    s = Node(t.workdir, [], sentinel_conf=(f"sentinel monitor acl 127.0.0.1 {master.port} 1\n"
                                           "sentinel down-after-milliseconds acl 1000\n"))
    t.sentinels.append(s)
    eventually(lambda: s.command("SENTINEL", "get-master-addr-by-name", "acl") == ["127.0.0.1", str(master.port)],
               timeout=30, what="the sentinel naming the master")
    t.url = f"redis+sentinel://{USER}:{PASSWORD}@127.0.0.1:{s.port}/acl/0"


def started(build: Any) -> Topology:
    """build(t) on a new Topology; whatever it started is stopped if it fails half-way."""
    t = Topology()
    try:
        build(t)
    except BaseException:
        t.stop()
        raise
    return t


TOPOLOGIES = {"single": single, "cluster": cluster, "sentinel": sentinel}


@pytest.fixture(params=list(TOPOLOGIES))
def deployment(request: Any) -> Iterator[Topology]:
    t = started(TOPOLOGIES[request.param])
    try:
        t.add_user(documented_rule())
        yield t
    finally:
        t.stop()


# --- what a fleet does through the user -----------------------------------------------------------------

REDIS = {"deadline_ms": 2000, "connect_timeout_ms": 2000}


def store_decided(d: floodwall.Decision) -> floodwall.Decision:
    assert not d.degraded and not d.failed_open and d.fail_reason is None, (d.status, d.fail_reason)
    return d


def no_store_failures(fw: floodwall.Floodwall) -> None:
    m = fw.metrics()
    failures = {(lim, why): n for lim, reasons in m["store_failures"].items() for why, n in reasons.items() if n}
    assert failures == {}, failures
    assert m["config_errors"] == 0, m["config_errors"]


def run_cli(t: Topology, *args: str) -> subprocess.CompletedProcess:
    assert SCRIPT.exists(), f"pip did not install the floodwall console script at {SCRIPT}"
    env = {k: v for k, v in os.environ.items() if k != "FLOODWALL_STORE"}
    return subprocess.run([str(SCRIPT), "--store", t.url, *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_the_documented_rule_runs_everything_floodwall_sends(deployment: Topology):
    t = deployment
    policy = {
        "store": t.url, "redis": REDIS,
        "request_rate": {"rate": 5, "burst": 10,
                         "limits": [{"name": "search", "routes": ["/search*"], "rate": 5, "burst": 10}]},
        "quotas": [{"name": "monthly", "limit": 100000, "period": "month"}],
        "tiers": {"pro": {"rate": 100, "burst": 200}},
        "concurrency": {"limit": 3},
        "fleet": {"capacity": 100},
    }
    with floodwall.Floodwall(policy) as fw:
        # Admits (the bucket, a limit, a quota, a concurrency slot, a fleet slot, the control record read).
        held = [store_decided(fw.admit("acme", route="/search/a", path="/search/a")) for _ in range(3)]
        assert [d.status for d in held] == [200, 200, 200]
        refused = store_decided(fw.admit("acme", route="/search/a", path="/search/a"))
        assert refused.status == 429 and refused.limiter == "concurrency"
        # Releases: the slots come back (a release is a ZREM on the I/O thread, not waited for).
        for d in held:
            d.release()
        eventually(lambda: fw.admin.show("acme")["concurrency"]["in_flight"] == 0, timeout=10,
                   what="the released slots leaving the tenant's set")
        again = store_decided(fw.admit("acme", route="/search/a", path="/search/a"))
        assert again.allowed
        again.release()
        if "cluster" not in t.url:
            # A blocking acquire waiting for a slot: it subscribes to the tenant's channel, and the release
            # publishes on it (a cluster's store signals none: there a full limit refuses at once).
            held = [store_decided(fw.admit("acme", route="/search/a", path="/search/a")) for _ in range(3)]
            waited: List[Any] = []
            waiter = threading.Thread(
                target=lambda: waited.append(fw.acquire("acme", route="/search/a", max_wait=20.0)))
            waiter.start()
            time.sleep(0.2)
            held[0].release()
            waiter.join(30)
            assert waited and waited[0].allowed, "the waiting acquire took the released slot"
            for d in held[1:] + waited:
                d.release()

        # The admin API, each change seen by the next admit.
        admin = fw.admin
        admin.set_override("acme", rate=1, burst=2)
        assert admin.show("acme")["override"] == {"rate": 1.0, "burst": 2}
        admin.set_tier("acme", "pro")
        admin.block("acme", seconds=600)
        blocked = store_decided(fw.admit("acme"))
        assert blocked.status == 403
        shown = admin.show("acme")
        assert shown["blocked"] and shown["tier"] == "pro"
        assert [r["tenant"] for r in admin.list()] == ["acme"]
        admin.unblock("acme")
        admin.remove_override("acme")
        admin.set_tier("acme", None)
        admin.reset("acme")
        assert admin.show("acme")["quotas"][0]["remaining"] == 100000
        admin.set_mode("fleet", "dark")
        admin.set_mode("fleet", None)
        store_decided(fw.admit("acme")).release()
        no_store_failures(fw)

    # Leases: a hot tenant's tokens and slots, fleet reports (a policy without limits or quotas, which a
    # lease never decides).
    leasing = {"store": t.url, "redis": REDIS,
               "request_rate": {"rate": 100000, "burst": 100000, "lease": {"max_tokens": 50, "ttl_ms": 100}},
               "concurrency": {"limit": 100, "lease": {"max_slots": 5, "ttl_ms": 100}},
               "fleet": {"capacity": 1000}}
    with floodwall.Floodwall(leasing) as fw:
        def leased() -> bool:
            for _ in range(200):
                store_decided(fw.admit("hot")).release()
            lease = fw.metrics()["leases"]
            return lease["lease_calls"] > 0 and lease["decisions_in_process"] > 0 and lease["slots_leased"] > 0
        eventually(leased, timeout=30, what="a hot tenant decided from its leases")
        eventually(lambda: fw.metrics()["leases"]["fleet_reports"] > 0, timeout=10, what="a fleet report")
        no_store_failures(fw)

    # floodwall status, and a change through the command.
    r = run_cli(t, "status", "--json")
    assert r.returncode == 0, r.stderr
    status = json.loads(r.stdout)
    assert status, r.stdout
    r = run_cli(t, "block", "cli-tenant", "--for", "1m")
    assert r.returncode == 0, r.stderr
    r = run_cli(t, "unblock", "cli-tenant")
    assert r.returncode == 0, r.stderr
    r = run_cli(t, "status")
    assert r.returncode == 0 and "redis " in r.stdout, r.stdout + r.stderr

    # Redis refused the user nothing, on any node.
    assert t.acl_log() == {node.port: [] for node in t.data + t.sentinels}


def test_a_rule_without_evalsha_is_refused_and_said_so():
    """The control: the documented rule less one command is visibly not enough, so the test above runs as
    the documented user and not as Redis' open default one."""
    t = started(single)
    try:
        rule = [a for a in documented_rule() if a != "+evalsha"]
        assert len(rule) == len(documented_rule()) - 1
        t.add_user(rule)
        with floodwall.Floodwall({"store": t.url, "redis": REDIS, "request_rate": {"rate": 5, "burst": 10}}) as fw:
            d = fw.admit("acme")
            assert d.degraded and d.fail_reason == "config", (d.status, d.fail_reason)
        log = t.acl_log()[t.data[0].port]
        assert log and any("evalsha" in json.dumps(entry).lower() for entry in log), log
    finally:
        t.stop()
