"""Background work: observation, reflection and thread titles (spec §2.9, §2.3 ``generateTitle``) —
scheduled after saves, run in-process or as Step Functions tasks, swept when idle — and the model's
``recall`` tool over observed messages (spec §2.9.8)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memstack.errors import InvalidInput, MemstackError, NotFound
from memstack.model import Message, ModelUsage, ObservationRecord, Thread, ToolResultPart, new_id
from memstack.observability import traced
from memstack.observation.engine import ObserveResult, ReflectResult, failure_text, reflection_failure
from memstack.observation.recall_tool import TOOL_NAME as RECALL
from memstack.observation.recall_tool import run_recall
from memstack.observation.requirements import needs_chat_model
from memstack.observation.scheduler import InProcessScheduler
from memstack.ports import ObservationJob, ObservationScheduler
from memstack.scope import Scope
from memstack.usecases.checks import MAX_RECONCILE, MAX_TITLE_CHARS, check_limit
from memstack.usecases.core import Core, flush_all_usage, flush_usage
from memstack.usecases.messages import Messages
from memstack.working_memory.tools import parse_tool_call

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SweepResult:
    """What one sweep did: records due, jobs started, jobs that could not be started."""

    due: int
    started: int
    failed: int


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """What a resource's threads cost (``Memory.resource_usage``).

    Attributes:
        usage: the sum of the records' ``usage`` (the resource's own record in resource scope).
        records: how many records were summed.
        complete: ``False`` when the resource has more than ``MAX_USAGE_THREADS`` threads and only the
            newest ``MAX_USAGE_THREADS`` were summed.
    """

    usage: ModelUsage
    records: int
    complete: bool


MAX_USAGE_THREADS = 1_000
"""Threads whose records one ``resource_usage`` sums (one record read each) at most."""

SAVE_REASONS = frozenset({"threshold", "buffer", "reflect"})
"""The ``reason`` of a job a save scheduled (``ObservationEngine.due``). Such a job checks, when it starts,
whether its work is still due as the record then is: a job queued behind a failing call does not call the
model again while the failure's backoff runs (nor redoes work an earlier job did)."""


class Background:
    """Observation, reflection and titles over the core.

    Args:
        scheduler: runs jobs; ``None``: an ``InProcessScheduler`` made on first use, running ``run`` on a
            worker thread, or ``inline`` in the caller's thread.
    """

    def __init__(
        self,
        core: Core,
        scheduler: ObservationScheduler | None,
        *,
        inline: bool,
        run: Callable[[ObservationJob], None],
    ) -> None:
        self.core = core
        self._scheduler = scheduler
        self._inline = inline
        self._run = run
        self._lock = threading.Lock()

    @property
    def scheduler(self) -> ObservationScheduler:
        """The scheduler (made on first use unless one was given)."""
        with self._lock:
            if self._scheduler is None:
                self._scheduler = InProcessScheduler(
                    self._run, synchronous=self._inline, abandoned=self._mark_due
                )
            return self._scheduler

    def settled(self, timeout: float | None) -> bool:
        """Wait for in-process jobs; ``False`` if ``timeout`` seconds passed first."""
        scheduler = self._scheduler
        return scheduler.settled(timeout) if isinstance(scheduler, InProcessScheduler) else True

    def close(self) -> None:
        """Finish in-process jobs (for at most ``InProcessScheduler.CLOSE_TIMEOUT`` seconds), then write
        every thread's usage still pending (``flush_all_usage``). Jobs left unfinished are reported by the
        scheduler (a warning with their count, keys and thread ids) and their records are marked due
        (``pending_since``), so a sweep (``Memory.sweep_observations``) or the thread's next save does
        the work."""
        if isinstance(self._scheduler, InProcessScheduler):
            left = self._scheduler.close()
            for job in left:
                self._mark_due(job)
        flush_all_usage(self.core)

    def _mark_due(self, job: ObservationJob) -> None:
        """Mark the record of an abandoned job due for the sweep; a failure is logged, never raised (the
        thread's next save schedules the work again anyway)."""
        if not self.core.options.observational_memory.enabled:
            return
        try:
            self.core.observation.mark_due(self.core.options, job.resource_id, job.thread_id)
        except Exception as exc:
            logger.warning(
                "could not mark an abandoned observation job due (%s)",
                type(exc).__name__,
                extra={"resource_id": job.resource_id, "thread_id": job.thread_id, "key": job.key},
            )

    def schedule(self, scope: Scope) -> ObservationJob | None:
        """See ``Memory.schedule_observation``."""
        core = self.core
        opts = core.options
        if not needs_chat_model(opts) or opts.read_only:
            return None
        thread = core.store.get_thread(scope.resource_id, scope.thread)
        if thread is None:
            return None
        engine = core.observation
        job: ObservationJob | None = None
        om = opts.observational_memory
        if om.enabled:
            rec, pending, last = engine.pending(om, scope.resource_id, scope.thread)
            reason = engine.due(om, rec, pending)
            if reason is not None:
                job = engine.job(rec, scope.thread, last, reason)
        if job is None and engine.title_due(opts, thread):
            job = engine.title_job(thread)
        if job is not None:
            self.scheduler.submit(job)
        return job

    def observe(self, scope: Scope, *, reason: str, time_budget: float | None) -> ObserveResult:
        """See ``Memory.observe``. A job a save scheduled (``SAVE_REASONS``, or a title job) observes only
        if that is still due now (``_gate``)."""
        core = self.core
        opts = core.options
        core.require_chat_model(opts)
        thread = core.store.get_thread(scope.resource_id, scope.thread)
        if thread is None:
            return ObserveResult()
        if not opts.observational_memory.enabled:
            try:
                return ObserveResult(title=self._title(thread))
            finally:  # no record write comes for this thread: its title's cost is written now
                flush_usage(core, scope.resource_id, scope.thread, force=True)
        title = self._title(thread)
        gated = self._gate(scope, reason)
        if gated is not None:
            return replace(gated, title=title)
        deadline = None if time_budget is None else time.monotonic() + max(0.0, time_budget)
        try:
            result = core.observation.step(
                opts, scope.resource_id, scope.thread, reason=reason, deadline=deadline
            )
        except NotFound:  # the thread was deleted meanwhile: nothing left to observe
            return ObserveResult(title=title)
        return ObserveResult(**{**result.to_dict(), "title": title or self._observer_title(thread, result)})

    def _gate(self, scope: Scope, reason: str) -> ObserveResult | None:
        """For a job a save scheduled (``SAVE_REASONS``, or a title job): ``None`` when observing is due
        now as the record is (``ObservationEngine.due``: ``threshold`` or ``buffer``), else the result of
        doing nothing (``should_reflect`` when only reflection is due). The check is the job's own, at its
        start: a job queued while an earlier one was failing sees that failure's backoff."""
        if reason not in SAVE_REASONS and not reason.startswith("title"):
            return None
        engine = self.core.observation
        om = self.core.options.observational_memory
        rec, pending, _ = engine.pending(om, scope.resource_id, scope.thread)
        due = engine.due(om, rec, pending)
        if due in ("threshold", "buffer"):
            return None
        if reason in SAVE_REASONS and due != "reflect":
            logger.info(
                "observation job not run: %s",
                "the last failure's backoff runs" if rec.failure_count else "nothing is due any more",
                extra={
                    "resource_id": scope.resource_id,
                    "thread_id": scope.thread,
                    "reason": reason,
                    "failure_count": rec.failure_count,
                    "pending_tokens": pending,
                },
            )
        return ObserveResult(
            should_reflect=due == "reflect",
            observation_tokens=rec.observation_tokens,
            pending_tokens=pending,
        )

    def _title(self, thread: Thread) -> str | None:
        """Title the thread if due; a failure never holds up observation (a later save retries it)."""
        core = self.core
        opts = core.options
        if not core.observation.title_due(opts, thread):
            return None
        try:
            return core.observation.generate_title(opts, thread)
        except Exception as exc:
            logger.warning(
                "title generation failed (%s) for thread %s",
                type(exc).__name__,
                thread.id,
                extra={"thread_id": thread.id, "error": type(exc).__name__},
            )
            if not opts.observational_memory.enabled:
                raise
            return None

    def _observer_title(self, thread: Thread, result: ObserveResult) -> str | None:
        """``observation.thread_title``: the Observer's title goes on an untitled thread only."""
        core = self.core
        om = core.options.observational_memory
        if (
            not om.observation.thread_title
            or thread.title
            or not (result.observed_messages or result.buffered_chunks)
        ):
            return None
        rec = core.observation.get_record(om, thread.resource_id, thread.id)
        title = rec.thread_title if rec is not None else None
        if not title:
            return None
        try:
            core.store.update_thread(
                thread.resource_id,
                thread.id,
                title=title[:MAX_TITLE_CHARS],
                updated_at=core.clock.now(),
                expected_title="",
                expected_created_at=thread.created_at,  # not onto a thread made again under its id
            )
        except MemstackError:
            return None
        return title

    def reflect(self, scope: Scope) -> ReflectResult:
        """See ``Memory.reflect``."""
        self.core.require_chat_model(self.core.options)
        try:
            return self.core.observation.reflect(self.core.options, scope.resource_id, scope.thread)
        except NotFound:  # the thread was deleted meanwhile
            return ReflectResult()

    def record_failure(self, scope: Scope, error: str, *, retry_after: float | None = None) -> None:
        """See ``Memory.record_observation_failure``; ``retry_after``: seconds the model asked to wait."""
        if not self.core.options.observational_memory.enabled:
            return
        try:
            self.core.observation.record_failure(
                self.core.options, scope.resource_id, scope.thread, str(error), retry_after=retry_after
            )
        except NotFound:
            return

    def work(self, *, idle_seconds: int, limit: int) -> list[ObservationJob]:
        """See ``Memory.observation_work``."""
        check_limit(idle_seconds, "idle_seconds", 86_400, minimum=0)
        check_limit(limit, "limit", 1_000)
        if not self.core.options.observational_memory.enabled:
            return []
        return self.core.observation.work(self.core.options, idle_seconds=idle_seconds, limit=limit)

    def submit_all(self, jobs: list[ObservationJob]) -> SweepResult:
        """See ``Memory.sweep_observations``: every job is submitted; one that cannot be is logged and
        counted, and the others still start."""
        started = failed = 0
        for job in jobs:
            try:
                self.scheduler.submit(job)
                started += 1
            except Exception as exc:  # due again at the next sweep
                failed += 1
                logger.warning(
                    "observation sweep could not start a job (%s)",
                    type(exc).__name__,
                    extra={"resource_id": job.resource_id, "thread_id": job.thread_id, "key": job.key},
                )
        return SweepResult(due=len(jobs), started=started, failed=failed)

    def run(self, job: ObservationJob) -> None:
        """See ``Memory.run_observation_job``: observe, reflect if due; failures go on the record, a
        failed reflection of any kind as ``ReflectionFailed`` (``reflection_failure``), so it backs off
        reflection only and the next observations still run."""
        scope = Scope(job.resource_id, job.thread_id)
        try:
            result = self.observe(scope, reason=job.reason, time_budget=None)
            if result.should_reflect:
                try:
                    self.reflect(scope)
                except MemstackError as exc:
                    raise reflection_failure(exc) from exc
        except Exception as exc:
            logger.warning(
                "background observation failed (%s) for thread %s",
                type(exc).__name__,
                job.thread_id,
                extra={"thread_id": job.thread_id, "error": type(exc).__name__, "reason": job.reason},
            )
            try:
                self.record_failure(scope, failure_text(exc), retry_after=getattr(exc, "retry_after", None))
            except Exception as again:
                logger.warning("recording the failure failed (%s)", type(again).__name__)

    def resource_usage(self, resource_id: str) -> ResourceUsage:
        """See ``Memory.resource_usage``."""
        store = self.core.store
        if self.core.options.observational_memory.scope == "resource":
            rec = store.get_observation_record(resource_id, None)
            return ResourceUsage(rec.usage if rec is not None else ModelUsage(), int(rec is not None), True)
        total, records, seen, cursor = ModelUsage(), 0, 0, None
        while True:
            page = store.list_threads(resource_id, limit=100, cursor=cursor)
            for thread in page.threads:
                if seen >= MAX_USAGE_THREADS:
                    return ResourceUsage(total, records, False)
                seen += 1
                rec = store.get_observation_record(resource_id, thread.id)
                if rec is not None:
                    total, records = total.plus(rec.usage), records + 1
            if page.next_cursor is None:
                return ResourceUsage(total, records, True)
            cursor = page.next_cursor

    def record(self, scope: Scope) -> ObservationRecord | None:
        """See ``Memory.get_observation_record``: the stored record with ``pending_message_tokens``
        counted now (the thread's messages after its cursor), not as of the record's last write — a
        record whose Observer is failing or backing off is not rewritten by saves, and must not show
        nothing pending."""
        engine = self.core.observation
        om = self.core.options.observational_memory
        rec = engine.get_record(om, scope.resource_id, scope.thread)
        if rec is None:
            return None
        _, _, pending = engine.view(om, scope.resource_id, scope.thread, record=rec)
        return rec.model_copy(update={"pending_message_tokens": pending})

    def recall_tool(self, scope: Scope, tool_call: object, overrides: dict[str, Any] | None) -> Message:
        """See ``Memory.apply_recall_tool``."""
        core = self.core
        opts = core.options.merged(overrides)
        call = parse_tool_call(tool_call)
        if call.name != RECALL:
            raise InvalidInput(f"tool_call is {call.name!r}, not {RECALL}", field="tool_call.function.name")
        om = opts.observational_memory
        if not (om.enabled and om.retrieval.enabled):
            raise InvalidInput(
                "the recall tool needs observational_memory.retrieval", field="observational_memory.retrieval"
            )
        if call.arguments is None:
            result: dict[str, Any] = {"error": f"bad arguments: {call.error}"}
        else:
            try:
                result = run_recall(
                    core.store,
                    core.tokenizer,
                    resource_id=scope.resource_id,
                    thread_id=scope.thread,
                    scope=om.retrieval.scope,
                    args=call.arguments,
                )
            except InvalidInput as exc:
                result = {"error": exc.message}
        return Message(
            id=new_id(),
            thread_id=scope.thread,
            resource_id=scope.resource_id,
            role="tool",
            parts=(
                ToolResultPart(tool_call_id=call.id, name=RECALL, result=result, is_error="error" in result),
            ),
            created_at=core.clock.now(),
        )


@traced
class BackgroundWork:
    """The background-work part of ``Memory``'s API: what the stream indexer, the Step Functions tasks, the
    sweep and the model's ``recall`` tool call. ``Memory`` inherits it; ``_background`` and ``_messages``
    are its use cases."""

    _background: Background
    _messages: Messages

    @property
    def scheduler(self) -> ObservationScheduler:
        """The background-job scheduler (an ``InProcessScheduler`` made on first use unless one was given)."""
        return self._background.scheduler

    def index_saved(self, *, resource_id: str, thread_id: str, message_ids: Sequence[str]) -> int:
        """Index saved messages once each (a stream indexer's work); returns the chunks written."""
        return self._messages.index_saved(Scope.of(resource_id, thread_id), message_ids)

    def reconcile_index(self, *, limit: int = 1_000) -> int:
        """Index up to ``limit`` (1..``MAX_RECONCILE``) messages saved but never indexed; returns the chunks
        written (``usecases.messages``). Raises ``InvalidInput`` (``limit``), ``Unavailable`` (some threads
        could not be indexed; the others were)."""
        return self._messages.reconcile_index(check_limit(limit, "limit", MAX_RECONCILE))

    def index_removed(
        self,
        *,
        resource_id: str,
        message_ids: Sequence[str],
        positions: Sequence[tuple[str, int]] = (),
    ) -> None:
        """Remove messages deleted from the store from the index (a stream indexer's REMOVE records, a delete
        or a TTL expiry; idempotent).

        ``positions`` are the removed messages' ``(thread_id, seq)`` where the caller knows them (a stream
        record's key): the message now following each is indexed again, so no removed text stays
        searchable through its successor's keyword text (ADR 0015), as ``delete_messages`` does inline.
        Raises ``InvalidInput``/``PayloadTooLarge`` (more than ``MAX_BATCH`` ids or positions), ``Unavailable``
        (the index or store failed; retrying is safe). A failure to re-index a successor is logged, and
        ``index_health`` reports it stale."""
        self._messages.index_removed(Scope.resource(resource_id), message_ids, positions)

    def settled(self, timeout: float | None = None) -> bool:
        """Wait for in-process background work to finish; ``False`` if ``timeout`` seconds passed first."""
        return self._background.settled(timeout)

    def schedule_observation(self, *, resource_id: str, thread_id: str) -> ObservationJob | None:
        """Submit a background job if one is due (title, buffer, activation, reflection); returns it."""
        return self._background.schedule(Scope.of(resource_id, thread_id))

    def observe(
        self,
        *,
        resource_id: str,
        thread_id: str,
        reason: str = "background",
        time_budget: float | None = None,
    ) -> ObserveResult:
        """One background step: title if due, then activate, observe or buffer (spec §2.9.4); no new Observer
        call after ``time_budget`` seconds. Raises ``InvalidInput``, ``ObservationFailed``, ``Unavailable``,
        ``Conflict`` (retrying is safe)."""
        return self._background.observe(
            Scope.of(resource_id, thread_id), reason=reason, time_budget=time_budget
        )

    def reflect(self, *, resource_id: str, thread_id: str) -> ReflectResult:
        """Reflect the observations if due (spec §2.9.4 step 8); raises like ``observe``."""
        return self._background.reflect(Scope.of(resource_id, thread_id))

    def record_observation_failure(self, *, resource_id: str, thread_id: str, error: str) -> None:
        """Note a failed background run on the record so the sweep retries it."""
        self._background.record_failure(Scope.of(resource_id, thread_id), error)

    def observation_work(self, *, idle_seconds: int = 300, limit: int = 100) -> list[ObservationJob]:
        """Jobs for records with work left, idle ``idle_seconds`` (0..86,400): what the sweep restarts."""
        return self._background.work(idle_seconds=idle_seconds, limit=limit)

    def sweep_observations(self, *, idle_seconds: int = 300, limit: int = 100) -> SweepResult:
        """The periodic sweep: submit a job for every record with work left, idle ``idle_seconds``
        (0..86,400), at most ``limit`` (1..1000). A job that cannot be submitted is counted in ``failed``
        (the next sweep retries it); the others still start. Raises ``InvalidInput``, ``Unavailable``
        (the store failed)."""
        return self._background.submit_all(self.observation_work(idle_seconds=idle_seconds, limit=limit))

    def run_observation_job(self, job: ObservationJob) -> None:
        """Run one job as the state machine does; a failure goes on the record, never raised."""
        self._background.run(job)

    def resource_usage(self, *, resource_id: str) -> ResourceUsage:
        """What the resource's threads cost: the ``usage`` of its observation records summed — its own
        record in resource scope; in thread scope every thread's record, one read per thread, the newest
        ``MAX_USAGE_THREADS`` threads at most (``complete`` says whether that was all of them). Usage not
        yet written (pending in a process) is not included."""
        return self._background.resource_usage(Scope.resource(resource_id).resource_id)

    def get_observation_record(self, *, resource_id: str, thread_id: str) -> ObservationRecord | None:
        """The observation record serving this thread (its own, or its resource's in resource scope)."""
        return self._background.record(Scope.of(resource_id, thread_id))

    def apply_recall_tool(
        self, *, thread_id: str, resource_id: str, tool_call: object, options: dict[str, Any] | None = None
    ) -> Message:
        """Run the model's ``recall`` call (spec §2.9.8); its mistakes come back as an error result."""
        return self._background.recall_tool(Scope.of(resource_id, thread_id), tool_call, options)
