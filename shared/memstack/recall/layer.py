"""The semantic-recall layer: hits from this thread join the conversation by ``seq``, hits from the
resource's other threads form one system block (spec §2.8, §3.5); saved messages are indexed, and a
deleted thread or erased resource leaves nothing in the index."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memstack import deadline
from memstack.config import MemoryOptions
from memstack.context import cross_thread_block
from memstack.errors import InvalidInput, MemstackError, PayloadTooLarge
from memstack.layers.base import (
    Block,
    Contribution,
    LayerBase,
    Needs,
    NotIndexed,
    ThreadDeleted,
    Turn,
    TurnReads,
)
from memstack.model import Message, Thread, check_metadata
from memstack.ports import SearchIndex
from memstack.recall.engine import SemanticRecall, entry_metadata
from memstack.scope import Scope

logger = logging.getLogger(__name__)


class SemanticRecallLayer(LayerBase):
    """Semantic recall over the index.

    Args:
        engine: indexes and searches (shared with ``Memory.recall``).
        index: the search index (for deletions).
        inline: whether batches are indexed as they are saved (``Memory.index_on_save``); not when a
            stream indexer does it (AWS).
    """

    name = "semantic_recall"

    def __init__(self, engine: SemanticRecall, index: SearchIndex, *, inline: Callable[[], bool]) -> None:
        self.engine = engine
        self.index = index
        self.inline = inline

    def needs(self, turn: Turn, prepared: Any) -> Needs:
        return Needs(recall_query=turn.query if turn.options.semantic_recall.enabled else None)

    def contribute(self, turn: Turn, reads: TurnReads) -> Contribution:
        if reads.recall is None:
            return Contribution()
        in_history = {m.id for m in reads.history}
        found = [m for m in reads.recall.messages if m.id not in in_history]
        thread_id = turn.scope.thread
        return Contribution(
            block=Block("recall", [m for m in found if m.thread_id != thread_id], _render),
            conversation=[m for m in found if m.thread_id == thread_id],
            recalled=found,
        )

    def before_save(self, thread: Thread, options: MemoryOptions, messages: list[Message]) -> list[Message]:
        """Refuse a batch whose index entries would break the metadata limit: every entry carries the
        thread's metadata merged with the message's (``entry_metadata``)."""
        for i, m in enumerate(messages):
            check_metadata(entry_metadata(thread, m), f"messages[{i}].metadata (with the thread's metadata)")
        return messages

    def after_save(self, thread: Thread, options: MemoryOptions, saved: Sequence[Message]) -> None:
        """Index the stored batch (inline mode), within ``options.context_timeout_ms``: a save is a turn's
        call, and a slow or hanging embedder must not hold it (the recall engine waits for an embedder call
        only until the deadline, ``memstack.deadline.Guard``; the network adapters also bound each request
        and their retries by it).

        Raises:
            NotIndexed: the embedder or index failed, refused the text, or the deadline passed; the batch is
                stored and stays marked unindexed (``retryable`` unless the text was refused for what it
                is, ``InvalidInput``/``PayloadTooLarge``, which no retry can change).
        """
        recall = options.semantic_recall
        if not recall.enabled or not saved or not self.inline():
            return
        try:
            with deadline.within(options.context_timeout_ms / 1000):
                self.engine.index_messages(thread, saved, recall)
        except Exception as exc:
            refused = isinstance(exc, InvalidInput | PayloadTooLarge)
            logger.warning(
                "indexing failed (%s) for %d stored message(s) of thread %s; %s",
                type(exc).__name__,
                len(saved),
                thread.id,
                "the index refused their text" if refused else "left for the background reconcile",
                extra={"thread_id": thread.id, "count": len(saved), "error": type(exc).__name__},
            )
            cause = (
                f"{type(exc).__name__}: {str(exc)[:300]}"
                if isinstance(exc, MemstackError)
                else type(exc).__name__
            )
            raise NotIndexed([m.id for m in saved], cause, retryable=not refused) from exc

    def on_thread_deleted(self, event: ThreadDeleted) -> Mapping[str, int]:
        """Remove the thread's index entries (an erasure removes the resource's in one go instead)."""
        if not event.erasing:
            self.index.delete_thread(event.scope.resource_id, event.scope.thread)
        return {}

    def on_resource_erased(self, scope: Scope, options: MemoryOptions) -> Mapping[str, int]:
        """Remove every index entry of the resource."""
        return {"index_documents": self.index.delete_resource(scope.resource_id)}


def _render(messages: list[Message]) -> str:
    return cross_thread_block(messages)
