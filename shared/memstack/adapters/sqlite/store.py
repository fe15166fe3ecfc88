"""``MemoryStore`` on SQLite: threads, messages and resources in one file.

Key design (mirrors what the DynamoDB adapter does with keys). Thread and message ids are scoped to their
resource, so every key starts with ``resource_id``:

* ``threads``: primary key ``(resource_id, id)``; indexes ``(resource_id, created_at, id)`` and
  ``(resource_id, updated_at, id)`` for cursor pages; ``next_seq`` hands out per-thread sequence numbers
  inside the save transaction.
* ``messages``: primary key ``(resource_id, id)``; unique ``(resource_id, thread_id, seq)`` serves last-N,
  pages and neighbour windows; foreign key ``(resource_id, thread_id)`` → ``threads`` (``ON DELETE
  CASCADE``).
* ``resources``: primary key ``id`` with a ``version`` for compare-and-set writes.
* ``observations``: observational-memory records (spec §2.9.2), primary key ``(resource_id, scope,
  thread_key)`` (``thread_key`` is the thread id, ``''`` in resource scope) with a ``version`` for
  compare-and-set writes; ``thread_id`` (``NULL`` in resource scope) references ``threads`` (``ON DELETE
  CASCADE``), and ``delete_thread`` deletes the thread's record explicitly too. ``pending_since`` copies
  the record's field (``NULL`` when nothing is due) for the partial index ``observations_by_pending``
  (``WHERE pending_since IS NOT NULL``) that ``list_observation_work`` reads, the one cross-resource query.

Every statement carries the ``resource_id`` it acts for and matches rows on it together with the id, so
one resource can never read, change or even detect another's rows. The one exception is
``list_observation_work``, the background sweep's query, which returns ids only.

The layout's version is ``PRAGMA user_version`` (``SCHEMA_VERSION``). Files made before it (version 0,
``id`` primary keys, ids unique across resources) are rebuilt in place, in one transaction, when opened.
"""

from __future__ import annotations

import bisect
import functools
import json
import operator
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.transfer import SqliteTransfer
from memstack.adapters.stored import check_last_seq, check_messages_kept, check_thread_update
from memstack.adapters.stored import dt as _dt
from memstack.adapters.stored import dumps as _dumps
from memstack.adapters.stored import ts as _ts
from memstack.cursors import decode_cursor, encode_cursor
from memstack.errors import Conflict, NotFound, Unavailable
from memstack.model import (
    Author,
    Message,
    ObservationRecord,
    Resource,
    Thread,
    ThreadPage,
    check_observation_work_limit,
    utcnow,
)
from memstack.ports import Direction, IndexState, MessageWindow, ThreadErasure, ThreadOrder

SCHEMA_VERSION = 5
"""Layout of the store's tables, recorded as ``PRAGMA user_version`` (0: ``id`` primary keys, before ids
were scoped to their resource; 2: ``(resource_id, id)`` keys; 3: adds ``observations``; 4: adds
``observations.pending_since`` and its partial index; 5: adds ``messages.index_docs``, the search-index
document ids of a message's chunks, kept across saves; 3, 4 and 5 are additive migrations). The search index
keeps its own version in ``search_meta``."""


_THREADS = """CREATE TABLE IF NOT EXISTS {name} (
  resource_id TEXT NOT NULL,
  id TEXT NOT NULL,
  title TEXT NOT NULL DEFAULT '',
  metadata TEXT NOT NULL DEFAULT '{{}}',
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  next_seq INTEGER NOT NULL DEFAULT 1,
  version INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (resource_id, id)
)"""
_MESSAGES = """CREATE TABLE IF NOT EXISTS {name} (
  resource_id TEXT NOT NULL,
  id TEXT NOT NULL,
  thread_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  role TEXT NOT NULL,
  parts TEXT NOT NULL,
  metadata TEXT NOT NULL DEFAULT '{{}}',
  author TEXT,
  created_at TEXT NOT NULL,
  indexed TEXT,
  index_docs TEXT,
  PRIMARY KEY (resource_id, id),
  UNIQUE (resource_id, thread_id, seq),
  FOREIGN KEY (resource_id, thread_id) REFERENCES threads (resource_id, id) ON DELETE CASCADE
)"""
_SCHEMA = (
    _THREADS.format(name="threads"),
    "CREATE INDEX IF NOT EXISTS threads_by_created ON threads(resource_id, created_at, id)",
    "CREATE INDEX IF NOT EXISTS threads_by_updated ON threads(resource_id, updated_at, id)",
    _MESSAGES.format(name="messages"),
    "CREATE INDEX IF NOT EXISTS messages_unindexed ON messages(resource_id, thread_id, seq) WHERE indexed IS NULL",
    """CREATE TABLE IF NOT EXISTS resources (
  id TEXT PRIMARY KEY,
  working_memory TEXT,
  metadata TEXT NOT NULL DEFAULT '{}',
  version INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS observations (
  resource_id TEXT NOT NULL,
  scope TEXT NOT NULL,
  thread_key TEXT NOT NULL,
  thread_id TEXT,
  record TEXT NOT NULL,
  version INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  pending_since TEXT,
  PRIMARY KEY (resource_id, scope, thread_key),
  FOREIGN KEY (resource_id, thread_id) REFERENCES threads (resource_id, id) ON DELETE CASCADE
)""",
    # sparse: only records with work pending are in it, so the sweep reads just those
    "CREATE INDEX IF NOT EXISTS observations_by_pending ON observations"
    "(pending_since, resource_id, scope, thread_key) WHERE pending_since IS NOT NULL",
)

_MSG_COLS = "id, thread_id, resource_id, seq, role, parts, metadata, author, created_at"
_THREAD_COLS = "id, resource_id, title, metadata, created_at, updated_at, version"
_THREAD_READ = f"{_THREAD_COLS}, next_seq - 1"
_GET_THREAD = f"SELECT {_THREAD_READ} FROM threads WHERE resource_id = ? AND id = ?"
_LAST_MESSAGES = (
    f"SELECT {_MSG_COLS} FROM messages WHERE resource_id = ? AND thread_id = ? ORDER BY seq DESC LIMIT ?"
)


def _thread(row: Sequence[Any]) -> Thread:
    return Thread(
        id=row[0],
        resource_id=row[1],
        title=row[2],
        metadata=json.loads(row[3]),
        created_at=_dt(row[4]),
        updated_at=_dt(row[5]),
        version=row[6],
        last_seq=row[7] if len(row) > 7 else 0,
    )


_CACHED_PARTS_CHARS = 8_192
"""Rows whose parts JSON is at most this long are cached (4,096 of them: at most ~64 MB)."""


def _message(row: tuple[Any, ...]) -> Message:
    """The ``Message`` of a ``messages`` row; small rows come from a cache (history repeats each turn)."""
    return _cached_message(row) if len(row[5]) <= _CACHED_PARTS_CHARS else _parse_message(row)


@functools.lru_cache(maxsize=4_096)
def _cached_message(row: tuple[Any, ...]) -> Message:
    # Rows are whole tuples of column values, so a cached result is exactly the row's message.
    return _parse_message(row)


def _parse_message(row: Sequence[Any]) -> Message:
    return Message.model_validate(
        {
            "id": row[0],
            "thread_id": row[1],
            "resource_id": row[2],
            "seq": row[3],
            "role": row[4],
            "parts": json.loads(row[5]),
            "metadata": json.loads(row[6]),
            "author": Author.model_validate_json(row[7]) if row[7] else None,
            "created_at": _dt(row[8]),
        }
    )


def _merged_spans(windows: Sequence[MessageWindow]) -> list[tuple[str, int, int]]:
    """The seq ranges ``(thread_id, low, high)`` covering ``windows``, overlapping or adjacent ones merged."""
    ranges = sorted((w.thread_id, w.seq - max(0, w.before), w.seq + max(0, w.after)) for w in windows)
    merged: list[tuple[str, int, int]] = []
    for thread_id, low, high in ranges:
        if merged and merged[-1][0] == thread_id and low <= merged[-1][2] + 1:
            if high > merged[-1][2]:
                merged[-1] = (thread_id, merged[-1][1], high)
            continue
        merged.append((thread_id, low, high))
    return merged


_THREAD_SEQ = operator.itemgetter(1, 3)
"""A ``messages`` row's ``(thread_id, seq)`` (``_MSG_COLS`` order)."""


def _window_short(window: MessageWindow, seqs: list[int]) -> bool:
    """Whether fewer rows came back for ``window`` than its seq range holds (``seqs``: its thread's seqs
    read, ascending): a gap, or the thread's end, that the exact read settles."""
    low, high = window.seq - window.before, window.seq + window.after
    got = bisect.bisect_right(seqs, high) - bisect.bisect_left(seqs, low)
    return got < (window.before + window.after + 1) - max(0, window.before - (window.seq - 1))


class SqliteMemoryStore(SqliteTransfer):
    """The embedded default's ``MemoryStore`` (see ``memstack.ports.MemoryStore`` for the contract)."""

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db
        _open_schema(db)

    # threads -------------------------------------------------------------------------------------

    def create_thread(self, thread: Thread) -> Thread:
        with self.db.transaction() as conn:
            self._insert_thread(conn, thread)
        return thread

    @staticmethod
    def _insert_thread(conn: Any, thread: Thread) -> None:
        exists = conn.execute(
            "SELECT 1 FROM threads WHERE resource_id = ? AND id = ?", (thread.resource_id, thread.id)
        ).fetchone()
        if exists:
            raise Conflict(f"thread {thread.id!r} already exists", field="thread_id")
        conn.execute(
            f"INSERT INTO threads ({_THREAD_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                thread.id,
                thread.resource_id,
                thread.title,
                _dumps(thread.metadata),
                _ts(thread.created_at),
                _ts(thread.updated_at),
                thread.version,
            ),
        )

    def get_thread(self, resource_id: str, thread_id: str) -> Thread | None:
        rows = self.db.query(_GET_THREAD, (resource_id, thread_id))
        return _thread(rows[0]) if rows else None

    def list_threads(
        self,
        resource_id: str,
        *,
        order_by: ThreadOrder = "created_at",
        direction: Direction = "desc",
        limit: int = 100,
        cursor: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> ThreadPage:
        column = {"created_at": "created_at", "updated_at": "updated_at"}[order_by]
        op, order = (">", "ASC") if direction == "asc" else ("<", "DESC")
        where = ["resource_id = ?"]
        params: list[Any] = [resource_id]
        if cursor:
            key, last_id = decode_cursor(cursor, 2)
            where.append(f"({column}, id) {op} (?, ?)")
            params += [key, last_id]
        for key, value in (metadata or {}).items():
            # typed equality: true never equals 1, "1" never equals 1
            where.append(
                "json_type(metadata, ?) IN (SELECT value FROM json_each(?)) AND json_extract(metadata, ?) IS ?"
            )
            params += [_json_path(key), json.dumps(_json_types(value)), _json_path(key), _sql_scalar(value)]
        rows = self.db.query(
            f"SELECT {_THREAD_READ} FROM threads WHERE {' AND '.join(where)} "
            f"ORDER BY {column} {order}, id {order} LIMIT ?",
            (*params, limit + 1),
        )
        threads = [_thread(r) for r in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = encode_cursor([last[4] if column == "created_at" else last[5], last[0]])
        return ThreadPage(threads=tuple(threads), next_cursor=next_cursor)

    def update_thread(
        self,
        resource_id: str,
        thread_id: str,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        updated_at: datetime,
        expected_version: int | None = None,
        expected_title: str | None = None,
        expected_created_at: datetime | None = None,
        expected_messages: Mapping[str, int] | None = None,
    ) -> Thread:
        with self.db.transaction() as conn:
            row = conn.execute(
                f"SELECT {_THREAD_READ} FROM threads WHERE resource_id = ? AND id = ?",
                (resource_id, thread_id),
            ).fetchone()
            if row is None:
                raise NotFound(f"thread {thread_id!r} not found", field="thread_id")
            current = _thread(row)
            check_thread_update(
                current,
                expected_version=expected_version,
                expected_title=expected_title,
                expected_created_at=expected_created_at,
            )
            if expected_messages:
                stored: dict[str, int] = {}
                ids = list(expected_messages)
                for start in range(0, len(ids), 500):
                    chunk = ids[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    stored.update(
                        conn.execute(
                            f"SELECT id, seq FROM messages WHERE resource_id = ? AND thread_id = ? AND id IN ({marks})",
                            (resource_id, thread_id, *chunk),
                        ).fetchall()
                    )
                check_messages_kept(thread_id, expected_messages, stored)
            merged = {**current.metadata, **metadata} if metadata is not None else current.metadata
            new_title = current.title if title is None else title
            conn.execute(
                "UPDATE threads SET title = ?, metadata = ?, updated_at = ?, version = version + 1 "
                "WHERE resource_id = ? AND id = ?",
                (new_title, _dumps(merged), _ts(updated_at), resource_id, thread_id),
            )
        return current.model_copy(
            update={
                "title": new_title,
                "metadata": merged,
                "updated_at": updated_at,
                "version": current.version + 1,
            }
        )

    def delete_thread(self, resource_id: str, thread_id: str) -> bool:
        return self.erase_thread(resource_id, thread_id) is not None

    def erase_thread(self, resource_id: str, thread_id: str) -> ThreadErasure | None:
        """One transaction: the thread's messages (their index marks are a column of theirs), its
        thread-scope observation record, then the thread row (see ``MemoryStore.erase_thread``)."""
        with self.db.transaction() as conn:
            messages = conn.execute(
                "DELETE FROM messages WHERE resource_id = ? AND thread_id = ?", (resource_id, thread_id)
            ).rowcount
            records = conn.execute(
                "DELETE FROM observations WHERE resource_id = ? AND scope = 'thread' AND thread_key = ?",
                (resource_id, thread_id),
            ).rowcount
            cur = conn.execute(
                "DELETE FROM threads WHERE resource_id = ? AND id = ?", (resource_id, thread_id)
            )
            return ThreadErasure(int(messages), int(records)) if cur.rowcount else None

    # messages ------------------------------------------------------------------------------------

    def save_messages(
        self,
        resource_id: str,
        thread_id: str,
        messages: Sequence[Message],
        *,
        create: Thread | None = None,
        expected_last_seq: int | None = None,
    ) -> list[Message]:
        saved: list[Message] = []
        with self.db.transaction() as conn:
            next_seq, latest = self._thread_for_save(conn, resource_id, thread_id, create)
            check_last_seq(thread_id, next_seq - 1, expected_last_seq)
            ids = [m.id for m in messages]
            existing: dict[str, tuple[str, int, str]] = {}
            for chunk_start in range(0, len(ids), 500):
                chunk = ids[chunk_start : chunk_start + 500]
                marks = ",".join("?" * len(chunk))
                for mid, tid, seq, created in conn.execute(
                    f"SELECT id, thread_id, seq, created_at FROM messages WHERE resource_id = ? AND id IN ({marks})",
                    (resource_id, *chunk),
                ):
                    existing[mid] = (tid, seq, created)
            for message in messages:
                old = existing.get(message.id)
                if old is not None and old[0] != thread_id:
                    raise Conflict(f"message {message.id!r} belongs to another thread", field="messages.id")
                if old is not None:
                    seq, created = old[1], old[2]
                    conn.execute(
                        "UPDATE messages SET role = ?, parts = ?, metadata = ?, author = ?, indexed = NULL "
                        "WHERE resource_id = ? AND id = ?",
                        (
                            message.role,
                            _parts_json(message),
                            _dumps(message.metadata),
                            message.author.model_dump_json() if message.author else None,
                            resource_id,
                            message.id,
                        ),
                    )
                    stored = message.model_copy(update={"seq": seq, "created_at": _dt(created)})
                else:
                    seq, created = next_seq, _ts(message.created_at)
                    next_seq += 1
                    conn.execute(
                        f"INSERT INTO messages ({_MSG_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            message.id,
                            thread_id,
                            resource_id,
                            seq,
                            message.role,
                            _parts_json(message),
                            _dumps(message.metadata),
                            message.author.model_dump_json() if message.author else None,
                            created,
                        ),
                    )
                    existing[message.id] = (thread_id, seq, created)
                    stored = message.model_copy(update={"seq": seq})
                saved.append(stored)
            # activity time: when the messages were saved (their created_at may lie in the past or future)
            latest = max(latest, _ts(utcnow()))
            conn.execute(
                "UPDATE threads SET next_seq = ?, updated_at = ? WHERE resource_id = ? AND id = ?",
                (next_seq, latest, resource_id, thread_id),
            )
        return saved

    def _thread_for_save(
        self, conn: Any, resource_id: str, thread_id: str, create: Thread | None
    ) -> tuple[int, str]:
        """The thread's ``next_seq`` and ``updated_at``, inside the save's transaction; the thread is
        inserted first when it is missing and ``create`` is it.

        Raises:
            NotFound: the thread is missing (and not ``create``) or another resource's.
        """
        row = conn.execute(
            "SELECT next_seq, updated_at FROM threads WHERE resource_id = ? AND id = ?",
            (resource_id, thread_id),
        ).fetchone()
        if row is None and create is not None and (create.resource_id, create.id) == (resource_id, thread_id):
            self._insert_thread(conn, create)
            row = (1, _ts(create.updated_at))
        if row is None:
            raise NotFound(f"thread {thread_id!r} not found", field="thread_id")
        return int(row[0]), str(row[1])

    def list_messages(
        self,
        resource_id: str,
        thread_id: str,
        *,
        limit: int,
        after_seq: int | None = None,
        before_seq: int | None = None,
        newest_first: bool = False,
    ) -> list[Message]:
        where = ["resource_id = ?", "thread_id = ?"]
        params: list[Any] = [resource_id, thread_id]
        if after_seq is not None:
            where.append("seq > ?")
            params.append(after_seq)
        if before_seq is not None:
            where.append("seq < ?")
            params.append(before_seq)
        order = "DESC" if newest_first else "ASC"
        rows = self.db.query(
            f"SELECT {_MSG_COLS} FROM messages WHERE {' AND '.join(where)} ORDER BY seq {order} LIMIT ?",
            (*params, limit),
        )
        return [_message(r) for r in rows]

    def get_thread_with_history(
        self, resource_id: str, thread_id: str, *, last: int
    ) -> tuple[Thread | None, list[Message]]:
        with self.db.read() as conn:  # one snapshot: the thread and its history agree
            row = conn.execute(_GET_THREAD, (resource_id, thread_id)).fetchone()
            if row is None or last <= 0:
                return (None if row is None else _thread(row)), []
            rows = conn.execute(_LAST_MESSAGES, (resource_id, thread_id, last)).fetchall()
        return _thread(row), [_message(r) for r in reversed(rows)]

    def get_messages(self, resource_id: str, message_ids: Sequence[str]) -> list[Message]:
        out: list[Message] = []
        ids = list(dict.fromkeys(message_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.query(
                f"SELECT {_MSG_COLS} FROM messages WHERE resource_id = ? AND id IN ({marks})",
                (resource_id, *chunk),
            )
            out += [_message(r) for r in rows]
        return out

    def message_windows(self, resource_id: str, windows: Sequence[MessageWindow]) -> list[Message]:
        if not windows:
            return []
        with self.db.read() as conn:
            # Seqs are gap-free until a message is deleted, so plain seq ranges are tried first (one
            # statement); a window that comes back short may have a gap and is read exactly below.
            # One range per span of overlapping or adjacent windows (each row read and parsed once), each
            # answered by the (resource_id, thread_id, seq) index (an OR of ranges made SQLite scan the whole
            # resource instead).
            one = f"SELECT {_MSG_COLS} FROM messages WHERE resource_id = ? AND thread_id = ? AND seq BETWEEN ? AND ?"
            rows: list[Any] = []
            spans = _merged_spans(windows)
            for start in range(0, len(spans), 400):  # SQLite allows 500 terms in a compound SELECT
                chunk = spans[start : start + 400]
                params: list[Any] = []
                for thread_id, low, high in chunk:
                    params += [resource_id, thread_id, low, high]
                rows += conn.execute(" UNION ALL ".join([one] * len(chunk)), params).fetchall()
            # The spans are disjoint, so every row is a distinct message; sorted by (thread, seq) once, as
            # returned, and counted per window by bisection.
            rows.sort(key=_THREAD_SEQ)
            if len(rows) == sum(high - max(low, 1) + 1 for _, low, high in spans):
                return [_message(r) for r in rows]  # every span whole: no window came back short
            seqs: dict[str, list[int]] = {}
            for r in rows:
                seqs.setdefault(r[1], []).append(r[3])
            short = [w for w in windows if _window_short(w, seqs.get(w.thread_id, []))]
            if not short:
                return [_message(r) for r in rows]
            found = {r[0]: r for r in rows}
            for r in self._exact_windows(resource_id, short):
                found.setdefault(r[0], r)
        return [_message(r) for r in sorted(found.values(), key=_THREAD_SEQ)]

    def get_index_marks(self, resource_id: str, message_ids: Sequence[str]) -> dict[str, str]:
        return {
            mid: state.fingerprint
            for mid, state in self.get_index_state(resource_id, message_ids).items()
            if state.fingerprint is not None
        }

    def list_unindexed(self, *, limit: int) -> list[tuple[str, str, str]]:
        """``UnindexedMessages``: the partial index ``messages_unindexed`` holds only unmarked rows."""
        rows = self.db.query(
            "SELECT resource_id, thread_id, id FROM messages INDEXED BY messages_unindexed "
            "WHERE indexed IS NULL ORDER BY resource_id, thread_id, seq LIMIT ?",
            (max(0, limit),),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def get_index_state(self, resource_id: str, message_ids: Sequence[str]) -> dict[str, IndexState]:
        out: dict[str, IndexState] = {}
        ids = list(dict.fromkeys(message_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.query(
                f"SELECT id, indexed, index_docs FROM messages WHERE resource_id = ? AND id IN ({marks})",
                (resource_id, *chunk),
            )
            out.update({r[0]: IndexState(r[1], tuple(json.loads(r[2])) if r[2] else ()) for r in rows})
        return out

    def set_index_marks(
        self,
        resource_id: str,
        marks: dict[str, str],
        *,
        documents: Mapping[str, Sequence[str]] | None = None,
        expected: Mapping[str, str | None] | None = None,
    ) -> list[str]:
        """One ``UPDATE`` per message in one transaction; with ``expected`` the update also requires the
        stored mark to be the expected one (``IS``: ``NULL`` matches no mark)."""
        missed: list[str] = []
        with self.db.transaction() as conn:
            for mid, fingerprint in marks.items():
                sql = "UPDATE messages SET indexed = ?"
                params: list[Any] = [fingerprint]
                if documents is not None and mid in documents:
                    sql += ", index_docs = ?"
                    params.append(json.dumps(list(documents[mid])))
                sql += " WHERE resource_id = ? AND id = ?"
                params += [resource_id, mid]
                if expected is not None:
                    sql += " AND indexed IS ?"
                    params.append(expected.get(mid))
                if conn.execute(sql, params).rowcount == 0:
                    missed.append(mid)
        return missed

    def get_resource_and_windows(
        self, resource_id: str, windows: Sequence[MessageWindow]
    ) -> tuple[Resource | None, list[Message]]:
        with self.db.read():
            return self.get_resource(resource_id), self.message_windows(resource_id, windows)

    def _exact_windows(self, resource_id: str, windows: Sequence[MessageWindow]) -> list[Any]:
        """Rows of each window, skipping gaps: up to ``before`` rows below the seq, and the seq itself plus
        up to ``after`` rows above it."""
        half = (
            "SELECT * FROM (SELECT {cols} FROM messages WHERE resource_id = ? AND thread_id = ? "
            "AND seq {op} ? ORDER BY seq {order} LIMIT ?)"
        )
        rows: list[Any] = []
        for start in range(0, len(windows), 200):  # SQLite allows 500 terms in a compound SELECT
            chunk = windows[start : start + 200]
            parts: list[str] = []
            params: list[Any] = []
            for w in chunk:
                parts.append(half.format(cols=_MSG_COLS, op="<", order="DESC"))
                params += [resource_id, w.thread_id, w.seq, max(0, w.before)]
                parts.append(half.format(cols=_MSG_COLS, op=">=", order="ASC"))
                params += [resource_id, w.thread_id, w.seq, max(0, w.after) + 1]
            with self.db.read() as conn:
                rows += conn.execute(" UNION ALL ".join(parts), params).fetchall()
        return rows

    def delete_messages(self, resource_id: str, message_ids: Sequence[str]) -> list[Message]:
        found = self.get_messages(resource_id, message_ids)
        if not found:
            return []
        with self.db.transaction() as conn:
            ids = [m.id for m in found]
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                conn.execute(
                    f"DELETE FROM messages WHERE resource_id = ? AND id IN ({marks})", (resource_id, *chunk)
                )
            now = _ts(utcnow())
            for tid in {m.thread_id for m in found}:
                conn.execute(
                    "UPDATE threads SET updated_at = max(updated_at, ?) WHERE resource_id = ? AND id = ?",
                    (now, resource_id, tid),
                )
        return found

    # resources -----------------------------------------------------------------------------------

    def get_resource(self, resource_id: str) -> Resource | None:
        rows = self.db.query(
            "SELECT id, working_memory, metadata, version, created_at, updated_at FROM resources WHERE id = ?",
            (resource_id,),
        )
        if not rows:
            return None
        r = rows[0]
        return Resource(
            id=r[0],
            working_memory=r[1],
            metadata=json.loads(r[2]),
            version=r[3],
            created_at=_dt(r[4]),
            updated_at=_dt(r[5]),
        )

    def put_resource(self, resource: Resource, *, expected_version: int) -> Resource:
        now = utcnow()
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT version, created_at FROM resources WHERE id = ?", (resource.id,)
            ).fetchone()
            created = _expect_version(row, expected_version, f"resource {resource.id!r}") or _ts(now)
            conn.execute(
                "INSERT INTO resources (id, working_memory, metadata, version, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET working_memory = excluded.working_memory,"
                " metadata = excluded.metadata, version = excluded.version, updated_at = excluded.updated_at",
                (
                    resource.id,
                    resource.working_memory,
                    _dumps(resource.metadata),
                    expected_version + 1,
                    created,
                    _ts(now),
                ),
            )
        return resource.model_copy(
            update={"version": expected_version + 1, "created_at": _dt(created), "updated_at": now}
        )

    def delete_resource(self, resource_id: str) -> bool:
        """One DELETE of the ``resources`` row."""
        with self.db.transaction() as conn:
            return bool(conn.execute("DELETE FROM resources WHERE id = ?", (resource_id,)).rowcount)

    # observational memory ----------------------------------------------------------------------

    def delete_observation_record(self, resource_id: str, thread_id: str | None) -> bool:
        """One DELETE by ``(resource_id, scope, thread_key)``; the partial index follows the row."""
        scope = "resource" if thread_id is None else "thread"
        with self.db.transaction() as conn:
            cur = conn.execute(
                "DELETE FROM observations WHERE resource_id = ? AND scope = ? AND thread_key = ?",
                (resource_id, scope, thread_id or ""),
            )
            return bool(cur.rowcount)

    def get_observation_record(self, resource_id: str, thread_id: str | None) -> ObservationRecord | None:
        """One SELECT by ``(resource_id, scope, thread_key)``."""
        scope = "resource" if thread_id is None else "thread"
        rows = self.db.query(
            "SELECT record, version, created_at, updated_at FROM observations "
            "WHERE resource_id = ? AND scope = ? AND thread_key = ?",
            (resource_id, scope, thread_id or ""),
        )
        if not rows:
            return None
        record, version, created, updated = rows[0]
        return ObservationRecord.model_validate_json(record).model_copy(
            update={"version": version, "created_at": _dt(created), "updated_at": _dt(updated)}
        )

    def put_observation_record(
        self, record: ObservationRecord, *, expected_version: int
    ) -> ObservationRecord:
        """Compare-and-set inside one transaction (see ``MemoryStore.put_observation_record``).

        Raises:
            Conflict: the stored version differs from ``expected_version``.
            NotFound: thread scope and the thread is missing or another resource's.
            PayloadTooLarge: the record is over ``MAX_OBSERVATION_RECORD_BYTES``.
        """
        content = record.check_size()
        now = utcnow()
        rid, tid = record.resource_id, record.thread_id
        with self.db.transaction() as conn:
            if (
                tid is not None
                and not conn.execute(
                    "SELECT 1 FROM threads WHERE resource_id = ? AND id = ?", (rid, tid)
                ).fetchone()
            ):
                raise NotFound(f"thread {tid!r} not found", field="thread_id")
            row = conn.execute(
                "SELECT version, created_at FROM observations WHERE resource_id = ? AND scope = ? AND thread_key = ?",
                (rid, record.scope, tid or ""),
            ).fetchone()
            created = _expect_version(row, expected_version, "observation record") or _ts(now)
            conn.execute(
                "INSERT INTO observations (resource_id, scope, thread_key, thread_id, record, version, created_at,"
                " updated_at, pending_since) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT(resource_id, scope, thread_key) DO UPDATE SET record = excluded.record,"
                " version = excluded.version, updated_at = excluded.updated_at,"
                " pending_since = excluded.pending_since",
                (
                    rid,
                    record.scope,
                    tid or "",
                    tid,
                    content,
                    expected_version + 1,
                    created,
                    _ts(now),
                    _pending_ts(record.pending_since),
                ),
            )
        return record.model_copy(
            update={"version": expected_version + 1, "created_at": _dt(created), "updated_at": _dt(_ts(now))}
        )

    def list_observation_work(self, *, due_before: datetime, limit: int) -> list[tuple[str, str | None]]:
        """One SELECT on the partial index ``observations_by_pending``: records whose ``pending_since`` is
        at or before ``due_before``, oldest first (ties by key), at most ``limit``. Crosses resources on
        purpose (see ``MemoryStore.list_observation_work``); returns ids only.

        Raises:
            InvalidInput: ``limit`` is not within 1..``MAX_OBSERVATION_WORK``.
        """
        check_observation_work_limit(limit)
        rows = self.db.query(
            "SELECT resource_id, thread_id FROM observations INDEXED BY observations_by_pending "
            "WHERE pending_since IS NOT NULL AND pending_since <= ? "
            "ORDER BY pending_since, resource_id, scope, thread_key LIMIT ?",
            (_pending_ts(due_before), limit),
        )
        return [(str(r[0]), r[1]) for r in rows]

    def close(self) -> None:
        self.db.close()


def _open_schema(db: SqliteDatabase) -> None:
    """Create the tables, or bring an earlier file's tables to ``SCHEMA_VERSION``.

    A current file costs one pragma read. Otherwise the work runs in one ``BEGIN IMMEDIATE`` transaction
    that reads the version again, so processes opening the same old file at once migrate it exactly once
    (the others wait for the lock, then find it current). Foreign keys are off while tables are rebuilt
    (dropping the old ``threads`` would otherwise cascade into the old ``messages``), and checked before
    the commit. Version 2 gains ``observations`` (``CREATE … IF NOT EXISTS``); version 3 gains
    ``observations.pending_since`` (``ALTER TABLE``, filled from each stored record) and its index.

    Raises:
        Unavailable: the file was made by a newer version, or its messages do not match their threads.
    """
    conn = db.conn
    with db.lock:
        if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return
        conn.execute("PRAGMA foreign_keys = OFF")  # a no-op inside a transaction, so set before it
        try:
            with db.transaction():
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version == SCHEMA_VERSION:
                    return
                if version > SCHEMA_VERSION:
                    raise Unavailable(
                        f"SQLite database {db.path!r} has store layout {version}, newer than this version of "
                        f"memstack understands ({SCHEMA_VERSION}); upgrade memstack"
                    )
                if _primary_key(conn, "threads") == ["id"]:
                    _migrate_global_ids(conn)
                backfill = bool(_columns(conn, "observations")) and "pending_since" not in _columns(
                    conn, "observations"
                )
                if backfill:  # a version-3 file
                    conn.execute("ALTER TABLE observations ADD COLUMN pending_since TEXT")
                had_messages = bool(_columns(conn, "messages"))
                if had_messages and "index_docs" not in _columns(conn, "messages"):
                    conn.execute("ALTER TABLE messages ADD COLUMN index_docs TEXT")  # a version-4 file
                if had_messages and version < 5:
                    # Until now inline indexing left no marks: the rows are taken as indexed (as they were
                    # searchable), so ``list_unindexed`` finds only what a crash leaves from now on
                    # rather than re-embedding the whole file.
                    conn.execute("UPDATE messages SET indexed = 'legacy' WHERE indexed IS NULL")
                for statement in _SCHEMA:
                    conn.execute(statement)
                if backfill:
                    _backfill_pending_since(conn)
                orphans = conn.execute("PRAGMA foreign_key_check(messages)").fetchall()
                if orphans:
                    raise Unavailable(
                        f"SQLite database {db.path!r}: {len(orphans)} message(s) do not belong to a thread of "
                        "their resource; the file was left unchanged"
                    )
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        finally:
            conn.execute("PRAGMA foreign_keys = ON")


def _backfill_pending_since(conn: Any) -> None:
    """Copy each stored record's ``pending_since`` (JSON, as pydantic wrote it) into the column, in the
    store's ``ts`` form, inside the caller's transaction. A value that is not an ISO-8601 time is left out
    of the index (the record itself fails validation when read, as it would have before)."""
    rows = conn.execute(
        "SELECT resource_id, scope, thread_key, json_extract(record, '$.pending_since') FROM observations "
        "WHERE json_valid(record) AND json_type(record, '$.pending_since') = 'text'"
    ).fetchall()
    for resource_id, scope, key, value in rows:
        try:
            stamp = _pending_ts(datetime.fromisoformat(value))
        except ValueError:
            continue
        conn.execute(
            "UPDATE observations SET pending_since = ? WHERE resource_id = ? AND scope = ? AND thread_key = ?",
            (stamp, resource_id, scope, key),
        )


def _pending_ts(value: datetime | None) -> str | None:
    """The ``pending_since`` column's value: ``ts`` text (fixed width, so text order is time order); a
    naive datetime is read as UTC."""
    if value is None:
        return None
    return _ts(value if value.tzinfo is not None else value.replace(tzinfo=UTC))


def _columns(conn: Any, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _primary_key(conn: Any, table: str) -> list[str]:
    """The primary key's columns in key order (``[]`` when the table does not exist)."""
    rows = [row for row in conn.execute(f"PRAGMA table_info({table})") if row[5]]
    return [row[1] for row in sorted(rows, key=lambda row: row[5])]


def _migrate_global_ids(conn: Any) -> None:
    """Rebuild version-0 tables (``id`` primary keys) with ``(resource_id, id)`` keys, inside the caller's
    transaction: create the new tables, copy every row, drop the old tables (their indexes go with them),
    rename the new ones. Columns that version-0 files gained later by ``ALTER`` (``threads.version``,
    ``messages.indexed``) are copied when present and defaulted when not. Indexes are created by the
    caller's ``_SCHEMA`` run."""
    version = "version" if "version" in _columns(conn, "threads") else "0"
    conn.execute(_THREADS.format(name="threads_v2"))
    conn.execute(
        "INSERT INTO threads_v2 (resource_id, id, title, metadata, created_at, updated_at, next_seq, version) "
        f"SELECT resource_id, id, title, metadata, created_at, updated_at, next_seq, {version} FROM threads"
    )
    has_messages = bool(_columns(conn, "messages"))
    if has_messages:
        indexed = "indexed" if "indexed" in _columns(conn, "messages") else "NULL"
        conn.execute(_MESSAGES.format(name="messages_v2"))
        conn.execute(
            f"INSERT INTO messages_v2 ({_MSG_COLS}, indexed) SELECT {_MSG_COLS}, {indexed} FROM messages"
        )
        conn.execute("DROP TABLE messages")
    conn.execute("DROP TABLE threads")
    conn.execute("ALTER TABLE threads_v2 RENAME TO threads")
    if has_messages:
        conn.execute("ALTER TABLE messages_v2 RENAME TO messages")


def _parts_json(message: Message) -> str:
    return _dumps([p.model_dump(mode="json") for p in message.parts])


def _json_path(key: str) -> str:
    return "$." + ".".join('"' + part.replace('"', '\\"') + '"' for part in key.split("."))


def _json_types(value: Any) -> list[str]:
    """The ``json_type`` names a stored value equal to ``value`` may have."""
    if value is None:
        return ["null"]
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, int | float):
        return ["integer", "real"]
    return ["text"]


def _sql_scalar(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dict | list):
        return _dumps(value)
    return value


def _expect_version(row: Sequence[Any] | None, expected: int, what: str) -> str | None:
    """Compare-and-set check of a ``(version, created_at)`` row (``None``: never written, version 0);
    returns the stored ``created_at`` to keep.

    Raises:
        Conflict: the stored version differs from ``expected`` (someone else wrote first).
    """
    current = int(row[0]) if row else 0
    if current != expected:
        raise Conflict(f"{what} changed (version {current}, expected {expected})", field="version")
    return str(row[1]) if row else None
