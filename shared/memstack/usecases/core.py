"""``Core``: what every use case works with — the ports, the options, the layers and the engines they
share — built once by the ``Memory`` facade."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memstack.config import MemoryOptions
from memstack.errors import InvalidInput
from memstack.layers.base import Layer
from memstack.model import Message, Thread
from memstack.observation.engine import ObservationEngine
from memstack.ports import ChatModel, Clock, Embedder, MemoryStore, SearchIndex, Tokenizer
from memstack.recall import SemanticRecall
from memstack.usecases.checks import MAX_BATCH
from memstack.working_memory.actions import WorkingMemoryActions


def needs_chat_model(options: MemoryOptions) -> bool:
    """Whether these options call a chat model: observational memory (Observer, Reflector) or
    ``generate_title``. The one rule ``Memory`` and ``bootstrap`` both ask."""
    return options.observational_memory.enabled or options.generate_title.enabled


@dataclass(slots=True)
class Core:
    """The shared dependencies of the use cases.

    Attributes:
        layers: the memory layers in turn order (``memstack.layers.default_layers``).
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

    def require_chat_model(self, options: MemoryOptions) -> None:
        """Raises ``InvalidInput`` (field ``chat_model``) when ``options`` need a chat model and none was
        given."""
        if self.chat_model is None and needs_chat_model(options):
            raise InvalidInput(
                "observational memory and title generation need a chat model: set OPENAI_API_KEY (or "
                "OPENAI_BASE_URL for a compatible endpoint) or pass chat_model",
                field="chat_model",
            )


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
