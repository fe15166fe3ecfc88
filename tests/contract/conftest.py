"""Adapter registries of the conformance suites: each suite runs once per registered adapter.

A factory is a context manager that yields a fresh, empty adapter and tears down whatever it started
(a moto mock, a server, a test double) on exit. Register more adapters here: one name, one factory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from memstack.ports import MemoryStore, SearchIndex


@contextmanager
def _sqlite_store(tmp: Any) -> Iterator[MemoryStore]:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.store import SqliteMemoryStore

    yield SqliteMemoryStore(SqliteDatabase(Path(tmp) / "store.db"))


@contextmanager
def _sqlite_index(dimension: int) -> Iterator[SearchIndex]:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    yield SqliteSearchIndex(SqliteDatabase(":memory:"), dimension)


@contextmanager
def _sqlite_index_sql_only(dimension: int) -> Iterator[SearchIndex]:
    """The SQLite index with its in-memory vector cache off: every vector search runs in SQL."""
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    yield SqliteSearchIndex(SqliteDatabase(":memory:"), dimension, vector_cache_bytes=0)


STORE_FACTORIES: dict[str, Callable[[Any], AbstractContextManager[MemoryStore]]] = {"sqlite": _sqlite_store}
"""name → factory(tmp_path): a context manager yielding a fresh, empty store."""

INDEX_FACTORIES: dict[str, Callable[[int], AbstractContextManager[SearchIndex]]] = {
    "sqlite": _sqlite_index,
    "sqlite-sql-only": _sqlite_index_sql_only,
}
"""name → factory(dimension): a context manager yielding a fresh, empty index."""
