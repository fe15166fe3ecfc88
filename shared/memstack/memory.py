"""``Memory``: the facade — Mastra's memory API in snake_case (spec §2.3) over the use cases
(``memstack.usecases``) and the ordered memory layers (``memstack.layers``).

Each public method checks its ids once into a ``Scope`` and hands over to one use case. The facade knows
only ports; ``Memory.local()`` builds the embedded default (SQLite file + offline embedder) through
``memstack.bootstrap``.
"""

from __future__ import annotations

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
    SavedBatch,
    Thread,
    ThreadPage,
    ToolCallPart,
    check_routable_id,
    new_id,
)
from memstack.observability import traced
from memstack.ports import (
    ChatModel,
    Clock,
    Embedder,
    MemoryStore,
    ObservationScheduler,
    SearchIndex,
    Tokenizer,
)
from memstack.recall import EmbeddingCache, RecallResult
from memstack.scope import Scope
from memstack.usecases.background import Background, BackgroundWork
from memstack.usecases.core import SystemClock, build_core
from memstack.usecases.index_retry import IndexRetry
from memstack.usecases.inspect import Inspection
from memstack.usecases.messages import Include, Messages
from memstack.usecases.threads import CloneResult, Threads
from memstack.usecases.turns import Turns
from memstack.working_memory.strip import strip_tags

__all__ = ["CloneResult", "Include", "Memory", "strip_tags"]


@traced
class Memory(BackgroundWork, Inspection):
    """Agent memory over a store, a search index, an embedder and a tokenizer.

    Args:
        store: threads, messages, resources, observation records.
        index: vector + keyword index of message chunks.
        embedder: text → vectors. tokenizer: counts tokens of the assembled context.
        options: ``MemoryOptions`` or a dict of them (Mastra's names in snake_case).
        clock: time source. embedding_cache: shared by queries and documents (a new one if omitted).
        parallel_recall: run recall on a worker thread beside the store reads of ``context()`` — for
            network backends; else before them (measured faster on SQLite), waited for until the deadline.
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
        if background not in ("thread", "inline"):
            raise InvalidInput("background must be 'thread' or 'inline'", field="background")
        core = build_core(
            store=store,
            index=index,
            embedder=embedder,
            tokenizer=tokenizer,
            options=options,
            clock=clock or SystemClock(),
            chat_model=chat_model,
            embedding_cache=embedding_cache,
        )
        core.index_on_save = index_on_save
        self._core = core
        self._background = Background(
            core, scheduler, inline=background == "inline", run=self.run_observation_job
        )
        core.layers = default_layers(core, schedule=self._background.schedule)
        self._threads, self._messages = Threads(core), Messages(core)
        self._turns = Turns(core, parallel_recall=parallel_recall)
        self._index_retry = IndexRetry(self.reconcile_index)
        core.on_unindexed = self._index_retry.poke
        core.require_chat_model(core.options)

    @classmethod
    def local(
        cls,
        path: str | Path | None = None,
        embedder: str | Embedder | None = None,
        *,
        chat_model: ChatModel | None = None,
        background: Literal["thread", "inline"] = "thread",
        **options: Any,
    ) -> Memory:
        """The embedded default: one SQLite file and an embedder (``bootstrap.build_local``); use it as
        ``with Memory.local() as memory:``, or ``close()`` it (closing finishes queued background work).

        Args:
            path: the SQLite file (default ``.memstack/memory.db``); ``":memory:"`` for a throwaway one.
            embedder: ``"wordllama"`` (static, 256-d, offline), ``"local"`` (e5-small, 384-d), ``"hash"``,
                ``"openai"``, ``"bedrock"`` or an ``Embedder``; ``None``: ``Settings.embedder_name``, the rule
                ``memstack serve`` uses too (``MEMSTACK_EMBEDDER``, else ``settings.default_embedder``).
            chat_model: the Observer's, Reflector's and titles' model; ``None`` with options that need one:
                built from the settings as ``build()`` does (``bootstrap.chat_model_for``).
            background: where their background work runs: a worker ``thread`` or ``inline`` in saves.
            **options: memory options, e.g. ``last_messages=20, semantic_recall={"top_k": 8}``.

        Raises:
            InvalidInput: bad options; no chat model passed or configured for options that need one (the
                message names the variables and ``chat_model=``); a file of another embedder.
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
        """Whether saves index and schedule their own follow-up work (``False`` under a stream indexer)."""
        return self._core.index_on_save

    @index_on_save.setter
    def index_on_save(self, value: bool) -> None:
        self._core.index_on_save = value

    @property
    def index_retry(self) -> IndexRetry:
        """The background retry that indexes what saves stored but could not index (``IndexRetry``)."""
        return self._index_retry

    def close(self) -> None:
        """Finish in-process work, write the usage still pending, then close the store and the index."""
        self._turns.close()
        self._index_retry.close()
        self._background.close()
        self._core.store.close()
        self._core.index.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # threads and resources ---------------------------------------------------------------------------
    # Each method checks its ids into a Scope and hands over; the use case's docstring has the details.

    def create_thread(
        self,
        *,
        resource_id: str,
        thread_id: str | None = None,
        title: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> Thread:
        """Create a thread of ``resource_id`` (untitled is ``""``; ``metadata.working_memory`` seeds working
        memory, spec §2.7). Raises ``InvalidInput``, ``Conflict`` (the resource has this thread id)."""
        scope = Scope.of(resource_id, new_id() if thread_id is None else thread_id)
        return self._threads.create(scope, title=title, metadata=metadata)

    def get_thread(self, *, thread_id: str, resource_id: str) -> Thread:
        """The thread. Raises ``NotFound`` when missing or another resource's (indistinguishable on purpose)."""
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
        """A page of threads (``limit`` 1..1000, newest created first by default; ``order_by``
        ``created_at|updated_at``; ``metadata``: equality on top-level keys). Raises ``InvalidInput``."""
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
        """Partial update; metadata merges shallowly (``metadata.working_memory`` seeds as at creation).
        Raises ``NotFound``, ``InvalidInput``, ``PayloadTooLarge``."""
        return self._threads.update(Scope.of(resource_id, thread_id), title=title, metadata=metadata)

    def delete_thread(self, *, thread_id: str, resource_id: str) -> None:
        """Delete the thread from every layer: messages, index entries, observations (in resource scope its
        part of the shared log). Raises ``NotFound``."""
        self._threads.delete(Scope.of(resource_id, thread_id, existing=True))

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
        """Copy a thread, its messages (new ids), thread-scoped working memory and observation record into a
        new thread of ``resource_id`` or of ``target_resource_id`` (the caller owns both); the source and
        its resource are never modified (spec §2.3). Returns the clone as stored (its ``last_seq`` counts
        the copies). An untitled source gives an untitled clone, else ``title`` defaults to ``Clone of
        <title>``. Raises ``NotFound``, ``Conflict`` (``new_thread_id`` taken: field ``new_thread_id``),
        ``InvalidInput`` (naming the argument at fault)."""
        source = Scope.of(resource_id, source_thread_id, existing=True)
        owner = check_routable_id(
            target_resource_id or resource_id, "target_resource_id" if target_resource_id else "resource_id"
        )
        new = check_routable_id(new_thread_id, "new_thread_id") if new_thread_id else new_id()
        target = Scope(owner, new)
        return self._threads.clone(
            source,
            target=target,
            title=title,
            metadata=metadata,
            message_limit=message_limit,
        )

    def erase_resource(self, *, resource_id: str) -> EraseReceipt:
        """Delete everything ``resource_id`` owns in every store, layer by layer; idempotent and resumable (a
        call that failed part way is finished by the next). Returns what this call deleted, counted."""
        return self._threads.erase_resource(Scope.resource(resource_id, existing=True))

    # messages ----------------------------------------------------------------------------------------

    def save_messages(
        self,
        *,
        thread_id: str,
        resource_id: str,
        messages: Sequence[Message | dict[str, Any] | str],
        expected_last_seq: int | None = None,
    ) -> SavedBatch:
        """Save a batch in order (an existing id updates in place; a missing thread is created); the layers
        strip working-memory plumbing, then index and schedule (spec §2.4).

        A stored batch is reported as stored: when indexing it fails (the embedder or index down or slower
        than ``context_timeout_ms``, a malformed embedding), the save still returns, the ids are in
        ``SavedBatch.unindexed``, and the index is completed in the background (``index_retry``,
        ``reconcile_index``). ``expected_last_seq`` (``ModelContext.last_seq``): ``Conflict`` if the thread
        moved on.

        Returns:
            The saved messages with their ``seq`` (a ``SavedBatch``, a list).

        Raises:
            InvalidInput: nothing written. NotFound. Conflict. PayloadTooLarge: over ``MAX_BATCH``.
            MemstackError: a follow-up after the store committed failed; its ``saved_ids`` name the stored
                messages and saving them again with those ids is safe.
        """
        return self._messages.save(
            Scope.of(resource_id, thread_id), messages, expected_last_seq=expected_last_seq
        )

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
        """Messages by ``seq``: the newest ``last``, or pages of ``limit`` from ``cursor``; ``include`` adds
        messages with neighbours from their own threads. Raises ``NotFound``, ``InvalidInput``."""
        scope = Scope.of(resource_id, thread_id)
        self._threads.get(scope)
        return self._messages.listing(scope, last=last, limit=limit, cursor=cursor, include=include)

    def delete_messages(self, *, resource_id: str, message_ids: Sequence[str]) -> int:
        """Delete the resource's messages with these ids and their index entries; returns how many existed."""
        return self._messages.delete(Scope.resource(resource_id, existing=True), message_ids)

    # working memory ----------------------------------------------------------------------------------

    def get_working_memory(
        self, *, resource_id: str, thread_id: str | None = None, options: dict[str, Any] | None = None
    ) -> str | None:
        """The document (markdown, or JSON text in schema mode), ``None`` when disabled or never written.
        ``thread_id`` may be omitted in resource scope."""
        opts = self.options.merged(options)
        scope = Scope.for_working_memory(resource_id, thread_id, opts.working_memory.scope)
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
        """Markdown replaces the document, schema mode merges (spec §2.7). Raises ``InvalidInput``,
        ``Forbidden`` (read-only), ``PayloadTooLarge``, ``NotFound`` (thread scope), ``Conflict``."""
        opts = self.options.merged(options)
        scope = Scope.for_working_memory(resource_id, thread_id, opts.working_memory.scope)
        self._core.working_memory.update(opts, scope.resource_id, scope.thread_id, working_memory)

    def apply_tool_call(
        self,
        *,
        thread_id: str,
        resource_id: str,
        tool_call: dict[str, Any] | ToolCallPart,
        options: dict[str, Any] | None = None,
        context: ModelContext | None = None,
        working_memory_version: str | None = None,
    ) -> Message:
        """Run the model's ``updateWorkingMemory`` call; returns the unsaved tool-result message (``is_error``
        when the model erred). With the turn's ``context`` (or ``working_memory_version``) a markdown update
        made from a document that moved on is refused with the current one; ``context`` records what the
        model has seen since (``WorkingMemoryActions``). Raises ``InvalidInput``, ``NotFound``, ``Conflict``."""
        scope, versions = Scope.of(resource_id, thread_id), context.versions if context is not None else None
        return self._core.working_memory.apply_tool_call(
            self.options.merged(options),
            scope.resource_id,
            scope.thread,
            tool_call,
            seen_version=working_memory_version,
            versions=versions,
        )

    # the turn ----------------------------------------------------------------------------------------

    def recall(
        self, *, thread_id: str, resource_id: str, query: str, options: dict[str, Any] | None = None
    ) -> RecallResult:
        """Semantic recall alone: the best hits for ``query`` in the resource and their neighbour windows,
        within ``context_timeout_ms`` (the turn's deadline, as ``context()``: each embedder and index
        request and its retries are cut to the time left). Raises ``InvalidInput``, ``Unavailable``
        (embedder or index failed, or the deadline passed first)."""
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
        """What the model sees for a turn (DESIGN.md "The layers and what the model sees"): the caller's
        ``instructions``, each layer's contribution, call-time ``context`` messages and the new ``message``
        (none saved); ``options`` override per call. Returns a ``ModelContext`` (``.to_openai()``).

        Raises:
            InvalidInput: bad input (another resource's thread reads as a new one). Embedder, index and
            Observer failures never fail the turn: that layer is skipped with a warning.
        """
        scope = Scope.of(resource_id, thread_id)
        return self._turns.context(
            scope, message=message, instructions=instructions, context=context, overrides=options
        )
