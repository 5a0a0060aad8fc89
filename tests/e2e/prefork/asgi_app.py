"""A Starlette app behind floodwall.asgi, its client made at import: what uvicorn --workers starts."""
import os

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from floodwall import Floodwall
from floodwall.asgi import FloodwallMiddleware

fw = Floodwall(os.environ["FW_POLICY"])


async def work(request):
    return JSONResponse({"pid": os.getpid()})


limited = FloodwallMiddleware(Starlette(routes=[Route("/work", work)]), client=fw,
                              key=lambda scope: dict(scope["headers"]).get(b"x-api-key"))


async def app(scope, receive, send):
    """Every answer, the 429s too, names the worker that gave it (X-Worker-Pid)."""
    async def named(message):
        if message["type"] == "http.response.start":
            worker = (b"x-worker-pid", str(os.getpid()).encode())
            message = dict(message, headers=list(message.get("headers", [])) + [worker])
        await send(message)
    await limited(scope, receive, named if scope["type"] == "http" else send)
