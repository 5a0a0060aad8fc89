"""The Python API on both stores: decisions, headers and bodies from the core, releases, modes, metrics."""

from __future__ import annotations

import json
import pathlib

import pytest

import os

import floodwall
from conftest import admitted_soon, eventually

SEED = {"request_rate": {"rate": 100, "burst": 500}, "concurrency": {"limit": 20}}


def test_first_admit_carries_the_seed_headers_in_order(make_client):
    fw = make_client(SEED)
    d = fw.admit("acme")
    assert d.allowed and d.status == 200 and d.limiter is None
    assert list(d.headers.items()) == [
        ("RateLimit-Policy", '"request_rate";q=500;w=5, "concurrency";q=20;qu="concurrent-requests"'),
        ("RateLimit", '"concurrency";r=19'),
        ("RateLimit-Limit", "500"),
        ("RateLimit-Remaining", "499"),
        ("RateLimit-Reset", "1"),
    ]
    assert d.body == "" and d.content_type == ""  # nothing to send for an allowed request
    assert d.cost == 1
    assert (d.limit, d.remaining, d.reset, d.retry_after) == (500, 499, 1, 0)
    assert (d.concurrency_limit, d.concurrency_remaining) == (20, 19)
    assert d.ticket != 0 and not d.failed_open and d.fail_reason is None and d.dark_limiter is None
    d.release()


def test_a_drained_bucket_answers_429_with_retry_after_and_the_core_body(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 3}})
    allowed = [fw.admit("acme").allowed for _ in range(3)]
    d = fw.admit("acme")
    assert allowed == [True, True, True]
    assert (d.allowed, d.status, d.limiter, d.remaining) == (False, 429, "request_rate", 0)
    assert d.retry_after >= 1 and d.headers["Retry-After"] == str(d.retry_after)
    assert list(d.headers)[-1] == "Retry-After"
    assert d.content_type == "application/json"
    body = json.loads(d.body)
    assert body == {
        "error": {
            "type": "rate_limit_error",
            "limit_type": "request_rate",
            "message": "Request rate limit exceeded: 1 requests/second sustained (bursts to 3). "
            f"Retry after {d.retry_after}s.",
            "limit": 3,
            "rate": 1,
            "retry_after": d.retry_after,
        }
    }
    assert d.ticket == 0  # a rejection holds nothing


def test_cost_spends_that_many_tokens(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 10}})
    assert fw.admit("acme", cost=4).remaining == 6
    assert fw.admit("acme", cost=6).remaining == 0
    assert fw.admit("acme", cost=1).status == 429


def test_a_weighted_rejection_names_its_cost_and_the_limit(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 10}})
    fw.admit("acme", cost=8)
    d = fw.admit("acme", cost=5)
    assert (d.status, d.cost) == (429, 5)
    error = json.loads(d.body)["error"]
    assert error["cost"] == 5 and error["limit"] == 10
    assert "costs 5 tokens" in error["message"] and "1 tokens/second" in error["message"]
    assert fw.admit("acme", cost=0).cost == 1  # 0 counts as 1


def test_problem_json_bodies_carry_their_own_content_type(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 1}, "body_format": "problem+json"})
    assert fw.admit("acme").content_type == ""
    d = fw.admit("acme")
    assert d.content_type == "application/problem+json"
    problem = json.loads(d.body)
    assert problem["status"] == 429 and problem["type"].startswith("https://")
    assert problem["retry_after"] == d.retry_after


def test_the_core_derives_the_tenant_from_the_headers_and_the_peer(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 2}})
    bearer = fw.tenant_key(headers=[("Authorization", "Bearer tok")], peer="192.0.2.1", verified=True)
    assert bearer.startswith("key:") and len(bearer) == 4 + 32 and "tok" not in bearer
    # The same verified token is one tenant whatever the peer, the header's case, str or bytes, or a mapping.
    assert fw.tenant_key(headers=[(b"authorization", b"Bearer tok")], peer=b"198.51.100.9", verified=True) == bearer
    assert fw.tenant_key(headers={"AUTHORIZATION": "Bearer tok"}, verified=True) == bearer
    assert fw.tenant_key(headers=iter([("x-api-key", "tok")]), verified=True) == bearer  # one secret, one tenant
    assert fw.tenant_key(peer="192.0.2.1") == "ip:192.0.2.1"
    assert fw.tenant_key(peer="[::ffff:192.0.2.1]:443") == "ip:192.0.2.1"
    assert fw.tenant_key() == "anonymous" == fw.tenant_key("")
    assert fw.tenant_key("acme", headers=[("Authorization", "Bearer tok")]) == "acme"  # a given tenant wins
    # admit() decides with that key.
    assert fw.admit(headers=[("Authorization", "Bearer tok")], peer="192.0.2.1", verified=True).remaining == 1
    assert fw.admit(headers=[(b"x-api-key", b"tok")], peer="203.0.113.5", verified=True).remaining == 0
    assert fw.admit(bearer).status == 429
    assert fw.admit(peer="192.0.2.1").remaining == 1


def test_a_credential_nobody_vouched_for_is_keyed_by_the_address(make_client):
    fw = make_client({"request_rate": {"rate": 0.001, "burst": 2}})
    token = [("Authorization", "Bearer made-up")]
    assert fw.tenant_key(headers=token, peer="192.0.2.1") == "ip:192.0.2.1"  # unchecked: the default policy
    assert fw.tenant_key(headers=token, peer="192.0.2.1", verified=False) == "ip:192.0.2.1"
    assert fw.tenant_key(headers=token, peer="192.0.2.1", verified=True).startswith("key:")
    # Made-up keys from one address share its bucket; a verified one has its own.
    assert fw.admit(headers=[("X-API-Key", "made-up-1")], peer="192.0.2.1").remaining == 1
    assert fw.admit(headers=[("X-API-Key", "made-up-2")], peer="192.0.2.1", verified=False).remaining == 0
    assert fw.admit(headers=[("X-API-Key", "made-up-3")], peer="192.0.2.1").status == 429
    assert fw.admit(headers=[("X-API-Key", "real")], peer="192.0.2.1", verified=True).remaining == 1


def test_credentials_unverified_lets_an_unchecked_key_name_its_tenant_but_never_a_rejected_one(make_client):
    fw = make_client({"tenant": {"credentials": "unverified"}})
    token = [("Authorization", "Bearer t")]
    key = fw.tenant_key(headers=token, peer="192.0.2.1", verified=True)
    assert fw.tenant_key(headers=token, peer="192.0.2.1") == key
    assert fw.tenant_key(headers=token, peer="192.0.2.1", verified=False) == "ip:192.0.2.1"


def test_request_credential_names_what_a_verify_hook_is_asked(make_client):
    fw = make_client({})
    assert fw.request_credential(headers=[("Authorization", "  Bearer tok  ")]) == "tok"
    assert fw.request_credential(headers=[(b"x-api-key", b" k-1 ")], peer=b"192.0.2.1") == "k-1"
    assert fw.request_credential(headers={"X-API-Key": "k", "Authorization": "Bearer t"}) == "t"  # tenant.from
    assert fw.request_credential(headers=[("X-API-Key", " ")], peer="192.0.2.1") is None
    assert fw.request_credential(peer="192.0.2.1") is None and fw.request_credential() is None
    assert fw.request_credential(headers=[(b"x-api-key", b"caf\xc3\xa9")]) == "caf\u00e9"  # UTF-8
    assert fw.request_credential(headers=[(b"x-api-key", b"k\xff")]) == "k\udcff"  # else surrogate escapes
    # The address before credentials in tenant.from: no credential is ever asked about.
    ip_first = make_client({"tenant": {"from": ["ip", "x-api-key"]}})
    assert ip_first.request_credential(headers=[("X-API-Key", "k")], peer="192.0.2.1") is None


def test_deadline_ms_is_the_policys_redis_deadline(make_client, store):
    assert make_client({}).deadline_ms == store.get("redis", {}).get("deadline_ms", 50)
    assert make_client({"redis": {"deadline_ms": 120}}).deadline_ms == 120


def test_trusted_proxies_hand_the_key_to_the_forwarded_client(make_client):
    fw = make_client({"tenant": {"trusted_proxies": ["10.0.0.0/8"]}})
    xff = [("X-Forwarded-For", "198.51.100.7, 10.0.0.3")]
    assert fw.tenant_key(headers=xff, peer="10.0.0.2") == "ip:198.51.100.7"
    assert fw.tenant_key(headers=xff, peer="192.0.2.1") == "ip:192.0.2.1"  # an untrusted peer is the client


def test_tenant_headers_are_the_ones_the_policy_reads(make_client):
    assert make_client({}).tenant_headers == ("authorization", "x-api-key")
    assert make_client({"tenant": {"from": ["x-api-key", "ip"]}}).tenant_headers == ("x-api-key",)
    # The forwarded header only once a proxy is trusted, and the one the policy names.
    proxied = {"trusted_proxies": ["10.0.0.0/8"]}
    assert make_client({"tenant": proxied}).tenant_headers == ("authorization", "x-api-key", "x-forwarded-for")
    rfc = {**proxied, "forwarded_header": "forwarded"}
    assert make_client({"tenant": rfc}).tenant_headers == ("authorization", "x-api-key", "forwarded")


def test_can_block_is_true_only_for_a_network_store(make_client, store):
    fw = make_client({})
    assert fw.can_block is store["store"].startswith("redis://")


RULES = {
    "request_rate": {
        "rate": 0.001,
        "burst": 10,
        "limits": [{"name": "writes", "routes": ["/*"], "methods": ["POST"], "rate": 0.001, "burst": 1}],
    },
    "quotas": [{"name": "daily", "limit": 100, "period": "day"}],
}


def test_a_decision_names_its_limits_and_quotas(make_client):
    fw = make_client(RULES)
    first = fw.admit("acme", route="/orders", method="POST")
    assert first.allowed and first.rules == ["writes", "daily"]  # limits in policy order, then quotas
    assert first.rule is None and first.dark_rule is None
    policy = first.headers["RateLimit-Policy"]
    assert '"writes";q=1;' in policy and '"daily";q=100;w=86400' in policy
    assert policy.index('"writes"') < policy.index('"daily"')
    second = fw.admit("acme", route="/orders", method="POST")
    assert (second.allowed, second.status, second.limiter, second.rule) == (False, 429, "request_rate", "writes")
    assert second.rules == ["writes", "daily"] and "rule=writes" in repr(second)
    assert '"writes"' in second.headers["RateLimit-Policy"] and '"daily"' in second.headers["RateLimit-Policy"]
    error = json.loads(second.body)["error"]
    assert error["policy"] == "writes" and error["limit"] == 1
    read = fw.admit("acme", route="/orders", method="GET")
    assert read.allowed and read.rules == ["daily"] and read.rule is None
    assert '"writes"' not in read.headers["RateLimit-Policy"]
    # A policy with no rules: nothing to name.
    plain = make_client({"request_rate": {"rate": 1, "burst": 2}}).admit("acme")
    assert (plain.rules, plain.rule, plain.dark_rule) == ([], None, None)
    # A dark limit lets the request in and names itself as the one that would have rejected.
    writes = {**RULES["request_rate"]["limits"][0], "mode": "dark"}
    fw = make_client({**RULES, "request_rate": {**RULES["request_rate"], "limits": [writes]}})
    fw.admit("acme", route="/orders", method="POST")
    d = fw.admit("acme", route="/orders", method="POST")
    assert (d.allowed, d.rule, d.dark_rule, d.dark_limiter) == (True, None, "writes", "request_rate")


def test_tenants_have_separate_buckets_and_str_is_its_utf8_bytes(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 2}})
    fw.admit("café")
    assert fw.admit("café".encode("utf-8")).remaining == 0  # the same tenant as bytes
    assert fw.admit("cafe").remaining == 1


def test_overrides_give_a_tenant_its_own_limits(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 2, "overrides": {"big": {"rate": 10, "burst": 50}}}})
    assert fw.admit("big").limit == 50
    assert fw.admit("small").limit == 2


def test_concurrency_holds_a_slot_until_release(make_client):
    fw = make_client({"concurrency": {"limit": 2}})
    a, b = fw.admit("acme"), fw.admit("acme")
    c = fw.admit("acme")
    assert (a.allowed, b.allowed) == (True, True)
    assert (c.allowed, c.status, c.limiter, c.retry_after) == (False, 429, "concurrency", 1)
    assert json.loads(c.body)["error"]["limit_type"] == "concurrency"
    fw.release(a)
    assert admitted_soon(fw, "acme").allowed


def test_release_is_idempotent_and_accepts_tickets(make_client):
    fw = make_client({"concurrency": {"limit": 1}})
    d = fw.admit("acme")
    fw.release(d)
    fw.release(d)
    d.release()
    fw.release(0)
    e = admitted_soon(fw, "acme")
    fw.release(e.ticket)
    assert admitted_soon(fw, "acme").allowed


def test_the_context_manager_releases_even_when_the_body_raises(make_client):
    fw = make_client({"concurrency": {"limit": 1}})
    with pytest.raises(RuntimeError):
        with fw.admit("acme") as d:
            assert d.allowed
            raise RuntimeError("handler failed")
    with admitted_soon(fw, "acme") as again:
        assert again.allowed
    assert admitted_soon(fw, "acme").allowed


def test_concurrency_counts_only_the_listed_routes(make_client):
    fw = make_client({"concurrency": {"limit": 1, "routes": ["/search"]}})
    held = fw.admit("acme", route="/search")
    assert not fw.admit("acme", route="/search").allowed
    other = fw.admit("acme", route="/status")
    assert other.allowed and other.concurrency_limit == 0
    held.release()


def test_the_fleet_shedder_answers_503_and_lets_critical_traffic_through(make_client):
    fw = make_client({"fleet": {"capacity": 1}})
    held = fw.admit("a")
    shed = fw.admit("b")
    assert (shed.allowed, shed.status, shed.limiter) == (False, 503, "fleet")
    assert "Retry-After" in shed.headers and json.loads(shed.body)["error"]["limit_type"] == "fleet"
    assert fw.admit("b", critical=True).allowed
    held.release()
    assert admitted_soon(fw, "b").allowed


def test_the_utilization_shedder_sheds_gets_after_its_ramp(make_client):
    fw = make_client(
        {"utilization": {"workers": 4, "sample_s": 0.01, "ramp_s": 0.05, "delay_s": 0}}
    )
    fw.report_utilization(1.0)
    eventually(lambda: fw.admit("acme", method="GET").status == 503, what="utilization shedding")
    d = fw.admit("acme", sandbox=True)
    assert (d.status, d.limiter) == (503, "utilization")
    assert fw.shedding_amount() > 0


def test_dark_mode_allows_and_names_who_would_have_blocked(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 1}})
    fw.admit("acme")
    fw.set_mode("request_rate", "dark")
    assert fw.get_mode("request_rate") == "dark"
    d = fw.admit("acme")
    assert (d.allowed, d.status, d.limiter, d.dark_limiter) == (True, 200, None, "request_rate")
    assert fw.metrics()["decisions"]["request_rate"]["dark_rejected"] == 1
    fw.set_mode("request_rate", "enforce")
    assert fw.admit("acme").status == 429


def test_off_mode_skips_the_limiter(make_client):
    fw = make_client({"concurrency": {"limit": 1}})
    fw.admit("acme")
    fw.set_mode("concurrency", "off")
    assert fw.get_mode("concurrency") == "off"
    assert fw.admit("acme").allowed


def test_every_limiter_and_mode_name_is_accepted(make_client):
    # The core's names (fw_limiter_name), as Node and Ruby take them too.
    assert floodwall.LIMITERS == ("request_rate", "concurrency", "fleet", "utilization", "adaptive")
    fw = make_client({})
    for limiter in floodwall.LIMITERS:
        for mode in floodwall.MODES:
            fw.set_mode(limiter, mode)


def test_metrics_count_decisions_and_prometheus_exposes_them(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 2}})
    for _ in range(3):
        fw.admit("acme", route="/a")
    counts = fw.metrics()["decisions"]["request_rate"]
    assert (counts["allowed"], counts["rejected"]) == (2, 1)
    assert fw.metrics()["routes"]["/a"]["request_rate"]["rejected"] == 1
    text = fw.prometheus()
    assert "# TYPE" in text and "request_rate" in text


def test_a_policy_can_be_json_text_a_path_or_a_pathlib_path(tmp_path: pathlib.Path):
    policy = {"request_rate": {"rate": 1, "burst": 7}}
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(policy))
    for source in (policy, json.dumps(policy), "  " + json.dumps(policy), str(path), path, json.dumps(policy).encode()):
        with floodwall.Floodwall(source) as fw:
            assert fw.admit("acme").limit == 7


def test_a_closed_client_refuses_further_calls():
    fw = floodwall.Floodwall({"request_rate": {"rate": 1, "burst": 2}})
    d = fw.admit("acme")
    fw.close()
    assert fw.closed
    with pytest.raises(floodwall.ClosedError):
        fw.admit("acme")
    with pytest.raises(floodwall.ClosedError):
        d.headers
    with pytest.raises(floodwall.ClosedError):
        fw.tenant_key(peer="192.0.2.1")
    d.release()  # releasing after close is harmless: the client holds nothing any more
    fw.close()  # idempotent


def test_versions_agree():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    version = open(os.path.join(root, "VERSION")).read().strip()
    assert floodwall.__version__ == version  # the core's fw_version()
    from importlib.metadata import version as dist_version
    assert dist_version("floodwall") == version  # the wheel's metadata, which pyproject reads from VERSION


def test_the_adaptive_limit_sheds_with_its_own_503_and_dark_mode_says_so(make_client):
    # At most two in flight (min = max = 2): a third is shed by "adaptive", with the core's 503.
    fw = make_client({"adaptive": {"enabled": True, "min_limit": 2, "max_limit": 2, "initial_limit": 2,
                                   "critical_reserve": 0}})
    held = [fw.admit("acme"), fw.admit("acme")]
    assert all(d.allowed for d in held)
    d = fw.admit("acme")
    assert (d.allowed, d.status, d.limiter) == (False, 503, "adaptive")
    assert d.headers["Retry-After"] == "1"
    assert json.loads(d.body)["error"]["limit_type"] == "adaptive"
    fw.set_mode("adaptive", "dark")
    d = fw.admit("acme")
    assert (d.allowed, d.dark_limiter) == (True, "adaptive")
    fw.set_mode("adaptive", "enforce")
    for h in held:
        fw.release(h)
    assert fw.admit("acme").allowed
    assert 'floodwall_adaptive_limit{route="*"} 2' in fw.prometheus()
