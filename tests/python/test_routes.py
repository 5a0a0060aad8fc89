"""Route rules with the middleware mounted app-wide and no ``route`` option (issue #56): the ASGI and WSGI
middlewares hand the core the matched route's pattern where the framework knows it before the handler
(Starlette/FastAPI routes, Flask's url_map) and the request's path always, so a policy's globs apply to
every app shape, over real HTTP, on memory:// and on Redis."""

from __future__ import annotations

import threading
from typing import Any, Dict

import httpx
import pytest

import floodwall
from floodwall.asgi import FloodwallMiddleware as ASGIMiddleware
from floodwall.wsgi import FloodwallMiddleware as WSGIMiddleware

from conftest import serve_asgi, serve_wsgi

ORDERS = {"name": "orders", "routes": ["/orders", "/orders/*"], "rate": 0.001, "burst": 2}
POLICY: Dict[str, Any] = {"request_rate": {"rate": 100, "burst": 100, "limits": [ORDERS]}}


def starlette_app(with_order_route: bool) -> Any:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def ok(request):
        return PlainTextResponse("ok")

    routes = [Route("/hello", ok)] + ([Route("/orders/{id}", ok)] if with_order_route else [])
    return Starlette(routes=routes)


def fastapi_app() -> Any:
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/orders/{order_id}")
    async def order(order_id: int):
        return {"id": order_id}

    @app.get("/hello")
    async def hello():
        return {"hello": "world"}

    return app


def flask_app() -> Any:
    from flask import Flask

    app = Flask(__name__)

    @app.get("/orders/<int:order_id>")
    def order(order_id):
        return {"id": order_id}

    @app.get("/hello")
    def hello():
        return {"hello": "world"}

    return app


async def plain_asgi(scope, receive, send):
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


def plain_wsgi(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


def mounted(shape: str, fw: floodwall.Floodwall):
    """A server of the app shape with the middleware mounted app-wide and no route option."""
    if shape == "starlette":
        app = starlette_app(with_order_route=True)
        app.add_middleware(ASGIMiddleware, client=fw)
        return serve_asgi(app)
    if shape == "starlette, no route for the path":
        app = starlette_app(with_order_route=False)
        app.add_middleware(ASGIMiddleware, client=fw)
        return serve_asgi(app)
    if shape == "fastapi":
        app = fastapi_app()
        app.add_middleware(ASGIMiddleware, client=fw)
        return serve_asgi(app)
    if shape == "plain asgi":
        return serve_asgi(ASGIMiddleware(plain_asgi, fw))
    if shape == "flask":
        app = flask_app()
        app.wsgi_app = WSGIMiddleware(app.wsgi_app, fw)
        return serve_wsgi(app)
    if shape == "plain wsgi":
        return serve_wsgi(WSGIMiddleware(plain_wsgi, fw))
    raise AssertionError(shape)


SHAPES = ["starlette", "starlette, no route for the path", "fastapi", "plain asgi", "flask", "plain wsgi"]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_glob_limit_limits_a_path_under_it_mounted_app_wide(make_client, shape):
    fw = make_client(POLICY)
    server = mounted(shape, fw)
    try:
        with httpx.Client(base_url=server.url) as http:
            statuses = [http.get("/orders/42").status_code for _ in range(3)]
            refused = http.get("/orders/42")
            other = http.get("/hello")
    finally:
        server.stop()
    passed = 404 if "no route" in shape else 200  # no route for the path: the router's 404, let through
    assert statuses == [passed, passed, 429]
    assert refused.status_code == 429
    assert refused.json()["error"]["policy"] == "orders"
    assert refused.headers["ratelimit"].startswith('"orders";')
    assert int(refused.headers["retry-after"]) >= 1
    assert other.status_code == 200  # another route: not the rule's


@pytest.mark.parametrize("shape", SHAPES)
def test_the_metrics_route_families_are_the_globs_or_the_patterns_never_one_per_url(make_client, shape):
    fw = make_client({"request_rate": {"rate": 100, "burst": 100, "limits": [
        {**ORDERS, "rate": 100, "burst": 100}]}})
    server = mounted(shape, fw)
    try:
        with httpx.Client(base_url=server.url) as http:
            for n in range(1, 6):
                assert http.get(f"/orders/{n}").status_code == (404 if "no route" in shape else 200)
    finally:
        server.stop()
    routes = fw.metrics()["routes"]
    assert not any(r.startswith("/orders/") and r[8:].isdigit() for r in routes), routes
    # Where the framework knows the pattern it is the family, canonical; else the policy's glob.
    family = "/orders/:id" if shape in ("starlette", "fastapi", "flask") else "/orders/*"
    if shape in ("fastapi", "flask"):
        family = "/orders/:order_id"
    assert routes[family]["request_rate"]["allowed"] == 5, routes.keys()


@pytest.mark.parametrize("shape", ["starlette, no route for the path", "plain asgi", "plain wsgi", "flask"])
def test_concurrency_routes_glob_is_honoured_mounted_app_wide(make_client, shape):
    # One slot on /slow/*: a request held there makes the next /slow/... a 429, while /hello is not counted.
    fw = make_client({"concurrency": {"limit": 1, "routes": ["/slow/*"]}})
    held = fw.admit("ip:127.0.0.1", path="/slow/held")  # the tenant the middleware derives for 127.0.0.1
    try:
        assert held.allowed
        server = mounted(shape, fw)
        try:
            with httpx.Client(base_url=server.url) as http:
                refused = http.get("/slow/1")
                other = http.get("/hello")
        finally:
            server.stop()
    finally:
        held.release()
    assert refused.status_code == 429 and refused.json()["error"]["limit_type"] == "concurrency"
    assert other.status_code == 200


def test_an_explicit_route_option_still_wins(make_client):
    fw = make_client(POLICY)
    app = flask_app()
    app.wsgi_app = WSGIMiddleware(app.wsgi_app, fw, route="checkout")
    server = serve_wsgi(app)
    try:
        statuses = [httpx.get(server.url + "/orders/42").status_code for _ in range(3)]
    finally:
        server.stop()
    assert statuses == [200, 200, 200]  # "checkout" is not under the orders globs
    assert fw.metrics()["routes"]["checkout"]["request_rate"]["allowed"] == 3


def test_many_concurrent_requests_on_a_glob_never_exceed_its_concurrency(make_client):
    # Starlette app-wide, no pattern for the path: 40 requests at once on /work/..., a cap of 3 in flight.
    import asyncio

    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    state = {"now": 0, "most": 0}
    lock = threading.Lock()

    async def work(request):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        await asyncio.sleep(0.05)
        with lock:
            state["now"] -= 1
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/work/{n}", work)])
    fw = make_client({"concurrency": {"limit": 3, "routes": ["/work/*"]}})
    app.add_middleware(ASGIMiddleware, client=fw)
    server = serve_asgi(app)

    async def main():
        async with httpx.AsyncClient(base_url=server.url, limits=httpx.Limits(max_connections=40)) as http:
            return await asyncio.gather(*(http.get(f"/work/{i}") for i in range(40)))

    try:
        statuses = [r.status_code for r in asyncio.run(main())]
    finally:
        server.stop()
    assert set(statuses) <= {200, 429} and 200 in statuses
    assert state["most"] <= 3
