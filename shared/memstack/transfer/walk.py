"""What a job walks: the resources and threads of a selection (one thread, one resource, or everything),
read through the ``MemoryStore`` port."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from memstack.errors import InvalidInput, NotFound
from memstack.model import Message, Thread, check_id
from memstack.ports import MemoryStore

PAGE = 500
"""Threads or messages read per store call."""


@dataclass(frozen=True, slots=True)
class Selection:
    """What a job covers: everything (both ``None``), one resource, or one thread of a resource.

    Raises (on construction):
        InvalidInput: a thread without its resource, or a malformed id.
    """

    resource_id: str | None = None
    thread_id: str | None = None

    def __post_init__(self) -> None:
        if self.thread_id is not None and self.resource_id is None:
            raise InvalidInput("a thread is selected with its resource (--resource)", field="thread_id")
        if self.resource_id is not None:
            check_id(self.resource_id, "resource_id")
        if self.thread_id is not None:
            check_id(self.thread_id, "thread_id")

    def to_dict(self) -> dict[str, str | None]:
        """``{"resource_id": ..., "thread_id": ...}`` (the export header's ``selection``)."""
        return {"resource_id": self.resource_id, "thread_id": self.thread_id}


@dataclass(frozen=True, slots=True)
class Plan:
    """The resources and threads a job walks, read up front, so progress has a total.

    Attributes:
        resources: resource id → its threads (oldest first), resources by id.
        total: the threads' ``last_seq`` summed: an upper bound of their messages (deleted ones leave
            gaps) that progress counts in, advancing to each thread's ``last_seq`` as it is done.
    """

    resources: dict[str, list[Thread]]
    total: int


def plan(store: MemoryStore, selection: Selection) -> Plan:
    """Read the selection's resources and threads.

    Raises:
        NotFound: the selected thread does not exist; the selected resource holds nothing (no thread,
            resource record or resource-scope observation record) — a mistyped id would otherwise give
            an empty export, or a reindex of nothing, that looks like success.
    """
    if selection.thread_id is not None:
        assert selection.resource_id is not None
        thread = store.get_thread(selection.resource_id, selection.thread_id)
        if thread is None:
            raise NotFound(f"thread {selection.thread_id!r} not found", field="thread_id")
        resources = {selection.resource_id: [thread]}
    else:
        ids = [selection.resource_id] if selection.resource_id is not None else resource_ids(store)
        resources = {rid: list(threads_of(store, rid)) for rid in ids}
        rid = selection.resource_id
        if (
            rid is not None
            and not resources[rid]
            and store.get_resource(rid) is None
            and store.get_observation_record(rid, None) is None
        ):
            raise NotFound(
                f"resource {rid!r} not found: it has no threads, working memory or observations",
                field="resource_id",
            )
    return Plan(resources, sum(t.last_seq for ts in resources.values() for t in ts))


def resource_ids(store: MemoryStore) -> list[str]:
    """Every resource id of the store, sorted (``list_resource_ids`` pages, de-duplicated)."""
    found: set[str] = set()
    cursor: str | None = None
    while True:
        page = store.list_resource_ids(limit=PAGE, cursor=cursor)
        found.update(page.ids)
        if page.next_cursor is None:
            return sorted(found)
        cursor = page.next_cursor


def threads_of(store: MemoryStore, resource_id: str) -> Iterator[Thread]:
    """The resource's threads, oldest first (ties by id)."""
    cursor: str | None = None
    while True:
        page = store.list_threads(
            resource_id, order_by="created_at", direction="asc", limit=PAGE, cursor=cursor
        )
        yield from page.threads
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def message_pages(
    store: MemoryStore, thread: Thread, *, through: int | None = None
) -> Iterator[list[Message]]:
    """The thread's messages by ``seq``, ``PAGE`` at a time; with ``through``, only those whose ``seq`` is
    at most ``through`` (an export passes the thread's ``last_seq`` as it read it: a message saved after
    that read is not part of the thread it wrote)."""
    after = 0
    while True:
        page = store.list_messages(thread.resource_id, thread.id, limit=PAGE, after_seq=after)
        if through is not None and page and page[-1].seq > through:
            page = [m for m in page if m.seq <= through]
            if page:
                yield page
            return
        if not page:
            return
        yield page
        after = page[-1].seq
