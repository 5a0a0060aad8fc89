"""The middlewares' max_wait option (#57 part 2) over real HTTP: a request the bucket would refuse is delayed
to its turn instead of a 429 when that turn is within max_wait, on memory:// and a real redis-server; off by
default; beyond max_wait still a 429; a bad value named."""

from __future__ import annotations

import concurrent.futures
import time

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from conftest import serve_asgi, serve_wsgi
from floodwall.asgi import FloodwallMiddleware as AsgiMiddleware
from floodwall.wsgi import FloodwallMiddleware as WsgiMiddleware


def asgi_app(client, **options):
    async def hello(request):
        return PlainTextResponse("hello")

    app = Starlette(routes=[Route("/hello", hello)])
    app.add_middleware(AsgiMiddleware, client=client, key="acme", **options)
    return app


def wsgi_app(client, **options):
    def hello(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"hello"]

    return WsgiMiddleware(hello, client, key="acme", **options)


SERVERS = {"asgi": (asgi_app, serve_asgi), "wsgi": (wsgi_app, serve_wsgi)}


@pytest.fixture(params=sorted(SERVERS))
def serve(request):
    build, serve_with = SERVERS[request.param]
    servers = []

    def start(client, **options):
        server = serve_with(build(client, **options))
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()


def test_without_max_wait_the_request_is_refused_at_once(make_client, serve):
    server = serve(make_client({"request_rate": {"rate": 5, "burst": 1}}))
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/hello").status_code == 200
        assert http.get("/hello").status_code == 429


def test_with_max_wait_the_request_waits_for_its_turn(make_client, serve):
    server = serve(make_client({"request_rate": {"rate": 5, "burst": 1}}), max_wait=1.0)
    with httpx.Client(base_url=server.url, timeout=10) as http:
        assert http.get("/hello").status_code == 200
        started = time.monotonic()
        r = http.get("/hello")
        took = time.monotonic() - started
        assert r.status_code == 200 and r.text == "hello"
        assert r.headers["ratelimit-limit"] == "1"
        assert took >= 0.15, "it waited for its token (200 ms at 5/s, less the time since the first)"


def test_beyond_max_wait_it_is_still_a_429(make_client, serve):
    server = serve(make_client({"request_rate": {"rate": 1, "burst": 1}}), max_wait=0.2)
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/hello").status_code == 200
        r = http.get("/hello")  # its turn is a second away
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1


def test_concurrent_requests_are_all_served_within_the_bound(make_client, serve):
    rate, burst = 20.0, 10  # max_wait caps at burst / rate: 0.5 s
    server = serve(make_client({"request_rate": {"rate": rate, "burst": burst}}), max_wait=2.0)

    def get(_):
        with httpx.Client(base_url=server.url, timeout=10) as http:
            r = http.get("/hello")
            return r.status_code, time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(get, range(16)))
    assert [status for status, _ in results] == [200] * 16, "nothing refused within max_wait"
    times = sorted(at for _, at in results)
    assert times[-1] - times[0] >= (16 - burst) / rate * 0.8, "the last six waited a token apart"


def test_a_bad_max_wait_is_refused_naming_it(make_client):
    client = make_client({"request_rate": {"rate": 5, "burst": 1}})
    for build in (asgi_app, wsgi_app):
        for bad in (-1, float("nan"), float("inf")):
            with pytest.raises(ValueError, match="max_wait"):
                app = build(client, max_wait=bad)
                if hasattr(app, "build_middleware_stack"):
                    app.build_middleware_stack()
        for bad in ("1", True):
            with pytest.raises(TypeError, match="max_wait"):
                app = build(client, max_wait=bad)
                if hasattr(app, "build_middleware_stack"):
                    app.build_middleware_stack()
