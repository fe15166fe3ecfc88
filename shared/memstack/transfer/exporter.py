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

    A store written to while it is exported still gives a file that imports (docs/export.md "Exporting a
    live store"). Every read happens inside ``store.read_snapshot()``: on SQLite the file is one moment of
    the store. A store without snapshots (DynamoDB) is read in the order that keeps the file's invariants
    — a resource-scope observation record before the resource's threads, a thread-scope one before its
    thread, the thread before its messages, and of those only the ones up to the ``last_seq`` just read —
    so no message lies above its thread's ``last_seq`` and no observation cursor passes it (an observer
    only observes saved messages). What is saved after a thread was read is left to the next export.

    Raises:
        NotFound: the selected thread does not exist, or the selected resource holds nothing
            (``walk.plan``). Whatever the store raises.
    """
    progress = progress or NoProgress()
    with store.read_snapshot():
        yield from _lines(store, selection, progress)


def _lines(store: MemoryStore, selection: Selection, progress: Progress) -> Iterator[str]:
    walk = plan(store, selection)
    progress.start(walk.total, "messages")
    counts = dict.fromkeys(COUNT_KEYS, 0)
    yield header(utcnow().isoformat(), selection.to_dict())
    whole = selection.thread_id is None
    for resource_id, threads in walk.resources.items():
        shared = store.get_observation_record(resource_id, None) if whole else None
        resource = store.get_resource(resource_id) if whole else None
        if resource is not None:
            counts["resources"] += 1
            yield dump("resource", resource)
        for listed in threads:
            record = store.get_observation_record(resource_id, listed.id)
            thread = store.get_thread(resource_id, listed.id)
            done = 0  # progress, in the listed thread's seqs (Plan.total)
            if thread is not None:  # else deleted since it was listed: not part of the file
                counts["threads"] += 1
                yield dump("thread", thread)
                for page in message_pages(store, thread, through=thread.last_seq):
                    counts["messages"] += len(page)
                    yield from (dump("message", m) for m in page)
                    seen = min(page[-1].seq, listed.last_seq)
                    progress.advance(max(seen - done, 0))
                    done = max(done, seen)
                if record is not None:
                    counts["observation_records"] += 1
                    yield dump("observation_record", record)
            progress.advance(listed.last_seq - done)
        if shared is not None:
            counts["observation_records"] += 1
            yield dump("observation_record", shared)
    yield dump("end", {"counts": counts})
