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
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = [
    "DEFAULT_CONTEXT_TIMEOUT_MS",
    "LAMBDA_MARGIN_MS",
    "Guard",
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


class Guard:
    """Waits for calls that may hang (an embedder's: a model loading, a stalled socket, a server trickling
    its answer a byte at a time, which no per-read timeout ends) only until the current deadline.

    ``call`` runs the call on a daemon thread of its own and waits for it until ``remaining()`` runs out;
    past it the caller gets ``Unavailable`` and the call finishes on its thread, its result dropped. At most
    ``limit`` calls may run past their deadline at once: while that many are still running, the next is
    refused at once rather than started, so a dependency that hangs for good holds ``limit`` threads, not
    one per turn. Daemon threads: a call that never returns does not keep the process from exiting.
    Without a deadline the call runs on the caller's thread, as it would unguarded.

    Args:
        what: names the dependency in error messages, e.g. ``"the embedder (text-embedding-3-small)"``.
        limit: calls that may be running at once (threads).
    """

    def __init__(self, what: str, *, limit: int = 4) -> None:
        self.what = what
        self.limit = limit
        self._slots = threading.BoundedSemaphore(limit)

    def call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)``, waited for until the deadline.

        Raises:
            memstack.errors.Unavailable: the deadline passed first (or had passed), or ``limit`` calls are
                still running; what ``fn`` raises otherwise.
        """
        from memstack.errors import Unavailable

        left = remaining()
        if left is None:
            return fn(*args)
        if left <= 0.0:
            raise Unavailable(f"{self.what} was not called: the turn's deadline has passed")
        if not self._slots.acquire(blocking=False):
            raise Unavailable(
                f"{self.what} was not called: {self.limit} calls to it are still running past their deadline"
            )
        done = threading.Event()
        outcome: list[Any] = []

        def run() -> None:
            try:
                outcome.append((True, fn(*args)))
            except BaseException as exc:  # handed to the caller, who raises it
                outcome.append((False, exc))
            finally:
                self._slots.release()
                done.set()

        threading.Thread(target=carry(run), name="memstack-guard", daemon=True).start()
        if not done.wait(left):
            raise Unavailable(f"{self.what} did not answer within the turn's deadline ({left:.2f} s)")
        ok, value = outcome[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]
