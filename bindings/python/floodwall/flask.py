"""Flask: the extension ``floodwall.flask.Floodwall(app, policy)`` (or ``init_app`` later) installs the WSGI
middleware (floodwall.wsgi) around ``app.wsgi_app``; ``@floodwall.flask.limit(cost=5)`` puts a view's own
settings next to it.

    fw = floodwall.flask.Floodwall(app, {"request_rate": {"rate": 5, "burst": 10}}, verify=...)

    @app.post("/reports")
    @floodwall.flask.limit(cost=5)
    def report(): ...

The options are the WSGI middleware's (``key``, ``skip``, ``on_reject``, ``route``, ``method``, ``cost``,
``critical``, ``sandbox``, ``verify``, ``verify_timeout``); without a policy argument, ``init_app`` reads
``app.config["FLOODWALL"]``, a dict of "policy" (or "client") and those options, as Django's
settings.FLOODWALL. A bad option raises when the extension is made, naming it.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from . import Floodwall as Client
from . import PolicyLike
from ._middleware import OPTIONS, RouteSettings, client_and_options
from .wsgi import FloodwallMiddleware, _flask_match

__all__ = ["Floodwall", "limit"]


def limit(*, cost: Any = None, critical: Any = None, sandbox: Any = None, skip: Any = None) -> RouteSettings:
    """A view's own settings, over the middleware's: ``cost`` an int >= 1, ``critical``, ``sandbox`` and
    ``skip`` True/False; each may also be a callable of the WSGI environ. A bad value raises at import.
    Put it under ``@app.get(...)`` (or above: Flask registers the function itself either way)."""
    return RouteSettings("floodwall.flask.limit", cost=cost, critical=critical, sandbox=sandbox, skip=skip)


class Floodwall:
    """The Flask extension. ``client`` is the floodwall.Floodwall it made (or was given) once an app is
    initialised; ``app.extensions["floodwall"]`` is this extension."""

    def __init__(self, app: Any = None, policy: Optional[PolicyLike] = None, *, client: Optional[Client] = None,
                 **options: Any) -> None:
        config: Dict[str, Any] = dict(options)
        if policy is not None:
            config["policy"] = policy
        if client is not None:
            config["client"] = client
        self._config: Optional[Dict[str, Any]] = None
        if config:
            self._config = config
            self._check(config)
        self.client: Optional[Client] = None
        if app is not None:
            self.init_app(app)

    @staticmethod
    def _check(config: Dict[str, Any]) -> None:
        for name in config:
            if name not in OPTIONS and name not in ("policy", "client"):
                raise TypeError(f"floodwall.flask.Floodwall: {name}: unknown option (known: {', '.join(OPTIONS)})")

    def init_app(self, app: Any) -> None:
        """Wraps ``app.wsgi_app`` in the WSGI middleware, routing by the app's url_map and reading its views'
        ``limit`` settings. One client per extension, shared by every app it initialises."""
        config = self._config if self._config is not None else app.config.get("FLOODWALL")
        if config is None:
            raise TypeError('floodwall.flask.Floodwall: no policy: give one, or set app.config["FLOODWALL"]')
        where = "floodwall.flask.Floodwall" if self._config is not None else 'app.config["FLOODWALL"]'
        if self.client is not None:
            config = {**{k: v for k, v in config.items() if k != "policy"}, "client": self.client}
        client, options = client_and_options(config, where, ValueError)
        self.client = client
        middleware = FloodwallMiddleware(app.wsgi_app, client, **options)
        middleware._match = _flask_match(app)  # the app itself, whatever wraps its wsgi_app already
        app.wsgi_app = middleware
        app.extensions["floodwall"] = self
