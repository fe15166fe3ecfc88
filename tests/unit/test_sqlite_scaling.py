"""The embedded index's per-resource keyword index and partitioned vector cache (ADR 0006)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SqliteSearchIndex
from memstack.adapters.sqlite.keywords import Analysed, tokens
from memstack.ports import IndexEntry

DIM = 16


def entry(
    message_id: str, text: str, vector: list[float], *, thread_id: str = "t1", seq: int = 0
) -> IndexEntry:
    return IndexEntry(
        resource_id="r1",
        thread_id=thread_id,
        message_id=message_id,
        chunk=0,
        text=text,
        vector=vector,
        role="user",
        seq=seq,
        created_at=datetime(2024, 1, 1, tzinfo=UTC),
        metadata={},
    )


def test_given_text_when_tokenised_then_words_are_folded_and_stemmed_as_fts5_porter_did() -> None:
    assert tokens("Caroline went HIKING with her dogs to the Café, yesterday!") == [
        "carolin",
        "went",
        "hike",
        "with",
        "her",
        "dog",
        "to",
        "the",
        "cafe",
        "yesterdai",
    ]
    assert tokens("naïve cafe\u0301 snake_case x2") == ["naiv", "cafe", "snake", "case", "x2"]
    assert tokens("It's as it is, for us") == ["it", "s", "as", "it", "is", "for", "us"], (
        "short words unstemmed"
    )
    assert Analysed.of("dog dogs cat") == Analysed({"dog": 2, "cat": 1}, 3)


def test_given_a_schema_1_file_when_opened_then_its_fts5_keywords_move_to_the_per_resource_index(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    db = SqliteDatabase(path)
    with db.transaction() as conn:  # the tables as schema 1 created them, and one indexed chunk
        conn.execute("CREATE TABLE search_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")
        conn.execute("INSERT INTO search_meta VALUES ('dimension', ?), ('schema_version', '1')", (str(DIM),))
        conn.execute(
            """CREATE TABLE search_chunks (rowid INTEGER PRIMARY KEY, resource_id TEXT NOT NULL,
            thread_id TEXT NOT NULL, message_id TEXT NOT NULL, chunk INTEGER NOT NULL, role TEXT NOT NULL,
            seq INTEGER NOT NULL, created_at TEXT NOT NULL, metadata TEXT NOT NULL, embedding BLOB NOT NULL)"""
        )
        conn.execute(
            "CREATE VIRTUAL TABLE search_fts USING fts5(text, scope, content='', contentless_delete=1, "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        vector = np.eye(DIM, dtype="<f4")[0].tobytes()
        for rowid, (message_id, text) in enumerate([("m1", "hiking with dogs"), ("m2", "a quiet day")], 1):
            conn.execute(
                "INSERT INTO search_chunks VALUES (?, 'r1', 't1', ?, 0, 'user', ?, '2024-01-01', '{}', ?)",
                (rowid, message_id, rowid, vector),
            )
            conn.execute("INSERT INTO search_fts (rowid, text, scope) VALUES (?, ?, 'r1 t1')", (rowid, text))
    db.close()

    db = SqliteDatabase(path)
    index = SqliteSearchIndex(db, DIM)

    found = index.search("r1", top_k=5, text="hike dog").keyword or []
    assert [h.message_id for h in found] == ["m1"]
    assert db.query("SELECT 1 FROM sqlite_master WHERE name = 'search_fts'") == []
    assert db.query("SELECT value FROM search_meta WHERE key = 'schema_version'") == [("2",)]
    assert db.query("SELECT chunks, tokens FROM search_keyword_stats") == [(2, 6)]
    index.delete_messages("r1", ["m1"])  # its postings, rebuilt from FTS5, go with it
    assert index.search("r1", top_k=5, text="hike dog").keyword == []
    db.close()


def test_given_a_cached_resource_when_it_changes_then_searches_see_the_change_without_a_reload() -> None:
    rng = np.random.default_rng(2)
    rows = rng.standard_normal((1000, DIM)).astype(np.float32)
    index = SqliteSearchIndex(SqliteDatabase(":memory:"), DIM)
    index.upsert([entry(f"m{i:04d}", "x", row.tolist(), seq=i) for i, row in enumerate(rows)])
    index.search("r1", top_k=4, vector=rows[0].tolist())
    cached = index._cache.entries["r1"]

    target = rows[5] * 3 + 1.0
    index.upsert([entry("new", "x", target.tolist(), thread_id="t2", seq=5000)])
    index.upsert([entry("zero", "x", [0.0] * DIM, seq=5001)])
    index.delete_messages("r1", ["m0000"])
    assert index._cache.entries["r1"] is cached, "the write reloaded the resource"

    first = (index.search("r1", top_k=3, vector=target.tolist()).vector or [])[0]
    assert (first.message_id, first.thread_id, first.seq) == ("new", "t2", 5000)
    assert first.score == pytest.approx(1.0, abs=1e-6)
    everything = {h.message_id for h in index.search("r1", top_k=2000, vector=rows[0].tolist()).vector or []}
    assert "m0000" not in everything and "zero" not in everything and len(everything) == 1000
    only_t2 = index.search("r1", top_k=5, vector=rows[0].tolist(), thread_id="t2").vector or []
    assert [h.message_id for h in only_t2] == ["new"]


def test_given_a_cached_resource_when_most_rows_are_rewritten_then_dead_rows_are_compacted() -> None:
    rng = np.random.default_rng(3)
    index = SqliteSearchIndex(SqliteDatabase(":memory:"), DIM)
    rows = rng.standard_normal((1500, DIM)).astype(np.float32)
    index.upsert([entry(f"m{i}", "x", row.tolist()) for i, row in enumerate(rows)])
    index.search("r1", top_k=1, vector=rows[0].tolist())
    for start in [*range(0, 1500, 300), 0]:  # rewrite every message (some twice), with new vectors
        index.upsert([entry(f"m{i}", "x", (-rows[i]).tolist()) for i in range(start, start + 300)])

    cached = index._cache.entries["r1"]
    assert (cached.n, cached.dead) == (1500, 0), "the dead rows were never compacted"
    best = (index.search("r1", top_k=1, vector=(-rows[7]).tolist()).vector or [])[0]
    assert (best.message_id, round(best.score, 5)) == ("m7", 1.0)


def test_given_a_rebuild_for_another_model_when_opened_then_no_keyword_posting_of_the_old_index_is_left() -> (
    None
):
    db = SqliteDatabase(":memory:")
    old = SqliteSearchIndex(db, DIM, model_id="old-model")
    old.upsert([entry(f"m{i}", f"hiking trip {i}", np.eye(DIM)[0].tolist()) for i in range(70)])  # blocks
    old.upsert([entry("p1", "pending words", np.eye(DIM)[1].tolist())])  # and pending

    rebuilt = SqliteSearchIndex(db, DIM, model_id="new-model", rebuild=True)

    for table in ("search_postings", "search_keyword_pending", "search_keyword_stats"):
        assert db.query(f"SELECT count(*) FROM {table}") == [(0,)], table
    assert rebuilt.search("r1", top_k=5, text="hiking").keyword == []
