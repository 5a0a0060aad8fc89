"""A WSGI app behind floodwall.wsgi that answers with a file through the server's wsgi.file_wrapper (PEP 3333's
optional platform-specific file handling), for tests/e2e/test_wsgi_file_wrapper.py. The file refuses read():
it can reach the client only by the server's sendfile path, which gunicorn takes only when the response
iterable is an instance of its file wrapper. The policy (FW_POLICY) holds one request in flight per tenant,
so a slot that was not given back turns the next request into a 429."""
import io
import os

from floodwall import Floodwall
from floodwall.wsgi import FloodwallMiddleware

fw = Floodwall(os.environ["FW_POLICY"])
FILE = os.environ["FW_FILE"]


class SendfileOnly(io.FileIO):
    def read(self, *args):
        raise RuntimeError("read(): the server iterated the response instead of sending the file")

    readinto = readall = read


def inner(environ, start_response):
    if environ["PATH_INFO"] == "/work":  # the readiness probe
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]
    size = os.path.getsize(FILE)
    start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(size))])
    return environ["wsgi.file_wrapper"](SendfileOnly(FILE, "r"), 65536)


app = FloodwallMiddleware(inner, fw, key="one-tenant")
