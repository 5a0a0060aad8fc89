"""tests/vectors.json, the vectors every floodwall suite (core, Python, Node, Ruby) checks alike, through the
Python binding's public API: tenant keys and the credential a verify hook is asked about, the route a
request's rules match (the same route family for one app shape in every framework), how a policy given as a
string or a path is read, backoff delays,
Retry-After values, and whole decisions (status, headers in order, content type and body). A missing file
or an absent or empty section fails."""

from __future__ import annotations

import asyncio
import json
import pathlib
from typing import Any, Dict, List

import pytest

import floodwall
from floodwall import backoff
from floodwall.wsgi import FloodwallMiddleware, request_headers

VECTORS_PATH = pathlib.Path(__file__).resolve().parents[2] / "tests" / "vectors.json"
SECTIONS = ("tenant_keys", "routes", "policy_text", "backoff", "retry_after", "decisions")


def load() -> Dict[str, Any]:
    # Read at collection: a missing or broken file is an error of this module, not a silent zero tests.
    with open(VECTORS_PATH, encoding="utf-8") as f:
        vectors = json.load(f)
    assert isinstance(vectors, dict), f"{VECTORS_PATH}: not a JSON object"
    return vectors


VECTORS = load()


def section(name: str) -> List[Dict[str, Any]]:
    """A section's vectors, for parametrize; an absent or empty section becomes one failing case."""
    cases = VECTORS.get(name)
    if not isinstance(cases, list) or not cases:
        return [pytest.param(None, id=f"{name}-missing")]
    return [pytest.param(c, id=f"{i}-{c.get('name', '')}"[:80]) for i, c in enumerate(cases)]


def present(name: str, case: Any) -> Dict[str, Any]:
    assert case is not None, f"{VECTORS_PATH}: section {name!r} is missing or empty"
    return case


def test_every_section_is_there_and_not_empty():
    for name in SECTIONS:
        assert isinstance(VECTORS.get(name), list) and VECTORS[name], f"{VECTORS_PATH}: section {name!r}"


def pairs(headers: List[List[str]], as_bytes: bool) -> List[tuple]:
    if as_bytes:
        return [(n.encode("ascii"), v.encode("ascii")) for n, v in headers]
    return [(n, v) for n, v in headers]


# A case's "check", what the app said of the request's credential, as admit(verified=...) takes it.
VERIFIED = {None: None, "verified": True, "rejected": False}


def verified_of(case: Dict[str, Any]) -> Any:
    check = case.get("check")
    assert check in VERIFIED, f"{case.get('name')}: unknown check {check!r}"
    return VERIFIED[check]


def one_token_policy(case: Dict[str, Any]) -> Dict[str, Any]:
    """One token per tenant that never comes back, under the case's tenant section: an admit says which
    tenant spent it."""
    policy: Dict[str, Any] = {"request_rate": {"rate": 0.001, "burst": 1}}
    if "tenant" in case:
        policy["tenant"] = case["tenant"]
    return policy


@pytest.mark.parametrize("case", section("tenant_keys"))
def test_tenant_key(case):
    case = present("tenant_keys", case)
    verified = verified_of(case)
    with floodwall.Floodwall(one_token_policy(case)) as fw:
        for as_bytes in (False, True):  # ASGI gives bytes, WSGI-style callers str: one key
            headers = pairs(case["headers"], as_bytes)
            peer = case["peer"]
            if as_bytes and peer is not None:
                peer = peer.encode("ascii")
            assert fw.tenant_key(headers=headers, peer=peer, verified=verified) == case["key"], (case, as_bytes)
            assert fw.request_credential(headers=headers, peer=peer) == case["credential"], (case, as_bytes)
        # admit() derives that same key: the request spends the one token of the tenant named by the key.
        assert fw.admit(headers=pairs(case["headers"], False), peer=case["peer"], verified=verified).allowed
        assert fw.admit(case["key"]).status == 429, case


@pytest.mark.parametrize("case", section("tenant_keys"))
def test_tenant_key_async(case):
    # admit_async() takes the same request and check as admit(): the one token of the case's tenant.
    case = present("tenant_keys", case)

    async def spend(fw: floodwall.Floodwall) -> floodwall.Decision:
        return await fw.admit_async(headers=pairs(case["headers"], True), peer=case["peer"],
                                    verified=verified_of(case))

    with floodwall.Floodwall(one_token_policy(case)) as fw:
        assert asyncio.run(spend(fw)).allowed
        assert fw.admit(case["key"]).status == 429, case


@pytest.mark.parametrize("case", section("tenant_keys"))
def test_tenant_key_through_the_wsgi_middleware(case):
    # The WSGI middleware looks up only the headers the policy reads (Floodwall.tenant_headers) among the
    # environ's, which a cookie, a user agent and the rest sit beside: the tenant it charges is the one
    # that every header of the request names. Its verify hook is asked about the case's credential and
    # answers the case's check (no hook when the case has none).
    case = present("tenant_keys", case)
    verified = verified_of(case)
    asked = []

    def verify(credential: str, env: Dict[str, Any]) -> bool:
        asked.append(credential)
        return bool(verified)

    environ: Dict[str, Any] = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "HTTP_COOKIE": "session=" + "c" * 900,
                               "HTTP_USER_AGENT": "Mozilla/5.0", "HTTP_ACCEPT_LANGUAGE": "en"}
    for name, value in case["headers"]:
        key = "HTTP_" + name.upper().replace("-", "_")
        environ[key] = environ[key] + "," + value if key in environ else value  # as a server joins them
    if case["peer"] is not None:
        environ["REMOTE_ADDR"] = case["peer"]
    with floodwall.Floodwall(one_token_policy(case)) as fw:
        options: Dict[str, Any] = {} if verified is None else {"verify": verify}
        app = FloodwallMiddleware(lambda env, start: start("200 OK", []) or [b"ok"], fw, route="/", **options)
        result = app(environ, lambda status, headers, exc_info=None: None)
        result.close()
        every_header = fw.tenant_key(headers=request_headers(environ), peer=case["peer"], verified=verified)
        assert fw.admit(every_header).status == 429, (case, every_header)
        if verified is not None:
            assert asked == ([] if case["credential"] is None else [case["credential"]]), case


@pytest.mark.parametrize("case", section("routes"))
def test_request_route(case):
    case = present("routes", case)
    with floodwall.Floodwall({"request_rate": {"rate": 1, "burst": 1}}) as fw:
        got = fw.request_route(route=case.get("route"), path=case.get("path"))
        assert got == case["route_family"], case
        if "path" in case:  # a path as WSGI and ASGI servers give it: bytes, or a str of them
            assert fw.request_route(route=case.get("route"), path=case["path"].encode()) == got, case


@pytest.mark.parametrize("case", section("policy_text"))
def test_a_policy_string_is_json_text_or_a_path_by_one_rule(case):
    # Through the constructor, as a user gives a policy: a str, or a pathlib.Path when the case is a path.
    case = present("policy_text", case)
    policy = pathlib.Path(case["input"]) if case.get("is_path") else case["input"]
    if "error" in case:
        with pytest.raises(floodwall.PolicyError) as e:
            floodwall.Floodwall(policy)
        assert str(e.value) == case["error"]
        return
    assert floodwall._policy_text(policy) == case["text"]
    try:
        floodwall.Floodwall(policy).close()  # JSON text: the core's own verdict on it, never a file's
    except floodwall.PolicyError as e:
        assert "cannot read the file" not in str(e) and str(e).startswith("policy: "), e


@pytest.mark.parametrize("case", section("routes"))
def test_a_routes_family_is_what_a_policy_glob_matches(case):
    # A limit whose only glob is the route family of a case with a pattern applies to an admit with the
    # case's route and path: the one token it gives is spent, the next request is refused by that rule.
    # (A glob is made canonical as a pattern is, so a path's own "(" or "{" are not a glob's text.)
    case = present("routes", case)
    family = case["route_family"]
    if "route" not in case:
        return  # a path, or the default route: checked by test_request_route
    policy = {"request_rate": {"rate": 1000, "burst": 1000,
                               "limits": [{"name": "only", "routes": [family], "rate": 0.001, "burst": 1}]}}
    with floodwall.Floodwall(policy) as fw:
        kw = {"route": case.get("route"), "path": case.get("path")}
        assert fw.admit("t", **kw).allowed, case
        refused = fw.admit("t", **kw)
        assert refused.status == 429 and refused.rule == "only", case


@pytest.mark.parametrize("case", section("backoff"))
def test_backoff_delay(case):
    case = present("backoff", case)
    kw = {k: case[k + "_s"] for k in ("base", "cap") if k + "_s" in case}
    ra = case["retry_after_s"]
    got = backoff.delay(case["attempt"], None if ra == -1 else ra, random=lambda: case["random"], **kw)
    assert got == pytest.approx(case["delay_s"], abs=1e-9, rel=0), case
    if ra < 0:  # the jitter alone
        jitter = backoff.full_jitter(case["attempt"], random=lambda: case["random"], **kw)
        assert jitter == pytest.approx(case["delay_s"], abs=1e-9, rel=0), case


@pytest.mark.parametrize("case", section("retry_after"))
def test_retry_after(case):
    case = present("retry_after", case)
    got = backoff.parse_retry_after(case["value"], now=case["now"])
    if case["seconds"] is None:
        assert got is None, case
    else:
        assert got == pytest.approx(case["seconds"], abs=1e-9, rel=0), case
    assert backoff.parse_retry_after(case["value"].encode("ascii"), now=case["now"]) == got


def admit(fw: floodwall.Floodwall, request: Dict[str, Any]) -> floodwall.Decision:
    kw: Dict[str, Any] = {k: request[k] for k in ("route", "method", "cost") if k in request}
    if "tenant" in request:
        return fw.admit(request["tenant"], **kw)
    return fw.admit(headers=pairs(request.get("headers", []), False), peer=request.get("peer"),
                    verified=verified_of(request), **kw)


@pytest.mark.parametrize("case", section("decisions"))
def test_decisions(case):
    case = present("decisions", case)
    assert case["requests"], case["name"]
    with floodwall.Floodwall(case["policy"]) as fw:
        held = []
        for i, request in enumerate(case["requests"]):
            d = admit(fw, request)
            expect = request["expect"]
            where = f"{case['name']} request {i}"
            assert d.status == expect["status"], where
            assert d.allowed == (expect["status"] == 200), where
            assert [list(h) for h in d.headers.items()] == [list(h) for h in expect["headers"]], where
            assert d.content_type == expect["content_type"], where
            assert d.body == expect["body"], where
            if request.get("hold"):
                held.append(d)
            else:
                d.release()
        for d in held:
            d.release()
