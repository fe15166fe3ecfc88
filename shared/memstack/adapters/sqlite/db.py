"""One SQLite file shared by the store and the index: connections, extensions, pragmas, the write lock.

The standard library's ``sqlite3`` often cannot load extensions, so connections come from ``sqlean.py``
(a drop-in ``sqlite3`` with extension loading on every platform), and sqlite-vec is loaded into each.

Concurrency (SQLite's WAL mode, https://www.sqlite.org/wal.html: "readers do not block writers and a writer
does not block readers"; one writer at a time):

* **Writes** go through one connection (``conn``), serialised by ``lock``: ``transaction()`` is
  ``BEGIN IMMEDIATE`` on it. Code that holds ``lock`` (inside a transaction or not) reads through the same
  connection, so it sees its own uncommitted writes.
* **Reads** (``read()``, ``query()``) borrow a connection of their own from a small pool and run in a read
  transaction, so several threads read at once and the statements of one ``read()`` block see one snapshot
  of the file. ``read()`` is re-entrant per thread.
* An in-memory database (``":memory:"``) is private to its connection, so there every read goes through
  ``conn`` under ``lock`` as well.
"""

from __future__ import annotations

import queue
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

IDLE_READERS = 8
"""Read connections kept open between reads; more are opened when more threads read at once, and closed
when they come back to a full pool."""


class SqliteDatabase:
    """One SQLite file: a write connection behind a lock and a pool of read connections (WAL mode).

    Args:
        path: the database file (its folder is created), or ``":memory:"``.
        busy_timeout_ms: how long a writer waits for another process's lock before failing.

    Attributes:
        path: the file, as given.
        conn: the write connection; use it only while holding ``lock`` (or inside ``transaction()``).
        lock: the re-entrant write lock; it also turns SQLite's operational failures into ``Unavailable``.

    Raises:
        Unavailable: the file cannot be opened or sqlite-vec cannot be loaded.
    """

    def __init__(self, path: str | Path = DEFAULT_PATH, *, busy_timeout_ms: int = 10_000) -> None:
        self.path = str(path)
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._in_memory = self.path == ":memory:"
        if not self._in_memory:
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise Unavailable(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        self.conn: Any = self._open(writer=True)
        self.lock = _Guard()
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._idle_count = 0
        self._pool_lock = threading.Lock()
        self._local = threading.local()
        self._closed = False

    def _open(self, *, writer: bool) -> Any:
        conn: Any = None
        try:
            conn = sqlean.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
            conn.enable_load_extension(False)
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            if writer:
                conn.execute("PRAGMA journal_mode = WAL")  # persistent: stored in the file
                conn.execute("PRAGMA synchronous = NORMAL")
            else:
                conn.execute("PRAGMA query_only = ON")  # a write on a read connection is a bug: fail loudly
            conn.execute("PRAGMA foreign_keys = ON")
        except Exception as exc:  # sqlean's own error types for the file or the extension
            if conn is not None:
                conn.close()
            raise Unavailable(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        return conn

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A write transaction (``BEGIN IMMEDIATE``): commits on success, rolls back on any error.

        Yields:
            The write connection (``conn``).

        Raises:
            Unavailable: the file is locked by another process past ``busy_timeout_ms``, full, or closed.
        """
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def read(self) -> _Read:
        """A read: a connection whose statements all see one snapshot of the file, concurrently with other
        threads' reads and with the writer. Use it as ``with db.read() as conn:``.

        Re-entrant: a ``read()`` inside another on the same thread shares its connection and snapshot. A
        thread that holds ``lock`` (for instance inside ``transaction()``) reads through ``conn`` instead,
        so it sees its own writes; so does every read of an in-memory database.

        Yields:
            A connection to run ``SELECT`` statements on (writes on it fail: ``PRAGMA query_only``).

        Raises:
            Unavailable: SQLite failed (locked past the busy timeout, closed, corrupt).
        """
        return _Read(self)

    def query(self, sql: str, params: Any = ()) -> list[Any]:
        """Run one read statement and return all rows (``read()`` semantics: one snapshot).

        Inside a ``read()`` it runs on that read's connection and snapshot. Alone, it runs on a pooled
        read connection without ``BEGIN``/``COMMIT``: in autocommit mode one statement is its own read
        transaction, so it sees one snapshot all the same, for two statements fewer.

        Raises:
            Unavailable: SQLite failed (locked past the busy timeout, closed, corrupt).
        """
        if self._in_memory or self.lock.held() or getattr(self._local, "reader", None) is not None:
            with self.read() as conn, _translated():
                return list(conn.execute(sql, params).fetchall())
        conn = self._borrow()
        try:
            return list(conn.execute(sql, params).fetchall())
        except BaseException as exc:
            _raise_translated(exc)
            raise
        finally:
            self._give_back(conn)

    def _borrow(self) -> Any:
        with self._pool_lock:
            if self._closed:
                raise Unavailable(f"SQLite database {self.path!r} is closed")
            if self._idle_count:
                self._idle_count -= 1
                return self._idle.get_nowait()
        return self._open(writer=False)

    def _give_back(self, conn: Any) -> None:
        with self._pool_lock:
            if not self._closed and self._idle_count < IDLE_READERS:
                self._idle.put(conn)
                self._idle_count += 1
                return
        conn.close()

    def close(self) -> None:
        """Close the write connection and the idle read connections (idempotent); a read in progress
        closes its connection when it ends."""
        with self._pool_lock:
            self._closed = True
            while self._idle_count:
                self._idle_count -= 1
                self._idle.get_nowait().close()
        with self.lock:
            self.conn.close()


class _Read:
    """``SqliteDatabase.read()``: a class rather than a generator, since every store and index call enters
    one (a generator-based context manager costs several times more to enter and leave)."""

    __slots__ = ("_conn", "_db", "_mode")

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        self._conn: Any = None
        self._mode = ""

    def __enter__(self) -> Any:
        db = self._db
        if db._in_memory or db.lock.held():
            db.lock.__enter__()
            self._mode = "locked"
            return db.conn
        current = getattr(db._local, "reader", None)
        if current is not None:
            self._mode = "nested"
            return current
        conn = db._borrow()
        db._local.reader = conn
        try:
            conn.execute("BEGIN")  # deferred: the snapshot starts at the first SELECT
        except BaseException as exc:
            db._local.reader = None
            db._give_back(conn)
            _raise_translated(exc)
            raise
        self._conn, self._mode = conn, "own"
        return conn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        db, mode = self._db, self._mode
        if mode == "locked":
            db.lock.__exit__(kind, exc, tb)  # releases the lock; translates a SQLite failure
            return
        if mode == "nested":
            return
        conn = self._conn
        try:
            if conn.in_transaction:
                conn.execute("COMMIT")
        except BaseException as failure:
            _raise_translated(failure)
            raise
        finally:
            db._local.reader = None
            db._give_back(conn)
        if exc is not None:
            _raise_translated(exc)


def _raise_translated(exc: BaseException) -> None:
    """Raise ``Unavailable`` from ``exc`` when it is one of SQLite's operational failures (``_translated``);
    otherwise return, and the caller lets ``exc`` go on."""
    if isinstance(exc, sqlean.Error) and not isinstance(exc, sqlean.IntegrityError):
        raise Unavailable(f"SQLite database unavailable: {exc}") from exc


@contextmanager
def _translated() -> Iterator[None]:
    """SQLite's operational failures (a file locked by another process past ``busy_timeout``, a closed
    connection, a corrupt file, a full disk) become ``Unavailable``. Constraint violations
    (``IntegrityError``) are bugs, not outages, and pass through."""
    try:
        yield
    except sqlean.Error as exc:
        if isinstance(exc, sqlean.IntegrityError):
            raise
        raise Unavailable(f"SQLite database unavailable: {exc}") from exc


class _Guard:
    """The write connection's re-entrant lock, which also translates SQLite's failures (``_translated``)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._owner: int | None = None
        self._depth = 0

    def held(self) -> bool:
        """Whether the calling thread holds the lock."""
        return self._owner == threading.get_ident()

    def __enter__(self) -> _Guard:
        self._lock.acquire()
        self._owner = threading.get_ident()
        self._depth += 1
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
        self._lock.release()
        if isinstance(exc, sqlean.Error) and not isinstance(exc, sqlean.IntegrityError):
            raise Unavailable(f"SQLite database unavailable: {exc}") from exc
