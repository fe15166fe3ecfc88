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
        conn: Any = None
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlean.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
            conn.enable_load_extension(False)
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
        except Exception as exc:  # OSError for the folder; sqlean's own error types for the file
            if conn is not None:
                conn.close()
            raise Unavailable(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        self.conn: Any = conn
        self.lock = _Guard()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A write transaction (``BEGIN IMMEDIATE``): commits on success, rolls back on any error."""
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                if self.conn.in_transaction:
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


class _Guard:
    """The connection's re-entrant lock, which also turns SQLite's operational failures (a file locked by
    another process past ``busy_timeout``, a closed connection, a corrupt file, a full disk) into
    ``Unavailable``. Constraint violations (``IntegrityError``) are bugs, not outages, and pass through."""

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def __enter__(self) -> _Guard:
        self._lock.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self._lock.release()
        if isinstance(exc, sqlean.Error) and not isinstance(exc, sqlean.IntegrityError):
            raise Unavailable(f"SQLite database unavailable: {exc}") from exc
