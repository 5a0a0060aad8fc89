"""The Flask app tests/python/test_frameworks.py serves under gunicorn: floodwall.flask's extension with
init_app, its policy from the FLOODWALL_POLICY environment variable (JSON), views with their own settings."""

import json
import os
import threading
import time

from flask import Flask, Response, jsonify

import floodwall
import floodwall.flask

lock = threading.Lock()
seen = {"now": 0, "most": 0}
ext = floodwall.flask.Floodwall(policy=json.loads(os.environ["FLOODWALL_POLICY"]),
                                verify=lambda key, environ: key == "k-known")
app = Flask(__name__)
ext.init_app(app)


@app.get("/hello")
def hello():
    return jsonify(hello="world")


@app.get("/orders/<int:order_id>")
def order(order_id):
    return jsonify(order=order_id)


@app.post("/report")
@floodwall.flask.limit(cost=5)
def report():
    return jsonify(report="ready")


@floodwall.flask.limit(skip=True)  # above the route decorator works too
@app.get("/health")
def health():
    return jsonify(ok=True)


@app.get("/critical")
@floodwall.flask.limit(critical=True)
def critical():
    return jsonify(critical=True)


@app.get("/boom")
def boom():
    raise RuntimeError("the view failed")


@app.get("/slow/<int:n>")
def slow(n):
    with lock:
        seen["now"] += 1
        seen["most"] = max(seen["most"], seen["now"])
    try:
        time.sleep(0.5)
    finally:
        with lock:
            seen["now"] -= 1
    return jsonify(n=n)


@app.get("/stream")
def stream():
    def chunks():
        for _ in range(200):
            yield b"x" * 65536
            time.sleep(0.01)

    return Response(chunks())


@app.get("/_stats")
@floodwall.flask.limit(skip=True)
def stats():
    fw = app.extensions["floodwall"].client
    return jsonify(most=seen["most"], now=seen["now"],
                   in_flight=fw.admin.show("ip:127.0.0.1").get("concurrency", {}).get("in_flight"),
                   routes=sorted(fw.metrics()["routes"]))
