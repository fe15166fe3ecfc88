"""The working-memory layer: its system message and tool on every turn, tag stripping on save, and its
document through clones and erasures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memstack.config import MemoryOptions
from memstack.context import SystemMessage
from memstack.layers.base import Contribution, LayerBase, Needs, ThreadCloned, Turn, TurnReads
from memstack.model import Message, Thread
from memstack.ports import MemoryStore
from memstack.scope import Scope
from memstack.working_memory.instructions import system_message
from memstack.working_memory.service import THREAD_METADATA_KEY, document_version
from memstack.working_memory.strip import strip_batch
from memstack.working_memory.tools import tool_definition


def is_thread_document(options: MemoryOptions) -> bool:
    """Whether ``metadata.working_memory`` of a thread is the thread's own document (thread scope, or
    working memory off: then it is plain metadata) rather than the seed of the resource's (spec §2.7)."""
    wm = options.working_memory
    return not (wm.enabled and wm.scope == "resource")


class WorkingMemoryLayer(LayerBase):
    """Working memory (spec §2.7): the document — in the resource's record (resource scope, the default)
    or in the thread's metadata (thread scope) — shown with its update instructions and tool.

    Args:
        store: where resource records and threads live.
    """

    name = "working_memory"

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def needs(self, turn: Turn, prepared: Any) -> Needs:
        wm = turn.options.working_memory
        return Needs(resource=wm.enabled and wm.scope == "resource")

    def contribute(self, turn: Turn, reads: TurnReads) -> Contribution:
        opts = turn.options
        wm = opts.working_memory
        if not wm.enabled:
            return Contribution()
        if wm.scope == "resource":
            data = reads.resource.working_memory if reads.resource is not None else None
        else:
            value = reads.thread.metadata.get(THREAD_METADATA_KEY) if reads.thread is not None else None
            data = value if isinstance(value, str) else None
        return Contribution(
            system=[SystemMessage(system_message(wm, data, read_only=opts.read_only), "working_memory")],
            tools=[] if opts.read_only else [tool_definition(wm)],
            versions={"working_memory": document_version(data)},
        )

    def before_save(self, thread: Thread, options: MemoryOptions, messages: list[Message]) -> list[Message]:
        """Working-memory tool calls, their results and ``<working_memory>`` tags are never stored (spec
        §2.4), whether or not the layer is on: they are the memory's plumbing, not the conversation."""
        return strip_batch(messages)

    def on_thread_cloned(self, event: ThreadCloned) -> None:
        """A thread's own document travels with the clone (unless the caller gave the clone one); the seed
        of a resource's document does not (the resource keeps its newer document; the clone shares it when
        it stays in the resource)."""
        value = event.source.metadata.get(THREAD_METADATA_KEY)
        given = THREAD_METADATA_KEY in event.clone.metadata  # the caller's own document for the clone wins
        if value is None or given or not is_thread_document(event.options):
            return
        self.store.update_thread(
            event.clone.resource_id,
            event.clone.id,
            metadata={THREAD_METADATA_KEY: value},
            updated_at=event.clone.updated_at,
        )

    def on_resource_erased(self, scope: Scope, options: MemoryOptions) -> Mapping[str, int]:
        """Delete the resource's record: its working memory and metadata."""
        return {"working_memory": int(self.store.delete_resource(scope.resource_id))}
