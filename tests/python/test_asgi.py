"""floodwall.asgi.FloodwallMiddleware in a FastAPI app served by uvicorn over real HTTP, driven by httpx."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from conftest import CountingClient, eventually, serve_asgi
from floodwall.asgi import FloodwallMiddleware


def build_app(client, **options) -> FastAPI:
    app = FastAPI()
    app.add_middleware(FloodwallMiddleware, client=client, **options)
    app.state.entered = threading.Event()

    @app.get("/hello")
    async def hello():
        return {"hello": "world"}

    @app.get("/users/{user_id}")
    async def user(user_id: int):
        return {"user": user_id}

    @app.post("/orders")
    async def order():
        return {"ok": True}

    @app.get("/boom")
    async def boom():
        raise RuntimeError("handler failed")

    @app.get("/wait")
    async def wait(request: Request):
        # A long poll that ends when the client goes away.
        app.state.entered.set()
        while (await request.receive())["type"] != "http.disconnect":
            pass
        return {"gone": True}

    @app.get("/slow")
    async def slow():
        app.state.entered.set()
        await asyncio.sleep(0.5)
        return {"slow": True}

    @app.get("/stream")
    async def stream():
        async def chunks():
            while True:
                yield b"x" * 1024
                await asyncio.sleep(0.01)

        return StreamingResponse(chunks(), media_type="application/octet-stream")

    return app


@pytest.fixture
def serve():
    servers = []

    def start(client, **options):
        app = build_app(client, **options)
        server = serve_asgi(app)
        servers.append(server)
        return server, app

    yield start
    for s in servers:
        s.stop()


def limit_headers(response: httpx.Response):
    return [(k, v) for k, v in response.headers.items() if k.startswith("ratelimit") or k == "retry-after"]


def test_a_200_carries_the_limit_headers(make_client, serve):
    server, _ = serve(make_client({"request_rate": {"rate": 100, "burst": 500}, "concurrency": {"limit": 20}}))
    r = httpx.get(server.url + "/hello")
    assert r.status_code == 200 and r.json() == {"hello": "world"}
    assert limit_headers(r) == [
        ("ratelimit-policy", '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"'),
        ("ratelimit", '"request_rate";r=499;t=1, "concurrency";r=19'),
        ("ratelimit-limit", "500"),
        ("ratelimit-remaining", "499"),
        ("ratelimit-reset", "1"),
    ]


def test_a_429_has_the_exact_headers_and_the_core_body(make_client, serve):
    server, _ = serve(make_client({"request_rate": {"rate": 1, "burst": 2}}))
    with httpx.Client(base_url=server.url) as http:
        assert [http.get("/hello").status_code for _ in range(2)] == [200, 200]
        r = http.get("/hello")
    assert r.status_code == 429
    assert r.headers["content-type"] == "application/json"
    assert limit_headers(r) == [
        ("ratelimit-policy", '"request_rate";q=2;w=2'),
        ("ratelimit", '"request_rate";r=0;t=2'),
        ("ratelimit-limit", "2"),
        ("ratelimit-remaining", "0"),
        ("ratelimit-reset", "2"),
        ("retry-after", "1"),
    ]
    assert r.content == (
        b'{"error":{"type":"rate_limit_error","limit_type":"request_rate","message":"Request rate limit exceeded: '
        b'1 requests/second sustained (bursts to 2). Retry after 1s.","limit":2,"rate":1,"retry_after":1}}'
    )
    assert r.headers["content-length"] == str(len(r.content))


FLEET_503_BODY = (
    b'{"error":{"type":"service_unavailable","limit_type":"fleet","message":"Service degraded: non-critical '
    b'traffic is being shed to keep capacity for critical requests. Retry with backoff after 1s.","retry_after":1}}'
)


def test_a_503_from_the_fleet_shedder_has_the_exact_headers_and_the_core_body(make_client, serve):
    server, app = serve(make_client({"request_rate": {"rate": 10, "burst": 20}, "fleet": {"capacity": 1}}))
    with httpx.Client(base_url=server.url) as http:
        holder = threading.Thread(target=http.get, args=("/slow",), kwargs={"headers": {"X-API-Key": "holder"}})
        holder.start()
        assert app.state.entered.wait(5)
        r = http.get("/hello")
        holder.join()
    assert r.status_code == 503 and r.headers["content-type"] == "application/json"
    assert limit_headers(r) == [  # a shed request spends no token of its tenant
        ("ratelimit-policy", '"request_rate";q=20;w=2'),
        ("ratelimit", '"request_rate";r=20;t=0'),
        ("ratelimit-limit", "20"),
        ("ratelimit-remaining", "20"),
        ("ratelimit-reset", "0"),
        ("retry-after", "1"),
    ]
    assert r.content == FLEET_503_BODY


def test_a_critical_option_lets_requests_past_the_fleet_shedder(make_client, serve):
    fw = make_client({"fleet": {"capacity": 1}})
    server, app = serve(fw, critical=lambda scope: scope["path"] == "/hello")
    with httpx.Client(base_url=server.url) as http:
        holder = threading.Thread(target=http.get, args=("/slow",))
        holder.start()
        assert app.state.entered.wait(5)
        assert http.get("/hello").status_code == 200
        assert http.get("/users/1").status_code == 503
        holder.join()


def test_an_exception_in_the_app_releases_the_slot(make_client, serve):
    client = CountingClient(make_client({"concurrency": {"limit": 1}}))
    server, _ = serve(client)
    assert httpx.get(server.url + "/boom").status_code == 500
    # uvicorn closes the connection after an unhandled exception: a new connection per request.
    eventually(lambda: httpx.get(server.url + "/hello").status_code == 200, what="the slot coming back")
    eventually(client.balanced, what="every ticket released once")


def test_a_client_disconnect_releases_the_slot(make_client, serve):
    client = CountingClient(make_client({"concurrency": {"limit": 1}}))
    server, app = serve(client)
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(server.url + "/wait", timeout=httpx.Timeout(5, read=0.3))
    assert app.state.entered.is_set()
    with httpx.Client(base_url=server.url) as http:
        eventually(lambda: http.get("/hello").status_code == 200, what="the slot coming back")
    eventually(client.balanced, what="every ticket released once")


def test_a_streaming_body_closed_early_releases_the_slot(make_client, serve):
    client = CountingClient(make_client({"concurrency": {"limit": 1}}))
    server, _ = serve(client)
    with httpx.Client(base_url=server.url) as http:
        with http.stream("GET", "/stream") as r:
            assert r.status_code == 200 and r.headers["ratelimit"] == '"concurrency";r=0'
            assert http.get("/hello").status_code == 429  # the stream holds the only slot
            next(r.iter_bytes())
        # Leaving the block closes the connection mid-body.
    with httpx.Client(base_url=server.url) as http:
        eventually(lambda: http.get("/hello").status_code == 200, what="the slot coming back")
    eventually(client.balanced, what="every ticket released once")


def test_the_default_key_is_the_bearer_token_else_the_client_address(make_client, serve):
    server, _ = serve(make_client({"request_rate": {"rate": 0.001, "burst": 1}}))
    with httpx.Client(base_url=server.url) as http:
        a = {"Authorization": "Bearer token-a"}
        assert http.get("/hello", headers=a).status_code == 200
        assert http.get("/hello", headers=a).status_code == 429
        assert http.get("/hello", headers={"Authorization": "Bearer token-b"}).status_code == 200
        assert http.get("/hello", headers={"X-API-Key": "key-c"}).status_code == 200
        assert http.get("/hello").status_code == 200  # anonymous: 127.0.0.1
        assert http.get("/hello").status_code == 429


def test_the_default_key_never_puts_the_credential_in_the_metrics(make_client, serve):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 1}})
    server, _ = serve(fw)
    with httpx.Client(base_url=server.url) as http:
        for _ in range(2):
            http.get("/hello", headers={"Authorization": "Bearer s3cr3t-token"})
    tenants = [row["tenant"] for row in fw.metrics()["top_tenants"]]
    assert tenants and all("s3cr3t" not in t for t in tenants)
    assert "s3cr3t" not in fw.prometheus()


def test_the_default_route_is_the_path_template(make_client, serve):
    fw = make_client({"request_rate": {"rate": 100, "burst": 100}})
    server, _ = serve(fw)
    with httpx.Client(base_url=server.url) as http:
        for path in ("/users/1", "/users/2", "/nowhere"):
            http.get(path)
        http.post("/hello")  # path matches, method does not (405): still the route family
    routes = fw.metrics()["routes"]
    assert routes["/users/{user_id}"]["request_rate"]["allowed"] == 2
    assert routes["/hello"]["request_rate"]["allowed"] == 1
    assert "/users/1" not in routes and "/nowhere" not in routes
    assert routes["default"]["request_rate"]["allowed"] == 1  # an unmatched path


def test_concurrency_counts_only_the_listed_route_templates(make_client, serve):
    server, app = serve(make_client({"concurrency": {"limit": 1, "routes": ["/slow"]}}))
    with httpx.Client(base_url=server.url) as http:
        holder = threading.Thread(target=http.get, args=("/slow",))
        holder.start()
        assert app.state.entered.wait(5)
        assert http.get("/slow").status_code == 429
        assert http.get("/hello").status_code == 200
        holder.join()


def test_options_may_be_callables_of_the_scope_or_constants(make_client, serve):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 10}})
    server, _ = serve(
        fw,
        key=lambda scope: dict(scope["headers"]).get(b"x-tenant", b"anonymous"),
        cost=lambda scope: 3 if scope["method"] == "POST" else 1,
        route="api",
    )
    with httpx.Client(base_url=server.url) as http:
        assert http.post("/orders", headers={"X-Tenant": "acme"}).headers["ratelimit-remaining"] == "7"
        assert http.get("/hello", headers={"X-Tenant": "acme"}).headers["ratelimit-remaining"] == "6"
        assert http.get("/hello", headers={"X-Tenant": "other"}).headers["ratelimit-remaining"] == "9"
    assert fw.metrics()["routes"]["api"]["request_rate"]["allowed"] == 3


def test_a_key_callable_returning_none_falls_back_to_the_default_key(make_client, serve):
    server, _ = serve(make_client({"request_rate": {"rate": 0.001, "burst": 1}}), key=lambda scope: None)
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/hello").status_code == 200
        assert http.get("/hello").status_code == 429


def test_streaming_and_error_responses_carry_the_limit_headers_too(make_client, serve):
    server, _ = serve(make_client({"request_rate": {"rate": 100, "burst": 100}}))
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/nowhere").headers["ratelimit-limit"] == "100"  # a 404 from the router
        with http.stream("GET", "/stream") as r:
            assert r.headers["ratelimit-limit"] == "100"


def test_many_concurrent_requests_get_exactly_the_burst(make_client, serve):
    server, _ = serve(make_client({"request_rate": {"rate": 0.001, "burst": 25}}))

    async def main():
        async with httpx.AsyncClient(base_url=server.url, limits=httpx.Limits(max_connections=20)) as http:
            return await asyncio.gather(*(http.get("/hello") for _ in range(60)))

    statuses = [r.status_code for r in asyncio.run(main())]
    assert statuses.count(200) == 25 and statuses.count(429) == 35


def test_wrapping_a_starlette_app_from_outside_routes_by_its_templates_too(make_client):
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    async def item(request):
        return PlainTextResponse("ok")

    inner = Starlette(routes=[Route("/items/{item_id}", item), Mount("/v1", routes=[Route("/things/{n}", item)])])
    fw = make_client({"request_rate": {"rate": 100, "burst": 100}})
    server = serve_asgi(FloodwallMiddleware(inner, fw))
    try:
        for path in ("/items/1", "/items/2", "/v1/things/3"):
            assert httpx.get(server.url + path).status_code == 200
    finally:
        server.stop()
    routes = fw.metrics()["routes"]
    assert routes["/items/{item_id}"]["request_rate"]["allowed"] == 2
    assert routes["/v1/things/{n}"]["request_rate"]["allowed"] == 1
