"""Opening a SQLite file made before ids were scoped to their resource (``id`` primary keys, no
``user_version``) rebuilds the store's tables with ``(resource_id, id)`` keys, keeping every row.

The old DDL is copied here verbatim (as of commit b66e886, and the first layout of 0f2ec06, before
``threads.version`` and ``messages.indexed`` were added by ``ALTER``), so the test keeps meaning the files
users have, whatever the store's schema becomes."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SqliteSearchIndex
from memstack.adapters.sqlite.store import SCHEMA_VERSION, SqliteMemoryStore
from memstack.adapters.testing import HashEmbedder
from memstack.errors import Conflict, Unavailable
from memstack.model import Message, TextPart, Thread
from memstack.ports import IndexEntry, MessageWindow

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

OLD_SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
  id TEXT PRIMARY KEY,
  resource_id TEXT NOT NULL,
  title TEXT NOT NULL DEFAULT '',
  metadata TEXT NOT NULL DEFAULT '{}',
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  next_seq INTEGER NOT NULL DEFAULT 1,
  version INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS threads_by_created ON threads(resource_id, created_at, id);
CREATE INDEX IF NOT EXISTS threads_by_updated ON threads(resource_id, updated_at, id);
CREATE TABLE IF NOT EXISTS messages (
  id TEXT PRIMARY KEY,
  thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
  resource_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  role TEXT NOT NULL,
  parts TEXT NOT NULL,
  metadata TEXT NOT NULL DEFAULT '{}',
  author TEXT,
  created_at TEXT NOT NULL,
  indexed TEXT,
  UNIQUE(thread_id, seq)
);
CREATE INDEX IF NOT EXISTS messages_by_resource ON messages(resource_id, id);
CREATE TABLE IF NOT EXISTS resources (
  id TEXT PRIMARY KEY,
  working_memory TEXT,
  metadata TEXT NOT NULL DEFAULT '{}',
  version INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
"""

# The first layout: no threads.version, no messages.indexed (later versions added them by ALTER).
OLDEST_SCHEMA = OLD_SCHEMA.replace(",\n  version INTEGER NOT NULL DEFAULT 0\n", "\n").replace(
    "  indexed TEXT,\n", ""
)


def ts(minute: int) -> str:
    return f"2024-05-01T12:{minute:02d}:00.000000Z"


def at(minute: int) -> datetime:
    return T0.replace(minute=minute)


def old_file(path: Path, schema: str = OLD_SCHEMA) -> Path:
    """A file as an earlier version wrote it: resource r1 with threads t1 (3 messages, one deleted, one
    indexed) and t2 (1 message), resource r2 with thread t3, and r1's resource record."""
    db = SqliteDatabase(path)
    conn = db.conn
    conn.executescript(schema)
    with_version = "version" in {r[1] for r in conn.execute("PRAGMA table_info(threads)")}
    for tid, rid, title, metadata, minute, next_seq, version in (
        ("t1", "r1", "Trip", '{"topic":"travel"}', 1, 4, 3),
        ("t2", "r1", "", "{}", 2, 2, 0),
        ("t3", "r2", "B's", "{}", 3, 2, 1),
    ):
        cols = "id, resource_id, title, metadata, created_at, updated_at, next_seq"
        values: tuple[object, ...] = (tid, rid, title, metadata, ts(minute), ts(minute + 10), next_seq)
        if with_version:
            cols, values = cols + ", version", (*values, version)
        conn.execute(f"INSERT INTO threads ({cols}) VALUES ({', '.join('?' * len(values))})", values)
    for mid, tid, rid, seq, text in (
        ("m1", "t1", "r1", 1, "first"),
        ("m3", "t1", "r1", 3, "third"),  # seq 2 was deleted: a gap
        ("m4", "t2", "r1", 1, "other thread"),
        ("m5", "t3", "r2", 1, "b's note"),
    ):
        conn.execute(
            "INSERT INTO messages (id, thread_id, resource_id, seq, role, parts, metadata, author, created_at)"
            " VALUES (?, ?, ?, ?, 'user', ?, '{\"k\":1}', NULL, ?)",
            (mid, tid, rid, seq, f'[{{"type":"text","text":"{text}"}}]', ts(seq)),
        )
    if "indexed" in {r[1] for r in conn.execute("PRAGMA table_info(messages)")}:
        conn.execute("UPDATE messages SET indexed = 'fp1' WHERE id = 'm1'")
    conn.execute(
        "INSERT INTO resources (id, working_memory, metadata, version, created_at, updated_at) "
        "VALUES ('r1', '# notes', '{}', 2, ?, ?)",
        (ts(0), ts(5)),
    )
    db.close()
    return path


def layout(path: Path) -> tuple[int, list[str], list[str], list[str]]:
    """user_version, the primary keys of threads and messages, and the index names of messages."""
    db = SqliteDatabase(path)
    try:
        conn = db.conn

        def pk(table: str) -> list[str]:
            rows = sorted(
                (r for r in conn.execute(f"PRAGMA table_info({table})") if r[5]), key=lambda r: r[5]
            )
            return [r[1] for r in rows]

        indexes = sorted(r[1] for r in conn.execute("PRAGMA index_list(messages)"))
        return conn.execute("PRAGMA user_version").fetchone()[0], pk("threads"), pk("messages"), indexes
    finally:
        db.close()


def msg(mid: str, tid: str, rid: str, text: str = "hello") -> Message:
    return Message(
        id=mid, thread_id=tid, resource_id=rid, role="user", parts=(TextPart(text=text),), created_at=T0
    )


@pytest.mark.parametrize("schema", [OLD_SCHEMA, OLDEST_SCHEMA], ids=["with-version-columns", "first-layout"])
def test_given_a_file_with_global_ids_when_opened_then_every_row_reads_back_under_resource_keys(
    tmp_path: Path, schema: str
) -> None:
    path = old_file(tmp_path / "old.db", schema)
    assert layout(path)[:3] == (0, ["id"], ["id"])
    store = SqliteMemoryStore(SqliteDatabase(path))
    try:
        t1 = store.get_thread("r1", "t1")
        assert t1 is not None
        assert (t1.title, t1.metadata, t1.created_at, t1.updated_at) == (
            "Trip",
            {"topic": "travel"},
            at(1),
            at(11),
        )
        assert t1.version == (3 if schema is OLD_SCHEMA else 0)
        assert store.get_thread("r2", "t1") is None
        assert [t.id for t in store.list_threads("r1").threads] == ["t2", "t1"]
        assert [t.id for t in store.list_threads("r1", order_by="updated_at", direction="asc").threads] == [
            "t1",
            "t2",
        ]
        messages = store.list_messages("r1", "t1", limit=10)
        assert [(m.id, m.seq, m.text, m.metadata, m.created_at) for m in messages] == [
            ("m1", 1, "first", {"k": 1}, at(1)),
            ("m3", 3, "third", {"k": 1}, at(3)),
        ]
        assert [m.id for m in store.get_messages("r1", ["m1", "m4", "m5"])] in (["m1", "m4"], ["m4", "m1"])
        windows = store.message_windows("r1", [MessageWindow("t1", 3, before=1)])
        assert [m.id for m in windows] == ["m1", "m3"]  # the gap at seq 2 is skipped
        marks = store.get_index_marks("r1", ["m1", "m3"])
        # rows without a mark were searchable before marks were kept: taken as indexed, not re-embedded
        assert marks == (
            {"m1": "fp1", "m3": "legacy"} if schema is OLD_SCHEMA else {"m1": "legacy", "m3": "legacy"}
        )
        assert store.list_unindexed(limit=10) == []
        resource = store.get_resource("r1")
        assert resource is not None and (resource.working_memory, resource.version) == ("# notes", 2)
        # sequence numbers continue where the old file left them
        saved = store.save_messages("r1", "t1", [msg("m6", "t1", "r1")])
        assert saved[0].seq == 4
    finally:
        store.close()
    version, thread_key, message_key, indexes = layout(path)
    assert (version, thread_key, message_key) == (
        SCHEMA_VERSION,
        ["resource_id", "id"],
        ["resource_id", "id"],
    )
    assert "messages_by_resource" not in indexes  # the old index went with the old table
    db = SqliteDatabase(path)
    try:
        keys = [(r[2], r[3], r[4], r[6]) for r in db.conn.execute("PRAGMA foreign_key_list(messages)")]
        assert sorted(keys) == [
            ("threads", "resource_id", "resource_id", "CASCADE"),
            ("threads", "thread_id", "id", "CASCADE"),
        ]
        db.conn.execute("DELETE FROM threads WHERE resource_id = 'r1' AND id = 't2'")  # cascades
        assert db.conn.execute("SELECT count(*) FROM messages WHERE thread_id = 't2'").fetchone() == (0,)
        assert db.conn.execute("SELECT count(*) FROM messages").fetchone() == (4,)
    finally:
        db.close()


def test_given_a_migrated_file_when_another_resource_reuses_its_ids_then_each_has_its_own(
    tmp_path: Path,
) -> None:
    path = old_file(tmp_path / "old.db")
    store = SqliteMemoryStore(SqliteDatabase(path))
    try:
        # r2 takes r1's thread and message ids; r1's rows are untouched
        store.create_thread(Thread(id="t1", resource_id="r2", title="mine", created_at=T0, updated_at=T0))
        store.save_messages("r2", "t1", [msg("m1", "t1", "r2", "b's first")])
        assert [m.text for m in store.list_messages("r2", "t1", limit=10)] == ["b's first"]
        assert [m.text for m in store.list_messages("r1", "t1", limit=10)] == ["first", "third"]
        with pytest.raises(Conflict):  # within a resource, ids stay unique
            store.create_thread(Thread(id="t1", resource_id="r1", created_at=T0, updated_at=T0))
        with pytest.raises(Conflict):
            store.save_messages("r1", "t2", [msg("m1", "t2", "r1")])
        # deleting r2's thread cascades to r2's messages only
        assert store.delete_thread("r2", "t1") is True
        assert store.get_messages("r2", ["m1"]) == []
        assert [m.text for m in store.get_messages("r1", ["m1"])] == ["first"]
        assert store.delete_thread("r1", "t1") is True
        assert store.get_messages("r1", ["m1", "m3"]) == []
        assert [m.id for m in store.get_messages("r1", ["m4"])] == ["m4"]
    finally:
        store.close()


def test_given_a_migrated_file_when_opened_again_then_nothing_changes(tmp_path: Path) -> None:
    path = old_file(tmp_path / "old.db")
    SqliteMemoryStore(SqliteDatabase(path)).close()
    first = layout(path)
    store = SqliteMemoryStore(SqliteDatabase(path))
    try:
        assert [m.id for m in store.list_messages("r1", "t1", limit=10)] == ["m1", "m3"]
    finally:
        store.close()
    assert layout(path) == first


def test_given_an_old_file_with_a_search_index_when_opened_then_the_index_still_answers(
    tmp_path: Path,
) -> None:
    path = old_file(tmp_path / "old.db")
    embedder = HashEmbedder()
    db = SqliteDatabase(path)
    SqliteSearchIndex(db, embedder.dimension).upsert(
        [
            IndexEntry(
                message_id="m1",
                chunk=0,
                thread_id="t1",
                resource_id="r1",
                role="user",
                seq=1,
                created_at=T0,
                text="first",
                vector=embedder.embed_documents(["first"])[0],
            )
        ]
    )
    db.close()
    db = SqliteDatabase(path)
    try:
        store = SqliteMemoryStore(db)
        index = SqliteSearchIndex(db, embedder.dimension)
        hits = index.search("r1", top_k=5, text="first").keyword
        assert hits is not None and [h.message_id for h in hits] == ["m1"]
        assert [m.text for m in store.get_messages("r1", [h.message_id for h in hits])] == ["first"]
    finally:
        db.close()


def test_given_processes_opening_an_old_file_at_once_when_they_migrate_then_it_is_rebuilt_once(
    tmp_path: Path,
) -> None:
    path = old_file(tmp_path / "old.db")
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def open_store() -> None:
        try:
            db = SqliteDatabase(path)  # a connection each, as separate processes have
            start.wait()
            store = SqliteMemoryStore(db)
            assert [m.id for m in store.list_messages("r1", "t1", limit=10)] == ["m1", "m3"]
            store.close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=open_store) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    assert layout(path)[:3] == (SCHEMA_VERSION, ["resource_id", "id"], ["resource_id", "id"])


def test_given_an_old_file_whose_message_is_not_its_threads_resources_when_opened_then_unavailable_and_unchanged(
    tmp_path: Path,
) -> None:
    path = old_file(tmp_path / "old.db")
    db = SqliteDatabase(path)
    db.conn.execute("UPDATE messages SET resource_id = 'r2' WHERE id = 'm4'")  # t2 is r1's
    db.close()
    db = SqliteDatabase(path)
    with pytest.raises(Unavailable, match="1 message"):
        SqliteMemoryStore(db)
    db.close()
    assert layout(path)[:3] == (0, ["id"], ["id"])


def test_given_a_file_of_a_newer_layout_when_opened_then_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SqliteMemoryStore(SqliteDatabase(path)).close()
    db = SqliteDatabase(path)
    db.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    db = SqliteDatabase(path)
    with pytest.raises(Unavailable, match="newer"):
        SqliteMemoryStore(db)
    db.close()


def test_given_a_new_file_when_opened_then_it_has_the_current_layout(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    SqliteMemoryStore(SqliteDatabase(path)).close()
    assert layout(path)[:3] == (SCHEMA_VERSION, ["resource_id", "id"], ["resource_id", "id"])


def test_given_a_version_2_file_when_opened_then_observations_are_added_and_rows_kept(tmp_path: Path) -> None:
    from memstack.model import ObservationRecord

    path = tmp_path / "v2.db"
    store = SqliteMemoryStore(SqliteDatabase(path))
    store.create_thread(Thread(id="t1", resource_id="r1", created_at=T0, updated_at=T0))
    store.save_messages("r1", "t1", [msg("m1", "t1", "r1")])
    store.close()
    db = SqliteDatabase(path)  # make it a version-2 file: no observations table
    db.conn.execute("DROP TABLE observations")
    db.conn.execute("PRAGMA user_version = 2")
    db.close()
    store = SqliteMemoryStore(SqliteDatabase(path))
    assert layout(path)[0] == SCHEMA_VERSION
    assert [m.id for m in store.list_messages("r1", "t1", limit=10)] == ["m1"]
    record = ObservationRecord(
        scope="thread", resource_id="r1", thread_id="t1", active_observations="x", pending_since=T0
    )
    assert store.put_observation_record(record, expected_version=0).version == 1
    assert store.list_observation_work(due_before=T0, limit=10) == [("r1", "t1")]
    store.close()


# The version-3 observations table, verbatim (before pending_since and its index).
V3_OBSERVATIONS = """CREATE TABLE observations (
  resource_id TEXT NOT NULL,
  scope TEXT NOT NULL,
  thread_key TEXT NOT NULL,
  thread_id TEXT,
  record TEXT NOT NULL,
  version INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (resource_id, scope, thread_key),
  FOREIGN KEY (resource_id, thread_id) REFERENCES threads (resource_id, id) ON DELETE CASCADE
)"""


def v3_file(path: Path, records: list[tuple[str, str, str | None, str]]) -> Path:
    """A version-3 file: r1 with threads t1, t2, and observation rows ``(resource_id, scope, thread_id,
    record JSON)`` written as version 3 wrote them (no ``pending_since`` column)."""
    store = SqliteMemoryStore(SqliteDatabase(path))
    store.create_thread(Thread(id="t1", resource_id="r1", created_at=T0, updated_at=T0))
    store.create_thread(Thread(id="t2", resource_id="r1", created_at=T0, updated_at=T0))
    store.close()
    db = SqliteDatabase(path)
    db.conn.execute("DROP TABLE observations")  # its index goes with it
    db.conn.execute(V3_OBSERVATIONS)
    for rid, scope, tid, record in records:
        db.conn.execute(
            "INSERT INTO observations (resource_id, scope, thread_key, thread_id, record, version, created_at,"
            " updated_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
            (rid, scope, tid or "", tid, record, ts(0), ts(1)),
        )
    db.conn.execute("PRAGMA user_version = 3")
    db.close()
    return path


def test_given_a_version_3_file_when_opened_then_pending_since_is_filled_from_each_record(
    tmp_path: Path,
) -> None:
    from memstack.model import ObservationRecord

    def record(tid: str | None, **kw: object) -> str:
        scope = "resource" if tid is None else "thread"
        return ObservationRecord(scope=scope, resource_id="r1", thread_id=tid, **kw).content_json()  # type: ignore[arg-type]

    path = v3_file(
        tmp_path / "v3.db",
        [
            ("r1", "thread", "t1", record("t1", pending_since=at(7))),
            ("r1", "thread", "t2", record("t2")),  # nothing pending
            ("r1", "resource", None, record(None, pending_since=at(3))),
            ("r2", "resource", None, record(None).replace("}", ',"pending_since":"not a time"}', 1)),
            # what version 3 wrote: no pending_since key at all
            ("r3", "resource", None, '{"scope":"resource","resource_id":"r3","thread_id":null}'),
        ],
    )
    store = SqliteMemoryStore(SqliteDatabase(path))
    try:
        assert layout(path)[0] == SCHEMA_VERSION == 5
        assert store.list_observation_work(due_before=at(59), limit=10) == [("r1", None), ("r1", "t1")]
        got = store.get_observation_record("r1", "t1")
        assert got is not None and (got.pending_since, got.version) == (at(7), 1)
        r3 = store.get_observation_record("r3", None)
        assert r3 is not None and (r3.pending_since, r3.failure_count, r3.last_error) == (None, 0, None)
        # written again, the column follows the record
        store.put_observation_record(got.model_copy(update={"pending_since": None}), expected_version=1)
        assert store.list_observation_work(due_before=at(59), limit=10) == [("r1", None)]
    finally:
        store.close()
    db = SqliteDatabase(path)
    try:
        indexes = {r[1]: r[4] for r in db.conn.execute("PRAGMA index_list(observations)")}
        assert indexes.get("observations_by_pending") == 1  # partial
        plan = " ".join(
            str(r[3])
            for r in db.conn.execute(
                "EXPLAIN QUERY PLAN SELECT resource_id, thread_id FROM observations "
                "WHERE pending_since IS NOT NULL AND pending_since <= ? "
                "ORDER BY pending_since, resource_id, scope, thread_key LIMIT 5",
                (ts(59),),
            )
        )
        assert "observations_by_pending" in plan and "TEMP B-TREE" not in plan
    finally:
        db.close()


def test_given_a_version_0_file_when_opened_then_the_work_index_exists(tmp_path: Path) -> None:
    path = old_file(tmp_path / "old.db")
    store = SqliteMemoryStore(SqliteDatabase(path))
    try:
        assert store.list_observation_work(due_before=T0, limit=10) == []
    finally:
        store.close()
    db = SqliteDatabase(path)
    try:
        assert "observations_by_pending" in {r[1] for r in db.conn.execute("PRAGMA index_list(observations)")}
    finally:
        db.close()
