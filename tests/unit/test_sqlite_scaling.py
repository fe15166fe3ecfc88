"""The embedded index's per-resource keyword index and partitioned vector cache (ADR 0006)."""

from __future__ import annotations

import dataclasses
import unicodedata
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memstack.adapters.sqlite import keywords
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SCHEMA_VERSION, SqliteSearchIndex
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
    assert tokens("STRASSE Straße ﬁles ＲＯＣＫ x² İstanbul") == [
        "strass",
        "strass",
        "file",
        "rock",
        "x2",
        "istanbul",
    ]


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
    assert db.query("SELECT value FROM search_meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
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

    for table in ("search_postings", "search_pending_chunks", "search_keyword_stats"):
        assert db.query(f"SELECT count(*) FROM {table}") == [(0,)], table
    assert rebuilt.search("r1", top_k=5, text="hiking").keyword == []


def _reference_keyword_top(
    index: SqliteSearchIndex, db: SqliteDatabase, text: str, top_k: int, thread_id: str | None
) -> list[tuple[str, float]]:
    """The top messages by a full sort of every chunk's BM25 (``keywords.score``), ties by message id."""
    from memstack.adapters.search_text import query_terms
    from memstack.adapters.sqlite import keywords

    with db.read() as conn:
        rowids, scores = keywords.score(conn, "r1", keywords.query_tokens(query_terms(text)))
        owner = dict(conn.execute("SELECT rowid, message_id FROM search_chunks").fetchall())
        threads = dict(conn.execute("SELECT rowid, thread_id FROM search_chunks").fetchall())
    best: dict[str, float] = {}
    for rowid, score in zip(rowids.tolist(), scores.tolist(), strict=True):
        if thread_id is None or threads[rowid] == thread_id:
            best[owner[rowid]] = max(best.get(owner[rowid], 0.0), score)
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:top_k]


@pytest.mark.parametrize(("distinct", "thread_id"), [(40, None), (40, "t3"), (600, None), (600, "t3")])
def test_given_many_tied_chunks_when_searched_by_keywords_then_the_prefix_walk_returns_the_full_sort(
    distinct: int, thread_id: str | None
) -> None:
    rng = np.random.default_rng(11)
    words = ["hiking", "dog", "lake", "painting", "caroline", "sunrise", "race", "charity"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 7)))) for _ in range(distinct)]
    db = SqliteDatabase(":memory:")
    index = SqliteSearchIndex(db, DIM)
    vector = np.eye(DIM)[0].tolist()
    # 3000 messages from a few distinct texts: identical chunks tie, in groups larger than a batch or
    # smaller; a thread holds one message in seven, so a thread's search walks past the resource's first
    # prefixes (the best 2·top_k + 8 chunks, then 16 times more).
    index.upsert(
        [
            entry(f"m{i:05d}", texts[i % distinct], vector, thread_id=f"t{i % 7}", seq=i)
            for i in rng.permutation(3000).tolist()
        ]
    )
    for text in ["caroline hiking", "dog lake sunrise", "charity race painting dog", "caroline"]:
        for top_k in (1, 3, 4, 9, 16):
            hits = index.search("r1", top_k=top_k, text=text, thread_id=thread_id).keyword or []
            expected = _reference_keyword_top(index, db, text, top_k, thread_id)
            assert [h.message_id for h in hits] == [m for m, _ in expected], (text, top_k)
            assert [h.score for h in hits] == [score / 2.2 for _, score in expected], "Lucene's scale"


def test_given_a_resource_when_scored_over_its_rowid_span_or_by_sorting_then_the_floats_are_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memstack.adapters.sqlite import keywords

    db = SqliteDatabase(":memory:")
    index = SqliteSearchIndex(db, DIM)
    texts = ["dog lake", "lake lake hiking dog", "hiking", "dog dog dog sunrise at the lake"]
    index.upsert([entry(f"m{i}", texts[i % 4], np.eye(DIM)[0].tolist(), seq=i) for i in range(300)])
    query = ["dog", "lake", "hike", "dog"]
    with db.read() as conn:
        dense = keywords.score(conn, "r1", query)
        monkeypatch.setattr(keywords, "DENSE_SPAN", -(10**9))  # the span never qualifies: np.unique
        sorted_ = keywords.score(conn, "r1", query)
    assert dense[0].tolist() == sorted_[0].tolist()
    assert dense[1].tolist() == sorted_[1].tolist(), "each chunk's weights summed in the same order"


def _fold_before_compatibility(text: str) -> str:
    """The fold of schema-2 files: canonical decomposition, marks dropped, lower case (no NFKD, no
    case fold), so "Straße", "ﬁ" and full-width letters were indexed as they were written."""
    folded = unicodedata.normalize("NFD", text)
    return "".join(c for c in folded if not unicodedata.combining(c)).lower()


FOLD_TEXTS = [
    "Wir treffen uns in der Hauptstraße",
    "Die Straße ist lang, die Strasse auch",
    "Der ﬁnale Bericht ﬁles",
    "ＲＯＣＫ concert tonight with the band",
    "½ a cake and x² tomatoes",
    "a plain ascii message about rock music",
    "café naïve résumé",
]


@pytest.mark.parametrize("count", [7, 70, 300])
def test_given_a_schema_2_file_when_opened_then_its_terms_are_refolded_as_a_new_index_writes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """Pending postings (few chunks), merged blocks (a bulk write) and several blocks per term."""
    vectors = np.eye(DIM, dtype=np.float32)
    entries = [
        entry(f"m{i:04d}", FOLD_TEXTS[i % len(FOLD_TEXTS)] + f" n{i}", vectors[i % DIM].tolist(), seq=i)
        for i in range(count)
    ]
    other = [dataclasses.replace(entry("o1", "nothing to fold here", vectors[0].tolist()), resource_id="r2")]
    with monkeypatch.context() as patched:
        patched.setattr(keywords, "fold", _fold_before_compatibility)
        old = SqliteDatabase(tmp_path / "old.db")
        index = SqliteSearchIndex(old, DIM)
        for start in range(0, count, 50 if count > 100 else count):
            index.upsert(entries[start : start + (50 if count > 100 else count)])
        index.upsert(other)
        assert [h.message_id for h in index.search("r1", top_k=5, text="hauptstrasse").keyword or []] == []
        with old.transaction() as conn:
            conn.execute("UPDATE search_meta SET value = '2' WHERE key = 'schema_version'")
        generations = dict(old.query("SELECT resource_id, generation FROM search_generations"))
        old.close()

    fresh = SqliteSearchIndex(SqliteDatabase(tmp_path / "fresh.db"), DIM)
    fresh.upsert(entries)
    fresh.upsert(other)
    db = SqliteDatabase(tmp_path / "old.db")
    migrated = SqliteSearchIndex(db, DIM)

    assert db.query("SELECT value FROM search_meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    after = dict(db.query("SELECT resource_id, generation FROM search_generations"))
    assert after["r1"] > generations["r1"] and after["r2"] == generations["r2"], "only r1 had terms to refold"
    for query in [
        "strasse",
        "Straße",
        "hauptstrasse",
        "finale",
        "files",
        "rock",
        "ｒｏｃｋ",
        "cake 2",
        "x2",
        "cafe",
    ]:
        want = [
            (h.message_id, round(h.score, 9)) for h in fresh.search("r1", top_k=10, text=query).keyword or []
        ]
        got = [
            (h.message_id, round(h.score, 9))
            for h in migrated.search("r1", top_k=10, text=query).keyword or []
        ]
        assert got == want and want, query
    stats = "SELECT resource_id, chunks, tokens FROM search_keyword_stats ORDER BY resource_id"
    assert db.query(stats) == fresh._db.query(stats)
    terms = "SELECT message_id, terms, length FROM search_chunks ORDER BY message_id"
    assert [(m, sorted(t.split()), n) for m, t, n in db.query(terms)] == [
        (m, sorted(t.split()), n) for m, t, n in fresh._db.query(terms)
    ]
    migrated.upsert([entry("later", "another Straße", vectors[1].tolist(), seq=10_000)])
    assert "later" in {h.message_id for h in migrated.search("r1", top_k=400, text="strasse").keyword or []}
    db.close()


@pytest.mark.parametrize("pending", [1, 30, 63])
def test_given_a_schema_3_file_with_postings_pending_per_term_when_opened_then_they_are_kept_per_chunk(
    tmp_path: Path, pending: int
) -> None:
    """Schema 3 kept a pending row per posting (``search_keyword_pending``); the migrated file answers as a
    file written by this code, and its pending chunks still merge, and still leave with their messages."""
    vectors = np.eye(DIM, dtype=np.float32)
    bulk = [
        entry(f"b{i:03d}", f"hiking trip number {i} with Caroline", vectors[0].tolist()) for i in range(70)
    ]
    singles = [
        entry(f"p{i:03d}", f"pottery class {i} and a hiking plan, Straße {i % 3}", vectors[1].tolist(), seq=i)
        for i in range(pending)
    ]
    other = dataclasses.replace(entry("o1", "hiking elsewhere", vectors[0].tolist()), resource_id="r2")

    def written(path: Path) -> SqliteSearchIndex:
        index = SqliteSearchIndex(SqliteDatabase(path), DIM)
        index.upsert(bulk)
        for one in singles:
            index.upsert([one])
        index.upsert([other])
        return index

    old = written(tmp_path / "old.db")
    with old._db.transaction() as conn:  # the pending rows as schema 3 kept them
        conn.execute(
            "CREATE TABLE search_keyword_pending (resource_id TEXT NOT NULL, rowid INTEGER NOT NULL, "
            "term TEXT NOT NULL, tf INTEGER NOT NULL, length INTEGER NOT NULL, "
            "PRIMARY KEY (resource_id, rowid, term)) WITHOUT ROWID"
        )
        conn.execute(
            "INSERT INTO search_keyword_pending SELECT p.resource_id, p.rowid, j.key, j.value, p.length "
            "FROM search_pending_chunks AS p, json_each(p.counts) AS j"
        )
        conn.execute("DROP TABLE search_pending_chunks")
        conn.execute("UPDATE search_meta SET value = '3' WHERE key = 'schema_version'")
    old._db.close()
    fresh = written(tmp_path / "fresh.db")

    db = SqliteDatabase(tmp_path / "old.db")
    migrated = SqliteSearchIndex(db, DIM)

    assert db.query("SELECT 1 FROM sqlite_master WHERE name = 'search_keyword_pending'") == []
    assert db.query("SELECT value FROM search_meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]

    def answers(index: SqliteSearchIndex) -> list[list[tuple[str, float]]]:
        return [
            [(h.message_id, round(h.score, 9)) for h in index.search(r, top_k=100, text=q).keyword or []]
            for r in ("r1", "r2")
            for q in ("pottery", "hiking plan", "strasse 2", "caroline")
        ]

    assert answers(migrated) == answers(fresh) and any(answers(fresh))
    stats = "SELECT resource_id, chunks, tokens, pending FROM search_keyword_stats ORDER BY resource_id"
    assert db.query(stats) == fresh._db.query(stats)
    for index in (migrated, fresh):  # a pending chunk leaves with its message, then the rest merge
        index.delete_messages("r1", ["p000"])
        for i in range(pending, pending + 70):
            index.upsert([entry(f"p{i:03d}", f"pottery class {i}", vectors[1].tolist(), seq=i)])
    assert answers(migrated) == answers(fresh)
    assert db.query(stats) == fresh._db.query(stats)
    assert db.query("SELECT count(*) FROM search_pending_chunks WHERE resource_id = 'r1'")[0][0] < 64


def test_given_a_saved_chunk_when_it_waits_for_the_merge_then_it_is_one_pending_row_whatever_its_terms() -> (
    None
):
    """A save inserts one row in the pending table (one B-tree insert), not one per term."""
    db = SqliteDatabase(":memory:")
    index = SqliteSearchIndex(db, DIM)
    words = " ".join(f"word{i}" for i in range(40))
    index.upsert([entry("m1", words, np.eye(DIM)[0].tolist())])
    index.upsert([entry("m2", "", np.eye(DIM)[1].tolist(), seq=1)])  # no terms: still one pending chunk

    assert db.query("SELECT count(*) FROM search_pending_chunks") == [(2,)]
    assert db.query("SELECT pending FROM search_keyword_stats") == [(2,)]
    assert [h.message_id for h in index.search("r1", top_k=3, text="word7").keyword or []] == ["m1"]
    index.delete_messages("r1", ["m2"])
    assert db.query("SELECT pending FROM search_keyword_stats") == [(1,)]


def _keyword_answers(index: SqliteSearchIndex, text: str) -> list[tuple[str, float]]:
    return [(h.message_id, round(h.score, 9)) for h in index.search("r1", top_k=20, text=text).keyword or []]


def test_given_pending_chunks_held_when_saves_add_and_merge_them_then_new_terms_are_found_as_without_a_cache() -> (
    None
):
    """Each save is followed by a search for a term only it holds (read with the held pending chunks) and
    for older terms; 150 single saves cross two merges (``MERGE_PENDING``)."""
    cached = SqliteSearchIndex(SqliteDatabase(":memory:"), DIM)
    plain = SqliteSearchIndex(SqliteDatabase(":memory:"), DIM, keyword_cache_bytes=0)
    held = 0
    for i in range(150):
        saved = entry(f"m{i:03d}", f"word{i % 17} topic{i} shared", np.eye(DIM)[i % DIM].tolist(), seq=i)
        cached.upsert([saved])
        plain.upsert([saved])
        for text in (f"topic{i}", f"word{i % 17}", f"topic{max(0, i - 5)}", "shared"):
            assert _keyword_answers(cached, text) == _keyword_answers(plain, text), (i, text)
        entry_ = cached._postings._resources.get("r1")
        held += entry_ is not None and entry_.pending is not None
    assert held > 100, "the searches never used held pending chunks: the comparison proves little"


def test_given_pending_chunks_held_when_another_process_saves_then_its_chunks_are_found(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.db"
    mine = SqliteSearchIndex(SqliteDatabase(path), DIM)
    other = SqliteSearchIndex(SqliteDatabase(path), DIM)
    mine.upsert([entry("m1", "hiking with dogs", np.eye(DIM)[0].tolist())])
    assert [m for m, _ in _keyword_answers(mine, "hiking")] == ["m1"]  # its pending chunks now held

    other.upsert([entry("m2", "pottery and hiking", np.eye(DIM)[1].tolist(), seq=1)])

    assert [m for m, _ in _keyword_answers(mine, "pottery")] == ["m2"]
    assert {m for m, _ in _keyword_answers(mine, "hiking")} == {"m1", "m2"}
