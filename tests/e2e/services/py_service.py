"""The Python member of the e2e fleet: Starlette behind floodwall's ASGI middleware, on uvicorn."""
import asyncio
import os
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from floodwall import Floodwall
from floodwall.asgi import FloodwallMiddleware

fw = Floodwall(os.environ["FW_POLICY"])


async def work(request: Request) -> JSONResponse:
    await asyncio.sleep(float(request.query_params.get("hold_s", "0")))
    return JSONResponse({"lang": "python"})


async def metrics(request: Request) -> PlainTextResponse:
    return PlainTextResponse(fw.prometheus())


api = Starlette(routes=[Route("/work", work)])
# No key function: the core derives the tenant from the request (a verified Authorization or X-API-Key, else
# the address behind the policy's trusted proxies), as the Node and Ruby services do. The fleet's issued
# keys: every key but the test's made-up ones.
limited = FloodwallMiddleware(api, client=fw, route="/work", verify=lambda key, scope: not key.startswith("made-up-"))


async def app(scope, receive, send):
    if scope["type"] == "http" and scope["path"] == "/metrics":
        await PlainTextResponse(fw.prometheus())(scope, receive, send)
    else:
        await limited(scope, receive, send)


if __name__ == "__main__":
    # proxy_headers off: X-Forwarded-For is the core's business (tenant.trusted_proxies), not uvicorn's.
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", proxy_headers=False)
