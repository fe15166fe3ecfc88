"""One SQLite file shared by the store and the index: connection, extensions, pragmas, a lock.

The standard library's ``sqlite3`` often cannot load extensions, so the connection comes from
``sqlean.py`` (a drop-in ``sqlite3`` with extension loading on every platform), and sqlite-vec is loaded
into it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlean
import sqlite_vec

from memstack.errors import Unavailable

DEFAULT_PATH = Path(".memstack") / "memory.db"
"""Where the embedded default keeps its file, relative to the working directory."""


class SqliteDatabase:
    """A connection to one SQLite file, usable from several threads (serialised by a lock).

    Args:
        path: the database file (its folder is created), or ``":memory:"``.
        busy_timeout_ms: how long a writer waits for another process's lock before failing.

    Raises:
        Unavailable: the file cannot be opened or sqlite-vec cannot be loaded.
    """

    def __init__(self, path: str | Path = DEFAULT_PATH, *, busy_timeout_ms: int = 10_000) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlean.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
            conn.enable_load_extension(False)
        except Exception as exc:  # sqlean raises its own sqlite3 error types
            raise Unavailable(f"cannot open SQLite database: {exc}") from exc
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        self.conn: Any = conn
        self.lock = threading.RLock()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A write transaction (``BEGIN IMMEDIATE``): commits on success, rolls back on any error."""
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def query(self, sql: str, params: Any = ()) -> list[Any]:
        """Run a read query and return all rows."""
        with self.lock:
            return list(self.conn.execute(sql, params).fetchall())

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self.lock:
            self.conn.close()
