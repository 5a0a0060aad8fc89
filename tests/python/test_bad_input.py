"""Bad input gets a clear error naming the field, or a documented decision; never a crash, a hang, a
leaked slot or a header carrying the caller's bytes."""

from __future__ import annotations

import json

import pytest

import floodwall

BAD_POLICIES = [
    ({"request_rate": {"rate": -1, "burst": 10}}, "request_rate.rate"),
    ({"request_rate": {"rate": float("nan"), "burst": 10}}, "request_rate.rate"),
    ({"request_rate": {"rate": float("inf"), "burst": 10}}, "request_rate.rate"),
    ({"request_rate": {"rate": 1, "burst": 0}}, "request_rate.burst"),
    ({"request_rate": {"rate": 1, "burst": 1.5}}, "request_rate.burst"),
    ({"request_rate": {"rate": "fast", "burst": 10}}, "request_rate.rate"),
    ({"request_rate": {"burst": 10}}, "request_rate.rate"),
    ({"request_rate": {"rate": 1, "burst": 10, "mode": "loud"}}, "request_rate.mode"),
    ({"request_rate": {"rate": 1, "burst": 10, "overrides": {"a": {"rate": 1, "burst": -2}}}}, "request_rate.overrides.a.burst"),
    ({"request_rate": []}, "request_rate"),
    ({"concurrency": {"limit": 0}}, "concurrency.limit"),
    ({"concurrency": {"limit": 2, "routes": [""]}}, "concurrency.routes[0]"),
    ({"concurrency": {"limit": 2, "routes": "/a"}}, "concurrency.routes"),
    ({"fleet": {"capacity": -5}}, "fleet.capacity"),
    ({"utilization": {"good": 0.9, "bad": 0.8}}, "utilization.bad"),
    ({"utilization": {"workers": 0}}, "utilization.workers"),
    ({"redis": {"deadline_ms": 0}}, "redis.deadline_ms"),
    ({"prefix": "has space"}, "prefix"),
    ({"max_tenants": 0}, "max_tenants"),
    ({"rate_limit": {"rate": 1}}, "rate_limit"),  # an unknown key is an error, not ignored
]


@pytest.mark.parametrize("policy,field", BAD_POLICIES, ids=[f for _, f in BAD_POLICIES])
def test_a_bad_policy_raises_policy_error_naming_the_field(policy, field):
    with pytest.raises(floodwall.PolicyError) as info:
        floodwall.Floodwall(policy)
    assert isinstance(info.value, ValueError) and isinstance(info.value, floodwall.Error)
    assert str(info.value).startswith(field + ":"), str(info.value)


@pytest.mark.parametrize("text", ["{", '{"request_rate": ', "{} trailing", "{'single': 'quotes'}"])
def test_text_that_is_not_json_raises_policy_error(text):
    with pytest.raises(floodwall.PolicyError, match="^policy: "):
        floodwall.Floodwall(text)


def test_a_json_document_that_is_not_an_object_raises_policy_error(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text("[1, 2]")
    with pytest.raises(floodwall.PolicyError, match="^policy: "):
        floodwall.Floodwall(str(path))


def test_a_missing_policy_file_is_a_policy_error_naming_the_path_as_in_every_language(tmp_path):
    missing = tmp_path / "missing.json"
    for policy in (str(missing), missing):  # a str by the shared rule, a Path always a path
        with pytest.raises(floodwall.PolicyError) as e:
            floodwall.Floodwall(policy)
        assert str(e.value) == f'policy: cannot read the file "{missing}" (No such file or directory)'
    with pytest.raises(floodwall.PolicyError, match="NUL"):
        floodwall.Floodwall("policy\x00.json")


def test_a_policy_of_the_wrong_type_raises_type_error():
    with pytest.raises(TypeError, match="policy"):
        floodwall.Floodwall(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("url", ["redis://host:notaport/0", "redis://127.0.0.1:99999/0", "mongodb://localhost", "memory://x/y"])
def test_a_bad_store_url_raises_a_value_error_naming_store(url):
    with pytest.raises(ValueError, match="store"):
        floodwall.Floodwall({"store": url})


HOSTILE_TENANTS = {
    "nul": b"a\x00b",
    "braces": "{acme}:rate",
    "crlf": "acme\r\nX-Injected: yes",
    "one_megabyte": b"x" * (1 << 20),
    "invalid_utf8": b"\xff\xfe\xc3",
    "redis_protocol": "*3\r\n$3\r\nDEL\r\n",
    "emoji": "🦀" * 100,
}


@pytest.mark.parametrize("name", HOSTILE_TENANTS)
def test_a_hostile_tenant_is_a_tenant_like_any_other(make_client, name):
    tenant = HOSTILE_TENANTS[name]
    fw = make_client({"request_rate": {"rate": 1, "burst": 2}, "concurrency": {"limit": 1}})
    first = fw.admit(tenant)
    second = fw.admit(tenant)
    assert first.allowed and not second.allowed and second.limiter == "concurrency"
    first.release()
    # No caller byte in any header or body: values are ASCII built from numbers and the policy.
    for d in (first, second):
        text = "".join(f"{k}: {v}\r\n" for k, v in d.headers.items()) + d.body
        assert text.isascii() and "acme" not in text and "Injected" not in text and "\x00" not in text
        for value in d.headers.values():
            assert "\r" not in value and "\n" not in value
    # A different tenant that shares a prefix is not the same bucket.
    assert fw.admit(tenant + (b"!" if isinstance(tenant, bytes) else "!")).remaining == 1


def test_tenants_that_differ_only_after_a_nul_are_different(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 1}})
    assert fw.admit(b"a\x00one").allowed
    assert fw.admit(b"a\x00two").allowed
    assert not fw.admit(b"a\x00one").allowed


@pytest.mark.parametrize("tenant", ["", b""])
def test_an_empty_tenant_is_the_anonymous_tenant_and_limited(make_client, tenant):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 2}})
    assert fw.admit(tenant).remaining == 1
    assert fw.admit("").remaining == 0 and fw.admit(b"").status == 429  # one bucket, never skipped
    assert fw.admit().status == 429  # nothing to derive from: the same anonymous tenant
    assert fw.tenant_key(tenant) == "anonymous"


@pytest.mark.parametrize("tenant", [42, ["acme"], bytearray(b"acme")])
def test_a_tenant_that_is_neither_str_nor_bytes_nor_none_is_a_type_error(tenant):
    fw = floodwall.Floodwall({})
    with pytest.raises(TypeError, match="tenant"):
        fw.admit(tenant)  # type: ignore[arg-type]


@pytest.mark.parametrize("headers", [42, "authorization: x", b"x", [("only-a-name",)], [("a", "b", "c")],
                                     [(1, "v")], [("n", None)], ["ab"], [b"ab"]])
def test_headers_that_are_not_name_value_pairs_are_a_type_error(headers):
    fw = floodwall.Floodwall({})
    with pytest.raises(TypeError, match="header"):
        fw.admit(headers=headers)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="header"):
        fw.tenant_key(headers=headers)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="header"):
        fw.request_credential(headers=headers)  # type: ignore[arg-type]


@pytest.mark.parametrize("peer", [42, ("127.0.0.1", 80)])
def test_a_peer_that_is_neither_str_nor_bytes_is_a_type_error(peer):
    fw = floodwall.Floodwall({})
    with pytest.raises(TypeError, match="peer"):
        fw.admit(peer=peer)  # type: ignore[arg-type]


HOSTILE_HEADERS = [
    ("Authorization", "Bearer acme\r\nX-Injected: yes"),
    ("X-API-Key", "\x00acme\x00"),
    ("Authorization", "x" * (1 << 20)),
    ("X-Forwarded-For", "acme\r\nX-Injected: yes, " + "1.2.3.4, " * 10000),
]


@pytest.mark.parametrize("verified", [None, True], ids=["unchecked", "verified"])
@pytest.mark.parametrize("i", range(len(HOSTILE_HEADERS)))
def test_hostile_headers_never_reach_a_response_header(make_client, i, verified):
    fw = make_client({"request_rate": {"rate": 1, "burst": 1}, "tenant": {"trusted_proxies": ["0.0.0.0/0"]}})
    headers = [HOSTILE_HEADERS[i]]
    key = fw.tenant_key(headers=headers, peer="10.0.0.1", verified=verified)
    assert key.isascii() and "acme" not in key and "\r" not in key and "\n" not in key and len(key) <= 46
    fw.admit(headers=headers, peer="10.0.0.1", verified=verified)
    d = fw.admit(headers=headers, peer="10.0.0.1", verified=verified)
    assert d.status == 429  # one tenant: the hostile bytes were hashed or dropped, the same way each time
    text = "".join(f"{k}: {v}\r\n" for k, v in d.headers.items()) + d.content_type + d.body
    assert text.isascii() and "acme" not in text and "Injected" not in text and "\x00" not in text


@pytest.mark.parametrize("peer", ["1.2.3.4\r\nX-Injected: yes", "/run/app.sock", "", "01.2.3.4", "not an address"])
def test_a_peer_that_is_no_address_is_the_anonymous_tenant(peer):
    fw = floodwall.Floodwall({})
    assert fw.tenant_key(peer=peer) == "anonymous"


def test_a_str_tenant_that_is_not_encodable_raises_unicode_error():
    fw = floodwall.Floodwall({})
    with pytest.raises(UnicodeEncodeError):
        fw.admit("lone \udc80 surrogate")


def test_cost_zero_counts_as_one(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 5}})
    assert fw.admit("acme", cost=0).remaining == 4
    assert fw.admit("acme", cost=0).remaining == 3


def test_cost_equal_to_the_burst_is_admitted_once(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 5}})
    assert fw.admit("acme", cost=5).allowed
    assert not fw.admit("acme", cost=5).allowed


@pytest.mark.parametrize("cost", [6, 10**6, 2**64 - 1])
def test_cost_above_the_burst_is_an_invalid_argument_and_spends_nothing(make_client, cost):
    fw = make_client({"request_rate": {"rate": 1, "burst": 5}, "concurrency": {"limit": 1}})
    with pytest.raises(floodwall.InvalidArgumentError, match="^cost: ") as info:
        fw.admit("acme", cost=cost)
    assert isinstance(info.value, ValueError)
    d = fw.admit("acme")  # nothing was consumed: a full bucket and a free slot
    assert d.allowed and d.remaining == 4
    d.release()


def test_the_burst_of_an_override_bounds_the_cost_of_that_tenant(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 5, "overrides": {"big": {"rate": 1, "burst": 50}}}})
    assert fw.admit("big", cost=40).allowed
    with pytest.raises(floodwall.InvalidArgumentError, match="^cost: "):
        fw.admit("small", cost=40)


@pytest.mark.parametrize("cost", [-1, 2**64, -(2**70)])
def test_a_cost_outside_uint64_is_an_invalid_argument_naming_cost(cost):
    fw = floodwall.Floodwall({"request_rate": {"rate": 1, "burst": 5}})
    with pytest.raises(floodwall.InvalidArgumentError, match="^cost: "):
        fw.admit("acme", cost=cost)


@pytest.mark.parametrize("cost", [1.5, "1", None])
def test_a_cost_that_is_not_an_int_is_a_type_error(cost):
    fw = floodwall.Floodwall({"request_rate": {"rate": 1, "burst": 5}})
    with pytest.raises(TypeError, match="cost"):
        fw.admit("acme", cost=cost)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["route", "method"])
def test_a_nul_inside_route_or_method_is_an_invalid_argument(field):
    fw = floodwall.Floodwall({"request_rate": {"rate": 1, "burst": 5}})
    with pytest.raises(floodwall.InvalidArgumentError, match=f"^{field}: "):
        fw.admit("acme", **{field: "GE\x00T"})


def test_hostile_routes_are_escaped_in_the_metrics():
    fw = floodwall.Floodwall({"request_rate": {"rate": 1, "burst": 5}})
    fw.admit("acme", route='/"}\r\n# TYPE evil counter')
    json.dumps(fw.metrics())  # the JSON parsed, so the route was escaped
    for line in fw.prometheus().splitlines():
        assert not line.startswith("# TYPE evil")


@pytest.mark.parametrize("limiter,mode,field", [("rate", "dark", "limiter"), ("request_rate", "loud", "mode"),
                                                ("", "off", "limiter"), ("request_rate\x00x", "off", "limiter")])
def test_unknown_limiter_or_mode_names_are_invalid_arguments(limiter, mode, field):
    fw = floodwall.Floodwall({"request_rate": {"rate": 1, "burst": 5}})
    with pytest.raises(floodwall.InvalidArgumentError, match=f"^{field}: "):
        fw.set_mode(limiter, mode)


@pytest.mark.parametrize("u", [float("nan"), -0.1, 1.5, float("inf")])
def test_utilization_outside_zero_one_is_an_invalid_argument(u):
    fw = floodwall.Floodwall({"utilization": {"workers": 2}})
    with pytest.raises(floodwall.InvalidArgumentError, match="^utilization: "):
        fw.report_utilization(u)


async def _admit_async(fw, **kw):
    return await fw.admit_async(**kw)


def test_bad_input_raises_from_admit_async_too(make_client):
    import asyncio

    fw = make_client({"request_rate": {"rate": 1, "burst": 5}})
    with pytest.raises(floodwall.InvalidArgumentError, match="^cost: "):
        asyncio.run(_admit_async(fw, tenant="acme", cost=6))
    with pytest.raises(TypeError, match="header"):
        asyncio.run(_admit_async(fw, headers=[("only-a-name",)]))
    assert asyncio.run(_admit_async(fw, tenant="")).allowed  # the anonymous tenant, as from admit()
    assert fw.admit("acme").remaining == 4


def test_verified_is_true_false_or_none_and_nothing_else_names_a_tenant():
    fw = floodwall.Floodwall({})
    key = [("X-API-Key", "k")]
    assert fw.tenant_key(headers=key, peer="192.0.2.1", verified=True).startswith("key:")
    assert fw.tenant_key(headers=key, peer="192.0.2.1", verified=False) == "ip:192.0.2.1"
    assert fw.tenant_key(headers=key, peer="192.0.2.1", verified=None) == "ip:192.0.2.1"
    # "false" is a non-empty string: taken for its truth it would vouch for the key. Refused, as in Node and Ruby.
    for bad in ("false", "yes", 1, 0, [0]):
        with pytest.raises(TypeError, match="^verified: "):
            fw.tenant_key(headers=key, peer="192.0.2.1", verified=bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="^verified: "):
            fw.admit(headers=key, peer="192.0.2.1", verified=bad)  # type: ignore[arg-type]


def test_an_async_verify_hook_under_wsgi_is_refused_or_counts_as_no():
    from floodwall import wsgi

    async def verify(key, environ):
        return True

    fw = floodwall.Floodwall({"request_rate": {"rate": 0.001, "burst": 1}})
    with pytest.raises(TypeError, match="^verify: "):
        wsgi.FloodwallMiddleware(lambda e, s: [], fw, verify=verify)
    # A plain function that returns an awaitable all the same: a failing hook (the address), not a yes: two
    # made-up keys from one address share its bucket of 1.
    def app(environ, start_response):
        start_response("200 OK", [])
        return [b"ok"]

    mw = wsgi.FloodwallMiddleware(app, fw, verify=lambda key, environ: verify(key, environ))
    statuses = []
    for key in ("made-up-1", "made-up-2"):
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "REMOTE_ADDR": "192.0.2.1", "HTTP_X_API_KEY": key}
        body = mw(environ, lambda status, headers, exc_info=None: statuses.append(status))
        b"".join(body)
        getattr(body, "close", lambda: None)()
    assert [s.split()[0] for s in statuses] == ["200", "429"], statuses


@pytest.mark.parametrize("timeout,error", [(0, ValueError), (-1, ValueError), (float("nan"), ValueError),
                                           (float("inf"), ValueError), ("1", TypeError), (True, TypeError)])
@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_a_verify_timeout_that_is_no_positive_number_of_seconds_is_refused(kind, timeout, error):
    from floodwall import asgi, wsgi

    middleware = {"asgi": asgi, "wsgi": wsgi}[kind].FloodwallMiddleware
    with pytest.raises(error, match="^verify_timeout: "):
        middleware(lambda *a: None, floodwall.Floodwall({}), verify=lambda c, r: True, verify_timeout=timeout)


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_a_verify_hook_that_is_not_callable_is_a_type_error(kind):
    from floodwall import asgi, wsgi

    middleware = {"asgi": asgi, "wsgi": wsgi}[kind].FloodwallMiddleware
    with pytest.raises(TypeError, match="^verify: "):
        middleware(lambda *a: None, floodwall.Floodwall({}), verify={"k-1"})  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_a_verify_timeout_without_a_verify_hook_is_a_type_error(kind):
    from floodwall import asgi, wsgi

    middleware = {"asgi": asgi, "wsgi": wsgi}[kind].FloodwallMiddleware
    with pytest.raises(TypeError, match="^verify_timeout: "):
        middleware(lambda *a: None, floodwall.Floodwall({}), verify_timeout=1.0)


@pytest.mark.parametrize("path", [42, 1.5, ["/orders"], object()])
def test_a_path_that_is_neither_str_nor_bytes_nor_none_is_a_type_error_naming_path(path):
    with floodwall.Floodwall({"request_rate": {"rate": 1, "burst": 1}}) as fw:
        with pytest.raises(TypeError, match="path: "):
            fw.admit("t", path=path)
        with pytest.raises(TypeError, match="path: "):
            fw.request_route(path=path)
        assert fw.admit("t").allowed  # nothing was spent by the refused calls


@pytest.mark.parametrize("path", ["/a\0b", "/" + "x" * 1_000_000, "/\r\n/{(}", b"/\xff\xfe", ""])
def test_a_hostile_path_is_text_never_a_crash_or_a_header(path):
    with floodwall.Floodwall({"request_rate": {"rate": 100, "burst": 100, "limits": [
            {"name": "x", "routes": ["/x/*"], "rate": 1, "burst": 1}]}}) as fw:
        d = fw.admit("t", path=path)
        assert d.allowed and all("\n" not in v and "\r" not in v for v in d.headers.values())
        assert isinstance(fw.request_route(path=path), str)
        assert len(fw.metrics()["routes"]) <= 3  # default and the globs: a path is never a family of its own
