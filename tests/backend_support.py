"""One ``Memory`` per storage backend, for tests that must hold on the embedded default (one SQLite file)
and on the AWS backend (DynamoDB under moto, OpenSearch on its double as a managed domain and as a
Serverless collection)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstack import Memory
from memstack.adapters.hash_embed import HashEmbedder
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SqliteSearchIndex
from memstack.adapters.sqlite.store import SqliteMemoryStore
from memstack.ports import Embedder
from memstack.tokens import default_tokenizer
from tests.opensearch_double import OpenSearchDouble

BACKENDS = ("sqlite", "aws-managed", "aws-serverless")


@dataclass
class Backend:
    """A ``Memory`` and, on the AWS backend, the OpenSearch double its index talks to."""

    name: str
    memory: Memory
    double: OpenSearchDouble | None = None

    def __post_init__(self) -> None:
        self.store = self.memory.store  # the real one, whatever a test wraps around it


def _memory(store: Any, index: Any, embedder: Embedder) -> Memory:
    return Memory(store=store, index=index, embedder=embedder, tokenizer=default_tokenizer())


@contextmanager
def open_backend(name: str, tmp_path: Path, embedder: Embedder | None = None) -> Iterator[Backend]:
    """A fresh ``Memory`` on backend ``name`` (one of ``BACKENDS``), closed and cleaned up on exit."""
    emb = embedder if embedder is not None else HashEmbedder()
    if name == "sqlite":
        db = SqliteDatabase(tmp_path / "memory.db")
        with _memory(SqliteMemoryStore(db), SqliteSearchIndex(db, emb.dimension), emb) as memory:
            yield Backend(name, memory)
        return
    from tests.contract import opensearch_support
    from tests.contract.dynamodb_support import dynamodb_moto_store

    mode = "managed" if name == "aws-managed" else "serverless"
    factory = (
        opensearch_support.opensearch_managed_index
        if mode == "managed"
        else opensearch_support.opensearch_serverless_index
    )
    with ExitStack() as stack:  # the factories delete what they made
        store = stack.enter_context(dynamodb_moto_store())
        index = stack.enter_context(factory(emb.dimension))
        yield Backend(name, _memory(store, index, emb), opensearch_support.shared_double(mode))
