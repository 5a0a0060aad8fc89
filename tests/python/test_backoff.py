"""floodwall.backoff: full jitter that honours Retry-After, against a real floodwall-protected server."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time

import httpx
import pytest
from fastapi import FastAPI

import floodwall
from conftest import serve_asgi
from floodwall import backoff
from floodwall.asgi import FloodwallMiddleware


@pytest.mark.parametrize("attempt", range(12))
def test_the_window_doubles_from_base_up_to_cap(attempt):
    top = backoff.full_jitter(attempt, base=0.5, cap=30.0, random=lambda: 1.0)
    assert top == min(30.0, 0.5 * 2**attempt)
    assert backoff.full_jitter(attempt, base=0.5, cap=30.0, random=lambda: 0.0) == 0.0


def test_full_jitter_spreads_waits_over_the_whole_window():
    rng = random.Random(7)
    waits = [backoff.full_jitter(3, base=1.0, cap=30.0, random=rng.random) for _ in range(2000)]
    assert all(0.0 <= w < 8.0 for w in waits)
    assert min(waits) < 1.0 and max(waits) > 7.0  # the whole window, not a cluster


def test_a_huge_attempt_is_capped_without_overflow():
    assert backoff.full_jitter(10_000, base=0.5, cap=30.0, random=lambda: 1.0) == 30.0


def test_a_negative_attempt_is_a_value_error():
    with pytest.raises(ValueError, match="attempt"):
        backoff.full_jitter(-1)


def test_retry_after_is_a_floor_under_the_jitter():
    assert backoff.delay(0, 3.0, base=0.5, random=lambda: 0.5) == 3.0
    assert backoff.delay(8, 3.0, base=0.5, cap=30.0, random=lambda: 1.0) == 30.0
    assert backoff.delay(2, None, base=0.5, random=lambda: 0.5) == 1.0


def test_retry_after_parses_seconds_and_http_dates():
    now = time.time()
    assert backoff.parse_retry_after("3") == 3.0
    assert backoff.parse_retry_after(" 120 ") == 120.0
    assert backoff.parse_retry_after(email.utils.formatdate(now + 10, usegmt=True), now=now) == pytest.approx(10, abs=1)
    assert backoff.parse_retry_after(email.utils.formatdate(now - 10, usegmt=True), now=now) == 0.0
    for bad in (None, "", "-1", "soon", "1.5e3"):
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
    for rejected, slept in zip(responses, sleeps):
        assert slept >= float(rejected.headers["retry-after"])  # never earlier than the server said


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


def test_zero_attempts_is_a_value_error():
    with pytest.raises(ValueError, match="attempts"):
        backoff.send_with_backoff(lambda: None, attempts=0)
