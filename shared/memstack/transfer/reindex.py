"""``reindex``: embed a selection's messages again with the memory's embedder, into its index.

Resumable by construction: each message is indexed ``once`` (``SemanticRecall.index_messages``), and the
mark the store keeps for it fingerprints the embedding model with the content, so messages already indexed
for this model are skipped and a stopped run continues where it stopped. An index that is being rebuilt
(``ports.RebuildableIndex``) is marked done once the whole store has been walked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memstack.errors import InvalidInput
from memstack.ports import RebuildableIndex
from memstack.transfer.progress import NoProgress, Progress
from memstack.transfer.walk import Selection, message_pages, plan

if TYPE_CHECKING:
    from memstack.memory import Memory


@dataclass(frozen=True, slots=True)
class ReindexReport:
    """What a reindex did: resources, threads and messages walked, chunks embedded and written (0 for
    messages already indexed for this model), and the model and dimension of the index."""

    resources: int
    threads: int
    messages: int
    chunks: int
    model_id: str
    dimension: int


def reindex(memory: Memory, selection: Selection, *, progress: Progress | None = None) -> ReindexReport:
    """Index every message of ``selection`` for ``memory``'s embedder (see the module docstring).

    ``progress`` counts messages (``Plan.total``). Embedding calls are not added to the threads' usage:
    an operator's job is not what a conversation cost.

    Raises:
        InvalidInput: semantic recall is off in ``memory``'s options (nothing would be indexed).
        NotFound: the selected thread does not exist, or the selected resource holds nothing (``walk.plan``).
        Whatever the embedder, index or store raise (what was indexed stays indexed).
    """
    recall = memory.options.semantic_recall
    if not recall.enabled:
        raise InvalidInput("semantic recall is off: there is no index to rebuild", field="semantic_recall")
    progress = progress or NoProgress()
    walk = plan(memory.store, selection)
    progress.start(walk.total, "messages")
    threads = messages = chunks = 0
    for thread in (t for ts in walk.resources.values() for t in ts):
        threads += 1
        done = 0
        for page in message_pages(memory.store, thread):
            chunks += memory.recall_engine.index_messages(thread, page, recall, once=True, metered=False)
            messages += len(page)
            progress.advance(page[-1].seq - done)
            done = page[-1].seq
        progress.advance(thread.last_seq - done)
    index = memory.index
    if selection.resource_id is None and isinstance(index, RebuildableIndex) and index.rebuilding:
        index.finish_rebuild()
    return ReindexReport(
        resources=len(walk.resources),
        threads=threads,
        messages=messages,
        chunks=chunks,
        model_id=memory.embedder.model_id,
        dimension=memory.embedder.dimension,
    )
