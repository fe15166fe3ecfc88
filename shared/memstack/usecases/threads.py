"""Thread use cases: create, read, list, update, delete and clone threads, and erase a resource.

Deleting, cloning and erasing go through every layer's lifecycle hook, in layer order (message history
first: a thread is gone from the store before the other layers clean up after it)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from memstack.errors import Conflict, InvalidInput, NotFound
from memstack.layers.base import ThreadCloned, ThreadDeleted
from memstack.model import EraseReceipt, Message, Thread, ThreadPage, check_metadata, new_id
from memstack.scope import Scope
from memstack.usecases.checks import (
    MAX_BATCH,
    MAX_PAGE,
    MAX_TITLE_CHARS,
    check_limit,
    check_metadata_filter,
    check_thread_metadata,
    check_title,
)
from memstack.usecases.core import Core, add_counts, follow_up, store_batches
from memstack.working_memory import THREAD_METADATA_KEY

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CloneResult:
    """A clone: its thread as stored after the copy (``last_seq`` counts the copies), its messages
    (chronological) and the map of source message id → new id."""

    thread: Thread
    messages: list[Message]
    message_id_map: dict[str, str]


class Threads:
    """Thread use cases over the core (``Memory`` validates ids into a ``Scope`` first)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def create(self, scope: Scope, *, title: str, metadata: dict[str, Any] | None) -> Thread:
        """See ``Memory.create_thread``."""
        core = self.core
        now = core.clock.now()
        thread = Thread(
            id=scope.thread,
            resource_id=scope.resource_id,
            title=check_title(title),
            metadata=check_thread_metadata(metadata),
            created_at=now,
            updated_at=now,
        )
        core.working_memory.check_seed(core.options, thread.metadata)
        created = core.store.create_thread(thread)
        core.working_memory.seed_from_thread(core.options, created)
        return created

    def get(self, scope: Scope) -> Thread:
        """The thread, if it belongs to the scope's resource.

        Raises:
            NotFound: missing, or another resource's (the two are indistinguishable on purpose).
        """
        thread = self.core.store.get_thread(scope.resource_id, scope.thread)
        if thread is None:
            raise NotFound(f"thread {scope.thread!r} not found", field="thread_id")
        return thread

    def listing(
        self,
        scope: Scope,
        *,
        limit: int,
        cursor: str | None,
        order_by: str,
        direction: str,
        metadata: dict[str, Any] | None,
    ) -> ThreadPage:
        """See ``Memory.list_threads``."""
        check_limit(limit, "limit", MAX_PAGE)
        if order_by not in ("created_at", "updated_at"):
            raise InvalidInput("order_by must be created_at or updated_at", field="order_by")
        if direction not in ("asc", "desc"):
            raise InvalidInput("direction must be asc or desc", field="direction")
        if metadata is not None:
            check_metadata_filter(metadata)
        return self.core.store.list_threads(
            scope.resource_id,
            order_by=order_by,  # type: ignore[arg-type]
            direction=direction,  # type: ignore[arg-type]
            limit=limit,
            cursor=cursor,
            metadata=metadata,
        )

    def update(self, scope: Scope, *, title: str | None, metadata: dict[str, Any] | None) -> Thread:
        """See ``Memory.update_thread``."""
        core = self.core
        checked = None if metadata is None else check_thread_metadata(metadata)
        if checked is not None:
            current = self.get(scope)
            check_metadata({**current.metadata, **checked}, "metadata (merged with the stored metadata)")
            core.working_memory.check_seed(core.options, checked)
        updated = core.store.update_thread(
            scope.resource_id,
            scope.thread,
            title=None if title is None else check_title(title),
            metadata=checked,
            updated_at=core.clock.now(),
        )
        if checked is not None and THREAD_METADATA_KEY in checked:
            core.working_memory.seed_from_thread(core.options, updated)
        return updated

    def delete(self, scope: Scope) -> None:
        """Delete the thread from every layer: history, index, observations. Resumable: a delete that
        failed part way (the thread already gone from the store, a later layer not yet cleaned) is
        finished by deleting again, which runs every layer's cleanup before answering ``NotFound``.

        Raises:
            NotFound: missing or another resource's thread (after the cleanup).
        """
        existed = self.core.store.get_thread(scope.resource_id, scope.thread) is not None
        self._teardown(scope, erasing=False)
        if not existed:
            raise NotFound(f"thread {scope.thread!r} not found", field="thread_id")

    def _teardown(self, scope: Scope, *, erasing: bool) -> dict[str, int]:
        counts: dict[str, int] = {}
        event = ThreadDeleted(scope, self.core.options, erasing=erasing)
        for layer in self.core.layers:
            add_counts(counts, layer.on_thread_deleted(event))
        return counts

    def clone(
        self,
        scope: Scope,
        *,
        target: Scope,
        title: str | None,
        metadata: dict[str, Any] | None,
        message_limit: int | None,
    ) -> CloneResult:
        """Copy a thread and its messages (new ids) into a new thread, of the same resource or of
        ``target``'s. Every layer copies what it keeps (``on_thread_cloned``); the source is never
        modified. The copies are then indexed and scheduled like any saved batch.

        Raises:
            NotFound: source missing or another resource's. Conflict: the new thread id exists.
        """
        core = self.core
        source = self.get(scope)
        if message_limit is not None:
            check_limit(message_limit, "message_limit", 1_000_000, minimum=0)
        messages = everything = all_messages(core, scope)
        if message_limit is not None:
            messages = messages[len(messages) - message_limit :] if message_limit else []
        thread = self._create_clone(source, target, title, metadata, messages[-1].id if messages else None)
        id_map = {m.id: new_id() for m in messages}
        copies = [
            m.model_copy(
                update={
                    "id": id_map[m.id],
                    "thread_id": thread.id,
                    "resource_id": thread.resource_id,
                    "seq": 0,
                }
            )
            for m in messages
        ]
        try:
            saved = store_batches(core, thread, copies)
            seq_map = {m.seq: c.seq for m, c in zip(messages, saved, strict=True)}
            complete = len(messages) == len(everything)
            event = ThreadCloned(source, thread, core.options, id_map, seq_map, complete)
            for layer in core.layers:
                layer.on_thread_cloned(event)
            # indexing and scheduling come last: the copies are observed from where the source was
            for start in range(0, len(saved), MAX_BATCH):
                follow_up(core, thread, saved[start : start + MAX_BATCH])
        except Exception:
            self._teardown(Scope(thread.resource_id, thread.id), erasing=False)
            raise
        # the thread as stored now: saving the copies moved last_seq and updated_at on, and the layers may
        # have written its metadata (thread-scoped working memory), so the answer's expected_last_seq works
        stored = core.store.get_thread(thread.resource_id, thread.id)
        return CloneResult(thread=stored or thread, messages=saved, message_id_map=id_map)

    def _create_clone(
        self,
        source: Thread,
        target: Scope,
        title: str | None,
        metadata: dict[str, Any] | None,
        last_message_id: str | None,
    ) -> Thread:
        """Store the clone's thread: the source's metadata (not its working memory: the working-memory layer
        decides what travels) under ``metadata`` and ``clone`` (spec §1 ``cloneThread``), titled ``title``
        or ``clone_title``.

        Raises:
            Conflict: the resource has a thread with the new id (field ``new_thread_id``).
            InvalidInput, PayloadTooLarge: a bad ``title`` or ``metadata``.
        """
        now = self.core.clock.now()
        extra = check_thread_metadata(metadata) if metadata is not None else {}
        self.core.working_memory.check_seed(self.core.options, extra)
        inherited = {k: v for k, v in source.metadata.items() if k != THREAD_METADATA_KEY}
        clone_meta = {
            **inherited,
            **extra,
            "clone": {
                "source_thread_id": source.id,
                "cloned_at": now.isoformat(),
                "last_message_id": last_message_id,
            },
        }
        new = Thread(
            id=target.thread,
            resource_id=target.resource_id,
            title=check_title(title) if title is not None else clone_title(source.title),
            metadata=check_thread_metadata(clone_meta),
            created_at=now,
            updated_at=now,
        )
        try:
            return self.core.store.create_thread(new)
        except Conflict:  # the caller named the id as new_thread_id (Memory.clone_thread, the HTTP body)
            raise Conflict(
                f"thread {new.id!r} already exists: choose another new_thread_id", field="new_thread_id"
            ) from None

    def erase_resource(self, scope: Scope) -> EraseReceipt:
        """Delete everything the resource owns, layer by layer: each thread as ``delete`` does, then each
        layer's resource-wide data (index, working memory, observation records). Idempotent; a call that
        failed part way leaves the rest for the next call, which finishes the job.

        Returns:
            The counts of what this call deleted.
        """
        core = self.core
        receipt = EraseReceipt(resource_id=scope.resource_id)
        counts = receipt.counts
        cursor: str | None = None
        while True:
            page = core.store.list_threads(
                scope.resource_id, order_by="created_at", direction="asc", limit=MAX_PAGE, cursor=cursor
            )
            for thread in page.threads:
                add_counts(counts, self._teardown(scope.with_thread(thread.id), erasing=True))
            cursor = page.next_cursor
            if cursor is None:
                break
        for layer in core.layers:
            add_counts(counts, layer.on_resource_erased(scope, core.options))
        logger.info("resource erased", extra={"resource_id": scope.resource_id, **counts})
        return receipt


def clone_title(source_title: str) -> str:
    """The title of a clone given none: ``Clone of <title>`` (Mastra's default, spec §1 ``cloneThread``),
    cut to ``MAX_TITLE_CHARS``; an untitled source gives an untitled clone, since untitled is ``""``, never
    a placeholder (DESIGN.md "Data model"), and ``generate_title`` titles only untitled threads."""
    return f"Clone of {source_title}".strip()[:MAX_TITLE_CHARS] if source_title.strip() else ""


def all_messages(core: Core, scope: Scope) -> list[Message]:
    """Every message of the thread, oldest first, read a page at a time."""
    out: list[Message] = []
    after: int | None = None
    while True:
        page = core.store.list_messages(scope.resource_id, scope.thread, limit=MAX_PAGE, after_seq=after)
        out += page
        if len(page) < MAX_PAGE:
            return out
        after = page[-1].seq
