"""floodwall.schema.json and the core's policy parser agree (jsonschema, a real JSON Schema 2020-12 validator).

Every example policy in the repository validates against the schema and is accepted by the core
(`floodwall check`, the core's own parser); every policy the core refuses for a shape reason (a type, an
unknown key, a bound, a name's pattern) is refused by the schema too, on a corpus of bad policies and the
policy fuzz corpus. Rules that span fields (burst / rate within 90 days, a lease within its bucket, bad >=
good, min <= initial <= max, unique names, a store's scheme for redis.tls) are the core's alone: JSON Schema
cannot compare two values. The schema's description lists them; CROSS_FIELD below is that list, and the
test checks the core refuses those policies while the schema may let them through.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import jsonschema
import pytest

from floodwall import _floodwall

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "floodwall.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

# The core's messages for rules that span fields or depend on the environment (see the module's docstring).
CROSS_FIELD = [
    r"takes more than 90 days to refill",
    r"must be at most the burst",
    r"must be at most the limit",
    r"must be at most half of concurrency\.ttl_s",
    r"must be >= utilization\.good",
    r"must be at most adaptive\.max_limit",
    r"must be between adaptive\.min_limit and adaptive\.max_limit",
    r"names another limit or quota too",
    r"too many limits and quotas",
    r"limits and quotas \(its own and the policy's\)",
    r"twice \(as \"",
    r"applies to rediss:// stores only",
    r"applies to redis\+sentinel://",
    r"cannot read \"",
    r"the environment variable .* is not set",
    r"is given in the store URL too",
    r"the store URL has a password too",
]


def core_errors(tmp_path: Path, text: str) -> List[Dict[str, str]]:
    """What `floodwall check --policy FILE --json` (the core's parser) says of a policy document."""
    f = tmp_path / "policy.json"
    f.write_text(text)
    code, out, err = _floodwall.cli_run(["floodwall", "check", "--policy", str(f), "--json"])
    report = json.loads(out)
    assert (code == 0) == report["valid"], (code, out, err)
    return report["errors"]


def schema_errors(text: str) -> List[str]:
    """The schema's errors; a document that is not strict JSON (NaN, Infinity) is refused as any JSON tool would."""
    def no_constants(token: str) -> Any:
        raise ValueError(f"{token} is not JSON")

    try:
        doc = json.loads(text, parse_constant=no_constants)
    except ValueError as e:
        return [f"not JSON: {e}"]
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(doc)]


def is_cross_field(error: Dict[str, str]) -> bool:
    return any(re.search(p, error["message"]) for p in CROSS_FIELD)


# --- the repository's example policies -------------------------------------------------------------------

def _code_literal(text: str, start: int) -> str:
    """The balanced (...) after `start`, as written."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] in "({[":
            depth += 1
        elif text[i] in ")}]":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
    raise AssertionError("unbalanced")


def _literal_to_json(code: str, ruby: bool) -> str:
    code = re.sub(r"(#|//)[^\n]*", "", code)  # comments
    code = re.sub(r"([A-Za-z_][A-Za-z0-9_]*):(?!/)", r'"\1":', code)  # bare keys (JS, Ruby) -> JSON keys
    code = code.replace("'", '"')
    return "{" + code + "}" if ruby else code


def example_policies() -> Iterator[Tuple[str, Any]]:
    yield "examples/routes_api/policy.json", json.loads((ROOT / "examples/routes_api/policy.json").read_text())
    # The policies the binding examples and the README's language sections hand to a client, as code literals.
    calls = [(r"Floodwall\(", False), (r"new Floodwall\(", False), (r"Floodwall::Client\.new\(", True)]
    # (An example that is a whole project, such as the Django one, is a folder of files.)
    files = [p for p in ROOT.glob("bindings/*/examples/**/*") if p.is_file() and p.suffix in (".py", ".js", ".ru", ".rb")]
    sources = sorted(files) + [ROOT / "README.md"]
    for src in sources:
        text = src.read_text()
        for pattern, ruby in calls:
            for m in re.finditer(pattern, text):
                literal = _code_literal(text, m.end() - 1).strip()
                if not literal or not (literal.startswith("{") or ruby) or "=>" in literal or "ENV[" in literal:
                    continue  # a variable, a file, or an expression: not a literal policy
                try:
                    yield f"{src.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}", json.loads(_literal_to_json(literal, ruby))
                except json.JSONDecodeError:
                    continue  # an expression built at run time (f-strings, interpolation)
    # The README's and the docs' JSON blocks that are policies (objects whose keys are the policy's).
    for page in [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md")):
        readme = page.read_text()
        for m in re.finditer(r"```json\n(.*?)```", readme, re.S):
            doc = json.loads(m.group(1))
            if isinstance(doc, dict) and set(doc) <= set(SCHEMA["properties"]):
                yield f"{page.relative_to(ROOT)}:{readme.count(chr(10), 0, m.start()) + 1}", doc
    vectors = json.loads((ROOT / "tests/vectors.json").read_text())
    for case in vectors.get("decisions", []):
        yield f"tests/vectors.json decisions: {case['name']}", case["policy"]
    for case in vectors.get("tenant_keys", []):
        if "tenant" in case:
            yield f"tests/vectors.json tenant_keys: {case['name']}", {"tenant": case["tenant"]}


EXAMPLES = list(example_policies())


def test_the_examples_are_found():
    names = {name.split(":")[0] for name, _ in EXAMPLES}
    for where in ["examples/routes_api/policy.json", "bindings/node/examples/express_app.js",
                  "bindings/python/examples/fastapi_app.py", "bindings/ruby/examples/config.ru", "README.md"]:
        assert where in names, f"no policy found in {where}"
    assert sum(name.startswith("tests/vectors.json") for name, _ in EXAMPLES) >= 10


@pytest.mark.parametrize("name,policy", EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_every_example_policy_validates_and_the_core_accepts_it(name, policy, tmp_path, monkeypatch):
    text = json.dumps(policy)
    assert schema_errors(text) == []
    monkeypatch.setenv("REDIS_PASSWORD", "example")  # the README's reference names its password's variable
    errors = core_errors(tmp_path, text)
    # The policy reference's block (docs/reference/policy.md) lists every key at once: redis.tls beside a
    # memory:// store, and a CA file of the reader's machine. Those are rules of the store and the
    # filesystem, not of the document's shape.
    if name.startswith(("README.md", "docs/")) and "tls" in policy.get("redis", {}):
        errors = [e for e in errors if not is_cross_field(e)]
    assert errors == []


# --- bad policies ---------------------------------------------------------------------------------------

B = {"request_rate": {"rate": 10, "burst": 20}}


def _with(**parts: Any) -> Dict[str, Any]:
    return {**B, **parts}


SHAPE = {
    # types
    "not an object": [1, 2],
    "store a number": {"store": 5},
    "rate a string": {"request_rate": {"rate": "10", "burst": 20}},
    "burst a fraction": {"request_rate": {"rate": 10, "burst": 2.5}},
    "burst a boolean": {"request_rate": {"rate": 10, "burst": True}},
    "mode a number": {"request_rate": {"rate": 10, "burst": 20, "mode": 1}},
    "tenant.from a string": {"tenant": {"from": "ip"}},
    "overrides an array": {"request_rate": {"rate": 1, "burst": 1, "overrides": []}},
    "limits an object": {"request_rate": {"rate": 1, "burst": 1, "limits": {}}},
    "quotas an object": {"quotas": {"name": "q"}},
    "redis.tls.insecure a string": {"store": "rediss://h:1", "redis": {"tls": {"insecure": "yes"}}},
    "adaptive.enabled a number": {"adaptive": {"enabled": 1}},
    "concurrency.routes a string": {"concurrency": {"limit": 1, "routes": "/a"}},
    # unknown keys, at every level
    "unknown top-level key": _with(requests=1),
    "unknown request_rate key": {"request_rate": {"rate": 1, "burst": 1, "brust": 2}},
    "unknown tenant key": {"tenant": {"form": ["ip"]}},
    "unknown redis key": {"redis": {"breaker_failures": 3}},
    "unknown tls key": {"store": "rediss://h:1", "redis": {"tls": {"ca": "x"}}},
    "unknown lease key": {"request_rate": {"rate": 1, "burst": 5, "lease": {"max_tokens": 1, "ttl_ms": 1, "x": 1}}},
    "unknown limit key": {"request_rate": {"rate": 1, "burst": 1, "limits": [{"name": "a", "routes": ["/"], "rate": 1, "burst": 1, "tier": 1}]}},
    "unknown tier key": {**B, "tiers": {"pro": {"rate": 1, "burst": 1, "price": 9}}},
    "empty key": {"": 1},
    # required
    "request_rate without burst": {"request_rate": {"rate": 1}},
    "concurrency without limit": {"concurrency": {}},
    "fleet without capacity": {"fleet": {"ttl_s": 5}},
    "lease without ttl_ms": {"request_rate": {"rate": 1, "burst": 5, "lease": {"max_tokens": 1}}},
    "limit without routes": {"request_rate": {"rate": 1, "burst": 1, "limits": [{"name": "a", "rate": 1, "burst": 1}]}},
    "quota without period": {"quotas": [{"name": "q", "limit": 5}]},
    "quota without name": {"quotas": [{"limit": 5, "period": "day"}]},
    "tiers without request_rate": {"tiers": {"pro": {"rate": 1, "burst": 1}}},
    "cert_file without key_file": {"store": "rediss://h:1", "redis": {"tls": {"cert_file": "/etc/hostname"}}},
    # bounds
    "rate 0": {"request_rate": {"rate": 0, "burst": 1}},
    "rate negative": {"request_rate": {"rate": -1, "burst": 1}},
    "rate above 1e6": {"request_rate": {"rate": 1e6 + 1, "burst": 1}},
    "rate below a micro-token": {"request_rate": {"rate": 1e-7, "burst": 1}},
    "burst 0": {"request_rate": {"rate": 1, "burst": 0}},
    "burst above 1e9": {"request_rate": {"rate": 1e6, "burst": 1e9 + 1}},
    "concurrency.limit 0": {"concurrency": {"limit": 0}},
    "concurrency.ttl_s 0": {"concurrency": {"limit": 1, "ttl_s": 0}},
    "max_tenants 0": {"max_tenants": 0},
    "ipv6_prefix 129": {"tenant": {"ipv6_prefix": 129}},
    "utilization.good 0": {"utilization": {"good": 0}},
    "utilization.bad 1": {"utilization": {"good": 0.5, "bad": 1}},
    "utilization.delay_s negative": {"utilization": {"delay_s": -1}},
    "utilization.sample_s above an hour": {"utilization": {"sample_s": 3601}},
    "adaptive.smoothing above 1": {"adaptive": {"smoothing": 1.5}},
    "adaptive.tolerance below 1": {"adaptive": {"tolerance": 0.5}},
    "adaptive.critical_reserve 0.95": {"adaptive": {"critical_reserve": 0.95}},
    "redis.connections 17": {"redis": {"connections": 17}},
    "redis.direct_connections 9": {"redis": {"direct_connections": 9}},
    "redis.deadline_ms 0": {"redis": {"deadline_ms": 0}},
    "redis.breaker_window_ms 5": {"redis": {"breaker_window_ms": 5}},
    "redis.breaker_failure_ratio 0": {"redis": {"breaker_failure_ratio": 0}},
    "redis.batch_window_us negative": {"redis": {"batch_window_us": -1}},
    "lease.ttl_ms above a minute": {"request_rate": {"rate": 1, "burst": 5, "lease": {"max_tokens": 1, "ttl_ms": 60001}}},
    "concurrency.lease.max_slots 1025": {"concurrency": {"limit": 100000, "lease": {"max_slots": 1025, "ttl_ms": 1}}},
    "quota limit 0": {"quotas": [{"name": "q", "limit": 0, "period": "day"}]},
    "docs_url 513 bytes": {"docs_url": "https://x/" + "a" * 503},
    "tenant.trusted_proxies 1025": {"tenant": {"trusted_proxies": ["10.0.0.1"] * 1025}},
    "17 limits": {"request_rate": {"rate": 1, "burst": 1, "limits": [
        {"name": f"l{i}", "routes": ["/"], "rate": 1, "burst": 1} for i in range(17)]}},
    "65 route families": {"concurrency": {"limit": 1, "routes": [f"/r{i}" for i in range(65)]}},
    "a limit with 65 routes": {"request_rate": {"rate": 1, "burst": 1, "limits": [
        {"name": "a", "routes": [f"/r{i}" for i in range(65)], "rate": 1, "burst": 1}]}},
    "a route of 257 bytes": {"request_rate": {"rate": 1, "burst": 1, "limits": [{"name": "a", "routes": ["/" + "a" * 256], "rate": 1, "burst": 1}]}},
    "a route family twice": {"concurrency": {"limit": 1, "routes": ["/a", "/a"]}},
    "33 tiers": {**B, "tiers": {f"t{i}": {"rate": 1, "burst": 1} for i in range(33)}},
    "no tiers": {**B, "tiers": {}},
    # enums and patterns
    "mode shadow": {"fleet": {"capacity": 1, "mode": "shadow"}},
    "body_format xml": {"body_format": "xml"},
    "headers legacy": {"headers": "legacy"},
    "fallback maybe": {"redis": {"fallback": "maybe"}},
    "clock local": {"redis": {"clock": "local"}},
    "algorithm aimd": {"adaptive": {"algorithm": "aimd"}},
    "tenant.from cookie": {"tenant": {"from": ["cookie"]}},
    "tenant.from empty": {"tenant": {"from": []}},
    "tenant.from ip twice": {"tenant": {"from": ["ip", "ip"]}},
    "credentials maybe": {"tenant": {"credentials": "maybe"}},
    "forwarded_header x-real-ip": {"tenant": {"forwarded_header": "x-real-ip"}},
    "trusted proxy not an address": {"tenant": {"trusted_proxies": ["proxy.internal"]}},
    "trusted proxy /33": {"tenant": {"trusted_proxies": ["10.0.0.0/33"]}},
    "prefix with a brace": {"prefix": "a{b}"},
    "prefix empty": {"prefix": ""},
    "prefix of 65": {"prefix": "p" * 65},
    "limit name with a space": {"request_rate": {"rate": 1, "burst": 1, "limits": [{"name": "a b", "routes": ["/"], "rate": 1, "burst": 1}]}},
    "limit named request_rate": {"request_rate": {"rate": 1, "burst": 1, "limits": [{"name": "request_rate", "routes": ["/"], "rate": 1, "burst": 1}]}},
    "limit method with a digit": {"request_rate": {"rate": 1, "burst": 1, "limits": [{"name": "a", "routes": ["/"], "methods": ["G3T"], "rate": 1, "burst": 1}]}},
    "limit with an empty route": {"request_rate": {"rate": 1, "burst": 1, "limits": [{"name": "a", "routes": [""], "rate": 1, "burst": 1}]}},
    "quota period week": {"quotas": [{"name": "q", "limit": 5, "period": "week"}]},
    "quota timezone Europe/Paris": {"quotas": [{"name": "q", "limit": 5, "period": "day", "timezone": "Europe/Paris"}]},
    "quota timezone UTC+15:00": {"quotas": [{"name": "q", "limit": 5, "period": "day", "timezone": "UTC+15:00"}]},
    "quota timezone UTC+14:30": {"quotas": [{"name": "q", "limit": 5, "period": "day", "timezone": "UTC+14:30"}]},
    "tier name with a slash": {**B, "tiers": {"a/b": {"rate": 1, "burst": 1}}},
    "insecure beside ca_file": {"store": "rediss://h:1", "redis": {"tls": {"insecure": True, "ca_file": "/etc/hostname"}}},
    "redis.username empty": {"redis": {"username": ""}},
    "redis.password_env empty": {"redis": {"password_env": ""}},
    "an override with an empty tenant": {"request_rate": {"rate": 1, "burst": 1, "overrides": {"": {"rate": 1, "burst": 1}}}},
}

# Refused by the core, for a rule the schema cannot say (the module's docstring).
CROSS = {
    "refill beyond 90 days": {"request_rate": {"rate": 0.000001, "burst": 1000000000}},
    "lease above the burst": {"request_rate": {"rate": 1, "burst": 5, "lease": {"max_tokens": 6, "ttl_ms": 10}}},
    "slot lease above the limit": {"concurrency": {"limit": 2, "lease": {"max_slots": 3, "ttl_ms": 10}}},
    "slot lease beyond half of ttl_s": {"concurrency": {"limit": 2, "ttl_s": 1, "lease": {"max_slots": 1, "ttl_ms": 600}}},
    "bad below good": {"utilization": {"good": 0.8, "bad": 0.7}},
    "min_limit above max_limit": {"adaptive": {"min_limit": 50, "max_limit": 10}},
    "initial_limit below min_limit": {"adaptive": {"min_limit": 10, "initial_limit": 5}},
    "one name twice": {"request_rate": {"rate": 1, "burst": 1, "limits": [{"name": "a", "routes": ["/"], "rate": 1, "burst": 1}]},
                       "quotas": [{"name": "a", "limit": 1, "period": "day"}]},
    "tls on a plain store": {"store": "redis://h:1", "redis": {"tls": {"insecure": True}}},
    "password_env unset": {"redis": {"password_env": "FLOODWALL_TEST_SURELY_UNSET"}},
}


@pytest.mark.parametrize("name", sorted(SHAPE))
def test_a_policy_the_core_refuses_for_its_shape_is_refused_by_the_schema(name, tmp_path):
    text = json.dumps(SHAPE[name])
    errors = core_errors(tmp_path, text)
    assert errors, "the core accepts it: not a bad policy"
    assert schema_errors(text), f"the schema accepts what the core refuses: {errors}"


@pytest.mark.parametrize("name", sorted(CROSS))
def test_a_cross_field_rule_is_the_cores(name, tmp_path):
    text = json.dumps(CROSS[name])
    errors = core_errors(tmp_path, text)
    assert errors and all(is_cross_field(e) for e in errors), errors


def fuzz_corpus() -> Iterator[Tuple[str, str]]:
    for f in sorted((ROOT / "fuzz/corpus/policy_fuzz").iterdir()):
        yield f.name, f.read_text(errors="replace")


@pytest.mark.parametrize("name,text", list(fuzz_corpus()), ids=[n for n, _ in fuzz_corpus()])
def test_the_fuzz_corpus_the_core_refuses_is_refused_by_the_schema_and_the_rest_validates(name, text, tmp_path):
    errors = core_errors(tmp_path, text)
    if not errors:
        assert schema_errors(text) == []
    elif not all(is_cross_field(e) for e in errors):
        assert schema_errors(text), f"the schema accepts what the core refuses: {errors}"


def test_the_schema_is_a_valid_2020_12_schema_and_names_every_top_level_key():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    # Every key the core accepts at the top level is described (an unknown one is refused by both).
    reference = (ROOT / "docs/reference/policy.md").read_text()
    readme_keys = set(json.loads(re.search(r"# Policy reference.*?```json\n(.*?)```", reference, re.S).group(1)))
    assert readme_keys <= set(SCHEMA["properties"])
    for key, spec in SCHEMA["properties"].items():
        assert "description" in spec or "$ref" in spec, key
