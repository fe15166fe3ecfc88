"""The SQLite store's transfer methods (``MemoryStore.list_resource_ids`` and ``restore_*``): what
``memstack export``, ``memstack import`` and ``memstack reindex`` read and write. A mixin of
``SqliteMemoryStore``, kept apart so the store's request path stays one file's read."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memstack.adapters.stored import (
    check_resource_id_limit,
    check_restore_batch,
    dumps,
    ts,
)
from memstack.cursors import decode_cursor, encode_cursor
from memstack.errors import Conflict, NotFound
from memstack.model import Message, ObservationRecord, Resource, Thread, same_record, utcnow
from memstack.ports import ResourceIdPage

if TYPE_CHECKING:
    from memstack.adapters.sqlite.db import SqliteDatabase

_RESOURCE_IDS = """SELECT resource_id FROM (
    SELECT resource_id FROM threads WHERE resource_id > ?
    UNION SELECT id FROM resources WHERE id > ?
    UNION SELECT resource_id FROM observations WHERE scope = 'resource' AND resource_id > ?
) ORDER BY resource_id LIMIT ?"""


class SqliteTransfer:
    """``list_resource_ids`` and the ``restore_*`` methods over the store's tables (each restore one
    transaction)."""

    db: SqliteDatabase

    if TYPE_CHECKING:  # the store's own reads (inside a transaction they read through its connection)

        def get_thread(self, resource_id: str, thread_id: str) -> Thread | None: ...

        def get_resource(self, resource_id: str) -> Resource | None: ...

        def get_observation_record(
            self, resource_id: str, thread_id: str | None
        ) -> ObservationRecord | None: ...

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """One read transaction (``SqliteDatabase.read``, re-entrant): every read of this thread inside the
        block sees the file as it was at the block's first read, whatever writers do meanwhile."""
        with self.db.read():
            yield

    def list_resource_ids(self, *, limit: int, cursor: str | None = None) -> ResourceIdPage:
        """One SELECT over the primary keys of ``threads``, ``resources`` and ``observations``: ids in
        ascending order after the cursor's id, each once."""
        check_resource_id_limit(limit)
        after = str(decode_cursor(cursor, 1)[0]) if cursor is not None else ""
        rows = self.db.query(_RESOURCE_IDS, (after, after, after, limit + 1))
        ids = tuple(str(r[0]) for r in rows[:limit])
        return ResourceIdPage(ids=ids, next_cursor=encode_cursor([ids[-1]]) if len(rows) > limit else None)

    def restore_thread(self, thread: Thread) -> Thread:
        """INSERT the row with ``next_seq = last_seq + 1``, unless an equal thread is stored."""
        with self.db.transaction() as conn:
            stored = self.get_thread(thread.resource_id, thread.id)
            if stored is not None:
                if same_record(stored, thread):
                    return stored
                raise Conflict(
                    f"thread {thread.id!r} of resource {thread.resource_id!r} exists with other content",
                    field="thread_id",
                )
            conn.execute(
                "INSERT INTO threads (id, resource_id, title, metadata, created_at, updated_at, version, "
                "next_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    thread.id,
                    thread.resource_id,
                    thread.title,
                    dumps(thread.metadata),
                    ts(thread.created_at),
                    ts(thread.updated_at),
                    thread.version,
                    thread.last_seq + 1,
                ),
            )
        return thread

    def restore_messages(self, resource_id: str, thread_id: str, messages: Sequence[Message]) -> int:
        """One transaction: check every message against what is stored, then INSERT or UPDATE each."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT next_seq FROM threads WHERE resource_id = ? AND id = ?", (resource_id, thread_id)
            ).fetchone()
            if row is None:
                raise NotFound(f"thread {thread_id!r} not found", field="thread_id")
            check_restore_batch(resource_id, thread_id, messages, int(row[0]) - 1)
            present = [_taken(conn, resource_id, thread_id, m) for m in messages]
            written = 0
            for m, stored in zip(messages, present, strict=True):
                if stored is not None and _same_message(stored, m):
                    continue  # left as it is, index mark included: importing a file again embeds nothing
                written += 1
                exists = stored is not None
                values = (
                    m.role,
                    dumps([p.model_dump(mode="json") for p in m.parts]),
                    dumps(m.metadata),
                    m.author.model_dump_json() if m.author else None,
                    ts(m.created_at),
                )
                if exists:
                    conn.execute(
                        "UPDATE messages SET role = ?, parts = ?, metadata = ?, author = ?, created_at = ?, "
                        "indexed = NULL WHERE resource_id = ? AND id = ?",
                        (*values, resource_id, m.id),
                    )
                else:
                    conn.execute(
                        "INSERT INTO messages (role, parts, metadata, author, created_at, id, thread_id, "
                        "resource_id, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (*values, m.id, thread_id, resource_id, m.seq),
                    )
        return written

    def restore_resource(self, resource: Resource) -> Resource:
        """INSERT the ``resources`` row, unless an equal one is stored."""
        now = ts(utcnow())
        with self.db.transaction() as conn:
            stored = self.get_resource(resource.id)
            if stored is not None:
                if same_record(stored, resource):
                    return stored
                raise Conflict(f"resource {resource.id!r} exists with other content", field="resource_id")
            conn.execute(
                "INSERT INTO resources (id, working_memory, metadata, version, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    resource.id,
                    resource.working_memory,
                    dumps(resource.metadata),
                    resource.version,
                    ts(resource.created_at) if resource.created_at else now,
                    ts(resource.updated_at) if resource.updated_at else now,
                ),
            )
        got = self.get_resource(resource.id)
        assert got is not None
        return got

    def restore_observation_record(self, record: ObservationRecord) -> ObservationRecord:
        """INSERT the ``observations`` row (its ``pending_since`` column too), unless an equal one is
        stored."""
        content = record.check_size()
        rid, tid = record.resource_id, record.thread_id
        now = ts(utcnow())
        with self.db.transaction() as conn:
            if tid is not None and self.get_thread(rid, tid) is None:
                raise NotFound(f"thread {tid!r} not found", field="thread_id")
            stored = self.get_observation_record(rid, tid)
            if stored is not None:
                if same_record(stored, record):
                    return stored
                raise Conflict("the observation record exists with other content", field="observation_record")
            pending = record.pending_since
            conn.execute(
                "INSERT INTO observations (resource_id, scope, thread_key, thread_id, record, version, "
                "created_at, updated_at, pending_since) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    rid,
                    record.scope,
                    tid or "",
                    tid,
                    content,
                    record.version,
                    ts(record.created_at) if record.created_at else now,
                    ts(record.updated_at) if record.updated_at else now,
                    ts(pending) if pending is not None else None,
                ),
            )
        got = self.get_observation_record(rid, tid)
        assert got is not None
        return got


def _taken(conn: Any, resource_id: str, thread_id: str, m: Message) -> Message | None:
    """The message stored under ``m``'s id (same thread and seq: it may be overwritten), or ``None``.

    Raises:
        Conflict: its id is stored elsewhere (another thread or seq), or its seq holds another message.
    """
    from memstack.adapters.sqlite.store import _MSG_COLS, _parse_message  # the store imports this mixin

    by_id = conn.execute(
        f"SELECT {_MSG_COLS} FROM messages WHERE resource_id = ? AND id = ?", (resource_id, m.id)
    ).fetchone()
    if by_id is not None and (by_id[1], by_id[3]) != (thread_id, m.seq):
        raise Conflict(f"message {m.id!r} is stored in another thread or at another seq", field="messages.id")
    by_seq = conn.execute(
        "SELECT id FROM messages WHERE resource_id = ? AND thread_id = ? AND seq = ?",
        (resource_id, thread_id, m.seq),
    ).fetchone()
    if by_seq is not None and by_seq[0] != m.id:
        raise Conflict(f"seq {m.seq} of thread {thread_id!r} holds another message", field="messages.seq")
    return _parse_message(by_id) if by_id is not None else None


def _same_message(stored: Message, given: Message) -> bool:
    """Whether a restore of ``given`` would write what is stored (JSON forms compared)."""
    return stored.model_dump(mode="json") == given.model_dump(mode="json")
