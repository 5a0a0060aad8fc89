"""floodwall.asgi.FloodwallMiddleware in a FastAPI app served by uvicorn over real HTTP, driven by httpx."""

from __future__ import annotations

import asyncio
import threading
from typing import Optional

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
        ("ratelimit", '"concurrency";r=19'),  # the policy closest to exhaustion
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
        ("ratelimit", '"request_rate";r=0;t=1'),  # on a 429, t is when a retry passes: Retry-After
        ("ratelimit-limit", "2"),
        ("ratelimit-remaining", "0"),
        ("ratelimit-reset", "1"),
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
    with httpx.Client(base_url=server.url) as http, from_peer(server, "127.0.0.2") as other:
        holder = threading.Thread(target=other.get, args=("/slow",))  # another tenant holds the capacity
        holder.start()
        assert app.state.entered.wait(5)
        r = http.get("/hello")
        holder.join()
    assert r.status_code == 503 and r.headers["content-type"] == "application/json"
    assert limit_headers(r) == [  # a shed request spends no token of its tenant
        ("ratelimit-policy", '"request_rate";q=20;w=2'),
        ("ratelimit", '"request_rate";r=20;t=1'),  # never earlier than Retry-After
        ("ratelimit-limit", "20"),
        ("ratelimit-remaining", "20"),
        ("ratelimit-reset", "1"),
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


def test_the_default_key_is_the_client_address_whatever_credential_it_sends(make_client, serve):
    server, _ = serve(make_client({"request_rate": {"rate": 0.001, "burst": 1}}))
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/hello", headers={"Authorization": "Bearer token-a"}).status_code == 200  # 127.0.0.1
        assert http.get("/hello", headers={"Authorization": "Bearer token-b"}).status_code == 429
        assert http.get("/hello", headers={"X-API-Key": "key-c"}).status_code == 429
        assert http.get("/hello").status_code == 429


def test_a_credential_verify_vouches_for_is_its_own_tenant_and_the_rest_the_address(make_client, serve):
    known = {"token-a", "key-c"}
    server, _ = serve(make_client({"request_rate": {"rate": 0.001, "burst": 1}}),
                      verify=lambda credential, scope: credential in known)
    with httpx.Client(base_url=server.url) as http:
        a = {"Authorization": "Bearer token-a"}
        assert http.get("/hello", headers=a).status_code == 200
        assert http.get("/hello", headers=a).status_code == 429
        assert http.get("/hello", headers={"X-API-Key": "key-c"}).status_code == 200
        assert http.get("/hello", headers={"Authorization": "Bearer made-up"}).status_code == 200  # 127.0.0.1
        assert http.get("/hello").status_code == 429


def test_an_async_verify_hook_is_awaited_and_asked_only_about_requests_with_a_credential(make_client, serve):
    asked = []

    async def verify(credential, scope):
        await asyncio.sleep(0)
        asked.append((credential, scope["path"]))
        return credential == "k-1"

    server, _ = serve(make_client({"request_rate": {"rate": 0.001, "burst": 1}}), verify=verify)
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/hello", headers={"X-API-Key": "k-1"}).status_code == 200
        assert http.get("/hello", headers={"X-API-Key": "k-1"}).status_code == 429
        assert http.get("/users/1").status_code == 200  # no credential: the address, nothing asked
    assert asked == [("k-1", "/hello"), ("k-1", "/hello")]


def test_the_default_key_never_puts_the_credential_in_the_metrics(make_client, serve):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 1}})
    server, _ = serve(fw, verify=lambda credential, scope: True)
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
    assert routes["/users/:user_id"]["request_rate"]["allowed"] == 2
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
    assert routes["/items/:item_id"]["request_rate"]["allowed"] == 2
    assert routes["/v1/things/:n"]["request_rate"]["allowed"] == 1


# ------------------------------------------------------------------------- tenant keys and hooks


def from_peer(server, peer: str) -> httpx.Client:
    """An HTTP client whose connections come from `peer` (any 127.0.0.0/8 address is this host on Linux):
    the server sees a different client address."""
    return httpx.Client(base_url=server.url, transport=httpx.HTTPTransport(local_address=peer))


def test_one_bearer_token_from_two_peers_is_one_bucket(make_client, serve):
    server, _ = serve(make_client({"request_rate": {"rate": 0.001, "burst": 1}}),
                      verify=lambda credential, scope: credential == "shared-token")
    token = {"Authorization": "Bearer shared-token"}
    with from_peer(server, "127.0.0.2") as a, from_peer(server, "127.0.0.3") as b:
        assert a.get("/hello", headers=token).status_code == 200
        assert b.get("/hello", headers=token).status_code == 429  # another peer, the same credential
        # Without a credential the peers are two tenants, so the peers did differ.
        assert a.get("/hello").status_code == 200
        assert b.get("/hello").status_code == 200
        assert b.get("/hello").status_code == 429


def test_the_core_derives_the_key_from_the_headers_and_the_peer(make_client, serve):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 2}})
    server, _ = serve(fw, key=None, verify=lambda credential, scope: credential == "k-1")  # key=None: the default
    with from_peer(server, "127.0.0.4") as http:
        http.get("/hello", headers={"X-API-Key": "k-1"})
        http.get("/hello")
    # The tenants the middleware used are the ones the core names for those headers, peers and checks.
    assert fw.admit(fw.tenant_key(headers=[(b"x-api-key", b"k-1")], peer="127.0.0.4", verified=True)).remaining == 0
    assert fw.admit(fw.tenant_key(peer="127.0.0.4")).remaining == 0
    assert fw.tenant_key(peer="127.0.0.4") == "ip:127.0.0.4"


def test_a_key_of_empty_string_is_one_anonymous_tenant(make_client, serve):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 2}})
    server, _ = serve(fw, key=lambda scope: "")
    with from_peer(server, "127.0.0.2") as a, from_peer(server, "127.0.0.3") as b:
        assert a.get("/hello", headers={"Authorization": "Bearer one"}).status_code == 200
        r = b.get("/hello", headers={"Authorization": "Bearer two"})
        assert r.status_code == 200 and r.headers["ratelimit-remaining"] == "0"  # limited, not skipped
        assert a.get("/hello").status_code == 429
    assert fw.admit("").status == 429  # the middleware's tenant was ""


def test_skip_lets_requests_through_undecided(make_client, serve):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 1}})
    server, _ = serve(fw, skip=lambda scope: scope["path"] == "/hello")
    with httpx.Client(base_url=server.url) as http:
        for _ in range(3):
            r = http.get("/hello")
            assert r.status_code == 200 and r.json() == {"hello": "world"}
            assert limit_headers(r) == []  # not decided at all
        assert http.get("/users/1").status_code == 200
        assert http.get("/users/1").status_code == 429
    counts = fw.metrics()["decisions"]["request_rate"]
    assert (counts["allowed"], counts["rejected"]) == (1, 1)


def test_an_async_skip_predicate_is_awaited(make_client, serve):
    async def skip(scope):
        await asyncio.sleep(0)
        return dict(scope["headers"]).get(b"x-internal") == b"yes"

    server, _ = serve(make_client({"request_rate": {"rate": 0.001, "burst": 1}}), skip=skip)
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/hello").status_code == 200
        assert http.get("/hello").status_code == 429
        assert http.get("/hello", headers={"X-Internal": "yes"}).status_code == 200


def test_on_reject_builds_the_response_and_gets_the_limit_headers_it_did_not_set(make_client, serve):
    from starlette.responses import JSONResponse

    seen = []

    def on_reject(scope, decision):
        seen.append((scope["path"], decision.status, decision.limiter, decision.cost))
        return JSONResponse(
            {"slow_down": decision.retry_after, "limit": decision.limit},
            status_code=decision.status,
            headers={"Retry-After": "7"},
        )

    client = CountingClient(make_client({"request_rate": {"rate": 1, "burst": 2}}))
    server, _ = serve(client, on_reject=on_reject)
    with httpx.Client(base_url=server.url) as http:
        assert [http.get("/hello").status_code for _ in range(2)] == [200, 200]
        r = http.get("/hello")
    assert r.status_code == 429 and r.json() == {"slow_down": 1, "limit": 2}
    assert r.headers["content-type"] == "application/json"
    assert r.headers.get_list("retry-after") == ["7"]  # its own, not the decision's as well
    assert r.headers["ratelimit-limit"] == "2" and r.headers["ratelimit-remaining"] == "0"
    assert seen == [("/hello", 429, "request_rate", 1)]
    eventually(client.balanced, what="every ticket released once")


def test_an_async_on_reject_may_answer_with_any_asgi_app(make_client, serve):
    from starlette.responses import PlainTextResponse

    async def on_reject(scope, decision):
        await asyncio.sleep(0)
        return PlainTextResponse(f"busy, cost {decision.cost}", status_code=decision.status)

    server, _ = serve(make_client({"request_rate": {"rate": 1, "burst": 2}}), on_reject=on_reject)
    with httpx.Client(base_url=server.url) as http:
        assert [http.get("/hello").status_code for _ in range(2)] == [200, 200]
        r = http.get("/hello")
    assert r.status_code == 429 and r.text == "busy, cost 1"
    assert r.headers["content-type"].startswith("text/plain")
    assert r.headers["retry-after"] == "1"  # the decision's, since the handler set none


def test_on_reject_returning_none_answers_with_the_default_rejection(make_client, serve):
    calls = []
    fw = make_client({"request_rate": {"rate": 1, "burst": 1}})
    server, _ = serve(fw, on_reject=lambda scope, decision: calls.append(decision.status))
    with httpx.Client(base_url=server.url) as http:
        http.get("/hello")
        r = http.get("/hello")
    assert r.status_code == 429 and r.headers["content-type"] == "application/json"
    assert r.json()["error"]["limit_type"] == "request_rate" and calls == [429]


def test_the_content_type_of_a_rejection_is_the_decisions(make_client, serve):
    fw = make_client({"request_rate": {"rate": 1, "burst": 1}, "body_format": "problem+json"})
    server, _ = serve(fw)
    with httpx.Client(base_url=server.url) as http:
        http.get("/hello")
        r = http.get("/hello")
    assert r.status_code == 429 and r.headers["content-type"] == "application/problem+json"
    assert r.headers["content-length"] == str(len(r.content))
    problem = r.json()
    assert problem["status"] == 429 and problem["type"].startswith("https://")


def test_the_policys_headers_choose_the_ietf_fields_alone_or_none(make_client, serve):
    def limit_headers(r):
        return sorted(h for h in r.headers if h.startswith("ratelimit") or h == "retry-after")

    server, _ = serve(make_client({"request_rate": {"rate": 1, "burst": 1}, "headers": "ietf"}))
    with httpx.Client(base_url=server.url) as http:
        ok, refused = http.get("/hello"), http.get("/hello")
    assert ok.status_code == 200 and limit_headers(ok) == ["ratelimit", "ratelimit-policy"]
    assert refused.status_code == 429 and limit_headers(refused) == ["ratelimit", "ratelimit-policy", "retry-after"]

    server, _ = serve(make_client({"request_rate": {"rate": 1, "burst": 1}, "headers": "none"}))
    with from_peer(server, "127.0.0.2") as http:  # another tenant (one Redis prefix for the test)
        ok, refused = http.get("/hello"), http.get("/hello")
    assert ok.status_code == 200 and limit_headers(ok) == []
    assert refused.status_code == 429 and limit_headers(refused) == ["retry-after"]
    assert refused.json()["error"]["limit_type"] == "request_rate"


def test_a_429_from_a_named_limit_names_it_in_the_body_and_the_headers(make_client, serve):
    from test_api import RULES

    server, _ = serve(make_client(RULES))
    with httpx.Client(base_url=server.url) as http:
        assert http.post("/orders").status_code == 200
        r = http.post("/orders")
        read = http.get("/hello")
    assert r.status_code == 429
    assert '"writes"' in r.headers["ratelimit-policy"] and '"daily"' in r.headers["ratelimit-policy"]
    assert r.headers["ratelimit"].startswith('"writes";r=0;')
    error = r.json()["error"]
    assert (error["policy"], error["limit_type"]) == ("writes", "request_rate")
    assert read.status_code == 200  # the limit is for POSTs only; the daily quota counts every request
    assert '"daily"' in read.headers["ratelimit-policy"] and '"writes"' not in read.headers["ratelimit-policy"]


def test_a_blocked_tenant_gets_the_cores_403_and_an_admin_endpoint_lifts_it(make_client):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 20}})
    app = FastAPI()
    app.add_middleware(FloodwallMiddleware, client=fw, skip=lambda scope: scope["path"].startswith("/admin/"),
                       verify=lambda credential, scope: True)  # every key is known here

    @app.get("/hello")
    async def hello():
        return {"hello": "world"}

    # Plain defs: FastAPI runs them in its thread pool, so an admin call waiting on the store never stalls
    # the event loop.
    @app.post("/admin/tenants/{tenant}/block")
    def block(tenant: str, seconds: Optional[float] = None):
        fw.admin.block(tenant, seconds=seconds)
        return fw.admin.show(tenant)

    @app.delete("/admin/tenants/{tenant}/block")
    def unblock(tenant: str):
        fw.admin.unblock(tenant)
        return fw.admin.show(tenant)

    server = serve_asgi(app)
    key = {"X-API-Key": "k-blocked"}
    tenant = fw.tenant_key(headers=[("x-api-key", "k-blocked")], verified=True)  # the one the middleware derives
    try:
        with httpx.Client(base_url=server.url) as http:
            assert http.get("/hello", headers=key).status_code == 200
            shown = http.post(f"/admin/tenants/{tenant}/block")
            assert shown.status_code == 200 and shown.json()["blocked"] is True
            r = http.get("/hello", headers=key)
            assert r.status_code == 403 and r.headers["content-type"] == "application/json"
            assert limit_headers(r) == []  # blocked until unblocked: no limit's state, no Retry-After
            assert r.headers["content-length"] == str(len(r.content))
            error = r.json()["error"]
            assert (error["type"], error["limit_type"]) == ("forbidden", "blocked")
            assert http.get("/hello", headers={"X-API-Key": "someone-else"}).status_code == 200

            assert http.post(f"/admin/tenants/{tenant}/block", params={"seconds": 90}).json()["blocked_until"]
            r = http.get("/hello", headers=key)
            assert r.status_code == 403 and limit_headers(r) == [("retry-after", r.headers["retry-after"])]
            assert 89 <= int(r.headers["retry-after"]) <= 91
            assert r.json()["error"]["retry_after"] == int(r.headers["retry-after"])

            assert http.delete(f"/admin/tenants/{tenant}/block").json()["blocked"] is False
            r = http.get("/hello", headers=key)
            assert r.status_code == 200 and r.headers["ratelimit-remaining"] == "18"  # the 403s spent nothing
    finally:
        server.stop()
