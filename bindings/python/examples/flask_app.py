import os
from flask import Flask
from floodwall import Floodwall
from floodwall.wsgi import FloodwallMiddleware

app = Flask(__name__)
app.wsgi_app = FloodwallMiddleware(app.wsgi_app, Floodwall({"request_rate": {"rate": 5, "burst": 10}}))

@app.get("/hello")
def hello():
    return {"hello": "world"}

if __name__ == "__main__":
    app.run(port=int(os.environ.get("PORT", "8000")))
