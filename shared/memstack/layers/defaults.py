"""The ordered tuple of memory layers a ``Memory`` runs."""

from __future__ import annotations

from collections.abc import Callable

from memstack.history import MessageHistoryLayer
from memstack.layers.base import Layer
from memstack.observation.layer import ObservationalLayer
from memstack.recall.layer import SemanticRecallLayer
from memstack.scope import Scope
from memstack.usecases.core import Core
from memstack.working_memory.layer import WorkingMemoryLayer


def default_layers(core: Core, *, schedule: Callable[[Scope], object]) -> tuple[Layer, ...]:
    """Message history, working memory, semantic recall, observational memory — in this order.

    Args:
        schedule: submits background observation for a thread (``Background.schedule``).
    """
    return (
        MessageHistoryLayer(core.store),
        WorkingMemoryLayer(core.store),
        SemanticRecallLayer(core.recall, core.index, inline=lambda: core.index_on_save),
        ObservationalLayer(
            core.observation,
            core.store,
            core.clock,
            require_chat_model=core.require_chat_model,
            schedule=schedule,
            inline=lambda: core.index_on_save,
        ),
    )
