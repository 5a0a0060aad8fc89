"""FLOODWALL_STORE with a scheme the core does not know: refused, naming the variable and the schemes it
knows, with the URL's password redacted (the core decides; this checks it through the Python binding)."""

import pytest

import floodwall


def test_an_unknown_scheme_in_floodwall_store_names_the_variable_and_the_schemes_and_hides_the_password(monkeypatch):
    monkeypatch.setenv("FLOODWALL_STORE", "postgres://admin:hunter2@db:5432/0")
    with pytest.raises(floodwall.Error) as e:
        floodwall.Floodwall({"request_rate": {"rate": 1, "burst": 1}})
    message = str(e.value)
    assert message.startswith("FLOODWALL_STORE: unknown scheme"), message
    assert "hunter2" not in message
    assert "postgres://admin:***@db:5432/0" in message
    for scheme in ("memory://", "shm://", "redis://", "rediss://", "redis+sentinel://", "redis+cluster://"):
        assert scheme in message, scheme


def test_a_store_the_policy_names_wins_over_a_bad_floodwall_store(monkeypatch):
    monkeypatch.setenv("FLOODWALL_STORE", "postgres://admin:hunter2@db:5432/0")
    fw = floodwall.Floodwall({"store": "memory://", "request_rate": {"rate": 0.001, "burst": 1}})
    try:
        assert [fw.admit("t").allowed, fw.admit("t").allowed] == [True, False]
    finally:
        fw.close()
