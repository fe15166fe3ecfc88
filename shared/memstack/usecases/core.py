"""``Core``: what every use case works with — the ports, the options, the layers and the engines they
share — built once by the ``Memory`` facade."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memstack.config import MemoryOptions
from memstack.errors import InvalidInput
from memstack.layers.base import Layer
from memstack.model import Message, Thread, utcnow
from memstack.observation.engine import ObservationEngine
from memstack.observation.requirements import require_chat_model
from memstack.ports import ChatModel, Clock, Embedder, MemoryStore, SearchIndex, Tokenizer
from memstack.recall import EmbeddingCache, SemanticRecall
from memstack.usecases.checks import MAX_BATCH
from memstack.working_memory.actions import WorkingMemoryActions


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


def follow_up(core: Core, thread: Thread, saved: Sequence[Message]) -> None:
    """Every layer's ``after_save`` on a stored batch, in layer order (recall indexes, observation
    schedules). Raises what a layer raises (``Unavailable`` when indexing failed)."""
    for layer in core.layers:
        layer.after_save(thread, core.options, saved)


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

    engine = ObservationEngine(
        store=store,
        tokenizer=tokenizer,
        chat_model=chat_model,
        clock=clock,
        working_memory=write_working_memory,
        read_working_memory=read_working_memory,
    )
    recall = SemanticRecall(store, index, embedder, embedding_cache)
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
