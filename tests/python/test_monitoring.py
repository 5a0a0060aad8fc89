"""monitoring/: every metric and label the Grafana dashboard and the Prometheus alerts use is one the core
emits, checked against the Prometheus text of clients that have seen every kind of decision (rejections by
each limiter, dark mode, the fallback deciding while Redis is gone, a lease, the adaptive limit, the
utilization shedder).

The PromQL is read by a small tokenizer (promql_names), not a parser. What it understands: string
literals (skipped, except as the values of label matchers), durations in brackets, numbers, selectors
`name{label op "value", ...}` and bare names, `by`/`without`/`on`/`ignoring`/`group_left`/`group_right`
label lists, function calls (an identifier followed by `(`), aggregation operators and keywords. What it
does not: a metric named only through `{__name__=~"..."}`, label names that live inside strings
(label_replace/label_join arguments), Grafana variables anywhere but in matcher values and `[...]`
ranges, `@` modifiers, and comments (`#`). The dashboard and alerts use none of those; the tokenizer's own
tests below pin what it returns."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Set, Tuple

import pytest

import floodwall
from conftest import RedisServer, eventually

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "monitoring" / "grafana" / "floodwall.json"
ALERTS = ROOT / "monitoring" / "prometheus" / "alerts.yml"

# Labels Prometheus adds to every scraped series (the target's), and the one every alert rule may group by.
TARGET_LABELS = {"job", "instance"}

AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
                "topk", "quantile", "limitk", "limit_ratio"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
            "offset", "atan2", "inf", "nan"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}

TOKEN = re.compile(
    r"""(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
      |(?P<range>\[[^\]]*\])
      |(?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[smhdwy]?)
      |(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
      |(?P<variable>\$\{?[A-Za-z0-9_]+\}?)
      |(?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=(){},])
      |(?P<space>\s+)""",
    re.VERBOSE,
)


class Usage:
    """What one expression uses: metric names, label names per metric (matchers), label names in grouping
    clauses (which apply to whatever metrics the expression combines) and equality matchers' values."""

    def __init__(self) -> None:
        self.metrics: Set[str] = set()
        self.matched: Dict[str, Set[str]] = {}
        self.grouped: Set[str] = set()
        self.equal: List[Tuple[str, str, str]] = []  # (metric, label, value) of label="value"


def tokens(expr: str) -> List[Tuple[str, str]]:
    out, pos = [], 0
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if m is None:
            raise ValueError(f"PromQL the tokenizer does not understand at {pos}: {expr[pos:pos + 30]!r}")
        pos = m.end()
        if m.lastgroup != "space":
            out.append((m.lastgroup, m.group()))
    return out


def promql_names(expr: str) -> Usage:
    u = Usage()
    toks = tokens(expr)
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        if kind == "ident" and text in GROUPING:
            i += 1
            if i < len(toks) and toks[i][1] == "(":
                i += 1
                while i < len(toks) and toks[i][1] != ")":
                    if toks[i][0] == "ident":
                        u.grouped.add(toks[i][1])
                    i += 1
            i += 1
            continue
        if kind == "ident" and (nxt == "(" or text in KEYWORDS or text in AGGREGATIONS):
            i += 1  # a function, an aggregation (its "by" comes next) or a keyword
            continue
        if kind == "ident":
            u.metrics.add(text)
            labels = u.matched.setdefault(text, set())
            i += 1
            if nxt == "{":
                i += 1
                while i < len(toks) and toks[i][1] != "}":
                    label, op, value = toks[i][1], toks[i + 1][1], toks[i + 2]
                    labels.add(label)
                    if op == "=" and value[0] == "string" and "$" not in value[1]:
                        u.equal.append((text, label, value[1][1:-1]))
                    i += 3
                    if i < len(toks) and toks[i][1] == ",":
                        i += 1
                i += 1
            continue
        i += 1
    return u


def label_values_names(query: str) -> Usage:
    """A Grafana variable's query: label_values(selector, label)."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", query)
    assert m, f"a template variable query that is not label_values(selector, label): {query!r}"
    u = promql_names(m.group(1))
    for metric in u.metrics:
        u.matched[metric].add(m.group(2))
    return u


def dashboard_expressions() -> Iterator[Tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())

    def panels(ps: list) -> Iterator[dict]:
        for p in ps:
            yield p
            yield from panels(p.get("panels", []))

    for p in panels(dash["panels"]):
        for t in p.get("targets", []):
            yield f"panel {p['title']!r}", t["expr"]


def dashboard_variables() -> Iterator[Tuple[str, str]]:
    for v in json.loads(DASHBOARD.read_text())["templating"]["list"]:
        if v["type"] == "query":
            yield f"variable {v['name']}", v["query"]["query"] if isinstance(v["query"], dict) else v["query"]


def alert_expressions() -> Iterator[Tuple[str, str]]:
    """Each rule's `alert:` and `expr:` (one line, or a `|` block of the lines indented deeper), read
    line by line so that the Python suite needs no YAML library; promtool and Prometheus itself read the
    whole file (packaging/test-monitoring.sh, test_prometheus.py)."""
    lines = ALERTS.read_text().splitlines()
    name = None
    for i, line in enumerate(lines):
        m = re.match(r"\s*- alert: (\S+)$", line)
        if m:
            name = m.group(1)
            continue
        m = re.match(r"(\s*)expr: (.*)$", line)
        if not m:
            continue
        assert name, f"alerts.yml line {i + 1}: an expr before any alert"
        if m.group(2).strip() != "|":
            yield f"alert {name}", m.group(2).strip()
        else:
            block = []
            for more in lines[i + 1:]:
                if more.strip() and len(more) - len(more.lstrip()) <= len(m.group(1)):
                    break
                block.append(more.strip())
            yield f"alert {name}", " ".join(block).strip()
        name = None


def all_usages() -> List[Tuple[str, str, Usage]]:
    found = [(where, e, promql_names(e)) for where, e in [*dashboard_expressions(), *alert_expressions()]]
    found += [(where, q, label_values_names(q)) for where, q in dashboard_variables()]
    return found


# ---------------------------------------------------------------------------------------------- tokenizer


def test_the_tokenizer_finds_metrics_labels_and_grouping_and_skips_functions_and_strings():
    u = promql_names(
        'sum by (limiter, route) (rate(floodwall_decisions_total{job=~"$job",outcome="rejected"}[$__rate_interval]))'
        ' / on (job) group_left (tenant) topk(10, floodwall_in_flight) > bool 0.5'
    )
    assert u.metrics == {"floodwall_decisions_total", "floodwall_in_flight"}
    assert u.matched["floodwall_decisions_total"] == {"job", "outcome"}
    assert u.grouped == {"limiter", "route", "job", "tenant"}
    assert u.equal == [("floodwall_decisions_total", "outcome", "rejected")]


def test_the_tokenizer_reads_a_bare_name_and_a_label_values_query():
    assert promql_names("floodwall_breaker_state == 1").metrics == {"floodwall_breaker_state"}
    u = label_values_names('label_values(floodwall_decisions_total{job=~"$job"}, instance)')
    assert u.matched == {"floodwall_decisions_total": {"job", "instance"}}


def test_the_tokenizer_refuses_what_it_does_not_understand():
    with pytest.raises(ValueError, match="does not understand"):
        tokens("floodwall_in_flight # a comment")


def test_the_dashboard_and_alerts_have_expressions_to_check():
    usages = all_usages()
    assert sum(where.startswith("panel") for where, _, _ in usages) >= 20
    alerts = [where for where, _, _ in usages if where.startswith("alert")]
    assert len(alerts) == 6 == len(re.findall(r"^\s*- alert: ", ALERTS.read_text(), re.M)), alerts
    assert {where for where, _, _ in usages if where.startswith("variable")} == {
        "variable job", "variable instance", "variable route"}


# --------------------------------------------------------------------------------------------- exposition


def parse_exposition(text: str) -> Dict[str, List[Dict[str, str]]]:
    """metric name -> the label sets of its series (the TYPE line alone makes it known, with no series)."""
    series: Dict[str, List[Dict[str, str]]] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            series.setdefault(line.split()[2], [])
        elif line and not line.startswith("#"):
            m = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)$", line)
            assert m, f"not a Prometheus sample line: {line!r}"
            labels = dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            labels["__value__"] = m.group(3)
            series.setdefault(m.group(1), []).append(labels)
    return series


def value(series: Dict[str, List[Dict[str, str]]], metric: str, **labels: str) -> float:
    return sum(float(s["__value__"]) for s in series.get(metric, []) if all(s.get(k) == v for k, v in labels.items()))


def rejected_by(limiter: str, admit: Callable[[], floodwall.Decision]) -> None:
    """Admits (without releasing) until `limiter` refuses one; fails after a bound."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        d = admit()
        if not d.allowed and d.limiter == limiter:
            return
        time.sleep(0.005)
    raise AssertionError(f"{limiter} refused nothing within 10s")


@pytest.fixture(scope="module")
def exposition() -> Iterator[Dict[str, List[Dict[str, str]]]]:
    texts = []
    redis = RedisServer()
    try:
        prefix = f"mon{int(time.time() * 1000) % 10**9}"
        store = {"store": redis.url, "prefix": prefix,
                 "redis": {"deadline_ms": 200, "connect_timeout_ms": 200, "breaker_min_calls": 2,
                           "breaker_window_ms": 1000, "breaker_open_ms": 60000}}
        # Redis: every limiter but the adaptive one, a hot tenant's lease, a dark rule.
        fw = floodwall.Floodwall({
            **store,
            "request_rate": {"rate": 1000, "burst": 1000, "lease": {"max_tokens": 50, "ttl_ms": 1000},
                             "limits": [{"name": "search", "routes": ["/search"], "rate": 1, "burst": 1},
                                        {"name": "shadow", "routes": ["/shadow"], "rate": 1, "burst": 1,
                                         "mode": "dark"}]},
            "concurrency": {"limit": 1, "routes": ["/conc"]},
            "fleet": {"capacity": 1},
            "utilization": {"workers": 1000, "delay_s": 0, "ramp_s": 0.05, "sample_s": 0.01},
        })
        # A hot tenant: many admits in a row, decided in process once its lease is in hand.
        def leased() -> bool:
            for _ in range(50):
                fw.admit("hot", route="/hot").release()
            return value(parse_exposition(fw.prometheus()), "floodwall_lease_decisions_total", how="in_process") > 0

        eventually(leased, timeout=10, what="a decision from a lease")
        held = []
        rejected_by("request_rate", lambda: fw.admit("searcher", route="/search"))
        for _ in range(3):  # the dark rule: dark_rejected, never refused (critical: past the fleet shedder)
            fw.admit("shadowed", route="/shadow", critical=True).release()
        # Critical: the fleet shedder never counts it (the hot tenant's reported usage may fill the fleet).
        held.append(fw.admit("busy", route="/conc", critical=True))
        rejected_by("concurrency", lambda: fw.admit("busy", route="/conc", critical=True))
        held.append(fw.admit("fleet-1", route="/fleet"))
        rejected_by("fleet", lambda: fw.admit("fleet-2", route="/fleet"))
        fw.set_mode("fleet", "dark")  # what it would refuse, counted, none refused
        assert fw.admit("fleet-3", route="/fleet").allowed
        for d in held:
            d.release()
        fw.report_utilization(1.0)
        rejected_by("utilization", lambda: fw.admit("sandboxed", route="/u", sandbox=True))
        fw.report_utilization(0.0)
        fw.set_mode("utilization", "dark")
        # The adaptive limit: min_limit in flight while it measures, the next one refused.
        ad = floodwall.Floodwall({**store, "adaptive": {"min_limit": 1, "initial_limit": 1}})
        held = [ad.admit("a")]
        rejected_by("adaptive", lambda: ad.admit("a"))
        for d in held:
            d.release()
        # Redis gone: the fallback decides, the breaker opens.
        redis.stop()
        assert all(fw.admit(f"t{i}", route="/gone").degraded for i in range(6))
        eventually(lambda: value(parse_exposition(fw.prometheus()), "floodwall_breaker_state", state="open") == 1,
                   timeout=10, what="the breaker opening")
        texts += [fw.prometheus(), ad.prometheus()]
        # memory://: the memory store's own families.
        mem = floodwall.Floodwall({"store": "memory://", "max_tenants": 1, "request_rate": {"rate": 1, "burst": 1}})
        for t in ("a", "a", "b", "c"):  # a refused by the bucket itself (a rule's refusals count by rule)
            mem.admit(t)
        texts.append(mem.prometheus())
        for c in (fw, ad, mem):
            c.close()
    finally:
        redis.stop()
    merged: Dict[str, List[Dict[str, str]]] = {}
    for text in texts:
        for metric, rows in parse_exposition(text).items():
            merged.setdefault(metric, []).extend(rows)
    yield merged


def test_the_clients_saw_every_kind_of_decision(exposition):
    for limiter in ("request_rate", "concurrency", "fleet", "utilization", "adaptive"):
        assert value(exposition, "floodwall_decisions_total", limiter=limiter, outcome="rejected") > 0, limiter
    assert value(exposition, "floodwall_decisions_total", limiter="fleet", outcome="dark_rejected") > 0
    assert value(exposition, "floodwall_rule_decisions_total", rule="shadow", outcome="dark_rejected") > 0
    assert value(exposition, "floodwall_decisions_by_source_total", source="fallback") > 0
    assert value(exposition, "floodwall_store_failures_total") > 0
    assert value(exposition, "floodwall_breaker_state", state="open") >= 1
    assert value(exposition, "floodwall_lease_decisions_total", how="in_process") > 0
    assert value(exposition, "floodwall_tenant_rejection_ratio") > 0
    assert value(exposition, "floodwall_store_evictions_total") > 0
    assert exposition["floodwall_adaptive_limit"] and exposition["floodwall_store_connections_in_use"]
    assert value(exposition, "floodwall_mode", limiter="utilization", mode="dark") == 1


@pytest.mark.parametrize("where,expr,usage", all_usages(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_metric_and_label_used_is_emitted(exposition, where, expr, usage):
    missing = usage.metrics - exposition.keys()
    assert not missing, f"{where}: {sorted(missing)} not in the Prometheus text\n{expr}"
    emitted_labels = set(TARGET_LABELS)
    for metric in usage.metrics:
        labels = {k for row in exposition[metric] for k in row if k != "__value__"}
        emitted_labels |= labels
        unknown = usage.matched[metric] - labels - TARGET_LABELS
        assert not unknown, f"{where}: {metric} has no label {sorted(unknown)}\n{expr}"
    unknown = usage.grouped - emitted_labels
    assert not unknown, f"{where}: grouped by {sorted(unknown)}, a label none of its metrics has\n{expr}"
    for metric, label, val in usage.equal:
        if label in TARGET_LABELS:
            continue
        assert any(row.get(label) == val for row in exposition[metric]), \
            f"{where}: no series {metric}{{{label}=\"{val}\"}} in the Prometheus text\n{expr}"
