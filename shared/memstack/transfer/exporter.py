"""``export_jsonl``: a selection of a store as the lines of an export file (``records``)."""

from __future__ import annotations

from collections.abc import Iterator

from memstack.model import utcnow
from memstack.ports import MemoryStore
from memstack.transfer.progress import NoProgress, Progress
from memstack.transfer.records import COUNT_KEYS, dump, header
from memstack.transfer.walk import Selection, message_pages, plan


def export_jsonl(
    store: MemoryStore, selection: Selection, *, progress: Progress | None = None
) -> Iterator[str]:
    """The lines (without newlines) of an export of ``selection``: header; per resource its record, then
    each thread (oldest first) with its messages by ``seq`` and its observation record, then the
    resource-scope observation record; the ``end`` record last. A resource's record and resource-scope
    observation record are part of a resource's or the whole store's export, not of one thread's.

    ``progress`` counts messages (``Plan.total``). The store is read lazily, a page at a time, so a
    consumer that stops early (Ctrl-C) stops the reads.

    Raises:
        NotFound: the selected thread does not exist, or the selected resource holds nothing
            (``walk.plan``). Whatever the store raises.
    """
    progress = progress or NoProgress()
    walk = plan(store, selection)
    progress.start(walk.total, "messages")
    counts = dict.fromkeys(COUNT_KEYS, 0)
    yield header(utcnow().isoformat(), selection.to_dict())
    whole = selection.thread_id is None
    for resource_id, threads in walk.resources.items():
        resource = store.get_resource(resource_id) if whole else None
        if resource is not None:
            counts["resources"] += 1
            yield dump("resource", resource)
        for thread in threads:
            counts["threads"] += 1
            yield dump("thread", thread)
            done = 0
            for page in message_pages(store, thread):
                counts["messages"] += len(page)
                yield from (dump("message", m) for m in page)
                progress.advance(page[-1].seq - done)
                done = page[-1].seq
            progress.advance(thread.last_seq - done)
            record = store.get_observation_record(resource_id, thread.id)
            if record is not None:
                counts["observation_records"] += 1
                yield dump("observation_record", record)
        shared = store.get_observation_record(resource_id, None) if whole else None
        if shared is not None:
            counts["observation_records"] += 1
            yield dump("observation_record", shared)
    yield dump("end", {"counts": counts})
