import os
from flask import Flask
from floodwall import Floodwall
from floodwall.wsgi import FloodwallMiddleware

API_KEYS = {"k-demo-1", "k-demo-2"}  # your key store: a key you issued is its own tenant, others the address
app = Flask(__name__)
app.wsgi_app = FloodwallMiddleware(app.wsgi_app, Floodwall({"request_rate": {"rate": 5, "burst": 10}}),
                                   verify=lambda key, environ: key in API_KEYS)

@app.get("/hello")
def hello():
    return {"hello": "world"}

if __name__ == "__main__":
    app.run(port=int(os.environ.get("PORT", "8000")))
