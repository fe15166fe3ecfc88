"""A ``Memory`` on each storage backend, for behaviour that must hold on both: SQLite (one file) and
DynamoDB (moto, with its transactions made atomic as DynamoDB's are). The search index is SQLite's in
both: these tests are about the store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from memstack import Memory
from memstack.adapters.hash_embed import HashEmbedder
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SqliteSearchIndex
from memstack.adapters.sqlite.store import SqliteMemoryStore
from memstack.tokens import default_tokenizer

BACKENDS = ("sqlite", "dynamodb")


@contextmanager
def memory_on(
    backend: str, tmp_path: Path, *, chat_model: Any = None, scheduler: Any = None, **options: Any
) -> Iterator[Memory]:
    """A ``Memory`` with ``options`` (semantic recall off unless given) on ``backend`` (``BACKENDS``),
    background work inline unless a ``scheduler`` is given."""
    options.setdefault("semantic_recall", False)
    db = SqliteDatabase(tmp_path / f"{backend}.db")
    index = SqliteSearchIndex(db, HashEmbedder().dimension)
    with ExitStack() as stack:
        if backend == "sqlite":
            store: Any = SqliteMemoryStore(db)
        else:
            from tests.contract.dynamodb_support import dynamodb_moto_store

            store = stack.enter_context(dynamodb_moto_store())
        memory = Memory(
            store=store,
            index=index,
            embedder=HashEmbedder(),
            tokenizer=default_tokenizer(),
            options=options,
            background="inline",
            chat_model=chat_model,
            scheduler=scheduler,
        )
        with memory:
            yield memory
