"""What the ASGI and WSGI middleware share: options that are constants or callables of the request, and
the default tenant key."""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Optional, TypeVar, Union

T = TypeVar("T")
Option = Union[T, Callable[[Any], T]]


def resolve(option: Any, request: Any) -> Any:
    """An option's value for one request: call it with the request (ASGI scope, WSGI environ) if callable."""
    return option(request) if callable(option) else option


def credential_key(authorization: Optional[bytes], api_key: Optional[bytes]) -> Optional[str]:
    """The tenant of a request that carries a credential: ``Authorization: Bearer <token>`` (or any other
    Authorization value), else ``X-API-Key``.

    The credential is hashed (SHA-256, first 16 bytes in hex): tenant ids appear in Redis keys and in the
    metrics' top tenants, and a secret must not. Two requests with the same credential share a bucket."""
    credential = None
    if authorization:
        scheme, _, rest = authorization.strip().partition(b" ")
        credential = rest.strip() if scheme.lower() == b"bearer" and rest.strip() else authorization.strip()
    elif api_key and api_key.strip():
        credential = api_key.strip()
    if not credential:
        return None
    return "key:" + hashlib.sha256(credential).hexdigest()[:32]


def address_key(host: Optional[str]) -> str:
    """The tenant of an anonymous request: its peer address. X-Forwarded-For is not trusted by default
    (any client can write it); behind a proxy, pass ``key=`` a callable that reads what your proxy sets."""
    return "ip:" + (host or "unknown")
