"""floodwall.backoff: full jitter that honours Retry-After, against a real floodwall-protected server."""

from __future__ import annotations

import asyncio
import email.utils
import inspect
import random
import time

import httpx
import pytest
from fastapi import FastAPI

import floodwall
from conftest import serve_asgi
from floodwall import backoff
from floodwall.asgi import FloodwallMiddleware


def test_the_defaults_are_the_cores():
    assert backoff.DEFAULTS == (0.1, 20.0, 5)  # FW_BACKOFF_INIT, read from the native module
    assert (backoff.DEFAULTS.base, backoff.DEFAULTS.cap, backoff.DEFAULTS.attempts) == (0.1, 20.0, 5)
    for f in (backoff.send_with_backoff, backoff.send_with_backoff_async):
        params = inspect.signature(f).parameters
        assert (params["base"].default, params["cap"].default, params["attempts"].default) == backoff.DEFAULTS
    for f in (backoff.delay, backoff.full_jitter):
        params = inspect.signature(f).parameters
        assert (params["base"].default, params["cap"].default) == backoff.DEFAULTS[:2]


@pytest.mark.parametrize("attempt", range(12))
def test_the_window_doubles_from_base_up_to_cap(attempt):
    half = backoff.full_jitter(attempt, base=0.5, cap=30.0, random=lambda: 0.5)
    assert half == pytest.approx(0.5 * min(30.0, 0.5 * 2**attempt), abs=1e-12)
    assert backoff.full_jitter(attempt, base=0.5, cap=30.0, random=lambda: 0.0) == 0.0
    default = backoff.full_jitter(attempt, random=lambda: 0.5)
    assert default == pytest.approx(0.5 * min(20.0, 0.1 * 2**attempt), abs=1e-12)


def test_full_jitter_spreads_waits_over_the_whole_window():
    rng = random.Random(7)
    waits = [backoff.full_jitter(3, base=1.0, cap=30.0, random=rng.random) for _ in range(2000)]
    assert all(0.0 <= w < 8.0 for w in waits)
    assert min(waits) < 1.0 and max(waits) > 7.0  # the whole window, not a cluster


def test_a_huge_attempt_is_capped_without_overflow():
    assert backoff.full_jitter(10_000, base=0.5, cap=30.0, random=lambda: 0.5) == 15.0
    assert backoff.full_jitter(2**80, base=0.5, cap=30.0, random=lambda: 0.5) == 15.0


def test_a_negative_attempt_is_a_value_error():
    with pytest.raises(ValueError, match="attempt"):
        backoff.full_jitter(-1)


@pytest.mark.parametrize("kw,field", [({"base": 0.0}, "base_s"), ({"base": 2.0, "cap": 1.0}, "cap_s"),
                                      ({"random": lambda: 1.0}, "random"), ({"random": lambda: -0.1}, "random")])
def test_bad_settings_are_value_errors_naming_them(kw, field):
    with pytest.raises(floodwall.InvalidArgumentError, match=field):
        backoff.delay(0, **kw)


def test_the_jitter_comes_on_top_of_retry_after():
    assert backoff.delay(0, 3.0, base=0.5, random=lambda: 0.5) == 3.25
    assert backoff.delay(8, 3.0, base=0.5, cap=30.0, random=lambda: 0.5) == 18.0
    assert backoff.delay(0, 3.0, base=0.5, random=lambda: 0.0) == 3.0  # never earlier than Retry-After
    assert backoff.delay(2, None, base=0.5, random=lambda: 0.5) == 1.0
    assert backoff.delay(2, -1.0, base=0.5, random=lambda: 0.5) == 1.0  # negative: the server sent none


def test_retry_after_parses_seconds_and_http_dates():
    now = time.time()
    assert backoff.parse_retry_after("3") == 3.0
    assert backoff.parse_retry_after(" 120 ") == 120.0
    assert backoff.parse_retry_after(b"120") == 120.0
    assert backoff.parse_retry_after(email.utils.formatdate(now + 10, usegmt=True), now=now) == pytest.approx(10, abs=1)
    assert backoff.parse_retry_after(email.utils.formatdate(now - 10, usegmt=True), now=now) == 0.0
    assert backoff.parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=784111767.0) == 10.0
    assert backoff.parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now=784111767.0) == 10.0
    assert backoff.parse_retry_after("Sun Nov  6 08:49:37 1994", now=784111767.0) == 10.0
    for bad in (None, "", "-1", "soon", "1.5e3", "+1"):
        assert backoff.parse_retry_after(bad) is None


@pytest.fixture
def serve_protected():
    """A FastAPI app behind floodwall with a one-token bucket refilled at `rate` tokens per second."""
    servers = []

    def start(rate):
        app = FastAPI()
        app.add_middleware(FloodwallMiddleware, client=floodwall.Floodwall({"request_rate": {"rate": rate, "burst": 1}}))

        @app.get("/quote")
        async def quote():
            return {"price": 42}

        servers.append(serve_asgi(app))
        return servers[-1].url + "/quote"

    yield start
    for server in servers:
        server.stop()


def test_send_with_backoff_waits_out_a_real_429(serve_protected):
    url = serve_protected(0.5)  # a token every 2 s: Retry-After: 2
    assert httpx.get(url).status_code == 200  # the only token
    responses, sleeps = [], []

    def send():
        responses.append(httpx.get(url))
        return responses[-1]

    def sleep(seconds):
        sleeps.append(seconds)
        time.sleep(seconds)

    r = backoff.send_with_backoff(send, base=0.05, sleep=sleep)
    assert r.status_code == 200 and r.json() == {"price": 42}
    assert responses[0].status_code == 429 and len(sleeps) == len(responses) - 1
    for attempt, (rejected, slept) in enumerate(zip(responses, sleeps)):
        retry_after = float(rejected.headers["retry-after"])
        assert retry_after <= slept < retry_after + 0.05 * 2**attempt  # Retry-After, plus the jitter


def test_send_with_backoff_gives_up_after_its_attempts(serve_protected):
    url = serve_protected(0.001)  # no refill within the test
    httpx.get(url)
    calls, sleeps = [], []

    def send():
        calls.append(1)
        return httpx.get(url)

    r = backoff.send_with_backoff(send, attempts=3, sleep=sleeps.append)  # no real waiting: every call is a 429
    assert r.status_code == 429 and len(calls) == 3 and len(sleeps) == 2


def test_send_with_backoff_async_does_not_block_the_loop(serve_protected):
    url = serve_protected(1)

    async def main():
        async with httpx.AsyncClient() as http:
            assert (await http.get(url)).status_code == 200
            ticks = 0

            async def ticker():
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.01)

            task = asyncio.create_task(ticker())
            r = await backoff.send_with_backoff_async(lambda: http.get(url), base=0.05)
            task.cancel()
            return r, ticks

    r, ticks = asyncio.run(main())
    assert r.status_code == 200
    assert ticks > 5  # the loop ran while the client waited out Retry-After


def test_zero_attempts_is_a_value_error_before_any_call():
    calls = []
    with pytest.raises(ValueError, match="attempts"):
        backoff.send_with_backoff(lambda: calls.append(1), attempts=0)
    with pytest.raises(ValueError, match="attempts"):
        asyncio.run(backoff.send_with_backoff_async(lambda: calls.append(1), attempts=0))
    assert calls == []
