"""The SQLite index's in-memory keyword postings (ADR 0013): a search served from them ranks exactly as one
that reads the file, through this process's saves and deletes, another process's writes and the byte bound."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SqliteSearchIndex
from memstack.ports import IndexEntry, IndexHit

DIM = 8
WORDS = ["hiking", "dog", "lake", "painting", "caroline", "sunrise", "race", "charity", "melanie", "pottery"]
QUERIES = ["caroline hiking", "dog lake sunrise", "charity race painting dog", "melanie", "pottery dogs"]


def _entry(message_id: str, text: str, *, thread_id: str = "t1", resource_id: str = "r1") -> IndexEntry:
    return IndexEntry(
        resource_id=resource_id,
        thread_id=thread_id,
        message_id=message_id,
        chunk=0,
        text=text,
        vector=np.eye(DIM)[len(text) % DIM].tolist(),
        role="user",
        seq=int(message_id[1:]) if message_id[1:].isdigit() else 0,
        created_at=datetime(2024, 1, 1, tzinfo=UTC),
        metadata={},
    )


def _texts(seed: int, n: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 9)))) for _ in range(n)]


def _key(hits: list[IndexHit] | None) -> list[tuple[str, float]]:
    return [(h.message_id, h.score) for h in hits or []]


def _same_as_the_file(cached: SqliteSearchIndex, db: SqliteDatabase) -> None:
    """Every query ranks alike (ids and float scores) with the postings cached and read from the file."""
    reference = SqliteSearchIndex(db, DIM, keyword_cache_bytes=0, vector_cache_bytes=0)
    for text in QUERIES:
        for top_k in (1, 4, 16):
            for thread_id in (None, "t2"):
                got = cached.search("r1", top_k=top_k, text=text, thread_id=thread_id).keyword
                want = reference.search("r1", top_k=top_k, text=text, thread_id=thread_id).keyword
                assert _key(got) == _key(want), (text, top_k, thread_id)


@pytest.fixture
def grown() -> tuple[SqliteDatabase, SqliteSearchIndex]:
    db = SqliteDatabase(":memory:")
    index = SqliteSearchIndex(db, DIM)
    texts = _texts(3, 400)
    index.upsert([_entry(f"m{i:04d}", t, thread_id=f"t{i % 3}") for i, t in enumerate(texts)])
    for text in QUERIES:  # the queries' terms are now held
        index.search("r1", top_k=4, text=text)
    return db, index


def test_given_held_terms_when_this_process_saves_one_message_at_a_time_then_they_are_appended_not_reread(
    grown: tuple[SqliteDatabase, SqliteSearchIndex],
) -> None:
    db, index = grown
    generation, before = index._postings.held("r1") or (0, {})
    assert before.get("dog", 0) > 0, "a search holds its terms"

    for i, text in enumerate(_texts(4, 100)):  # one save per call: the pending path, and merges past 64
        index.upsert([_entry(f"m{1000 + i}", text, thread_id=f"t{i % 3}")])

    held = index._postings.held("r1")
    assert held is not None, "this process's saves patch the held terms rather than dropping them"
    assert held[0] == generation + 100
    assert held[1]["dog"] > before["dog"]
    _same_as_the_file(index, db)


def test_given_held_terms_when_messages_are_reindexed_or_deleted_then_searches_match_the_file(
    grown: tuple[SqliteDatabase, SqliteSearchIndex],
) -> None:
    db, index = grown
    index.upsert([_entry("m0001", "caroline caroline hiking pottery")])  # replaces an indexed message
    _same_as_the_file(index, db)
    index.delete_messages("r1", ["m0002", "m0003"])
    _same_as_the_file(index, db)
    index.delete_thread("r1", "t1")
    _same_as_the_file(index, db)
    index.delete_documents("r1", ["m0005#0"])
    _same_as_the_file(index, db)
    index.delete_resource("r1")
    assert index.search("r1", top_k=4, text="dog").keyword == []


def test_given_held_terms_when_another_process_writes_then_the_next_search_reads_its_changes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    db = SqliteDatabase(path)
    index = SqliteSearchIndex(db, DIM)
    index.upsert([_entry(f"m{i:04d}", t) for i, t in enumerate(_texts(5, 200))])
    assert index.search("r1", top_k=4, text="pottery melanie").keyword

    other_db = SqliteDatabase(path)  # its own connections and caches, as another process has
    other = SqliteSearchIndex(other_db, DIM)
    other.upsert([_entry("m9000", "pottery melanie pottery melanie")])
    other.delete_messages("r1", ["m0000"])

    hits = index.search("r1", top_k=4, text="pottery melanie").keyword or []
    assert hits[0].message_id == "m9000", "the other writer's chunk must be found"
    _same_as_the_file(index, db)
    other_db.close()
    db.close()


@pytest.mark.parametrize("bound", [0, 600, 3000, 20_000])
def test_given_a_small_byte_bound_when_searched_then_rankings_match_the_file_and_the_bound_holds(
    bound: int,
) -> None:
    db = SqliteDatabase(":memory:")
    index = SqliteSearchIndex(db, DIM, keyword_cache_bytes=bound)
    index.upsert([_entry(f"m{i:04d}", t, thread_id=f"t{i % 3}") for i, t in enumerate(_texts(6, 300))])
    for round_ in range(3):
        _same_as_the_file(index, db)
        assert index._postings.nbytes <= bound
        index.upsert([_entry(f"m{5000 + round_}", "dog dog lake caroline", thread_id="t2")])


def test_given_a_held_term_without_room_when_saves_add_to_it_then_it_leaves_and_is_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memstack.adapters.sqlite import posting_cache

    monkeypatch.setattr(posting_cache, "MIN_HEADROOM", 3)
    monkeypatch.setattr(posting_cache, "HEADROOM", 10**6)  # room for 3 appended postings, whatever the size
    db = SqliteDatabase(":memory:")
    index = SqliteSearchIndex(db, DIM)
    index.upsert([_entry(f"m{i:04d}", t) for i, t in enumerate(_texts(7, 200))])
    index.search("r1", top_k=4, text="dog lake")
    for i in range(3):
        index.upsert([_entry(f"m{1000 + i}", "dog")])
    held = index._postings.held("r1")
    assert held is not None and "dog" in held[1], "three appends fit"

    index.upsert([_entry("m1003", "dog lake")])

    held = index._postings.held("r1")
    assert held is not None and "dog" not in held[1], "a save never grows a term: it leaves the cache"
    assert "lake" in held[1]
    _same_as_the_file(index, db)
    held = index._postings.held("r1")
    assert held is not None and "dog" in held[1], "the next search reads it again"


def test_given_many_resources_and_a_small_bound_when_each_is_searched_then_only_held_terms_keep_an_entry() -> (
    None
):
    db = SqliteDatabase(":memory:")
    index = SqliteSearchIndex(db, DIM, keyword_cache_bytes=4000)
    reference = SqliteSearchIndex(db, DIM, keyword_cache_bytes=0, vector_cache_bytes=0)
    resources = [f"r{n}" for n in range(12)]
    for n, resource_id in enumerate(resources):
        texts = _texts(100 + n, 40)
        index.upsert([_entry(f"m{i:04d}", t, resource_id=resource_id) for i, t in enumerate(texts)])
    for _ in range(2):
        for resource_id in resources:
            for text in QUERIES:
                got = index.search(resource_id, top_k=4, text=text).keyword
                assert _key(got) == _key(reference.search(resource_id, top_k=4, text=text).keyword)
    held = [r for r in resources if index._postings.held(r) is not None]
    assert index._postings.nbytes <= 4000
    assert 0 < len(held) < len(resources), "resources whose every term left keep no entry"
    assert all((index._postings.held(r) or (0, {}))[1] for r in held), "no entry without a held term"
