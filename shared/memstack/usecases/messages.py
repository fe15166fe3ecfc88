"""Message use cases: save a batch (through every layer's save hooks), list, delete, and the stream
indexer's work (index what was saved, forget what was removed)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memstack.cursors import decode_cursor, encode_cursor
from memstack.errors import InvalidInput, NotFound, PayloadTooLarge, Unavailable
from memstack.inputs import coerce_message
from memstack.layers.base import MessagesDeleted
from memstack.model import Message, MessagePage, SavedBatch, Thread, ToolCallPart, ToolResultPart, check_id
from memstack.ports import MessageWindow, UnindexedMessages
from memstack.scope import Scope
from memstack.usecases.checks import MAX_BATCH, MAX_INCLUDE, MAX_PAGE, MAX_SEQ, check_batch, check_limit
from memstack.usecases.core import Core, flush_usage, follow_up

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Include:
    """Ask ``list_messages`` for a message plus neighbours in its own thread (spec §2.3 ``include``)."""

    id: str
    before: int = 0
    after: int = 0


class Messages:
    """Message use cases over the core."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def save(
        self,
        scope: Scope,
        messages: Sequence[Message | dict[str, Any] | str],
        *,
        expected_last_seq: int | None = None,
    ) -> SavedBatch:
        """See ``Memory.save_messages``."""
        core = self.core
        check_batch(messages, "messages")
        if expected_last_seq is not None:
            check_limit(expected_last_seq, "expected_last_seq", MAX_SEQ, minimum=0)
        now = core.clock.now()
        parsed = [
            coerce_message(
                m, thread_id=scope.thread, resource_id=scope.resource_id, now=now, field=f"messages[{i}]"
            )
            for i, m in enumerate(messages)
        ]
        _check_batch_rules(parsed)
        if core.options.read_only:
            return SavedBatch()
        stored = self._store(scope, parsed, now, expected_last_seq)
        if stored is None:
            return SavedBatch()
        thread, saved = stored
        logger.debug("saved messages", extra={"thread_id": scope.thread, "count": len(saved)})
        unindexed = follow_up(core, thread, saved)
        if unindexed is None:
            return SavedBatch(saved)
        return SavedBatch(saved, unindexed=unindexed.message_ids, index_error=unindexed.reason)

    def _store(
        self, scope: Scope, parsed: list[Message], now: datetime, expected_last_seq: int | None
    ) -> tuple[Thread, list[Message]] | None:
        """The layers' ``before_save`` on the batch, then the store's write: the thread and the stored
        messages, or ``None`` when the layers left nothing to store.

        A save creates its thread when it is missing. A thread read here may be deleted before the write (a
        ``delete_thread`` racing the save); the store then refuses the write (``NotFound``, nothing written)
        and the save is made again against the thread as it is now — a new one — as if the delete had come
        first, instead of failing with a 404 that no order of the two calls gives.
        """
        core = self.core
        retried = False
        while True:
            stored = core.store.get_thread(scope.resource_id, scope.thread)
            thread = stored or Thread(
                id=scope.thread, resource_id=scope.resource_id, created_at=now, updated_at=now
            )
            batch = name_tool_results(parsed)
            for layer in core.layers:
                batch = layer.before_save(thread, core.options, batch)
            if not batch:
                return None
            try:
                saved = core.store.save_messages(
                    scope.resource_id,
                    scope.thread,
                    batch,
                    create=thread if stored is None else None,
                    expected_last_seq=expected_last_seq,
                )
            except NotFound:
                if stored is None or retried:
                    raise
                retried = True  # deleted since it was read
                continue
            return thread, saved

    def index_saved(self, scope: Scope, message_ids: Sequence[str]) -> int:
        """See ``Memory.index_saved``."""
        ids = check_ids(message_ids)
        recall = self.core.options.semantic_recall
        if not recall.enabled or not ids:
            return 0
        thread = self.core.store.get_thread(scope.resource_id, scope.thread)
        if thread is None:
            return 0
        found = [
            m for m in self.core.store.get_messages(scope.resource_id, ids) if m.thread_id == scope.thread
        ]
        written = self.core.recall.index_messages(thread, found, recall, once=True)
        flush_usage(self.core, scope.resource_id, scope.thread)
        logger.debug(
            "indexed saved messages",
            extra={"thread_id": scope.thread, "messages": len(found), "chunks": written},
        )
        return written

    def reconcile_index(self, limit: int) -> int:
        """``Memory.reconcile_index``: index up to ``limit`` messages saved but never indexed, once each
        (``index_saved``): a crash between the store's commit and inline indexing, or stream records the
        indexer gave up on. ``Memory.local`` runs it at start-up, the ``reconcile`` function on AWS on a
        schedule. Only stores that can list them take part (``ports.UnindexedMessages``).

        Each thread is indexed on its own: a thread whose text the embedder or index refuses
        (``InvalidInput``/``PayloadTooLarge``, which no retry can change) is logged and skipped, and a thread
        that fails otherwise does not stop the others.

        Returns:
            The chunks written (0 with semantic recall off or a store that cannot list them).

        Raises:
            Unavailable: indexing failed for some threads (after trying every thread); the next run retries
                them. Its message names how many threads and messages were left.
        """
        store = self.core.store
        if not self.core.options.semantic_recall.enabled or not isinstance(store, UnindexedMessages):
            return 0
        by_thread: dict[tuple[str, str], list[str]] = {}
        for resource_id, thread_id, message_id in store.list_unindexed(limit=limit):
            by_thread.setdefault((resource_id, thread_id), []).append(message_id)
        written = refused = 0
        failed: dict[tuple[str, str], int] = {}
        for (resource_id, thread_id), ids in by_thread.items():
            for start in range(0, len(ids), MAX_BATCH):
                part = ids[start : start + MAX_BATCH]
                try:
                    written += self.index_saved(Scope.of(resource_id, thread_id), part)
                except (InvalidInput, PayloadTooLarge) as exc:
                    refused += len(part)
                    _log_skipped("refused", exc, resource_id, thread_id, len(part))
                except Unavailable as exc:
                    failed[(resource_id, thread_id)] = failed.get((resource_id, thread_id), 0) + len(part)
                    _log_skipped("failed", exc, resource_id, thread_id, len(part))
        if by_thread:
            logger.info(
                "reconciled the index",
                extra={
                    "threads": len(by_thread),
                    "messages": sum(map(len, by_thread.values())),
                    "chunks": written,
                    "refused": refused,
                    "failed": sum(failed.values()),
                },
            )
        if failed:
            raise Unavailable(
                f"could not index {sum(failed.values())} unindexed messages of {len(failed)} threads; "
                "the next reconcile retries them"
            )
        return written

    def index_removed(
        self, scope: Scope, message_ids: Sequence[str], positions: Sequence[tuple[str, int]] = ()
    ) -> None:
        """See ``Memory.index_removed``."""
        ids = check_ids(message_ids)
        places = check_positions(positions)
        if ids:
            self.core.index.delete_messages(scope.resource_id, ids)
        after = self._following_removed(scope.resource_id, places, set(ids))
        if after:
            self._refresh_context(scope.resource_id, after)

    def _following_removed(
        self, resource_id: str, places: list[tuple[str, int]], gone: set[str]
    ) -> dict[str, list[str]]:
        """Thread id → the ids of the messages that now follow messages removed from the store (their
        ``(thread_id, seq)`` in ``places``): the first message still stored after each, whose keyword text
        may hold a removed message's text (``recall.engine.keyword_context``). One read per run of
        consecutive removed ``seq``s; empty with semantic recall off."""
        if not self.core.options.semantic_recall.enabled or not places:
            return {}
        by_thread: dict[str, set[int]] = {}
        for thread_id, seq in places:
            by_thread.setdefault(thread_id, set()).add(seq)
        after: dict[str, list[str]] = {}
        for thread_id, seqs in by_thread.items():
            for seq in sorted(seqs):
                if seq + 1 in seqs:  # removed too: the run's last message finds what follows the run
                    continue
                nxt = self.core.store.list_messages(resource_id, thread_id, limit=1, after_seq=seq)
                if nxt and nxt[0].id not in gone and nxt[0].id not in after.get(thread_id, ()):
                    after.setdefault(thread_id, []).append(nxt[0].id)
        return after

    def listing(
        self,
        scope: Scope,
        *,
        last: int | None,
        limit: int,
        cursor: str | None,
        include: Sequence[Include | dict[str, Any]] | None,
    ) -> MessagePage:
        """See ``Memory.list_messages`` (the caller has checked that the thread is the resource's)."""
        store = self.core.store
        if include is not None and not isinstance(include, list | tuple):
            raise InvalidInput("include must be a list", field="include")
        if include is not None and len(include) > MAX_INCLUDE:
            raise PayloadTooLarge(f"include exceeds the limit of {MAX_INCLUDE} items", field="include")
        includes = [_include(x, i) for i, x in enumerate(include or [])]
        next_cursor = None
        if last is not None:
            if cursor is not None:
                raise InvalidInput("last cannot be combined with cursor", field="cursor")
            check_limit(last, "last", MAX_PAGE, minimum=0)
            page = (
                store.list_messages(scope.resource_id, scope.thread, limit=last, newest_first=True)[::-1]
                if last
                else []
            )
        else:
            check_limit(limit, "limit", MAX_PAGE)
            after = int(decode_cursor(cursor, 1, (int,))[0]) if cursor is not None else None
            page = store.list_messages(scope.resource_id, scope.thread, limit=limit + 1, after_seq=after)
            if len(page) > limit:
                page = page[:limit]
                next_cursor = encode_cursor([page[-1].seq])
        if includes:
            page = self._with_includes(scope, page, includes)
        return MessagePage(messages=tuple(page), next_cursor=next_cursor)

    def _with_includes(self, scope: Scope, page: list[Message], includes: Sequence[Include]) -> list[Message]:
        store = self.core.store
        targets = {m.id: m for m in store.get_messages(scope.resource_id, [x.id for x in includes])}
        windows = [
            MessageWindow(targets[x.id].thread_id, targets[x.id].seq, x.before, x.after)
            for x in includes
            if x.id in targets
        ]
        extra = store.message_windows(scope.resource_id, windows) if windows else []
        return merge_by_thread(page, extra, scope.thread)

    def delete(self, scope: Scope, message_ids: Sequence[str]) -> int:
        """See ``Memory.delete_messages``."""
        check_batch(message_ids, "message_ids", empty_ok=False)
        ids = check_ids(message_ids)
        after = self._following(scope.resource_id, ids)
        self.core.index.delete_messages(scope.resource_id, ids)
        deleted = self.core.store.delete_messages(scope.resource_id, ids)
        if deleted:
            # after the store delete: a run that read before it loses its commit (the layers rewrite
            # what it would write over), and a run that reads after it never sees the messages
            event = MessagesDeleted(scope, self.core.options, tuple(deleted))
            for layer in self.core.layers:
                layer.on_messages_deleted(event)
        if after:
            self._refresh_context(scope.resource_id, after)
        return len(deleted)

    def _following(self, resource_id: str, ids: list[str]) -> dict[str, list[str]]:
        """Thread id → the ids of the messages right after these messages that are not deleted with them:
        their keyword text holds a deleted message's text (``recall.engine.keyword_context``). Empty with
        semantic recall off."""
        if not self.core.options.semantic_recall.enabled:
            return {}
        doomed = self.core.store.get_messages(resource_id, ids)
        if not doomed:
            return {}
        windows = [MessageWindow(m.thread_id, m.seq, 0, 1) for m in doomed]
        gone = {m.id for m in doomed}
        after: dict[str, list[str]] = {}
        read = self.core.store.message_windows(resource_id, windows)
        for m, nxt in zip(read, read[1:], strict=False):
            if m.id in gone and nxt.id not in gone and nxt.thread_id == m.thread_id:
                after.setdefault(m.thread_id, []).append(nxt.id)
        return after

    def _refresh_context(self, resource_id: str, after: dict[str, list[str]]) -> None:
        """Index again (``once``) the messages that followed deleted ones, so no deleted text stays
        searchable through its successor. A failure is logged, not raised: the messages are deleted, and
        ``Memory.index_health`` reports the successors stale until ``memstack reindex`` mends them."""
        recall = self.core.options.semantic_recall
        for thread_id, message_ids in after.items():
            thread = self.core.store.get_thread(resource_id, thread_id)
            if thread is None:
                continue
            try:
                found = [
                    m
                    for m in self.core.store.get_messages(resource_id, message_ids)
                    if m.thread_id == thread_id
                ]
                self.core.recall.index_messages(thread, found, recall, once=True)
            except Exception as exc:
                logger.warning(
                    "could not re-index %d message(s) after a deletion (%s); index_health reports them stale",
                    len(message_ids),
                    type(exc).__name__,
                    extra={"thread_id": thread_id, "count": len(message_ids), "error": type(exc).__name__},
                )


def _log_skipped(what: str, exc: Exception, resource_id: str, thread_id: str, count: int) -> None:
    logger.warning(
        "reconcile %s for %d message(s) (%s)",
        what,
        count,
        type(exc).__name__,
        extra={"resource_id": resource_id, "thread_id": thread_id, "error": type(exc).__name__},
    )


def check_ids(message_ids: Sequence[str]) -> list[str]:
    """Message ids, each checked (field ``message_ids[n]``), at most ``MAX_BATCH``."""
    check_batch(message_ids, "message_ids")
    return [check_id(i, f"message_ids[{n}]") for n, i in enumerate(message_ids)]


def check_positions(positions: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """``(thread_id, seq)`` pairs, each checked (field ``positions[n]``), at most ``MAX_BATCH``."""
    check_batch(positions, "positions")
    checked: list[tuple[str, int]] = []
    for n, place in enumerate(positions):
        if not isinstance(place, list | tuple) or len(place) != 2:
            raise InvalidInput(f"positions[{n}] must be a (thread_id, seq) pair", field=f"positions[{n}]")
        thread_id, seq = place
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= MAX_SEQ:
            raise InvalidInput(
                f"positions[{n}].seq must be an integer from 0 to {MAX_SEQ}", field=f"positions[{n}].seq"
            )
        checked.append((check_id(thread_id, f"positions[{n}].thread_id"), seq))
    return checked


def _check_batch_rules(parsed: list[Message]) -> None:
    seen: set[str] = set()
    for i, m in enumerate(parsed):
        if m.id in seen:
            raise InvalidInput(f"messages[{i}].id repeats an id of this batch", field=f"messages[{i}].id")
        if m.role == "system":  # spec §2.4: system messages are never persisted
            raise InvalidInput(
                f"messages[{i}].role: system messages are not stored; pass them to context() as instructions",
                field=f"messages[{i}].role",
            )
        seen.add(m.id)


def _include(value: Include | dict[str, Any], i: int) -> Include:
    if isinstance(value, dict):
        try:
            value = Include(**value)
        except TypeError:
            raise InvalidInput("include items take id, before, after", field=f"include[{i}]") from None
    if not isinstance(value, Include):
        raise InvalidInput("include items are {id, before, after} objects", field=f"include[{i}]")
    check_id(value.id, f"include[{i}].id")
    check_limit(value.before, f"include[{i}].before", 100, minimum=0)
    check_limit(value.after, f"include[{i}].after", 100, minimum=0)
    return value


def name_tool_results(messages: list[Message]) -> list[Message]:
    """The messages with each unnamed tool result named after its call in the same batch, so the result
    can be attributed (tool-call filter, search text) even when it is later shown without its call."""
    names = {p.id: p.name for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    out = []
    for m in messages:
        if any(isinstance(p, ToolResultPart) and not p.name and p.tool_call_id in names for p in m.parts):
            parts = tuple(
                p.model_copy(update={"name": names[p.tool_call_id]})
                if isinstance(p, ToolResultPart) and not p.name and p.tool_call_id in names
                else p
                for p in m.parts
            )
            m = m.model_copy(update={"parts": parts})
        out.append(m)
    return out


def merge_by_thread(page: list[Message], extra: list[Message], thread_id: str) -> list[Message]:
    """``page`` plus ``extra`` without repeats: other threads' messages first, grouped by thread (oldest
    group first, each by ``seq``), then this thread's, by ``seq``."""
    seen = {m.id for m in page}
    own = list(page) + [m for m in extra if m.thread_id == thread_id and m.id not in seen]
    own.sort(key=lambda m: m.seq)
    others: dict[str, list[Message]] = {}
    for m in extra:
        if m.thread_id != thread_id and m.id not in seen:
            seen.add(m.id)
            others.setdefault(m.thread_id, []).append(m)
    groups = sorted(others.values(), key=lambda g: (min(m.created_at for m in g), g[0].thread_id))
    return [m for g in groups for m in sorted(g, key=lambda m: m.seq)] + own
