"""A Flask app behind floodwall.wsgi, its client made at import: what gunicorn --preload forks."""
import os

from flask import Flask

from floodwall import Floodwall
from floodwall.wsgi import FloodwallMiddleware

fw = Floodwall(os.environ["FW_POLICY"])
flask_app = Flask(__name__)


@flask_app.get("/work")
def work():
    return {"pid": os.getpid()}


limited = FloodwallMiddleware(flask_app.wsgi_app, fw, key=lambda environ: environ.get("HTTP_X_API_KEY"))


def app(environ, start_response):
    """Every answer, the 429s too, names the worker that gave it (X-Worker-Pid)."""
    def start(status, headers, exc_info=None):
        return start_response(status, headers + [("X-Worker-Pid", str(os.getpid()))], exc_info)
    return limited(environ, start)
