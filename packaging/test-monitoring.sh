#!/usr/bin/env bash
# monitoring/: the alert rules checked and unit-tested by promtool, then the Python tests that check the
# dashboard and alerts against the core's Prometheus text (tests/python/test_monitoring.py) and against
# a real Prometheus scraping two apps (tests/python/test_prometheus.py), and floodwall.otel
# (tests/python/test_otel.py). promtool and prometheus come from Debian's `prometheus` package; a missing
# one fails this script. The tests start their own redis-server, apps and Prometheus and stop them.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in promtool prometheus redis-server; do
  command -v "$tool" >/dev/null || { echo "test-monitoring: $tool is not installed (Debian: apt-get install prometheus redis-server)" >&2; exit 1; }
done
promtool check rules monitoring/prometheus/alerts.yml
(cd monitoring/prometheus && promtool test rules alerts_test.yml)
py=$(bash packaging/python-venv.sh pytest starlette uvicorn flask opentelemetry-api opentelemetry-sdk | tail -n 1)
cd tests/python
exec "$py" -m pytest -q -p no:cacheprovider test_monitoring.py test_prometheus.py test_otel.py "$@"
