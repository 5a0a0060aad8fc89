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


app = FloodwallMiddleware(flask_app.wsgi_app, fw, key=lambda environ: environ.get("HTTP_X_API_KEY"))
