"""routes-api: the seed's fleet logistics platform, protected by floodwall's ASGI middleware.

    POST /v1/routes?stops=N       solve a routing problem: CPU work proportional to N, critical,
                                  costs ceil(N/10) tokens, at most 20 in flight per tenant
    GET  /v1/routes/{id}          a cheap read, critical
    GET  /v1/analytics/{report}   a heavy aggregate query, not critical (the fleet shedder's)
    GET  /v1/eta/{id}             an arrival estimate from a pool of 4 solver workers (50 ms each, about 80/s
                                  per box), critical: beyond 4 at once a request waits for a worker (the
                                  adaptive concurrency limit's scene)
    POST /v1/analytics/exports    a non-critical write

One API key that routes-api issued is one tenant (Authorization: Bearer <key>, checked by keys.valid);
a request with a made-up key, or none, is its client address's tenant. Keys starting sk_test_ are sandbox
traffic.
/metrics, /metrics.json and /admin/mode are the operator's and are not limited.
"""

from __future__ import annotations

import asyncio
import collections
import json
import math
import os
import sys
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from floodwall import Floodwall
from floodwall.asgi import FloodwallMiddleware

import keys

HERE = os.path.dirname(os.path.abspath(__file__))


def load_policy() -> dict:
    with open(os.environ.get("ROUTES_API_POLICY", os.path.join(HERE, "policy.json"))) as f:
        policy = json.load(f)
    if os.environ.get("ROUTES_API_STORE"):
        policy["store"] = os.environ["ROUTES_API_STORE"]
        policy["redis"] = {"deadline_ms": 50, "breaker_open_ms": 500, "flags_poll_ms": 250}
    return policy


fw = Floodwall(load_policy())


def solve(stops: int) -> int:
    # Stand-in for a vehicle routing solver: work grows with the stop count.
    x = 0
    for i in range(stops * 100):
        x = (x * 31 + i) % 1_000_003
    return x


def query_float(request: Request, name: str) -> float:
    try:
        return max(0.0, min(30.0, float(request.query_params.get(name, "0"))))
    except ValueError:
        return 0.0


async def create_route(request: Request) -> JSONResponse:
    stops = stop_count(request.scope)
    checksum = await asyncio.to_thread(solve, stops)
    await asyncio.sleep(query_float(request, "hold_s"))  # a slow solve, for the concurrency scene
    return JSONResponse({"id": f"rt_{checksum:x}", "stops": stops}, status_code=201)


async def get_route(request: Request) -> JSONResponse:
    await asyncio.sleep(query_float(request, "hold_s"))
    return JSONResponse({"id": request.path_params["id"], "status": "solved"})


async def analytics(request: Request) -> JSONResponse:
    await asyncio.sleep(0.2 + query_float(request, "hold_s"))  # a heavy aggregate query
    return JSONResponse({"report": request.path_params["report"], "rows": 1234})


# The ETA solvers: 4 workers per box. A request beyond them waits for one, so latency grows with what is in
# flight: what the adaptive limit measures (policy.json limits this route family only).
ETA_WORKERS = 4
eta_workers: "asyncio.Semaphore | None" = None


async def eta(request: Request) -> JSONResponse:
    global eta_workers
    if eta_workers is None:
        eta_workers = asyncio.Semaphore(ETA_WORKERS)
    async with eta_workers:
        await asyncio.sleep(0.05)
    return JSONResponse({"id": request.path_params["id"], "eta_s": 1260})


async def export(request: Request) -> JSONResponse:
    await asyncio.sleep(query_float(request, "hold_s"))
    return JSONResponse({"export": "queued"}, status_code=202)


api = Starlette(
    routes=[
        Route("/v1/routes", create_route, methods=["POST"]),
        Route("/v1/routes/{id}", get_route, methods=["GET"]),
        Route("/v1/analytics/exports", export, methods=["POST"]),
        Route("/v1/analytics/{report}", analytics, methods=["GET"]),
        Route("/v1/eta/{id}", eta, methods=["GET"]),
    ]
)


def stop_count(scope) -> int:
    for part in scope.get("query_string", b"").decode("latin-1").split("&"):
        name, _, value = part.partition("=")
        if name == "stops" and value.isdigit():
            return max(1, min(int(value), 5000))
    return 5


def api_key(scope) -> bytes:
    for name, value in scope.get("headers", ()):
        if name == b"authorization" and value.startswith(b"Bearer "):
            return value[7:]
    return b""


def cost(scope) -> int:
    if scope["method"] == "POST" and scope["path"] == "/v1/routes":
        return math.ceil(stop_count(scope) / 10)  # a 2,000-stop optimisation draws 200 tokens
    return 1


def critical(scope) -> bool:
    return scope["path"].startswith(("/v1/routes", "/v1/eta"))


protected = FloodwallMiddleware(
    api,
    client=fw,
    # The core reads the key from the Authorization header and asks this check: an issued key is its own
    # tenant; a made-up one counts against its client address.
    verify=lambda key, scope: keys.valid(key),
    cost=cost,
    critical=critical,
    sandbox=lambda scope: api_key(scope).startswith(b"sk_test_"),
)


# The ETA route's requests as this box saw them, for the adaptive limit's scene: (ended at, seconds from
# arrival to the end of the response, status), the last 10 s.
eta_log: "collections.deque[tuple]" = collections.deque(maxlen=20000)


def eta_stats(window_s: float = 2.0) -> dict:
    now = time.monotonic()
    recent = [(lat, status) for at, lat, status in eta_log if at > now - window_s]
    served = sorted(lat for lat, status in recent if status < 400)
    return {"window_s": window_s, "served_per_s": len(served) / window_s,
            "p99_ms": 1000 * served[len(served) * 99 // 100] if served else 0.0,
            "shed_per_s": sum(1 for _, status in recent if status == 503) / window_s}


async def timed(scope, receive, send):
    started, status = time.monotonic(), [0]

    async def sending(message):
        if message["type"] == "http.response.start":
            status[0] = message["status"]
        await send(message)

    await protected(scope, receive, sending)
    eta_log.append((time.monotonic(), time.monotonic() - started, status[0]))


async def app(scope, receive, send):
    path = scope.get("path", "")
    if scope["type"] == "http" and path.startswith("/v1/eta/"):
        await timed(scope, receive, send)
        return
    if scope["type"] == "http" and path in ("/metrics", "/metrics.json", "/admin/mode"):
        request = Request(scope, receive)
        if path == "/metrics":
            response = PlainTextResponse(fw.prometheus(), media_type="text/plain; version=0.0.4")
        elif path == "/metrics.json":
            response = JSONResponse({**fw.metrics(), "pid": os.getpid(), "eta": eta_stats()})
        else:
            limiter, mode = request.query_params.get("limiter", ""), request.query_params.get("mode", "")
            try:
                fw.set_mode(limiter, mode)
                response = JSONResponse({"limiter": limiter, "mode": fw.get_mode(limiter)})
            except ValueError as e:
                response = JSONResponse({"error": str(e)}, status_code=400)
        await response(scope, receive, send)
        return
    await protected(scope, receive, send)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run("app:app", host="127.0.0.1", port=int(sys.argv[1]) if len(sys.argv) > 1 else 8000, log_level="warning")
