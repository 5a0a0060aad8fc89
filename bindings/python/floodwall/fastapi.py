"""FastAPI: the ASGI middleware (floodwall.asgi) app-wide, and a route's own settings next to it.

    app.add_middleware(FloodwallMiddleware, client=Floodwall("policy.json"))

    @app.post("/reports")
    @floodwall.fastapi.limit(cost=5)                     # under the route decorator
    async def report(): ...

    @app.get("/health", dependencies=[Depends(floodwall.fastapi.limit(skip=True))])   # or as a dependency
    async def health(): ...

The middleware decides before FastAPI routes the request: it matches the app's routes itself and reads the
route's endpoint (or a dependency made by ``limit``), so a refused request never runs the endpoint nor its
dependencies. As a dependency, ``limit(...)`` does nothing when FastAPI calls it.
"""

from __future__ import annotations

import inspect
from typing import Any

from ._middleware import RouteSettings
from .asgi import FloodwallMiddleware

__all__ = ["FloodwallMiddleware", "limit"]


class _Limit(RouteSettings):
    """RouteSettings that FastAPI may also take as a dependency of no parameters (its call is a no-op)."""

    __slots__ = ()
    __signature__ = inspect.Signature()  # what FastAPI reads of a dependency: no parameters

    def __call__(self, view: Any = None) -> Any:  # type: ignore[override]
        if view is None:  # called by FastAPI as a dependency: the middleware already read the settings
            return None
        return super().__call__(view)


def limit(*, cost: Any = None, critical: Any = None, sandbox: Any = None, skip: Any = None) -> RouteSettings:
    """A route's own settings, over the middleware's: ``cost`` an int >= 1, ``critical``, ``sandbox`` and
    ``skip`` True/False; each may also be a callable of the ASGI scope (``skip`` may be async). A bad value
    raises at import. A decorator under ``@app.get(...)``, or ``Depends(limit(...))`` in the route's
    ``dependencies``."""
    return _Limit("floodwall.fastapi.limit", cost=cost, critical=critical, sandbox=sandbox, skip=skip)
