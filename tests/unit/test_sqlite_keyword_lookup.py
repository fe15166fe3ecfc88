"""The SQLite index's keyword search takes its chunks' messages from the vector cache when it holds the
search's snapshot, with exactly the hits the file's look-up gives: in a resource or one thread, after this
process's deletes and rewrites and after another index's writes; with a metadata filter it reads the file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SqliteSearchIndex
from memstack.ports import IndexEntry, IndexHit

DIM = 16
T0 = datetime(2024, 5, 1, tzinfo=UTC)
WORDS = ["apple", "river", "stone", "violin", "garden", "rocket", "pepper", "window"]
QUERIES = ["apple river", "stone violin garden", "rocket", "pepper window apple", "river river stone"]


def _entries(first: int, count: int, *, resource: str = "r1") -> list[IndexEntry]:
    """``count`` messages from ``first``: word mixes that overlap (so BM25 scores tie and differ), two chunks
    for every third message, three threads, metadata to filter on."""
    out = []
    for i in range(first, first + count):
        text = " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 4))
        for chunk in range(1 + (i % 3 == 0)):
            vector = [float((i + chunk + d) % 5 == 0) for d in range(DIM)]
            out.append(
                IndexEntry(
                    message_id=f"m{i:04d}",
                    chunk=chunk,
                    thread_id=f"t{i % 3}",
                    resource_id=resource,
                    role="user",
                    seq=i,
                    created_at=T0,
                    text=text if chunk == 0 else f"{text} {WORDS[i % len(WORDS)]}",
                    vector=vector,
                    metadata={"kind": "odd" if i % 2 else "even"},
                )
            )
    return out


def _keyword(index: SqliteSearchIndex, query: str, **kwargs: Any) -> list[IndexHit]:
    """The keyword list of a hybrid search (the vector half loads the resource into the cache)."""
    results = index.search("r1", top_k=6, vector=[1.0] * DIM, text=query, **kwargs)
    return list(results.keyword or [])


def test_given_a_cached_resource_when_keyword_searching_then_no_chunk_look_up_reaches_the_file(
    tmp_path: Path, traced: list[str]
) -> None:
    db = SqliteDatabase(tmp_path / "m.db")
    index = SqliteSearchIndex(db, DIM)
    index.upsert(_entries(0, 60))
    _keyword(index, "apple")  # loads the resource's vectors and the term's postings
    traced.clear()

    hits = _keyword(index, "apple")
    assert hits
    assert not [s for s in traced if "json_each" in s and "search_chunks" in s], traced
    filtered = _keyword(index, "apple", filter={"kind": "even"})
    assert filtered and not any(int(h.message_id[1:]) % 2 for h in filtered)
    assert [s for s in traced if "json_each" in s and "search_chunks" in s], "a filter is tested in SQL"
    db.close()


def test_given_writes_deletes_and_scopes_when_keyword_searching_then_hits_equal_the_files_look_up(
    tmp_path: Path,
) -> None:
    db = SqliteDatabase(tmp_path / "m.db")
    cached = SqliteSearchIndex(db, DIM)
    from_file = SqliteSearchIndex(db, DIM, vector_cache_bytes=0)  # every look-up reads search_chunks
    other = SqliteSearchIndex(SqliteDatabase(tmp_path / "m.db"), DIM)  # another process's writes
    cached.upsert(_entries(0, 90))

    def same_hits() -> None:
        for query in QUERIES:
            for scope in (None, "t1"):
                assert _keyword(cached, query, thread_id=scope) == _keyword(from_file, query, thread_id=scope)

    same_hits()
    cached.delete_messages("r1", ["m0003", "m0010"])  # this process: rows marked dead in the cache
    same_hits()
    cached.upsert(_entries(9, 3))  # rewritten messages: new rows, the old ones dead
    cached.upsert(_entries(90, 20))
    same_hits()
    other.upsert(_entries(200, 10))  # another writer: the generation moves, the cache reloads
    other.delete_thread("r1", "t2")
    same_hits()
    db.close()
