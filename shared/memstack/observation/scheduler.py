"""``InProcessScheduler``: the ``ObservationScheduler`` of the embedded default (DESIGN.md "Local mode":
background work runs in-process through the same port that Step Functions fills on AWS)."""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable

from memstack.ports import ObservationJob

__all__ = ["InProcessScheduler"]

logger = logging.getLogger(__name__)

_STOP = object()

CLOSE_TIMEOUT = 30.0
"""How long ``InProcessScheduler.close`` (so ``Memory.close()`` and the end of a ``with`` block, and the
stop of ``memstack serve``) waits for the background jobs still queued or running before it gives them up
with a warning naming them."""

MAX_NAMED_JOBS = 20
"""Jobs a warning about unfinished work names one by one (the rest are counted)."""

EXIT_DRAIN_SECONDS = 30.0
"""How long the interpreter's exit waits for the background jobs of a scheduler nobody closed (a script that
ends without ``Memory.close()``): they finish in that time, or are reported abandoned."""

_open: weakref.WeakSet[InProcessScheduler] = weakref.WeakSet()
"""Schedulers whose worker started and that were not closed: what the exit hook drains."""


def _drain_at_exit(timeout: float | None = None) -> None:
    """At interpreter exit, before daemon threads stop: wait (at most ``timeout`` seconds in all, default
    ``EXIT_DRAIN_SECONDS``) for the jobs of every scheduler nobody closed, warning that it does so; the jobs
    still not done are named in a second warning and handed to the scheduler's ``abandoned`` (``Memory``
    marks their records due for the sweep): work is never dropped without a word."""
    started = time.monotonic()
    budget = started + (EXIT_DRAIN_SECONDS if timeout is None else timeout)
    for scheduler in list(_open):
        waiting = scheduler.unfinished
        if not waiting:
            continue
        # a warning, not a log line: the library's logger has only a NullHandler unless the host set
        # logging up, and this must reach the person whose script forgot to close
        warnings.warn(
            f"memstack: {waiting} background observation job(s) still queued at exit; waiting up to "
            f"{max(0.0, budget - time.monotonic()):.0f} s. Close the Memory (close(), or "
            "`with Memory.local(...) as memory:`) or call settled() before the script ends",
            RuntimeWarning,
            stacklevel=1,
        )
        if not scheduler.settled(max(0.0, budget - time.monotonic())):
            # the owner marks the records due, as after a close() that runs out of time, so the sweep
            # finds them whether or not the thread is saved again
            waited = time.monotonic() - started
            scheduler.give_up(scheduler.stop(0.0, by="the interpreter's exit", waited=waited))


atexit.register(_drain_at_exit)


class InProcessScheduler:
    """Runs observation jobs on one daemon worker thread, in submission order, or inline.

    Jobs with a key already seen are dropped (the idempotent start that Step Functions execution names
    give on AWS); the last ``max_keys`` keys are remembered. ``run`` must not raise for a failed job —
    ``Memory.run_observation_job`` records failures on the record, as the state machine's Catch does.

    Args:
        run: does one job.
        synchronous: run each job inside ``submit`` (tests, simulations, one-shot scripts).
        max_keys: how many recent keys to remember for de-duplication.
        abandoned: called with each job the interpreter's exit gives up (a script that ended without
            ``Memory.close()``, its jobs not done within ``EXIT_DRAIN_SECONDS``); ``Memory`` marks the job's
            record due for the sweep. A ``close()`` returns what it gave up to its caller instead.
    """

    def __init__(
        self,
        run: Callable[[ObservationJob], None],
        *,
        synchronous: bool = False,
        max_keys: int = 10_000,
        abandoned: Callable[[ObservationJob], None] | None = None,
    ) -> None:
        self._run = run
        self._abandoned = abandoned
        self.synchronous = synchronous
        self._max_keys = max_keys
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._queue: queue.Queue[object] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._closed = False
        self._current: ObservationJob | None = None

    def submit(self, job: ObservationJob) -> None:
        """Queue ``job`` (or run it now when ``synchronous``); a repeated key is ignored."""
        with self._lock:
            if self._closed or job.key in self._seen:
                return
            self._seen[job.key] = None
            if len(self._seen) > self._max_keys:
                self._seen.popitem(last=False)
            if not self.synchronous and self._worker is None:
                self._worker = threading.Thread(target=self._loop, name="memstack-observer", daemon=True)
                self._worker.start()
                _open.add(self)
        if self.synchronous:
            self._run(job)
        else:
            self._queue.put(job)

    @property
    def unfinished(self) -> int:
        """Jobs queued or running (0 when idle)."""
        return self._queue.unfinished_tasks

    def settled(self, timeout: float | None = None) -> bool:
        """Wait until every queued job has run; ``False`` if ``timeout`` (seconds) passed first."""
        if self._worker is None:
            return True
        done = threading.Event()

        def waiter() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=waiter, daemon=True).start()
        return done.wait(timeout)

    def close(self, timeout: float | None = None) -> list[ObservationJob]:
        """Finish queued jobs (up to ``timeout`` seconds, default ``CLOSE_TIMEOUT``) and stop the worker;
        later submits are dropped.

        When the time runs out first (a model that hangs), the jobs not yet started are taken off the
        queue and, with the one still running, logged and warned about (``RuntimeWarning``: their count,
        keys and thread ids — never text); the running one goes on in its daemon thread until the process
        ends. Closing again only waits for the worker: a second stop marker would never be taken off the
        queue, and ``settled`` would then wait forever.

        Returns:
            The jobs left unfinished (the running one first); empty when everything finished.
        """
        return self.stop(CLOSE_TIMEOUT if timeout is None else timeout)

    def stop(
        self, timeout: float, *, by: str = "close()", waited: float | None = None
    ) -> list[ObservationJob]:
        """``close`` with its timeout given; ``by`` and ``waited`` (seconds, default ``timeout``) are what the
        warning about unfinished jobs says stopped the scheduler and how long it waited."""
        with self._lock:
            first = not self._closed
            self._closed = True
            worker = self._worker
        _open.discard(self)
        if worker is None:
            return []
        if first:
            self._queue.put(_STOP)
        worker.join(timeout)
        if not worker.is_alive():
            return []
        left = self._take_queued()
        running = self._current
        if running is not None:
            left.insert(0, running)
        if left:
            handed = by == "close()" or self._abandoned is not None
            _warn_unfinished(
                left, timeout if waited is None else waited, running=running is not None, by=by, handed=handed
            )
        return left

    def give_up(self, jobs: list[ObservationJob]) -> None:
        """Hand jobs given up at exit to ``abandoned`` (when set); a failure is logged, never raised (the
        interpreter is ending, and the thread's next save schedules the work again anyway)."""
        if self._abandoned is None:
            return
        for job in jobs:
            try:
                self._abandoned(job)
            except Exception:
                logger.exception("could not hand over an abandoned observation job", extra={"key": job.key})

    def _take_queued(self) -> list[ObservationJob]:
        """Empty the queue of jobs not started (the stop marker goes back, for the worker to end on)."""
        taken: list[ObservationJob] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            self._queue.task_done()
            if isinstance(item, ObservationJob):
                taken.append(item)
        self._queue.put(_STOP)
        return taken

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is _STOP:
                    return
                assert isinstance(job, ObservationJob)
                self._current = job
                self._run(job)
            except Exception:  # run() records failures itself; this guards the worker
                logger.exception("observation job crashed")
            finally:
                self._current = None
                self._queue.task_done()


def _warn_unfinished(
    jobs: list[ObservationJob], timeout: float, *, running: bool, by: str, handed: bool
) -> None:
    """Say what a close (``by``) left undone: a log record with the ids, and a ``RuntimeWarning`` (the
    library's logger has only a ``NullHandler`` unless the host set logging up, and this must reach whoever
    closed). ``handed``: the jobs go to an owner that marks their records due."""
    named = ", ".join(f"{job.key} (thread {job.thread_id})" for job in jobs[:MAX_NAMED_JOBS])
    more = f" and {len(jobs) - MAX_NAMED_JOBS} more" if len(jobs) > MAX_NAMED_JOBS else ""
    after = (
        "Their records are marked due: the thread's next save or a sweep (Memory.sweep_observations) "
        "does the work"
        if handed
        else "The thread's next save schedules the work again"
    )
    text = (
        f"memstack: {by} waited {timeout:g} s and left {len(jobs)} background observation job(s) "
        f"unfinished ({'1 running, ' if running else ''}{len(jobs) - running} not started): {named}{more}. "
        + after
    )
    logger.warning(
        "close left background observation jobs unfinished",
        extra={
            "jobs": len(jobs),
            "running": int(running),
            "keys": [job.key for job in jobs[:MAX_NAMED_JOBS]],
            "thread_ids": sorted({job.thread_id for job in jobs})[:MAX_NAMED_JOBS],
            "timeout_s": timeout,
        },
    )
    warnings.warn(text, RuntimeWarning, stacklevel=3)
