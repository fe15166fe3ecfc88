"""Adapter registries of the conformance suites: each suite runs once per registered adapter.

Later issues register more adapters here (DynamoDB under moto, OpenSearch against its test double).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from memstack.ports import MemoryStore, SearchIndex


def _sqlite_store(tmp: Any) -> MemoryStore:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.store import SqliteMemoryStore

    return SqliteMemoryStore(SqliteDatabase(Path(tmp) / "store.db"))


def _sqlite_index(dimension: int) -> SearchIndex:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    return SqliteSearchIndex(SqliteDatabase(":memory:"), dimension)


def _sqlite_index_sql_only(dimension: int) -> SearchIndex:
    """The SQLite index with its in-memory vector cache off: every vector search runs in SQL."""
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    return SqliteSearchIndex(SqliteDatabase(":memory:"), dimension, vector_cache_bytes=0)


STORE_FACTORIES: dict[str, Callable[[Any], MemoryStore]] = {"sqlite": _sqlite_store}
"""name → factory(tmp_path) of a fresh, empty store."""

INDEX_FACTORIES: dict[str, Callable[[int], SearchIndex]] = {
    "sqlite": _sqlite_index,
    "sqlite-sql-only": _sqlite_index_sql_only,
}
"""name → factory(dimension) of a fresh, empty index."""
