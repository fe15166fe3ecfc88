"""Completing the index without the caller: when a save stored its batch but could not index it (the
embedder down, hanging past the deadline, or answering malformed vectors), the messages stay marked
unindexed in the store and an ``IndexRetry`` runs ``Memory.reconcile_index`` in the background, backing off
while it keeps failing, until nothing is left.

This is the library's (and ``memstack serve``'s) shape of what AWS does with the stream indexer's retries
and the ``reconcile`` schedule; there saves do not index inline, so nothing here runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from memstack.errors import MemstackError

logger = logging.getLogger(__name__)

__all__ = ["CLOSE_WAIT", "DEFAULT_DELAYS", "IndexRetry"]

DEFAULT_DELAYS: tuple[float, ...] = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds before each background try, the last repeated while tries keep failing: soon after the failed
save (an embedder's blip is usually over in seconds), then backing off to one try every 5 minutes so that a
long outage costs one request per interval, not one per save."""


CLOSE_WAIT = 10.0
"""Seconds ``close`` waits for a running try before the store is closed under it."""


class Cancellable(Protocol):
    """A started timer (``threading.Timer``)."""

    def cancel(self) -> None: ...


Timer = Callable[[float, Callable[[], None]], Cancellable]
"""Starts ``fn`` after ``seconds`` on another thread and returns a handle to cancel it."""


def _thread_timer(seconds: float, fn: Callable[[], None]) -> Cancellable:
    timer = threading.Timer(seconds, fn)
    timer.name = "memstack-index-retry"
    timer.daemon = True  # a pending retry never keeps the process alive; the next start reconciles
    timer.start()
    return timer


class IndexRetry:
    """Runs ``reconcile`` in the background after a save left messages unindexed, until it succeeds.

    ``poke`` (a failed inline indexing) arms one try after the first delay unless one is already armed;
    a try that raises ``MemstackError`` (the embedder still down) arms the next with the next delay, the
    last delay repeating; a try that succeeds stops. Thread-safe.

    Args:
        reconcile: ``Memory.reconcile_index`` (returns chunks written; raises ``Unavailable`` when some
            threads still failed).
        delays: seconds before each try (``DEFAULT_DELAYS``); must not be empty.
        timer: starts a delayed call (a daemon ``threading.Timer`` unless a test injects another).

    Raises:
        ValueError: ``delays`` is empty or has a negative value.
    """

    def __init__(
        self,
        reconcile: Callable[[], int],
        *,
        delays: Sequence[float] = DEFAULT_DELAYS,
        timer: Timer = _thread_timer,
    ) -> None:
        if not delays or min(delays) < 0:
            raise ValueError("delays must be a non-empty sequence of seconds >= 0")
        self._reconcile = reconcile
        self._delays = tuple(delays)
        self._timer = timer
        self._lock = threading.Lock()
        self._armed: Cancellable | None = None
        self._failures = 0
        self._closed = False
        self._busy = threading.Lock()
        self.tries = 0
        """How many background tries ran."""

    @property
    def pending(self) -> bool:
        """Whether a try is armed."""
        with self._lock:
            return self._armed is not None

    def poke(self) -> None:
        """A save left messages unindexed: arm a try after the first delay unless one is armed."""
        with self._lock:
            if self._closed or self._armed is not None:
                return
            self._failures = 0
            self._armed = self._timer(self._delays[0], self.run)

    def run(self) -> None:
        """One try now (what the timer calls): reconcile; on failure arm the next try, backing off."""
        with self._lock:
            self._armed = None
            if self._closed:
                return
            self.tries += 1
        try:
            with self._busy:
                self._reconcile()
        except MemstackError as exc:
            with self._lock:
                if self._closed or self._armed is not None:
                    return
                self._failures += 1
                delay = self._delays[min(self._failures, len(self._delays) - 1)]
                self._armed = self._timer(delay, self.run)
            logger.warning(
                "background index retry failed (%s); next try in %.0f s",
                type(exc).__name__,
                delay,
                extra={"error": type(exc).__name__, "failures": self._failures},
            )
            return
        except Exception as exc:  # a bug must not kill the timer thread silently; the next save re-arms
            logger.exception("background index retry crashed (%s)", type(exc).__name__)
            return
        with self._lock:
            self._failures = 0

    def close(self, timeout: float = CLOSE_WAIT) -> None:
        """Cancel the armed try and wait up to ``timeout`` seconds for a running one (``Memory.close``,
        before the store closes); what is left is reconciled at the next start."""
        with self._lock:
            self._closed = True
            armed, self._armed = self._armed, None
        if armed is not None:
            armed.cancel()
        if self._busy.acquire(timeout=timeout):
            self._busy.release()
