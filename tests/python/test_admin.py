"""Floodwall.admin: tenants' overrides, tiers, blocks and resets kept in the store, applied to the next
request; on the memory store and a real Redis (the make_client fixture runs each test on both), and, on
Redis, from another client than the one that admits, as an admin endpoint of another process would."""

from __future__ import annotations

import json
import threading
import time

import pytest

import floodwall
from conftest import free_port
from test_redis import max_gap, redis_policy

TIERS = {
    "request_rate": {"rate": 0.001, "burst": 2},
    "tiers": {
        "pro": {
            "rate": 0.001,
            "burst": 10,
            "limits": [{"name": "search", "routes": ["/search"], "rate": 0.001, "burst": 3}],
        }
    },
}


def allowed(fw, tenant, n, **kw):
    return sum(fw.admit(tenant, **kw).allowed for _ in range(n))


def test_admin_is_one_object_of_the_client(make_client):
    fw = make_client(TIERS)
    assert isinstance(fw.admin, floodwall.Admin) and fw.admin is fw.admin


def test_an_override_raises_the_tenants_limit_on_its_next_request_and_goes_away(make_client):
    fw = make_client(TIERS)
    assert allowed(fw, "acct", 3) == 2
    fw.admin.set_override("acct", rate=0.001, burst=6)
    d = fw.admit("acct")
    assert d.allowed and (d.limit, d.remaining) == (6, 3)  # 2 of the 6 were spent already
    assert allowed(fw, "acct", 5) == 3
    fw.admin.remove_override("acct")
    d = fw.admit("acct")
    assert not d.allowed and d.limit == 2
    assert allowed(fw, "other", 3) == 2  # another tenant keeps the policy's bucket


def test_a_tier_gives_its_bucket_and_its_limits(make_client):
    fw = make_client(TIERS)
    fw.admin.set_tier("acct", "pro")
    assert allowed(fw, "acct", 5, route="/search") == 3  # pro's search limit
    assert allowed(fw, "acct", 10, route="/other") == 7  # pro's bucket of 10
    shown = fw.admin.show("acct")
    assert shown["tier"] == "pro" and shown["blocked"] is False and shown["override"] is None
    assert shown["request_rate"]["limit"] == 10 and shown["request_rate"]["remaining"] == 0
    assert [(x["name"], x["remaining"]) for x in shown["limits"]] == [("search", 0)]
    fw.admin.set_tier("acct", None)
    d = fw.admit("acct", route="/search")
    assert not d.allowed and d.limit == 2 and d.rules == []  # back in no tier: the policy's spent bucket
    assert fw.admin.show("acct")["tier"] is None


def test_a_block_answers_403_consumes_nothing_and_unblock_lifts_it(make_client):
    fw = make_client(TIERS)
    plain = fw.admit("acct")
    assert (plain.blocked, plain.blocked_until) == (False, None)
    fw.admin.block("acct")
    d = fw.admit("acct")
    assert (d.allowed, d.status, d.limiter, d.blocked, d.blocked_until) == (False, 403, None, True, None)
    assert d.ticket == 0 and "blocked=True" in repr(d)
    assert d.headers == {}  # until unblocked: no Retry-After to give
    assert d.content_type == "application/json"
    body = json.loads(d.body)["error"]
    assert (body["type"], body["limit_type"]) == ("forbidden", "blocked") and "until" not in body
    shown = fw.admin.show("acct")
    assert shown["blocked"] is True and shown["blocked_until"] is None

    before = int(time.time())
    fw.admin.block("acct", seconds=120)
    d = fw.admit("acct")
    assert d.status == 403 and d.blocked
    assert before + 119 <= d.blocked_until <= int(time.time()) + 121
    assert 119 <= int(d.headers["Retry-After"]) <= 121
    body = json.loads(d.body)["error"]
    assert body["limit_type"] == "blocked" and body["retry_after"] == int(d.headers["Retry-After"])
    assert fw.admin.show("acct")["blocked_until"] == body["until"]  # RFC 3339, as the body says it

    fw.admin.unblock("acct")
    assert fw.admin.show("acct")["blocked"] is False
    assert allowed(fw, "acct", 3) == 1  # the 403s consumed nothing: the plain admit spent 1 of 2


def test_show_names_tier_blocked_request_rate_and_concurrency(make_client):
    fw = make_client({**TIERS, "concurrency": {"limit": 3}})
    with fw.admit("acct"):
        shown = fw.admin.show("acct")
    assert shown["tenant"] == "acct" and shown["tier"] is None and shown["blocked"] is False
    assert shown["override"] is None and shown["blocked_until"] is None
    rate = shown["request_rate"]
    assert set(rate) == {"limit", "remaining", "rate", "full_in_s"}
    assert (rate["limit"], rate["remaining"], rate["rate"]) == (2, 1, 0.001)
    assert shown["concurrency"] == {"limit": 3, "in_flight": 1}
    assert shown["limits"] == [] and shown["quotas"] == [] and shown["store_time"].endswith("Z")
    # Bytes name the same tenant. The slot was released, but a release is sent without waiting for Redis'
    # reply (over the I/O thread's connection, not the admin call's), so show may come first: ask again.
    deadline = time.monotonic() + 5
    after = fw.admin.show(b"acct")
    while after["concurrency"]["in_flight"] != 0 and time.monotonic() < deadline:
        time.sleep(0.01)
        after = fw.admin.show(b"acct")
    assert after["tenant"] == "acct" and after["concurrency"] == {"limit": 3, "in_flight": 0}


def test_reset_fills_the_buckets_and_keeps_the_record(make_client):
    fw = make_client(TIERS)
    fw.admin.set_override("acct", rate=0.001, burst=3)
    assert allowed(fw, "acct", 4) == 3
    fw.admin.reset("acct")
    assert fw.admin.show("acct")["override"] == {"rate": 0.001, "burst": 3}
    assert allowed(fw, "acct", 4) == 3  # full again, with the override still in place


def test_list_names_the_tenants_with_a_record(make_client):
    fw = make_client(TIERS)
    fw.admit("plain")
    fw.admin.set_override("big", rate=5, burst=50)
    fw.admin.set_tier("paid", "pro")
    fw.admin.block("bad", seconds=60)
    listed = {x["tenant"]: x for x in fw.admin.list()}
    assert set(listed) == {"big", "paid", "bad"}
    assert listed["big"]["override"] == {"rate": 5, "burst": 50} and listed["big"]["tier"] is None
    assert listed["paid"]["tier"] == "pro" and listed["paid"]["blocked"] is False
    assert listed["bad"]["blocked"] is True and listed["bad"]["blocked_until"].endswith("Z")
    assert len(fw.admin.list(limit=2)) == 2
    assert all(set(x) == {"tenant", "tier", "override", "blocked", "blocked_until"} for x in listed.values())


def test_a_fleet_wide_mode_and_back_to_each_clients_own(make_client):
    fw = make_client(TIERS)
    fw.admin.set_mode("request_rate", "dark")
    assert fw.get_mode("request_rate") == "dark"
    assert allowed(fw, "acct", 4) == 4
    fw.admin.set_mode("request_rate", None)
    assert fw.get_mode("request_rate") == "enforce"


def test_bad_arguments_raise_invalid_argument_errors_naming_them(make_client):
    fw = make_client(TIERS)
    cases = [
        (lambda: fw.admin.set_tier("acct", "gold"), "tier: the policy has no tier named \"gold\" (it has: pro)"),
        (lambda: fw.admin.set_override("acct", rate=-1, burst=5), "rate: "),
        (lambda: fw.admin.set_override("acct", rate=1, burst=0), "burst: "),
        (lambda: fw.admin.set_override("acct", rate=float("nan"), burst=5), "rate: "),
        (lambda: fw.admin.block("acct", seconds=0), "seconds: "),
        (lambda: fw.admin.block("acct", seconds=-5), "seconds: "),
        (lambda: fw.admin.block("acct", seconds=float("inf")), "seconds: "),
        (lambda: fw.admin.block("acct", seconds=20 * 365 * 86400), "seconds: "),
        (lambda: fw.admin.show(""), "tenant: "),
        (lambda: fw.admin.unblock("a\nb"), "tenant: contains a control character"),
        (lambda: fw.admin.set_mode("bogus", "dark"), "limiter: "),
        (lambda: fw.admin.set_mode("fleet", "loud"), "mode: "),
        (lambda: fw.admin.list(0), "limit: "),
    ]
    for call, message in cases:
        with pytest.raises(floodwall.InvalidArgumentError) as e:
            call()
        assert isinstance(e.value, ValueError) and str(e.value).startswith(message), str(e.value)
    with pytest.raises(TypeError):
        fw.admin.show(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        fw.admin.block("acct", seconds="60")  # type: ignore[arg-type]
    assert fw.admin.list() == []  # nothing above wrote a record


def test_a_policy_without_tiers_says_so(make_client):
    fw = make_client({"request_rate": {"rate": 1, "burst": 2}})
    with pytest.raises(floodwall.InvalidArgumentError, match=r"^tier: .*it has no tiers"):
        fw.admin.set_tier("acct", "pro")


def test_a_closed_client_refuses_admin_calls(make_client):
    fw = make_client(TIERS)
    fw.close()
    with pytest.raises(floodwall.ClosedError):
        fw.admin.block("acct")
    with pytest.raises(floodwall.ClosedError):
        fw.admin.list()


# ------------------------------------------------------------------------------------------- Redis


def test_a_change_made_by_another_client_applies_to_the_next_request(redis_server):
    policy = redis_policy(redis_server, **TIERS)
    with floodwall.Floodwall(policy) as app, floodwall.Floodwall(policy) as ops:
        assert allowed(app, "acct", 3) == 2
        ops.admin.set_override("acct", rate=0.001, burst=5)
        assert allowed(app, "acct", 5) == 3
        ops.admin.block("acct", seconds=30)
        d = app.admit("acct")
        assert d.status == 403 and d.blocked and d.blocked_until is not None
        ops.admin.unblock("acct")
        ops.admin.set_tier("acct", "pro")
        assert app.admit("acct", route="/search").rules == ["search"]
        assert [x["tenant"] for x in app.admin.list()] == ["acct"]
        assert ops.admin.show("acct")["tier"] == "pro"


def test_an_unreachable_store_raises_store_error_within_a_bound():
    port = free_port()  # nothing listens there
    fw = floodwall.Floodwall(
        {"store": f"redis://127.0.0.1:{port}/0", "request_rate": {"rate": 1, "burst": 1},
         "redis": {"deadline_ms": 50, "connect_timeout_ms": 50}}
    )
    start = time.monotonic()
    with pytest.raises(floodwall.StoreError, match=r"^store: ") as e:
        fw.admin.block("acct")
    assert time.monotonic() - start < 5, "an admin call waits for at most the store's deadline (a second here)"
    assert str(port) in str(e.value)
    fw.close()


def test_an_admin_call_waiting_on_redis_releases_the_gil(redis_server):
    fw = floodwall.Floodwall(redis_policy(redis_server, **TIERS, redis={"deadline_ms": 3000}))
    fw.admin.show("warm-up")  # connected
    stall = redis_server.stall(0.6)
    span = {}

    def admin():
        span["start"] = time.monotonic()
        fw.admin.block("acct", seconds=60)
        span["end"] = time.monotonic()

    thread = threading.Thread(target=admin)
    stamps = []
    thread.start()
    while thread.is_alive():
        stamps.append(time.monotonic())  # pure Python: runs only while the admin call does not hold the GIL
    thread.join()
    stall.join()
    waited = span["end"] - span["start"]
    assert waited > 0.3, "the block waited for the stalled Redis"
    assert max_gap(stamps, span["start"], span["end"]) < waited / 2
    assert fw.admin.show("acct")["blocked"] is True
    fw.close()
