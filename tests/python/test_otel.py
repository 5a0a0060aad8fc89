"""floodwall.otel: the Prometheus text's counters and gauges as OpenTelemetry observable instruments, read
by the SDK's InMemoryMetricReader: the same names, attributes and values as the text."""

from __future__ import annotations

from typing import Any, Dict, Tuple

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.metrics._internal.point import Gauge, Sum

import floodwall
from floodwall import otel


def collect(reader: InMemoryMetricReader) -> Dict[str, Tuple[Any, Dict[Tuple[Tuple[str, str], ...], float]]]:
    """metric name -> (its data point type, {sorted attributes: value})."""
    out = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[m.name] = (m.data, {tuple(sorted(p.attributes.items())): p.value for p in m.data.data_points})
    return out


def prometheus_values(fw: floodwall.Floodwall) -> Dict[str, Dict[Tuple[Tuple[str, str], ...], float]]:
    _, samples = otel.parse_families(fw.prometheus())
    return {name: {tuple(sorted(labels.items())): value for labels, value in rows} for name, rows in samples.items()}


@pytest.fixture
def meter_reader():
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield provider.get_meter("test"), reader
    provider.shutdown()


def test_every_family_has_an_instrument_with_the_same_name_attributes_and_values(meter_reader, make_client):
    meter, reader = meter_reader
    fw = make_client({"request_rate": {"rate": 1, "burst": 2}, "concurrency": {"limit": 1},
                      "adaptive": {"enabled": True}})
    otel.instrument(fw, meter=meter)
    held = fw.admit("acme", route="/a")
    for _ in range(3):
        fw.admit("acme", route="/a").release()
    got = collect(reader)
    want = prometheus_values(fw)
    assert set(got) == set(want)
    for name, (data, points) in got.items():
        assert points == {k: v for k, v in want[name].items()}, name
    assert got["floodwall_decisions_total"][1][
        (("limiter", "concurrency"), ("outcome", "rejected"), ("route", "/a"))] == 3
    assert got["floodwall_adaptive_in_flight"][1][(("route", "*"),)] == 1
    held.release()


def test_counters_are_monotonic_sums_and_gauges_are_gauges(meter_reader):
    meter, reader = meter_reader
    fw = floodwall.Floodwall({"request_rate": {"rate": 1, "burst": 1}})
    otel.instrument(fw, meter=meter)
    fw.admit("a"), fw.admit("a")
    got = collect(reader)
    decisions = got["floodwall_decisions_total"][0]
    assert isinstance(decisions, Sum) and decisions.is_monotonic
    assert isinstance(got["floodwall_breaker_state"][0], Gauge)
    assert got["floodwall_tenant_rejection_ratio"][1] == {(("tenant", "a"),): 1.0}  # since its first rejection
    fw.close()


def test_each_collection_reads_the_counters_anew(meter_reader):
    meter, reader = meter_reader
    fw = floodwall.Floodwall({"request_rate": {"rate": 1, "burst": 1}})
    otel.instrument(fw, meter=meter)
    key = (("limiter", "request_rate"), ("outcome", "rejected"), ("route", "default"))
    fw.admit("a")
    assert collect(reader)["floodwall_decisions_total"][1][key] == 0
    fw.admit("a")
    assert collect(reader)["floodwall_decisions_total"][1][key] == 1
    fw.close()


def test_a_closed_client_observes_nothing_and_raises_nothing(meter_reader):
    meter, reader = meter_reader
    fw = floodwall.Floodwall({"request_rate": {"rate": 1, "burst": 1}})
    otel.instrument(fw, meter=meter)
    assert collect(reader)["floodwall_decisions_total"][1], "observed while open"
    fw.close()
    assert all(not points for _, points in collect(reader).values())


def test_the_global_meter_provider_is_the_default():
    from opentelemetry import metrics

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics.set_meter_provider(provider)
    fw = floodwall.Floodwall({"request_rate": {"rate": 1, "burst": 1}})
    otel.instrument(fw)
    fw.admit("a")
    data = reader.get_metrics_data()
    scopes = {sm.scope.name for rm in data.resource_metrics for sm in rm.scope_metrics}
    assert scopes == {"floodwall"}
    fw.close()
    provider.shutdown()


def test_a_client_that_is_not_a_floodwall_is_refused_by_name():
    with pytest.raises(TypeError, match="client: must be a floodwall.Floodwall"):
        otel.instrument(object())
