#!/usr/bin/env bash
# The Python suite: the shared venv with floodwall from this checkout and the test dependencies
# (packaging/python-venv.sh), then pytest.
# The tests start their own redis-server; a missing redis-server fails them.
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(bash packaging/python-venv.sh pytest fastapi uvicorn httpx flask gunicorn django opentelemetry-api opentelemetry-sdk | tail -n 1)
cd tests/python
exec "$py" -m pytest -q -p no:cacheprovider "$@"
