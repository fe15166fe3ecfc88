"""Semantic recall (spec §2.8): the engine that indexes and searches messages (``engine``) and the layer
that shows what it finds on every turn and keeps the index in step with the store (``layer``)."""

from memstack.recall.engine import (
    INDEX_EXCLUDED_THREAD_KEYS,
    EmbeddingCache,
    RecallResult,
    SemanticRecall,
    entry_metadata,
)

__all__ = [
    "INDEX_EXCLUDED_THREAD_KEYS",
    "EmbeddingCache",
    "RecallResult",
    "SemanticRecall",
    "entry_metadata",
]
