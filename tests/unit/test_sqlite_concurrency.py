"""The SQLite file's connections (WAL): reads run beside a write in progress and beside each other, a read
block sees one snapshot, and a writer reads its own uncommitted rows."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memstack.adapters.sqlite.db import IDLE_READERS, SqliteDatabase
from memstack.errors import Unavailable


@pytest.fixture
def db(tmp_path: Path) -> SqliteDatabase:
    database = SqliteDatabase(tmp_path / "c.db")
    with database.transaction() as conn:
        conn.execute("CREATE TABLE t (n INTEGER)")
        conn.execute("INSERT INTO t VALUES (1)")
    return database


def test_given_a_write_in_progress_when_another_thread_reads_then_it_answers_from_the_last_commit(
    db: SqliteDatabase,
) -> None:
    writing, done = threading.Event(), threading.Event()
    result: list[int] = []

    def writer() -> None:
        with db.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (2)")
            writing.set()
            done.wait(10)

    w = threading.Thread(target=writer)
    w.start()
    assert writing.wait(5)
    r = threading.Thread(target=lambda: result.append(db.query("SELECT count(*) FROM t")[0][0]))
    r.start()
    r.join(5)
    blocked = r.is_alive()
    done.set()
    w.join(5)
    r.join(5)
    assert not blocked, "the read waited for the writer's lock"
    assert result == [1]
    assert db.query("SELECT count(*) FROM t")[0][0] == 2


def test_given_a_read_block_when_another_thread_commits_then_the_block_keeps_its_snapshot(
    db: SqliteDatabase,
) -> None:
    with db.read() as conn:
        before = conn.execute("SELECT count(*) FROM t").fetchone()[0]
        committed = threading.Thread(target=lambda: _insert(db, 3))
        committed.start()
        committed.join(5)
        assert db.query("SELECT count(*) FROM t")[0][0] == before  # nested read: the same snapshot
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == before
    assert db.query("SELECT count(*) FROM t")[0][0] == before + 1


def _insert(db: SqliteDatabase, n: int) -> None:
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (?)", (n,))


def test_given_a_transaction_when_it_reads_then_it_sees_its_own_rows(db: SqliteDatabase) -> None:
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (4)")
        assert db.query("SELECT count(*) FROM t WHERE n = 4")[0][0] == 1
        with db.read() as reader:
            assert reader is conn


def test_given_a_read_connection_when_it_is_written_then_the_write_fails(db: SqliteDatabase) -> None:
    with pytest.raises(Unavailable), db.read() as conn:
        conn.execute("INSERT INTO t VALUES (5)")
    assert db.query("SELECT count(*) FROM t WHERE n = 5")[0][0] == 0


def test_given_many_threads_reading_then_idle_connections_stay_bounded(db: SqliteDatabase) -> None:
    gate = threading.Barrier(IDLE_READERS + 4)

    def read() -> None:
        with db.read() as conn:
            conn.execute("SELECT count(*) FROM t").fetchone()
            gate.wait(10)

    threads = [threading.Thread(target=read) for _ in range(IDLE_READERS + 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert db._idle_count == IDLE_READERS
    db.close()
    assert db._idle_count == 0
    with pytest.raises(Unavailable):
        db.query("SELECT 1")


def test_given_a_failing_read_when_it_ends_then_unavailable_and_its_connection_serves_the_next_read(
    db: SqliteDatabase,
) -> None:
    with pytest.raises(Unavailable, match="no such table"), db.read() as conn:
        conn.execute("SELECT * FROM missing")
    with pytest.raises(Unavailable, match="no such table"):
        db.query("SELECT * FROM missing")
    assert db._idle_count == 1, "the failed reads gave their connection back"
    with db.read() as conn:  # not left marked as this thread's open read
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 1
        assert db.query("SELECT count(*) FROM t")[0][0] == 1


def test_given_a_lone_query_when_it_runs_then_it_is_one_statement_without_begin_or_commit(
    db: SqliteDatabase,
) -> None:
    db.query("SELECT 1")  # a pooled read connection now exists
    conn = db._borrow()
    sent: list[str] = []
    conn.set_trace_callback(sent.append)
    db._give_back(conn)
    assert db.query("SELECT count(*) FROM t") == [(1,)]
    assert sent == ["SELECT count(*) FROM t"]
    with db.read() as reader:
        assert reader is conn
        assert db.query("SELECT count(*) FROM t") == [(1,)]  # inside a read: its snapshot
    assert sent[1:] == ["BEGIN", "SELECT count(*) FROM t", "COMMIT"]
    conn.set_trace_callback(None)
