"""OpenTelemetry metrics for a floodwall client: the counters and gauges of its Prometheus text, as
observable instruments with the same names, descriptions and attributes.

    from floodwall import Floodwall, otel
    fw = Floodwall("policy.json")
    otel.instrument(fw)                   # on the global MeterProvider's meter "floodwall"
    otel.instrument(fw, meter=my_meter)   # or on a meter of yours

Needs ``opentelemetry-api`` (not a dependency of floodwall: install it beside the SDK your app uses).
Each Prometheus counter is an observable counter, each gauge an observable gauge, named as in the text
(``floodwall_decisions_total`` with attributes ``limiter``, ``outcome`` and ``route``, ...): the numbers
come from the core's one text (``Floodwall.prometheus()``), read once per collection, so the two views
cannot disagree. The instruments are the families the client shows when ``instrument`` is called: those
its policy configures (rules, leases, the adaptive limit) and, for a Redis store, the connection gauges
when it has a connection at that moment (instrument a client made while Redis is down and they are
missing). Once the client is closed the instruments observe nothing."""

from __future__ import annotations

import re
import threading
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from . import Error, Floodwall, __version__

try:
    from opentelemetry import metrics as _metrics
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError("floodwall.otel needs opentelemetry-api (pip install opentelemetry-api)") from e

_SAMPLE = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
_UNESCAPE = re.compile(r"\\(.)")

Samples = Dict[str, List[Tuple[Dict[str, str], float]]]


def _unescape(value: str) -> str:
    return _UNESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def parse_families(text: str) -> Tuple[Dict[str, Tuple[str, str]], Samples]:
    """Prometheus text -> ({family: (type, help)}, {family: [(labels, value)]})."""
    families: Dict[str, Tuple[str, str]] = {}
    helps: Dict[str, str] = {}
    samples: Samples = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            _, _, name, *rest = line.split(" ", 3)
            helps[name] = rest[0] if rest else ""
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            families[name] = (kind, helps.get(name, ""))
            samples.setdefault(name, [])
        elif line and not line.startswith("#"):
            m = _SAMPLE.match(line)
            if m is None:
                continue
            labels = {k: _unescape(v) for k, v in _LABEL.findall(m.group(2) or "")}
            samples.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return families, samples


class _Snapshot:
    """One read of the client's text per collection: a family asked for a second time means a new
    collection has begun, and the text is read again."""

    def __init__(self, client: Floodwall) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._samples: Samples = {}
        self._served: Set[str] = set()
        self._fresh = False

    def samples(self, family: str) -> List[Tuple[Dict[str, str], float]]:
        with self._lock:
            if not self._fresh or family in self._served:
                try:
                    self._samples = parse_families(self._client.prometheus())[1]
                except Error:  # closed: nothing to observe
                    self._samples = {}
                self._served = set()
                self._fresh = True
            self._served.add(family)
            return self._samples.get(family, [])


def instrument(client: Floodwall, meter: Optional[Any] = None) -> List[Any]:
    """Registers one observable instrument per Prometheus family of ``client`` on ``meter`` (default:
    ``opentelemetry.metrics.get_meter("floodwall", floodwall.__version__)``). Returns the instruments."""
    if not isinstance(client, Floodwall):
        raise TypeError("client: must be a floodwall.Floodwall")
    if meter is None:
        meter = _metrics.get_meter("floodwall", __version__)
    families, _ = parse_families(client.prometheus())
    snapshot = _Snapshot(client)
    made = []
    for name, (kind, help_text) in families.items():
        def observe(options: Any, name: str = name, as_int: bool = kind == "counter") -> Iterable[Any]:
            for labels, value in snapshot.samples(name):
                yield _metrics.Observation(int(value) if as_int else value, labels)

        create = meter.create_observable_counter if kind == "counter" else meter.create_observable_gauge
        made.append(create(name, callbacks=[observe], description=help_text))
    return made
