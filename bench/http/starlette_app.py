"""One Starlette app behind one limiter (FW_HTTP_LIMITER), for bench/http/run.js, served by uvicorn on
FW_HTTP_PORT: none; `limits` with its async Redis storage (redis-py's asyncio client) and a fixed window, as
slowapi uses it, in a pure ASGI middleware; or floodwall's ASGI middleware on memory:// or Redis with the
README's example policy (100 requests/s per tenant, bursts to 500, 20 in flight). The tenant is the X-API-Key
header in every variant (floodwall's through a verify hook that looks the key up, as an app keying on API keys
does); no limit is ever reached at the load the benchmark offers (1,000 tenants)."""

import os

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

LIMITER = os.environ.get("FW_HTTP_LIMITER", "none")
REDIS = os.environ.get("FW_BENCH_REDIS", "")
fw = None  # floodwall's client: its metrics say where each decision came from


async def home(request):
    return JSONResponse({"ok": True})


async def sources(request):
    return JSONResponse(fw.metrics()["sources"] if fw is not None else None)


class LimitsMiddleware:
    """`limits`' async fixed window on Redis per X-API-Key, 30,000 a minute (never reached)."""

    def __init__(self, app):
        from limits import parse
        from limits.aio.storage import RedisStorage
        from limits.aio.strategies import FixedWindowRateLimiter

        self.app = app
        self.item = parse("30000/minute")
        self.limiter = FixedWindowRateLimiter(RedisStorage("async+" + REDIS, implementation="redispy"))

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] != "/__sources":
            key = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"x-api-key"), "anonymous")
            if not await self.limiter.hit(self.item, key):
                await JSONResponse({"error": "too many requests"}, status_code=429)(scope, receive, send)
                return
        await self.app(scope, receive, send)


app = Starlette(routes=[Route("/", home), Route("/__sources", sources)])
if LIMITER.startswith("floodwall-"):
    from floodwall import Floodwall
    from floodwall.asgi import FloodwallMiddleware

    store = "memory://" if LIMITER == "floodwall-memory" else REDIS
    fw = Floodwall({"store": store, "prefix": "fwhttp", "request_rate": {"rate": 100, "burst": 500},
                    "concurrency": {"limit": 20}})
    issued = {f"tenant-{i}" for i in range(1000)}  # the keys run.js sends: an app's verify looks its keys up
    app.add_middleware(FloodwallMiddleware, client=fw, skip=lambda scope: scope["path"] == "/__sources",
                       verify=lambda key, scope: key in issued)
elif LIMITER == "limits-redis":
    app.add_middleware(LimitsMiddleware)
elif LIMITER != "none":
    raise SystemExit(f"FW_HTTP_LIMITER: unknown limiter {LIMITER}")

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ["FW_HTTP_PORT"]), log_level="warning", access_log=False)
