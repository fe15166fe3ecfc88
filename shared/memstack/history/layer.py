"""The message-history layer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memstack.config import MemoryOptions
from memstack.layers.base import Contribution, LayerBase, Needs, ThreadDeleted, Turn, TurnReads
from memstack.ports import MemoryStore
from memstack.scope import Scope


class MessageHistoryLayer(LayerBase):
    """Shows the thread's newest ``last_messages`` messages (or, with observational memory, the unobserved
    tail that layer prepared) and owns the thread's rows in the store.

    Args:
        store: where threads and messages live.
    """

    name = "message_history"

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def needs(self, turn: Turn, prepared: Any) -> Needs:
        return Needs(last_messages=turn.options.history_count)

    def contribute(self, turn: Turn, reads: TurnReads) -> Contribution:
        return Contribution(conversation=list(reads.history))

    def on_thread_deleted(self, event: ThreadDeleted) -> Mapping[str, int]:
        """Delete the thread, its messages, their bodies and marks, and its thread-scope records.

        Returns:
            ``{"threads": 1, "messages": n, "observation_records": 0 or 1}`` (the thread-scope record the
            store deletes with its thread), or zeros when the thread was already gone.
        """
        deleted = self.store.erase_thread(event.scope.resource_id, event.scope.thread)
        if deleted is None:
            return {"threads": 0, "messages": 0, "observation_records": 0}
        return {
            "threads": 1,
            "messages": deleted.messages,
            "observation_records": deleted.observation_records,
        }

    def on_resource_erased(self, scope: Scope, options: MemoryOptions) -> Mapping[str, int]:
        return {}
