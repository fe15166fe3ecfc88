"""Adapter registries of the conformance suites: each suite runs once per registered adapter.

A factory is a context manager that yields a fresh, empty adapter and tears down whatever it started
(a moto mock, a server, a test double) on exit. Register more adapters here: one name, one factory.
The ``Embedder`` and ``ChatModel`` subjects are registered in ``model_support.py``, the
``ObservationScheduler`` subjects in ``scheduler_support.py``: each with the hooks its suite drives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from memstack.ports import MemoryStore, SearchIndex

from .dynamodb_support import dynamodb_moto_store, dynamodb_server_store


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
    """The SQLite index with its in-memory caches off: every vector search runs in SQL, every keyword search
    reads its postings from the file."""
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    yield SqliteSearchIndex(
        SqliteDatabase(":memory:"), dimension, vector_cache_bytes=0, keyword_cache_bytes=0
    )


@contextmanager
def _sqlite_index_quantised(dimension: int) -> Iterator[SearchIndex]:
    """The SQLite index searching every cached resource through its int8 copies and error bounds (ADR 0009),
    which a resource takes from ``QUANTISED_MIN_ROWS`` chunks on: the results must be the same."""
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    yield SqliteSearchIndex(SqliteDatabase(":memory:"), dimension, quantised_min_rows=0)


STORE_FACTORIES: dict[str, Callable[[Any], AbstractContextManager[MemoryStore]]] = {
    "sqlite": _sqlite_store,
    "dynamodb-moto": dynamodb_moto_store,
    "dynamodb-server": dynamodb_server_store,
}
"""name → factory(tmp_path): a context manager yielding a fresh, empty store."""


def _opensearch_index_factories() -> dict[str, Callable[[int], AbstractContextManager[SearchIndex]]]:
    """The OpenSearch adapter on its test double (managed domain and Serverless modes), plus a real cluster
    when ``OPENSEARCH_URL`` is set (tests/contract/opensearch_support.py)."""
    import os

    from . import opensearch_support as support

    factories: dict[str, Callable[[int], AbstractContextManager[SearchIndex]]] = {
        "opensearch-managed": support.opensearch_managed_index,
        "opensearch-serverless": support.opensearch_serverless_index,
    }
    if os.environ.get("OPENSEARCH_URL"):
        factories["opensearch-real"] = support.opensearch_real_index
    return factories


INDEX_FACTORIES: dict[str, Callable[[int], AbstractContextManager[SearchIndex]]] = {
    "sqlite": _sqlite_index,
    "sqlite-sql-only": _sqlite_index_sql_only,
    "sqlite-quantised": _sqlite_index_quantised,
    **_opensearch_index_factories(),
}
"""name → factory(dimension): a context manager yielding a fresh, empty index."""
