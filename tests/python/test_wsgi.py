"""floodwall.wsgi.FloodwallMiddleware in a Flask app served by the standard library's WSGI server (one
thread per request) over real HTTP, driven by httpx."""

from __future__ import annotations

import io
import threading
import time
import wsgiref.util

import httpx
import pytest
from flask import Flask, Response, stream_with_context

from conftest import CountingClient, eventually, serve_wsgi
from floodwall.wsgi import FloodwallMiddleware, request_headers
from test_asgi import FLEET_503_BODY, from_peer, limit_headers


def build_app(client, propagate=False, **options) -> Flask:
    app = Flask(__name__)
    app.config["PROPAGATE_EXCEPTIONS"] = propagate
    app.wsgi_app = FloodwallMiddleware(app.wsgi_app, client, **options)
    app.entered = threading.Event()

    @app.get("/hello")
    def hello():
        return {"hello": "world"}

    @app.get("/users/<int:user_id>")
    def user(user_id):
        return {"user": user_id}

    @app.post("/orders")
    def order():
        return {"ok": True}

    @app.get("/boom")
    def boom():
        raise RuntimeError("handler failed")

    @app.get("/slow")
    def slow():
        app.entered.set()
        time.sleep(0.5)
        return {"slow": True}

    @app.get("/stream")
    def stream():
        def chunks():
            while True:
                yield b"x" * 16384
                time.sleep(0.01)

        return Response(stream_with_context(chunks()), mimetype="application/octet-stream")

    return app


@pytest.fixture
def serve():
    servers = []

    def start(client, **options):
        app = build_app(client, **options)
        server = serve_wsgi(app)
        servers.append(server)
        return server, app

    yield start
    for s in servers:
        s.stop()


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
    assert [httpx.get(server.url + "/hello").status_code for _ in range(2)] == [200, 200]
    r = httpx.get(server.url + "/hello")
    assert r.status_code == 429 and r.reason_phrase == "Too Many Requests"
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


def test_a_503_from_the_fleet_shedder_has_the_exact_headers_and_the_core_body(make_client, serve):
    server, app = serve(make_client({"request_rate": {"rate": 10, "burst": 20}, "fleet": {"capacity": 1}}))
    with from_peer(server, "127.0.0.2") as other:  # another tenant holds the capacity
        holder = threading.Thread(target=other.get, args=("/slow",))
        holder.start()
        assert app.entered.wait(5)
        r = httpx.get(server.url + "/hello")
        holder.join()
    assert r.status_code == 503 and r.reason_phrase == "Service Unavailable"
    assert r.headers["content-type"] == "application/json"
    assert limit_headers(r) == [
        ("ratelimit-policy", '"request_rate";q=20;w=2'),
        ("ratelimit", '"request_rate";r=20;t=1'),  # never earlier than Retry-After
        ("ratelimit-limit", "20"),
        ("ratelimit-remaining", "20"),
        ("ratelimit-reset", "1"),
        ("retry-after", "1"),
    ]
    assert r.content == FLEET_503_BODY


def test_an_error_flask_handles_releases_the_slot(make_client, serve):
    client = CountingClient(make_client({"concurrency": {"limit": 1}}))
    server, _ = serve(client)
    r = httpx.get(server.url + "/boom")
    assert r.status_code == 500 and '"concurrency";r=0' == r.headers["ratelimit"]
    eventually(lambda: httpx.get(server.url + "/hello").status_code == 200, what="the slot coming back")
    eventually(client.balanced, what="every ticket released once")


def test_an_exception_that_reaches_the_middleware_releases_the_slot(make_client, serve):
    client = CountingClient(make_client({"concurrency": {"limit": 1}}))
    server, _ = serve(client, propagate=True)
    assert httpx.get(server.url + "/boom").status_code == 500  # wsgiref's own error page
    eventually(lambda: httpx.get(server.url + "/hello").status_code == 200, what="the slot coming back")
    eventually(client.balanced, what="every ticket released once")


def test_a_client_disconnect_mid_stream_releases_the_slot(make_client, serve):
    client = CountingClient(make_client({"concurrency": {"limit": 1}}))
    server, _ = serve(client)
    with httpx.stream("GET", server.url + "/stream") as r:
        assert r.status_code == 200 and r.headers["ratelimit"] == '"concurrency";r=0'
        assert httpx.get(server.url + "/hello").status_code == 429  # the stream holds the only slot
        next(r.iter_bytes())
    # The server's next writes fail; it closes the response iterable, which releases.
    eventually(lambda: httpx.get(server.url + "/hello").status_code == 200, what="the slot coming back")
    eventually(client.balanced, what="every ticket released once")


def test_the_iterable_closed_early_releases_exactly_once(make_client):
    """PEP 3333 directly: a server that stops iterating early and calls close()."""
    client = CountingClient(make_client({"concurrency": {"limit": 1}}))
    app = build_app(client)
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/stream", "SERVER_NAME": "test", "SERVER_PORT": "80",
               "wsgi.url_scheme": "http", "REMOTE_ADDR": "127.0.0.1", "wsgi.input": None}
    seen = {}
    body = app.wsgi_app(environ, lambda status, headers, exc_info=None: seen.update(status=status, headers=headers))
    it = iter(body)
    next(it)
    assert seen["status"].startswith("200") and dict(seen["headers"])["RateLimit"] == '"concurrency";r=0'
    tenant = client.fw.tenant_key(peer="127.0.0.1")  # the core's key for this environ: its REMOTE_ADDR
    assert not client.fw.admit(tenant).allowed
    body.close()
    body.close()  # a second close is harmless
    assert client.released == client.admitted
    assert client.fw.admit(tenant).allowed


def file_response(client, file_wrapper):
    """The middleware answering with environ["wsgi.file_wrapper"](a file), as a server offering
    `file_wrapper` calls it: (the iterable it returns, the environ, the file)."""
    f = io.BytesIO(b"file bytes")

    def app(environ, start_response):
        start_response("200 OK", [("Content-Length", "10")])
        return environ["wsgi.file_wrapper"](f, 4)

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/f", "REMOTE_ADDR": "127.0.0.1", "wsgi.file_wrapper": file_wrapper}
    return FloodwallMiddleware(app, client, route="/")(environ, lambda *a: None), environ, f


def test_a_file_wrapper_response_stays_the_servers_and_releases_on_close(make_client):
    """PEP 3333's optional file handling: the response is still an instance of the server's wrapper (gunicorn
    sends it with sendfile only then, see tests/e2e/test_wsgi_file_wrapper.py), and its close() closes
    the file and gives the slot back, once."""
    client = CountingClient(make_client({"concurrency": {"limit": 1}}))
    tenant = client.fw.tenant_key(peer="127.0.0.1")
    body, environ, f = file_response(client, wsgiref.util.FileWrapper)
    assert isinstance(body, wsgiref.util.FileWrapper)
    assert environ["wsgi.file_wrapper"] is wsgiref.util.FileWrapper  # given back for what comes after
    assert b"".join(body) == b"file bytes"
    assert not client.fw.admit(tenant).allowed  # the slot is held until the server closes the response
    body.close()
    body.close()
    assert f.closed
    assert client.released == client.admitted
    assert client.fw.admit(tenant).allowed


def test_a_file_wrapper_that_is_not_a_class_gets_the_releasing_iterable(make_client):
    client = CountingClient(make_client({"concurrency": {"limit": 1}}))
    body, _, f = file_response(client, lambda filelike, blksize=8192: wsgiref.util.FileWrapper(filelike, blksize))
    assert not isinstance(body, wsgiref.util.FileWrapper)  # wrapped: the server iterates it
    assert b"".join(body) == b"file bytes"
    body.close()
    assert f.closed and client.released == client.admitted


def test_the_default_key_is_the_client_address_whatever_credential_it_sends(make_client, serve):
    server, _ = serve(make_client({"request_rate": {"rate": 0.001, "burst": 1}}))
    get = lambda **h: httpx.get(server.url + "/hello", headers=h).status_code  # noqa: E731
    assert get(Authorization="Bearer token-a") == 200  # 127.0.0.1
    assert get(Authorization="Bearer token-b") == 429
    assert get(**{"X-API-Key": "key-c"}) == 429
    assert get() == 429


def test_a_credential_verify_vouches_for_is_its_own_tenant_and_the_rest_the_address(make_client, serve):
    asked = []

    def verify(credential, environ):
        asked.append((credential, environ["PATH_INFO"]))
        return credential in {"token-a", "key-c"}

    server, _ = serve(make_client({"request_rate": {"rate": 0.001, "burst": 1}}), verify=verify)
    get = lambda **h: httpx.get(server.url + "/hello", headers=h).status_code  # noqa: E731
    assert get(Authorization="Bearer token-a") == 200
    assert get(Authorization="Bearer token-a") == 429
    assert get(**{"X-API-Key": "key-c"}) == 200
    assert get(Authorization="Bearer made-up") == 200  # 127.0.0.1
    assert get() == 429  # no credential: the address, nothing asked
    assert asked == [("token-a", "/hello"), ("token-a", "/hello"), ("key-c", "/hello"), ("made-up", "/hello")]


def test_the_default_route_is_the_flask_rule(make_client, serve):
    fw = make_client({"request_rate": {"rate": 100, "burst": 100}})
    server, _ = serve(fw)
    for path in ("/users/1", "/users/2", "/nowhere"):
        httpx.get(server.url + path)
    routes = fw.metrics()["routes"]
    assert routes["/users/:user_id"]["request_rate"]["allowed"] == 2
    assert "/users/1" not in routes and "/nowhere" not in routes
    assert routes["default"]["request_rate"]["allowed"] == 1


def test_options_may_be_callables_of_the_environ_or_constants(make_client, serve):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 10}})
    server, _ = serve(
        fw,
        key=lambda environ: environ.get("HTTP_X_TENANT", "anonymous"),
        cost=lambda environ: 3 if environ["REQUEST_METHOD"] == "POST" else 1,
        route="api",
    )
    post = httpx.post(server.url + "/orders", headers={"X-Tenant": "acme"})
    assert post.headers["ratelimit-remaining"] == "7"
    assert httpx.get(server.url + "/hello", headers={"X-Tenant": "acme"}).headers["ratelimit-remaining"] == "6"
    assert httpx.get(server.url + "/hello", headers={"X-Tenant": "other"}).headers["ratelimit-remaining"] == "9"
    assert fw.metrics()["routes"]["api"]["request_rate"]["allowed"] == 3


def test_threads_of_the_server_share_the_bucket_exactly(make_client, serve):
    server, _ = serve(make_client({"request_rate": {"rate": 0.001, "burst": 15}}))
    statuses = []
    lock = threading.Lock()

    def worker():
        for _ in range(5):
            code = httpx.get(server.url + "/hello").status_code
            with lock:
                statuses.append(code)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses.count(200) == 15 and statuses.count(429) == 25


# ------------------------------------------------------------------------- tenant keys and hooks


def test_the_headers_come_back_from_the_http_keys_of_the_environ():
    environ = {"HTTP_X_API_KEY": "k", "HTTP_AUTHORIZATION": "Bearer t\xe9", "CONTENT_TYPE": "text/plain",
               "CONTENT_LENGTH": "3", "REMOTE_ADDR": "10.0.0.1", "wsgi.input": None}
    assert sorted(request_headers(environ)) == [("authorization", b"Bearer t\xe9"), ("x-api-key", b"k")]


def test_one_api_key_from_two_peers_is_one_bucket(make_client, serve):
    server, _ = serve(make_client({"request_rate": {"rate": 0.001, "burst": 1}}),
                      verify=lambda credential, environ: credential == "shared-key")
    key = {"X-API-Key": "shared-key"}
    with from_peer(server, "127.0.0.2") as a, from_peer(server, "127.0.0.3") as b:
        assert a.get("/hello", headers=key).status_code == 200
        assert b.get("/hello", headers=key).status_code == 429  # another peer, the same credential
        assert a.get("/hello").status_code == 200  # without one the peers are two tenants
        assert b.get("/hello").status_code == 200
        assert b.get("/hello").status_code == 429


def test_a_bearer_token_through_wsgi_is_the_key_the_core_names(make_client, serve):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 2}})
    server, _ = serve(fw, key=None, verify=lambda credential, environ: credential == "tok")  # key=None: the default
    with from_peer(server, "127.0.0.5") as http:
        http.get("/hello", headers={"Authorization": "Bearer tok"})
        http.get("/hello")
    assert fw.admit(fw.tenant_key(headers=[("Authorization", "Bearer tok")], verified=True)).remaining == 0
    assert fw.admit(fw.tenant_key(peer="127.0.0.5")).remaining == 0


def test_a_key_of_empty_string_is_one_anonymous_tenant(make_client, serve):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 2}})
    server, _ = serve(fw, key=lambda environ: "")
    with from_peer(server, "127.0.0.2") as a, from_peer(server, "127.0.0.3") as b:
        assert a.get("/hello", headers={"X-API-Key": "one"}).status_code == 200
        r = b.get("/hello", headers={"X-API-Key": "two"})
        assert r.status_code == 200 and r.headers["ratelimit-remaining"] == "0"  # limited, not skipped
        assert a.get("/hello").status_code == 429
    assert fw.admit("").status == 429  # the middleware's tenant was ""


def test_a_key_callable_returning_none_lets_the_core_derive_it(make_client, serve):
    server, _ = serve(make_client({"request_rate": {"rate": 0.001, "burst": 1}}), key=lambda environ: None,
                      verify=lambda credential, environ: True)
    assert httpx.get(server.url + "/hello", headers={"X-API-Key": "a"}).status_code == 200
    assert httpx.get(server.url + "/hello", headers={"X-API-Key": "a"}).status_code == 429
    assert httpx.get(server.url + "/hello", headers={"X-API-Key": "b"}).status_code == 200


def test_skip_lets_requests_through_undecided(make_client, serve):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 1}})
    server, _ = serve(fw, skip=lambda environ: environ["PATH_INFO"] == "/hello")
    for _ in range(3):
        r = httpx.get(server.url + "/hello")
        assert r.status_code == 200 and r.json() == {"hello": "world"} and limit_headers(r) == []
    assert httpx.get(server.url + "/users/1").status_code == 200
    assert httpx.get(server.url + "/users/1").status_code == 429
    counts = fw.metrics()["decisions"]["request_rate"]
    assert (counts["allowed"], counts["rejected"]) == (1, 1)


def test_on_reject_builds_the_response_and_gets_the_limit_headers_it_did_not_set(make_client, serve):
    seen = []

    def on_reject(environ, decision):
        seen.append((environ["PATH_INFO"], decision.status, decision.limiter, decision.cost))
        return Response(f"slow down, {decision.limit} per window", status=decision.status,
                        headers={"Retry-After": "7"}, mimetype="text/plain")

    client = CountingClient(make_client({"request_rate": {"rate": 1, "burst": 2}}))
    server, _ = serve(client, on_reject=on_reject)
    assert [httpx.get(server.url + "/hello").status_code for _ in range(2)] == [200, 200]
    r = httpx.get(server.url + "/hello")
    assert r.status_code == 429 and r.text == "slow down, 2 per window"
    assert r.headers["content-type"].startswith("text/plain")
    assert r.headers.get_list("retry-after") == ["7"]  # its own, not the decision's as well
    assert r.headers["ratelimit-limit"] == "2" and r.headers["ratelimit-remaining"] == "0"
    assert seen == [("/hello", 429, "request_rate", 1)]
    eventually(client.balanced, what="every ticket released once")


def test_on_reject_returning_none_answers_with_the_default_rejection(make_client, serve):
    calls = []
    server, _ = serve(make_client({"request_rate": {"rate": 1, "burst": 1}}),
                      on_reject=lambda environ, decision: calls.append(decision.status))
    httpx.get(server.url + "/hello")
    r = httpx.get(server.url + "/hello")
    assert r.status_code == 429 and r.headers["content-type"] == "application/json"
    assert r.json()["error"]["limit_type"] == "request_rate" and calls == [429]


def test_the_content_type_of_a_rejection_is_the_decisions(make_client, serve):
    server, _ = serve(make_client({"request_rate": {"rate": 1, "burst": 1}, "body_format": "problem+json"}))
    httpx.get(server.url + "/hello")
    r = httpx.get(server.url + "/hello")
    assert r.status_code == 429 and r.headers["content-type"] == "application/problem+json"
    assert r.headers["content-length"] == str(len(r.content))
    problem = r.json()
    assert problem["status"] == 429 and problem["type"].startswith("https://")


def test_a_blocked_tenant_gets_the_cores_403(make_client, serve):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 20}, "concurrency": {"limit": 5}})
    server, _ = serve(CountingClient(fw), verify=lambda credential, environ: True)  # every token is known here
    tenant = fw.tenant_key(headers=[("authorization", "Bearer t-blocked")], verified=True)
    fw.admin.block(tenant, seconds=30)
    with httpx.Client(base_url=server.url) as http:
        r = http.get("/hello", headers={"Authorization": "Bearer t-blocked"})
        other = http.get("/hello", headers={"Authorization": "Bearer t-other"})
        assert r.status_code == 403 and r.headers["content-type"] == "application/json"
        assert limit_headers(r) == [("retry-after", r.headers["retry-after"])]
        assert 29 <= int(r.headers["retry-after"]) <= 31
        error = r.json()["error"]
        assert (error["type"], error["limit_type"]) == ("forbidden", "blocked") and error["until"].endswith("Z")
        assert other.status_code == 200
        fw.admin.unblock(tenant)
        r = http.get("/hello", headers={"Authorization": "Bearer t-blocked"})
        assert r.status_code == 200 and r.headers["ratelimit-remaining"] == "19"
    # The 403 held no slot, and the 200's goes back when the server closes its body (after the client has
    # its response: a WSGI server's order).
    eventually(lambda: fw.admin.show(tenant)["concurrency"]["in_flight"] == 0, what="every slot given back")
