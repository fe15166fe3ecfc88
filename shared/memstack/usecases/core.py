"""``Core``: what every use case works with — the ports, the options, the layers and the engines they
share — built once by the ``Memory`` facade."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memstack.config import MemoryOptions
from memstack.errors import InvalidInput, MemstackError
from memstack.layers.base import Layer, NotIndexed
from memstack.model import Message, Thread, utcnow
from memstack.observation.engine import ObservationEngine
from memstack.observation.requirements import require_chat_model
from memstack.observation.usage import UsageMeter
from memstack.ports import ChatModel, Clock, Embedder, MemoryStore, SearchIndex, Tokenizer
from memstack.recall import EmbeddingCache, SemanticRecall
from memstack.usecases.checks import MAX_BATCH
from memstack.working_memory.actions import WorkingMemoryActions

logger = logging.getLogger(__name__)


class SystemClock:
    """The ``Clock`` of the machine: aware UTC."""

    def now(self) -> datetime:
        return utcnow()


@dataclass(slots=True)
class Core:
    """The shared dependencies of the use cases.

    Attributes:
        layers: the memory layers in turn order (``memstack.layers.defaults.default_layers``).
        index_on_save: saves index and schedule their follow-up work themselves (not under a stream
            indexer).
        on_unindexed: told when a stored batch was left unindexed for a reason a retry can mend (the
            ``Memory``'s ``IndexRetry``), so the index is completed without the caller.
    """

    store: MemoryStore
    index: SearchIndex
    embedder: Embedder
    tokenizer: Tokenizer
    options: MemoryOptions
    clock: Clock
    chat_model: ChatModel | None
    recall: SemanticRecall
    working_memory: WorkingMemoryActions
    observation: ObservationEngine
    layers: tuple[Layer, ...] = ()
    index_on_save: bool = True
    on_unindexed: Callable[[], None] | None = None

    def require_chat_model(self, options: MemoryOptions) -> None:
        """Raises ``InvalidInput`` (field ``chat_model``) when ``options`` need a chat model and none was
        given (``observation.requirements``)."""
        require_chat_model(self.chat_model, options)


def add_counts(total: dict[str, int], counts: Mapping[str, int]) -> None:
    """Add a layer's erasure counts into ``total``."""
    for key, n in counts.items():
        total[key] = total.get(key, 0) + n


def store_batches(core: Core, thread: Thread, messages: Sequence[Message]) -> list[Message]:
    """Store ``messages`` in ``thread`` (which exists) in batches of at most ``MAX_BATCH``, without the
    layers' follow-up work."""
    saved: list[Message] = []
    for start in range(0, len(messages), MAX_BATCH):
        saved += core.store.save_messages(thread.resource_id, thread.id, messages[start : start + MAX_BATCH])
    return saved


def follow_up(core: Core, thread: Thread, saved: Sequence[Message]) -> NotIndexed | None:
    """Every layer's ``after_save`` on a stored batch, in layer order (recall indexes, observation
    schedules), then the thread's usage written if enough is pending (``flush_usage``).

    The batch is stored when this runs, so what fails here never reads as "not saved": indexing that failed
    is returned (every other layer still runs) and told to ``core.on_unindexed`` (the library's background
    retry); any other error is raised with the stored ids named (``saved_ids``) and a message saying that
    saving them again with those ids is safe (an existing id updates in place).

    Returns:
        The indexing failure (``NotIndexed``) when the batch was stored but not indexed, else ``None``.
    """
    unindexed: NotIndexed | None = None
    for layer in core.layers:
        try:
            layer.after_save(thread, core.options, saved)
        except NotIndexed as exc:
            unindexed = exc
        except MemstackError as exc:
            raise _named_stored(exc, saved) from exc
    flush_usage(core, thread.resource_id, thread.id)
    if unindexed is not None and unindexed.retryable and core.on_unindexed is not None:
        core.on_unindexed()
    return unindexed


def _named_stored(exc: MemstackError, saved: Sequence[Message]) -> MemstackError:
    """``exc`` with the stored batch's ids in ``saved_ids`` and its message saying the batch was stored."""
    ids = [m.id for m in saved]
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    named = exc.restated(
        f"{exc.message}; the messages were stored ({shown}): saving them again with these ids is safe "
        "(an existing id updates in place)"
    )
    named.saved_ids = ids
    return named


def flush_usage(core: Core, resource_id: str, thread_id: str, *, force: bool = False) -> None:
    """``ObservationEngine.flush_usage`` for the thread under the core's options; a failure is logged
    (ids and the error class) and leaves the totals pending: accounting never fails the work it counts."""
    try:
        core.observation.flush_usage(core.options.observational_memory, resource_id, thread_id, force=force)
    except Exception as exc:
        logger.warning(
            "writing usage failed (%s) for thread %s; kept for the record's next write",
            type(exc).__name__,
            thread_id,
            extra={"thread_id": thread_id, "error": type(exc).__name__},
        )


def flush_all_usage(core: Core) -> None:
    """Write every thread's pending usage (``Memory.close``)."""
    if core.options.read_only:
        return
    for resource_id, thread_id in core.observation.usage.pending_keys():
        if thread_id is not None:
            flush_usage(core, resource_id, thread_id, force=True)


def build_core(
    *,
    store: MemoryStore,
    index: SearchIndex,
    embedder: Embedder,
    tokenizer: Tokenizer,
    options: MemoryOptions | dict[str, Any] | None,
    clock: Clock,
    chat_model: ChatModel | None,
    embedding_cache: EmbeddingCache | None,
) -> Core:
    """The core of a ``Memory`` (without its layers, which need the use cases).

    Raises:
        InvalidInput: invalid options, or the index's dimension differs from the embedder's.
    """
    if index.dimension != embedder.dimension:
        raise InvalidInput(
            f"index dimension {index.dimension} differs from embedder {embedder.model_id} "
            f"dimension {embedder.dimension}",
            field="embedder",
        )
    wm = WorkingMemoryActions(store, clock, tokenizer)
    built: list[Core] = []

    def read_working_memory(_: MemoryOptions, resource_id: str, thread_id: str) -> str | None:
        opts = built[0].options.working_memory
        return wm.get(opts, resource_id, thread_id) if opts.enabled else None

    def write_working_memory(opts: MemoryOptions, resource_id: str, thread_id: str, text: str) -> None:
        # the Observer's rewrite (``manage_working_memory``) under the configured working-memory options
        merged = built[0].options.model_copy(update={"observational_memory": opts.observational_memory})
        if merged.working_memory.enabled and not merged.read_only:
            wm.update(merged, resource_id, thread_id, text)

    meter = UsageMeter(tokenizer)

    def meter_embedding(resource_id: str, thread_id: str, texts: Sequence[str]) -> None:
        meter.add_embedding((resource_id, thread_id), texts)

    engine = ObservationEngine(
        store=store,
        tokenizer=tokenizer,
        chat_model=chat_model,
        clock=clock,
        working_memory=write_working_memory,
        read_working_memory=read_working_memory,
        usage=meter,
    )
    recall = SemanticRecall(store, index, embedder, embedding_cache, meter=meter_embedding, clock=clock)
    built.append(
        Core(
            store,
            index,
            embedder,
            tokenizer,
            MemoryOptions.parse(options),
            clock,
            chat_model,
            recall,
            wm,
            engine,
        )
    )
    return built[0]
