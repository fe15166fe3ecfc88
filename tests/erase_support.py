"""The remnants enumerator: everything a backend still stores of one resource (or one of its threads).

Test-side only. It reads *everything* stored, without knowing the adapters' layouts, and reports each
thing that mentions the resource, so a table, key prefix or index added later cannot be missed:

* SQLite: every table in ``sqlite_master`` (the store's, the index's, FTS5 and any vector-extension shadow
  tables), every row, every cell: a text or blob cell holding the resource id marks the row (the keyword
  index's postings are keyed by resource id, so they are caught here). An FTS5 table's inverted index (its
  ``_data``/``_idx`` shadow tables), should one be added, is read through ``fts5vocab``, the reader that
  applies FTS5's deletes: a term naming the resource still there is reachable by a query.
* AWS: a Scan of the whole DynamoDB table (the store never scans; this is the test looking), any string
  attribute holding the resource id marking the item; every object of the S3 bucket, mapped to its owner
  by its key (``messages/{sha256(resource_id)}/{sha256(thread_id)}/…``); every document of every index of
  the OpenSearch double.

Matching is by substring, so tests use distinctive ids (``erase-…`` with a random suffix) that no other
stored value contains. Each remnant is a short string naming where it is, e.g.
``sqlite messages: ('erase-a', 'm1', …)`` or ``s3 messages/…/….json``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from memstack.adapters.dynamodb.bodies import BodyStore
from memstack.adapters.dynamodb.store import DynamoDBMemoryStore
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.store import SqliteMemoryStore
from tests.opensearch_double import OpenSearchDouble

_FTS5 = re.compile(r"create\s+virtual\s+table\s+.*\busing\s+fts5\b", re.IGNORECASE | re.DOTALL)


def _mentions(values: Iterable[Any], needles: list[str]) -> bool:
    """``True`` if every needle occurs in some value (text, or the UTF-8 bytes of a blob)."""
    texts = [v for v in values if isinstance(v, str)]
    blobs = [bytes(v) for v in values if isinstance(v, bytes | bytearray | memoryview)]
    return all(any(n in t for t in texts) or any(n.encode() in b for b in blobs) for n in needles)


def sqlite_remnants(db: SqliteDatabase, resource_id: str, thread_id: str | None = None) -> list[str]:
    """What the SQLite file still holds of the resource (of its thread ``thread_id`` when given)."""
    needles = [resource_id] if thread_id is None else [resource_id, thread_id]
    tokens = {n.casefold() for n in needles}  # an FTS5 table would hold an id as a lower-cased term
    conn = db.conn
    with db.lock:
        tables = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
        fts = [name for name, sql in tables if sql and _FTS5.match(sql)]
        shadows = {
            f"{name}_{part}" for name in fts for part in ("data", "idx", "docsize", "config", "content")
        }
        found: list[str] = []
        for name, _sql in tables:
            if name in fts:
                found += _fts_terms(conn, name, tokens)
                continue
            if name in shadows:
                continue  # read through fts5vocab above
            for row in conn.execute(f'SELECT * FROM "{name}"'):
                if _mentions(row, needles):
                    found.append(f"sqlite {name}: {_short(row)}")
    return found


def _fts_terms(conn: Any, table: str, tokens: set[str]) -> list[str]:
    """The live terms of an FTS5 table that mark the scope (``fts5vocab``, instance counts)."""
    vocab = f"temp_vocab_{table}"
    conn.execute(f'CREATE VIRTUAL TABLE IF NOT EXISTS temp."{vocab}" USING fts5vocab(main, "{table}", row)')
    try:
        rows = conn.execute(f'SELECT term, doc FROM temp."{vocab}"').fetchall()
    finally:
        conn.execute(f'DROP TABLE IF EXISTS temp."{vocab}"')
    return [f"sqlite {table} (fts5 term {term!r} in {doc} rows)" for term, doc in rows if term in tokens]


def dynamodb_remnants(
    store: DynamoDBMemoryStore, resource_id: str, thread_id: str | None = None
) -> list[str]:
    """What the store's DynamoDB table (whole-table Scan) and S3 bucket (every object) still hold of the
    resource (of its thread ``thread_id`` when given)."""
    needles = [resource_id] if thread_id is None else [resource_id, thread_id]
    client = store._table.connection.client
    found: list[str] = []
    request: dict[str, Any] = {"TableName": store.table_name}
    while True:
        page = client.scan(**request)
        for item in page.get("Items", []):
            strings = [v["S"] for v in item.values() if "S" in v]
            if _mentions(strings, needles):
                found.append(f"dynamodb {item['pk']['S']} / {item['sk']['S']}")
        if "LastEvaluatedKey" not in page:
            break
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    if store._bodies is not None:
        # keys are messages/{sha256(resource_id)}/{sha256(thread_id)}/{sha256(message_id)}/{sha256(body)}.json
        owner = hashlib.sha256(resource_id.encode()).hexdigest()
        prefix = (
            f"messages/{owner}/" if thread_id is None else BodyStore.thread_prefix(resource_id, thread_id)
        )
        s3 = store._bodies._client
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=store._bodies.bucket):
            found += [f"s3 {o['Key']}" for o in page.get("Contents", []) if o["Key"].startswith(prefix)]
    return found


def opensearch_remnants(
    double: OpenSearchDouble, resource_id: str, thread_id: str | None = None
) -> list[str]:
    """The documents of every index of the double that belong to the resource (or its thread)."""
    found: list[str] = []
    for name in double.index_names():
        for doc_id, doc in double.documents(name).items():
            if doc.get("resource_id") == resource_id and thread_id in (None, doc.get("thread_id")):
                found.append(f"opensearch {name}/{doc_id}")
            elif doc.get("resource_id") != resource_id and _mentions(_strings(doc), [resource_id]):
                found.append(f"opensearch {name}/{doc_id} (mentions the resource)")
    return found


def remnants(
    resource_id: str,
    *,
    store: object | None = None,
    db: SqliteDatabase | None = None,
    double: OpenSearchDouble | None = None,
    thread_id: str | None = None,
) -> list[str]:
    """Everything still stored of the resource (of its thread ``thread_id`` when given) in the backends
    given: a SQLite file (``db``, or the one of a ``SqliteMemoryStore``), a DynamoDB store with its
    bucket, an OpenSearch double. ``[]`` when nothing is left."""
    found: list[str] = []
    if isinstance(store, SqliteMemoryStore) and db is None:
        db = store.db
    if db is not None:
        found += sqlite_remnants(db, resource_id, thread_id)
    if isinstance(store, DynamoDBMemoryStore):
        found += dynamodb_remnants(store, resource_id, thread_id)
    if double is not None:
        found += opensearch_remnants(double, resource_id, thread_id)
    return found


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _short(row: Iterable[Any]) -> str:
    return repr(tuple(v if not isinstance(v, bytes) else f"<{len(v)} bytes>" for v in row))[:200]
