"""The memory layers as processors (docs/adr/0004-layers-as-processors.md).

``memstack.layers.defaults.default_layers`` is the one place that says which layers exist and in what order: message history,
working memory, semantic recall, observational memory — the order in which their system messages reach
the model (DESIGN.md "The layers and what the model sees") and in which their hooks run. Adding a layer is
a new package with a ``Layer`` and one line here.
"""

from __future__ import annotations

from memstack.layers.base import (
    Block,
    Contribution,
    Layer,
    LayerBase,
    Needs,
    ThreadCloned,
    ThreadDeleted,
    Turn,
    TurnReads,
)

__all__ = [
    "Block",
    "Contribution",
    "Layer",
    "LayerBase",
    "Needs",
    "ThreadCloned",
    "ThreadDeleted",
    "Turn",
    "TurnReads",
]
