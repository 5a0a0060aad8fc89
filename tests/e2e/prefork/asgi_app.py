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


app = FloodwallMiddleware(Starlette(routes=[Route("/work", work)]), client=fw,
                          key=lambda scope: dict(scope["headers"]).get(b"x-api-key"))
