"""floodwall.wsgi under gunicorn with a response made by the server's wsgi.file_wrapper: the middleware must
not hide it from the server (gunicorn sends such a file with sendfile, and only when the response iterable
is its wrapper), and must still give the request's slot back once the file is sent."""

from __future__ import annotations

import json
import os

import httpx

from test_polyglot_fleet import free_port
from test_prefork import PY, serve, stop


def test_a_file_wrapper_response_goes_out_by_sendfile_and_gives_its_slot_back(tmp_path):
    data = os.urandom(300_000)
    path = tmp_path / "payload.bin"
    path.write_bytes(data)
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"concurrency": {"limit": 1}}))
    port = free_port()
    proc = serve([PY, "-m", "gunicorn", "-w", "1", "-b", f"127.0.0.1:{port}", "file_app:app"], "memory://",
                 tmp_path, port, policy=policy, env={"FW_FILE": str(path)})
    try:
        for i in range(3):  # one slot: each request passes only if the one before gave it back
            r = httpx.get(f"http://127.0.0.1:{port}/file", timeout=10)
            assert r.status_code == 200, (i, r.status_code, r.text[:200])
            assert r.content == data, f"request {i}: the file's bytes did not all arrive"
            assert r.headers["ratelimit"] == '"concurrency";r=0', r.headers
    finally:
        stop(proc)
