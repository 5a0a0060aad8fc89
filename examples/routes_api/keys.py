"""routes-api's API keys: the ones it issued carry a signature, so a key can be checked without a database
(as GitHub's and Stripe's tokens carry a checksum). A made-up key fails the check, and floodwall then keys
its request by the client's address: a scraper that invents a key per request shares one bucket.

    issue("sk_live_airflow")  -> "sk_live_airflow_3f9c1a7b20d4e6c8"
    valid(that)               -> True; valid("sk_live_airflow_0000000000000000") -> False

The secret would come from the app's configuration; it is a constant here because this is a demo.
"""

from __future__ import annotations

import hashlib
import hmac

SECRET = b"routes-api demo signing secret"


def _signature(name: str) -> str:
    return hmac.new(SECRET, name.encode("utf-8"), hashlib.sha256).hexdigest()[:16]


def issue(name: str) -> str:
    """The key routes-api hands its customer `name` (sk_live_... or sk_test_...)."""
    return f"{name}_{_signature(name)}"


def valid(key: str) -> bool:
    name, _, signature = key.rpartition("_")
    return bool(name) and hmac.compare_digest(signature, _signature(name))
