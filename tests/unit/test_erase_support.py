"""The remnants enumerator (tests/erase_support.py) can fail: after an erasure, one leftover of each kind,
planted behind the adapters' backs, is reported — including in a table the enumerator was never told of.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memstack import Memory
from memstack.adapters.dynamodb.store import DynamoDBMemoryStore
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SqliteSearchIndex
from memstack.adapters.sqlite.store import SqliteMemoryStore
from memstack.adapters.testing import HashEmbedder
from memstack.ports import IndexEntry
from memstack.tokens import default_tokenizer
from tests.erase_support import remnants

T0 = "2024-05-01T12:00:00.000000Z"
RID = f"erase-plant-{uuid.uuid4().hex[:8]}"


def erased_sqlite(tmp_path: Path) -> tuple[Memory, SqliteDatabase]:
    db = SqliteDatabase(tmp_path / "memory.db")
    memory = Memory(
        store=SqliteMemoryStore(db),
        index=SqliteSearchIndex(db, HashEmbedder().dimension),
        embedder=HashEmbedder(),
        tokenizer=default_tokenizer(),
    )
    memory.save_messages(resource_id=RID, thread_id="t1", messages=["hello there"])
    memory.erase_resource(resource_id=RID)
    assert remnants(RID, db=db) == []
    return memory, db


SQLITE_PLANTS: dict[str, tuple[str, str]] = {
    "threads": (
        "INSERT INTO threads (resource_id, id, created_at, updated_at) VALUES (?, 't9', ?, ?)",
        "threads",
    ),
    "resources": (
        "INSERT INTO resources (id, version, created_at, updated_at) VALUES (?, 1, ?, ?)",
        "resources",
    ),
    "observations": (
        "INSERT INTO observations (resource_id, scope, thread_key, record, version, created_at, updated_at)"
        " VALUES (?, 'resource', '', '{}', 1, ?, ?)",
        "observations",
    ),
    "search_generations": ("INSERT INTO search_generations (resource_id, generation) VALUES (?, 7)", ""),
    "a table added later": ("CREATE TABLE later_feature (owner TEXT, note TEXT)", "later_feature"),
}


@pytest.mark.parametrize("kind", sorted(SQLITE_PLANTS))
def test_given_an_erased_resource_when_a_sqlite_row_of_it_is_planted_then_it_is_reported(
    tmp_path: Path, kind: str
) -> None:
    memory, db = erased_sqlite(tmp_path)
    sql, table = SQLITE_PLANTS[kind]
    with db.transaction() as conn:
        if kind == "a table added later":
            conn.execute(sql)
            conn.execute("INSERT INTO later_feature VALUES (?, 'x')", (RID,))
        elif kind == "search_generations":
            conn.execute(sql, (RID,))
            table = "search_generations"
        else:
            conn.execute(sql, (RID, T0, T0) if sql.count("?") == 3 else (RID,))

    found = remnants(RID, db=db)

    assert [r for r in found if r.startswith(f"sqlite {table}:")], found
    memory.close()


def test_given_an_erased_resource_when_a_message_and_a_chunk_are_planted_then_both_are_reported(
    tmp_path: Path,
) -> None:
    memory, db = erased_sqlite(tmp_path)
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO threads (resource_id, id, created_at, updated_at) VALUES (?, 't9', ?, ?)",
            (RID, T0, T0),
        )
        conn.execute(
            "INSERT INTO messages (resource_id, id, thread_id, seq, role, parts, created_at) "
            "VALUES (?, 'm9', 't9', 1, 'user', '[]', ?)",
            (RID, T0),
        )
        conn.execute(
            "INSERT INTO search_chunks (rowid, resource_id, thread_id, message_id, chunk, role, seq, created_at,"
            " metadata, embedding) VALUES (999, ?, 't9', 'm9', 0, 'user', 1, ?, '{}', x'00')",
            (RID, T0),
        )

    tables = {r.split(":")[0] for r in remnants(RID, db=db)}

    assert {"sqlite threads", "sqlite messages", "sqlite search_chunks"} <= tables
    memory.close()


def test_given_an_erased_resource_when_a_keyword_entry_without_its_chunk_is_planted_then_it_is_reported(
    tmp_path: Path,
) -> None:
    memory, db = erased_sqlite(tmp_path)
    with db.transaction() as conn:
        conn.execute("INSERT INTO search_postings VALUES (?, 'hello', 999, x'00')", (RID,))
        conn.execute(
            "INSERT INTO search_keyword_stats (resource_id, chunks, tokens) VALUES (?, 1, 1)", (RID,)
        )

    tables = {r.split(":")[0] for r in remnants(RID, db=db)}

    assert {"sqlite search_postings", "sqlite search_keyword_stats"} <= tables
    memory.close()


# AWS ---------------------------------------------------------------------------------------------------


@pytest.fixture
def aws_store() -> Iterator[DynamoDBMemoryStore]:
    from tests.contract.dynamodb_support import dynamodb_moto_store

    with dynamodb_moto_store() as store:
        assert isinstance(store, DynamoDBMemoryStore)
        yield store


def _put_item(store: DynamoDBMemoryStore, pk: str, sk: str, **attrs: str) -> None:
    item = {"pk": {"S": pk}, "sk": {"S": sk}, **{k: {"S": v} for k, v in attrs.items()}}
    store._table.connection.client.put_item(TableName=store.table_name, Item=item)


AWS_PLANTS: dict[str, Callable[[DynamoDBMemoryStore], str]] = {
    "resource item": lambda s: (_put_item(s, f"R#{RID}", "RESOURCE"), "dynamodb R#")[1],
    "item naming the resource in an attribute": lambda s: (
        _put_item(s, "SOMETHING#NEW", "X", resource_id=RID),
        "dynamodb SOMETHING#NEW",
    )[1],
    "s3 body": lambda s: (
        s._bodies._client.put_object(  # type: ignore[union-attr]
            Bucket=s._bodies.bucket,  # type: ignore[union-attr]
            Key=f"messages/{hashlib.sha256(RID.encode()).hexdigest()}/{'0' * 64}/{'1' * 64}/{'2' * 64}.json",
            Body=b"{}",
        ),
        "s3 messages/",
    )[1],
}


@pytest.mark.parametrize("kind", sorted(AWS_PLANTS))
def test_given_an_aws_store_when_a_leftover_is_planted_then_it_is_reported(
    aws_store: DynamoDBMemoryStore, kind: str
) -> None:
    _put_item(aws_store, "R#someone-else", "RESOURCE", resource_id="someone-else")
    assert remnants(RID, store=aws_store) == []

    prefix = AWS_PLANTS[kind](aws_store)

    found = remnants(RID, store=aws_store)
    assert len(found) == 1 and found[0].startswith(prefix), found


@pytest.mark.parametrize("mode", ["managed", "serverless"])
def test_given_the_opensearch_double_when_a_chunk_of_the_resource_is_indexed_then_it_is_reported(
    mode: str,
) -> None:
    from tests.contract import opensearch_support

    factory: Any = (
        opensearch_support.opensearch_managed_index
        if mode == "managed"
        else opensearch_support.opensearch_serverless_index
    )
    double = opensearch_support.shared_double(mode)  # type: ignore[arg-type]
    with factory(4) as index:
        assert remnants(RID, double=double) == []
        index.upsert(
            [
                IndexEntry(
                    message_id="m1",
                    chunk=0,
                    thread_id="t1",
                    resource_id=RID,
                    role="user",
                    seq=1,
                    created_at=datetime(2024, 5, 1, tzinfo=UTC),
                    text="left behind",
                    vector=[1.0, 0.0, 0.0, 0.0],
                )
            ]
        )

        found = remnants(RID, double=double)

        assert len(found) == 1 and found[0].startswith(f"opensearch {index.name}/"), found
