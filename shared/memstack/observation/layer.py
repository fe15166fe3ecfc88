"""The observational-memory layer (spec §2.9, §2.11): observations shown as system messages, the unobserved
tail as the history, the continuation reminder and temporal markers; background observation scheduled
after each save; the record kept true through thread deletes, clones and resource erasures."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from memstack import deadline
from memstack.config import MemoryOptions
from memstack.context import SystemMessage
from memstack.errors import Conflict, MemstackError, NotFound, Unavailable
from memstack.layers.base import (
    Contribution,
    LayerBase,
    MessagesDeleted,
    Needs,
    ThreadCloned,
    ThreadDeleted,
    Turn,
    TurnReads,
)
from memstack.model import Message, ObservationRecord, Thread
from memstack.observation.context import (
    continuation_message,
    is_continuation,
    observation_context,
    temporal_marker_message,
)
from memstack.observation.engine import (
    ObservationEngine,
    failure_text,
    reflection_failure,
    thread_label,
    thread_labels,
)
from memstack.observation.lifecycle import clone_cursor, cloned_record, shared_with_clone, without_thread
from memstack.observation.recall_tool import tool_definition as recall_tool_definition
from memstack.ports import Clock, MemoryStore
from memstack.scope import Scope

logger = logging.getLogger(__name__)

SYNC_RETRY_AFTER = timedelta(minutes=1)
"""After a failed background or synchronous observation, ``context()`` waits this long before observing
synchronously again (above ``block_after``)."""

MAX_CLEANUP_ATTEMPTS = 10
"""Compare-and-set rounds a thread delete's record cleanup may lose before it gives up with ``Conflict``."""


class DeadlineExceeded(Unavailable):
    """The turn's deadline passed before the synchronous observation finished (``context_timeout_ms``)."""

    code = "deadline_exceeded"


@dataclass(frozen=True, slots=True)
class Observed:
    """What ``prepare`` read: the record (``None`` before the first write), the unobserved tail, and the
    thread (``None`` when new), which the read plan then need not read again."""

    record: ObservationRecord | None
    tail: list[Message]
    thread: Thread | None


class ObservationalLayer(LayerBase):
    """Observational memory as a layer.

    Args:
        engine: the Observer/Reflector engine (shared with the background use cases).
        store: where records live.
        clock: the time source (the synchronous-retry pause).
        require_chat_model: raises ``InvalidInput`` when the options need a chat model and there is none.
        schedule: submits background work for a thread after a save (``Background.schedule``).
        inline: whether ``after_save`` schedules (``Memory.index_on_save``); not when the stream indexer
            does it (AWS).
    """

    name = "observational_memory"

    def __init__(
        self,
        engine: ObservationEngine,
        store: MemoryStore,
        clock: Clock,
        *,
        require_chat_model: Callable[[MemoryOptions], None],
        schedule: Callable[[Scope], object],
        inline: Callable[[], bool],
    ) -> None:
        self.engine = engine
        self.store = store
        self.clock = clock
        self.require_chat_model = require_chat_model
        self.schedule = schedule
        self.inline = inline

    # the turn ------------------------------------------------------------------------------------

    def prepare(self, turn: Turn) -> Observed | None:
        """Observe (or reflect) synchronously when the thread is over ``block_after`` (or the log over the
        reflection's ``block_after``), then read the record and the unobserved tail (spec §2.9.1
        ``blockAfter``). Below it the turn never waits. A failed run is logged and recorded, and the turn
        goes on with the unobserved messages as they are; a run that failed a moment ago is not retried
        on every turn (a down endpoint would cost each turn its retries)."""
        opts = turn.options
        om = opts.observational_memory
        if not om.enabled:
            return None
        resource_id, thread_id = turn.scope.resource_id, turn.scope.thread
        engine = self.engine
        thread = self.store.get_thread(resource_id, thread_id)
        if thread is None:  # a new thread: nothing to observe; resource scope still shows the log
            record = engine.get_record(om, resource_id, thread_id) if om.scope == "resource" else None
            return Observed(record, [], thread)
        rec, tail, pending = engine.view(om, resource_id, thread_id)
        t = engine.thresholds(om, rec)
        over = pending > t.block_after
        # pending_since is also the mark a run takes before calling the model: one killed mid-call (a
        # Lambda timeout) leaves it, so a later turn does not start the same long run again at once
        failed_recently = (
            rec.pending_since is not None and self.clock.now() - rec.pending_since < SYNC_RETRY_AFTER
        )
        if (
            opts.read_only
            or failed_recently
            or not (over or rec.observation_tokens > t.reflection_block_after)
        ):
            return Observed(rec if rec.version else None, tail, thread)
        self.require_chat_model(opts)
        error = self._observe_within_deadline(opts, resource_id, thread_id, over=over)
        if error is not None:  # the turn never fails on the Observer: it goes on unobserved
            logger.warning(
                "synchronous observation failed (%s) for thread %s; continuing with unobserved messages",
                type(error).__name__,
                thread_id,
                extra={"thread_id": thread_id, "error": type(error).__name__},
            )
            try:
                engine.record_failure(
                    opts,
                    resource_id,
                    thread_id,
                    failure_text(error),
                    retry_after=getattr(error, "retry_after", None),
                )
            except Exception as again:
                logger.warning("recording the failure failed (%s)", type(again).__name__)
        rec, tail, _ = engine.view(om, resource_id, thread_id)
        return Observed(rec if rec.version else None, tail, thread)

    def _observe_within_deadline(
        self, opts: MemoryOptions, resource_id: str, thread_id: str, *, over: bool
    ) -> Exception | None:
        """Run the synchronous step on a worker thread and wait for it until the turn's deadline
        (``memstack.deadline``). The worker sees the same deadline (its model calls are cut at it), and a
        run still going when the turn gives up keeps going: it commits by compare-and-set, and the failure
        recorded here marks the record due, so the sweep finishes it if the process stops first.

        Returns:
            The run's exception, ``DeadlineExceeded`` when the deadline passed first, or ``None``.
        """
        failed: list[Exception] = []

        def run() -> None:
            try:
                self._observe_now(opts, resource_id, thread_id, over=over)
            except Exception as exc:
                failed.append(exc)

        worker = threading.Thread(target=deadline.carry(run), name="memstack-observe", daemon=True)
        worker.start()
        worker.join(deadline.remaining())
        if worker.is_alive():
            return DeadlineExceeded(
                f"synchronous observation of thread {thread_id} passed the turn's deadline "
                f"(context_timeout_ms={opts.context_timeout_ms}); it goes on in the background"
            )
        return failed[0] if failed else None

    def _observe_now(self, opts: MemoryOptions, resource_id: str, thread_id: str, *, over: bool) -> None:
        om = opts.observational_memory
        engine = self.engine
        if over:
            engine.step(opts, resource_id, thread_id, reason="block_after", block=True)
        if deadline.expired():
            return
        latest = engine.get_record(om, resource_id, thread_id)
        if (
            latest is not None
            and latest.observation_tokens > engine.thresholds(om, latest).reflection_block_after
        ):
            try:
                engine.reflect(opts, resource_id, thread_id)
            except NotFound:
                raise
            except MemstackError as exc:  # recorded as the Reflector's: observation must go on
                raise reflection_failure(exc) from exc

    def needs(self, turn: Turn, prepared: Any) -> Needs:
        if not isinstance(prepared, Observed):
            return Needs()
        return Needs(tail=prepared.tail, thread=(prepared.thread,))

    def contribute(self, turn: Turn, reads: TurnReads) -> Contribution:
        opts = turn.options
        om = opts.observational_memory
        observed = reads.prepared.get(self.name)
        if not om.enabled or not isinstance(observed, Observed):
            return Contribution()
        record = observed.record
        has_log = record is not None and bool(record.active_observations.strip())
        markers = om.temporal_markers and turn.new is not None
        return Contribution(
            system=[SystemMessage(t, "observations") for t in observation_context(om, record, turn.now)],
            tools=[recall_tool_definition(om.retrieval.scope)]
            if om.retrieval.enabled and not opts.read_only
            else [],
            lead=[continuation_message(turn.scope.thread, turn.scope.resource_id)] if has_log else [],
            marker=temporal_marker_message if markers else None,
        )

    # saves ---------------------------------------------------------------------------------------

    def before_save(self, thread: Thread, options: MemoryOptions, messages: list[Message]) -> list[Message]:
        """Drop Memstack's own continuation reminder from a batch (a caller that saves ``ctx.messages``
        back saves it too): it is a signal to the model, never conversation, and stored it would be
        observed as the user's words on every later turn."""
        kept = [m for m in messages if not is_continuation(m)]
        if len(kept) != len(messages):
            logger.info(
                "dropped the continuation reminder from a save",
                extra={"thread_id": thread.id, "dropped": len(messages) - len(kept)},
            )
        return kept

    def after_save(self, thread: Thread, options: MemoryOptions, saved: Sequence[Message]) -> None:
        """Schedule background observation (and titles) for the thread; a failure is logged, the save
        stands, and the next save or the sweep schedules again."""
        if not self.inline() or not saved:
            return
        try:
            self.schedule(Scope(thread.resource_id, thread.id))
        except Exception as exc:
            logger.warning(
                "scheduling observation failed (%s) for thread %s",
                type(exc).__name__,
                thread.id,
                extra={"thread_id": thread.id, "error": type(exc).__name__},
            )

    # lifecycle -----------------------------------------------------------------------------------

    def on_thread_deleted(self, event: ThreadDeleted) -> Mapping[str, int]:
        """Thread scope: the record went with the thread (the store deletes it). Resource scope: the
        thread's content leaves the resource's log (``observation.lifecycle.without_thread``) — whenever the
        resource has a log, whatever the configured options (per-call options may have written one), under
        every label the thread may have been shown with. The record is rewritten even when nothing of the
        thread is in it, so a background run that read it before the delete loses its compare-and-set and,
        finding the thread gone, commits nothing. The usage still pending for the thread is dropped
        (``UsageMeter.discard``): a new thread of the same id starts at nothing."""
        resource_id, thread_id = event.scope.resource_id, event.scope.thread
        self.engine.usage.discard(resource_id, thread_id)
        if event.erasing:
            return {}
        for _ in range(MAX_CLEANUP_ATTEMPTS):
            rec = self.store.get_observation_record(resource_id, None)
            if rec is None:
                return {}
            # a rewrite that only removes content: the options it was written under are not known here
            if self.engine.write(
                None, rec, without_thread(rec, thread_id, thread_labels(thread_id), self.engine.tokenizer)
            ):
                return {}
        raise Conflict(f"cleaning the observations of thread {thread_id} lost every write race; delete again")

    def on_messages_deleted(self, event: MessagesDeleted) -> None:
        """Every record that may be observing the deleted messages is rewritten
        (``ObservationEngine.forget_messages``), whatever the configured options (per-call options may
        have written a record of either scope): a background run computed from them loses its
        compare-and-set and commits nothing of them; buffered chunks that cover them are dropped."""
        self.engine.forget_messages(event.scope.resource_id, event.messages)

    def on_thread_cloned(self, event: ThreadCloned) -> None:
        """A clone of every message counts as observed as far as its source. Thread scope: the clone gets
        a copy of the source's record (Mastra copies it too), ranges and cursor pointing at the copies.
        Resource scope, same resource: the source's sections are repeated under the clone's label (they
        survive the source's deletion). A clone that left messages behind (``message_limit``) or moved to
        another resource starts unobserved: the source's log holds what the clone does not."""
        om = event.options.observational_memory
        source, clone = event.source, event.clone
        if not om.enabled or not event.complete:
            return
        if om.scope == "thread":
            rec = self.store.get_observation_record(source.resource_id, source.id)
            if rec is not None and rec.version:
                cursor = clone_cursor(rec.observed_seq(source.id), event.seq_map)
                copy = cloned_record(
                    rec, resource_id=clone.resource_id, thread_id=clone.id, id_map=event.id_map, cursor=cursor
                )
                if not self.engine.write(om, copy, copy):  # version 0: created, never overwritten
                    raise Conflict(f"thread {clone.id} already has an observation record")
        elif clone.resource_id == source.resource_id:
            self._share(event)

    def _share(self, event: ThreadCloned) -> None:
        source, clone = event.source, event.clone
        om = event.options.observational_memory
        for _ in range(MAX_CLEANUP_ATTEMPTS):
            rec = self.store.get_observation_record(source.resource_id, None)
            cursor = clone_cursor(rec.observed_seq(source.id), event.seq_map) if rec is not None else 0
            if rec is None or not cursor:
                return
            shared = shared_with_clone(
                rec,
                source=(source.id, thread_labels(source.id)),
                clone=(clone.id, thread_label(om, clone.id)),
                id_map=event.id_map,
                cursor=cursor,
                tokenizer=self.engine.tokenizer,
            )
            if self.engine.write(om, rec, shared):  # the log grows by the copies: held to its bounds
                return
        raise Conflict(
            f"sharing the observations of thread {source.id} with clone {clone.id} lost every race"
        )

    def on_resource_erased(self, scope: Scope, options: MemoryOptions) -> Mapping[str, int]:
        """Delete the resource-scoped record (thread-scoped ones went with their threads), whatever the
        configured scope, and drop the usage still pending for the resource: an erasure leaves nothing behind,
        and nothing written afterwards brings a record back."""
        self.engine.usage.discard(scope.resource_id)
        return {"observation_records": int(self.store.delete_observation_record(scope.resource_id, None))}
