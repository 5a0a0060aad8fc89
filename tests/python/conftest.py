"""Shared fixtures: a real redis-server on a free port, real HTTP servers in threads, policies per store.

Nothing here skips: a missing redis-server fails the Redis tests."""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterator

import pytest

import floodwall


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


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on port {port} after {timeout}s")


class RedisServer:
    """A throwaway redis-server; DEBUG is enabled for local clients so tests can stall it (DEBUG SLEEP)."""

    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not installed (packaging/install-deps.sh installs it)")
        self.port = free_port()
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--enable-debug-command", "local"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                if self.command("PING") == "+PONG":
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer PING")
            time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self, *args: str, timeout: float = 5.0) -> str:
        """One command over a raw socket; returns the first line of the reply (enough for these tests)."""
        payload = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(payload.encode())
            data = b""
            while not data.endswith(b"\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        return data.decode(errors="replace").split("\r\n")[0]

    def stall(self, seconds: float) -> threading.Thread:
        """Makes the server unresponsive for `seconds` (DEBUG SLEEP), from a background thread."""
        t = threading.Thread(target=self.command, args=("DEBUG", "SLEEP", str(seconds)), kwargs={"timeout": seconds + 5})
        t.start()
        time.sleep(0.05)  # let the server start sleeping before the caller measures anything
        return t

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


@pytest.fixture(params=["memory", "redis"])
def store(request: Any) -> Dict[str, Any]:
    """The policy keys that select a store; each Redis test gets its own key prefix."""
    if request.param == "memory":
        return {"store": "memory://"}
    server = request.getfixturevalue("redis_server")
    return {
        "store": server.url,
        "prefix": "t" + uuid.uuid4().hex[:12],
        "redis": {"deadline_ms": 2000, "connect_timeout_ms": 2000},
    }


@pytest.fixture
def make_client(store: Dict[str, Any]) -> Iterator[Callable[..., floodwall.Floodwall]]:
    """Floodwall(policy) on the parametrised store; closes what it made."""
    made = []

    def make(policy: Dict[str, Any]) -> floodwall.Floodwall:
        fw = floodwall.Floodwall({**store, **policy})
        made.append(fw)
        return fw

    yield make
    for fw in made:
        fw.close()


# ------------------------------------------------------------------------------------------- servers


class ThreadedServer:
    def __init__(self, port: int, stop: Callable[[], None], thread: threading.Thread) -> None:
        self.port, self._stop, self._thread = port, stop, thread

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._stop()
        self._thread.join(timeout=10)


def serve_asgi(app: Any) -> ThreadedServer:
    """uvicorn serving `app` on a free port, in a thread of this process."""
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)

    def stop() -> None:
        server.should_exit = True

    return ThreadedServer(port, stop, thread)


def serve_wsgi(app: Any) -> ThreadedServer:
    """wsgiref (the standard library's WSGI server), one thread per request, on a free port."""
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    httpd = make_server("127.0.0.1", 0, app, server_class=Server, handler_class=QuietHandler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()

    def stop() -> None:
        httpd.shutdown()
        httpd.server_close()

    return ThreadedServer(httpd.server_address[1], stop, thread)


def eventually(check: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Polls `check` until it holds; fails after `timeout` seconds (a bound, not a measured time)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout}s")
        time.sleep(0.02)



def admitted_soon(fw: floodwall.Floodwall, tenant: str, timeout: float = 5.0, **kw: Any) -> floodwall.Decision:
    """The first allowed decision for `tenant`, polling: on Redis, fw_release is queued without waiting
    for its reply and the core spreads calls over its connections round-robin, so an admit right after
    a release can reach Redis first (reported to the core's owner). Rejected polls hold nothing."""
    deadline = time.monotonic() + timeout
    while True:
        d = fw.admit(tenant, **kw)
        if d.allowed:
            return d
        if time.monotonic() > deadline:
            raise AssertionError(f"{tenant!r} was still rejected {timeout}s after its slot was released: {d!r}")
        time.sleep(0.005)


class CountingClient:
    """Floodwall, with a record of every ticket admitted and every release() the middleware makes, so a
    test can check "released exactly once" on each path. Decisions still come from the real core."""

    def __init__(self, fw: floodwall.Floodwall) -> None:
        self.fw = fw
        self.admitted: list = []
        self.released: list = []

    def _wrap(self, d: floodwall.Decision) -> "CountingDecision":
        self.admitted.append(d.ticket)
        return CountingDecision(d, self.released)

    def admit(self, *args: Any, **kw: Any) -> "CountingDecision":
        return self._wrap(self.fw.admit(*args, **kw))

    async def admit_async(self, *args: Any, **kw: Any) -> "CountingDecision":
        return self._wrap(await self.fw.admit_async(*args, **kw))

    def request_credential(self, **kw: Any) -> Any:
        return self.fw.request_credential(**kw)

    @property
    def deadline_ms(self) -> int:
        return self.fw.deadline_ms

    def balanced(self) -> bool:
        return sorted(self.admitted) == sorted(self.released)


class CountingDecision:
    def __init__(self, d: floodwall.Decision, released: list) -> None:
        self._d, self._released = d, released

    def __getattr__(self, name: str) -> Any:
        return getattr(self._d, name)

    def release(self) -> None:
        self._released.append(self._d.ticket)
        self._d.release()
