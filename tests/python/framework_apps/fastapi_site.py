"""The FastAPI app tests/python/test_frameworks.py serves under uvicorn: the ASGI middleware app-wide, its
policy from the FLOODWALL_POLICY environment variable (JSON), routes with their own settings as a decorator
and as a dependency."""

import asyncio
import json
import os

from fastapi import Depends, FastAPI
from fastapi.responses import StreamingResponse

import floodwall
import floodwall.fastapi

fw = floodwall.Floodwall(json.loads(os.environ["FLOODWALL_POLICY"]))
seen = {"now": 0, "most": 0}
app = FastAPI()
app.add_middleware(floodwall.fastapi.FloodwallMiddleware, client=fw, verify=lambda key, scope: key == "k-known")


@app.get("/hello")
async def hello():
    return {"hello": "world"}


@app.get("/orders/{order_id}")
async def order(order_id: int):
    return {"order": order_id}


@app.post("/report")
@floodwall.fastapi.limit(cost=5)
async def report():
    return {"report": "ready"}


@app.post("/report2", dependencies=[Depends(floodwall.fastapi.limit(cost=5))])
async def report2():
    return {"report": "ready"}


@app.get("/health", dependencies=[Depends(floodwall.fastapi.limit(skip=True))])
async def health():
    return {"ok": True}


@app.get("/critical")
@floodwall.fastapi.limit(critical=True)
async def critical():
    return {"critical": True}


@app.get("/boom")
async def boom():
    raise RuntimeError("the endpoint failed")


@app.get("/slow/{n}")
async def slow(n: int):
    seen["now"] += 1
    seen["most"] = max(seen["most"], seen["now"])
    try:
        await asyncio.sleep(0.5)
    finally:
        seen["now"] -= 1
    return {"n": n}


@app.get("/stream")
async def stream():
    async def chunks():
        for _ in range(200):
            yield b"x" * 65536
            await asyncio.sleep(0.01)

    return StreamingResponse(chunks())


@app.get("/_stats")
@floodwall.fastapi.limit(skip=True)
def stats():
    return {"most": seen["most"], "now": seen["now"],
            "in_flight": fw.admin.show("ip:127.0.0.1").get("concurrency", {}).get("in_flight"),
            "routes": sorted(fw.metrics()["routes"])}
