#!/usr/bin/env bash
# The Python suite: the shared venv with floodwall from this checkout and the test dependencies
# (packaging/python-venv.sh), then pytest.
# The tests start their own redis-server; a missing redis-server fails them.
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(bash packaging/python-venv.sh pytest fastapi uvicorn httpx flask gunicorn django opentelemetry-api opentelemetry-sdk | tail -n 1)
cd tests/python
# The monitoring tests (a real Prometheus, the dashboard's queries, OpenTelemetry) are the monitoring
# stage's (packaging/test-monitoring.sh), which make test runs beside this one.
exec "$py" -m pytest -q -p no:cacheprovider --ignore=test_monitoring.py --ignore=test_prometheus.py \
  --ignore=test_otel.py "$@"
