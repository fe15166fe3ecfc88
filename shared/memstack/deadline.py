"""The turn's deadline: how long ``context()`` may still take, visible to every call made on its path.

A turn sets a deadline (``within``) and everything it calls reads it through ``remaining``: the
synchronous Observer and Reflector stop waiting for the model at it, the read plan stops waiting for
semantic recall at it, and a network adapter (``OpenAIConnection``) bounds each request's timeout and its
retry waits by it, honouring ``Retry-After`` only when the wait still fits. The deadline lives in a
``contextvars.ContextVar``, so it reaches every call without widening the ports, and work submitted to a
pool carries it when submitted through ``carry``.

The default budget, ``DEFAULT_CONTEXT_TIMEOUT_MS``, leaves margin under API Gateway's 29-second
integration timeout; on Lambda the handler narrows it to the invocation's remaining time.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = [
    "DEFAULT_CONTEXT_TIMEOUT_MS",
    "LAMBDA_MARGIN_MS",
    "carry",
    "expired",
    "remaining",
    "within",
]

DEFAULT_CONTEXT_TIMEOUT_MS = 20_000
"""The default ``context_timeout_ms``: 20 s, 9 s under API Gateway's 29-second integration timeout for
the store reads, the assembly and the response."""

LAMBDA_MARGIN_MS = 3_000
"""Kept back from a Lambda invocation's remaining time when it narrows the deadline (the response must
still be written after the deadline)."""

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("memstack_deadline", default=None)

_T = TypeVar("_T")


def remaining() -> float | None:
    """Seconds left before the current deadline (``0.0`` once past it), or ``None`` when there is none."""
    at = _DEADLINE.get()
    if at is None:
        return None
    return max(0.0, at - time.monotonic())


def expired() -> bool:
    """Whether a deadline is set and has passed."""
    left = remaining()
    return left is not None and left <= 0.0


@contextmanager
def within(seconds: float | None) -> Iterator[float | None]:
    """Run the block under a deadline ``seconds`` from now, or under the enclosing one if that is
    sooner (a deadline only ever narrows). ``None`` keeps the enclosing deadline as it is.

    Yields:
        The ``time.monotonic()`` value of the deadline in force, or ``None``.
    """
    current = _DEADLINE.get()
    at = current
    if seconds is not None:
        mine = time.monotonic() + max(0.0, seconds)
        at = mine if current is None else min(current, mine)
    token = _DEADLINE.set(at)
    try:
        yield at
    finally:
        _DEADLINE.reset(token)


def carry(fn: Callable[..., _T]) -> Callable[..., _T]:
    """``fn`` bound to the caller's context, so that run on a pool thread it sees the caller's deadline
    (a ``ThreadPoolExecutor`` does not copy context variables)."""
    context = contextvars.copy_context()

    def run(*args: Any, **kwargs: Any) -> _T:
        return context.run(fn, *args, **kwargs)

    return run
