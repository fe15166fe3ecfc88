"""Every connection to the SQLite file reads it through a memory map (ADR 0012): the writer, a pooled reader
and a reader opened while the pool is empty, so no connection re-reads pages one ``pread`` at a time into
its own small page cache after another connection's commit."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from memstack.adapters.sqlite.db import MMAP_BYTES, SqliteDatabase
from memstack.errors import InvalidInput


def mmap_size(conn: Any) -> int:
    return int(conn.execute("PRAGMA mmap_size").fetchone()[0])


def test_given_a_file_when_opened_then_every_connection_kind_maps_it(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "m.db")
    with db.transaction() as conn:
        conn.execute("CREATE TABLE t (n INTEGER)")
    seen: dict[str, int] = {"writer": mmap_size(db.conn)}
    held = threading.Event()
    release = threading.Event()

    def hold_a_reader() -> None:
        with db.read() as conn:
            seen["reader held by another thread"] = mmap_size(conn)
            held.set()
            release.wait(10)

    other = threading.Thread(target=hold_a_reader)
    other.start()
    assert held.wait(10)
    with db.read() as conn:  # the pool's only connection is out: this one is opened for this read
        seen["reader opened beside it"] = mmap_size(conn)
    release.set()
    other.join(10)
    with db.read() as conn:  # a pooled connection, borrowed again
        seen["pooled reader"] = mmap_size(conn)
    db.close()

    assert seen == dict.fromkeys(seen, MMAP_BYTES), f"connections without the map: {seen}"


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="the process's mappings are listed by Linux")
def test_given_a_read_when_it_runs_then_the_file_is_mapped_into_the_process(tmp_path: Path) -> None:
    path = tmp_path / "mapped.db"
    db = SqliteDatabase(path)
    with db.transaction() as conn:
        conn.execute("CREATE TABLE t (n INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?)", ((n,) for n in range(1000)))
    with db.lock:  # the pages move from the write-ahead log into the file, where the map reads them
        db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with db.read() as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 1000
        mapped = {line.split(maxsplit=5)[-1] for line in Path("/proc/self/maps").read_text().splitlines()}
    db.close()

    # The write-ahead log's index (``-shm``) is mapped either way; the file itself only with mmap_size.
    assert str(path.resolve()) in mapped, "the database file is not memory-mapped while it is read"


def test_given_mmap_off_when_opened_then_no_connection_maps_the_file(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "off.db", mmap_bytes=0)
    with db.read() as conn:
        reader = mmap_size(conn)
    writer = mmap_size(db.conn)
    db.close()

    assert (writer, reader) == (0, 0)


@pytest.mark.parametrize("value", [-1, 1.5, "64", True])
def test_given_a_bad_mmap_size_when_opened_then_it_is_refused_by_name(tmp_path: Path, value: Any) -> None:
    with pytest.raises(InvalidInput) as raised:
        SqliteDatabase(tmp_path / "bad.db", mmap_bytes=value)

    assert raised.value.field == "mmap_bytes"
