"""What the ASGI and WSGI middleware share: options that are constants or callables of the request."""

from __future__ import annotations

from typing import Any, Callable, Iterable, List, Tuple, TypeVar, Union

T = TypeVar("T")
Option = Union[T, Callable[[Any], T]]
H = TypeVar("H", str, bytes)


def resolve(option: Any, request: Any) -> Any:
    """An option's value for one request: call it with the request (ASGI scope, WSGI environ) if callable."""
    return option(request) if callable(option) else option


def with_limits(headers: Iterable[Tuple[H, H]], limits: List[Tuple[H, H]]) -> List[Tuple[H, H]]:
    """A response's headers plus the decision's limit headers, except those it set itself (by name, any
    case): an application or an on_reject handler that writes its own Retry-After keeps it."""
    out = list(headers)
    if not limits:
        return out
    present = {name.lower() for name, _ in out}
    out.extend((name, value) for name, value in limits if name.lower() not in present)
    return out
