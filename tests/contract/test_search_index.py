"""Conformance suite of the ``SearchIndex`` port: every adapter runs it unchanged.

Adapters are registered in ``INDEX_FACTORIES`` (tests/contract/conftest.py) as ``factory(dimension)``:
SQLite (with and without its vector cache) and OpenSearch (managed domain and Serverless modes against its
HTTP test double, and a real cluster when ``OPENSEARCH_URL`` is set).

Vectors are hand-made in ``DIM`` = 8 dimensions, so expected cosine similarities are known exactly. Filter
behaviour is checked against ``memstack.filters.matches``, the reference evaluator, over a seeded random
corpus. Tests at the end are SQLite-specific and say so.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memstack.adapters.search_text import keyword_text
from memstack.errors import InvalidInput
from memstack.filters import matches
from memstack.ports import IndexEntry, IndexHit, SearchIndex

from .conftest import INDEX_FACTORIES

DIM = 8
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=sorted(INDEX_FACTORIES))
def index(request: pytest.FixtureRequest) -> Iterator[SearchIndex]:
    with INDEX_FACTORIES[request.param](DIM) as ix:
        yield ix
        ix.close()


# helpers ------------------------------------------------------------------------------------------


def unit(*components: float) -> list[float]:
    """A unit vector in ``DIM`` dimensions from its leading components."""
    v = [*components, *([0.0] * (DIM - len(components)))]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def at_angle(cosine: float) -> list[float]:
    """A unit vector whose cosine similarity with ``E0`` is ``cosine``."""
    return unit(cosine, math.sqrt(max(0.0, 1 - cosine * cosine)))


E0 = unit(1)
E1 = unit(0, 1)
E2 = unit(0, 0, 1)


def entry(
    message_id: str,
    text: str = "",
    vector: list[float] | None = None,
    *,
    thread_id: str = "t1",
    resource_id: str = "r1",
    chunk: int = 0,
    seq: int = 0,
    role: str = "user",
    metadata: dict[str, Any] | None = None,
) -> IndexEntry:
    return IndexEntry(
        message_id=message_id,
        chunk=chunk,
        thread_id=thread_id,
        resource_id=resource_id,
        role=role,
        seq=seq,
        created_at=T0,
        text=text or f"message {message_id}",
        vector=vector or E0,
        metadata=metadata or {},
    )


def ids(hits: list[IndexHit] | None) -> list[str]:
    assert hits is not None, "the retriever that was asked returned None instead of a list"
    return [h.message_id for h in hits]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


# ranking ------------------------------------------------------------------------------------------


def test_given_entries_at_known_angles_when_searching_by_vector_then_hits_are_best_first_with_cosine_scores(
    index: SearchIndex,
) -> None:
    index.upsert(
        [
            entry("far", vector=at_angle(-0.5)),
            entry("best", vector=at_angle(1.0)),
            entry("mid", vector=at_angle(0.5)),
            entry("good", vector=at_angle(0.9)),
            entry("orthogonal", vector=E1),
        ]
    )

    hits = index.search("r1", top_k=3, vector=E0).vector

    assert ids(hits) == ["best", "good", "mid"]
    assert hits is not None
    assert [round(h.score, 4) for h in hits] == [1.0, 0.9, 0.5], "scores must be cosine similarity"
    assert all(h.thread_id == "t1" for h in hits)


def test_given_all_entries_when_searching_by_vector_with_a_large_top_k_then_negative_similarities_come_last(
    index: SearchIndex,
) -> None:
    index.upsert(
        [entry("opposite", vector=at_angle(-1.0)), entry("same", vector=E0), entry("ortho", vector=E1)]
    )

    hits = index.search("r1", top_k=10, vector=E0).vector

    assert ids(hits) == ["same", "ortho", "opposite"]
    assert hits is not None
    assert hits[-1].score == pytest.approx(-1.0, abs=1e-4)


def test_given_texts_when_searching_by_keywords_then_the_more_specific_match_ranks_first(
    index: SearchIndex,
) -> None:
    index.upsert(
        [
            entry("weather", "The weather in Paris was lovely all week"),
            entry("museum", "We visited the Louvre museum in Paris and then another museum"),
            entry("groceries", "Buy milk, eggs and bread on the way home"),
        ]
    )

    hits = index.search("r1", top_k=5, text="Paris museum").keyword

    assert ids(hits) == ["museum", "weather"], "a message with no query term must not be returned"
    assert hits is not None
    assert all(h.score > 0 for h in hits), "keyword scores are positive"
    assert hits[0].score > hits[1].score


def test_given_messages_of_two_months_when_a_query_names_a_date_then_that_days_message_matches(
    index: SearchIndex,
) -> None:
    october = datetime(2023, 10, 13, 18, 30, tzinfo=UTC)
    index.upsert(
        [
            replace(entry("oct", "Look at the sunset I painted"), created_at=october),
            replace(entry("may", "Look at the lake I painted"), created_at=datetime(2023, 5, 8, tzinfo=UTC)),
        ]
    )

    by_day = index.search("r1", top_k=5, text="painted on October 13").keyword
    by_month = index.search("r1", top_k=5, text="October").keyword

    assert ids(by_day)[0] == "oct", "the message's date is indexed in words and numbers"
    assert ids(by_month) == ["oct"], "a month name matches only that month's messages"


def test_given_many_keyword_matches_when_searching_with_top_k_then_at_most_top_k_come_back(
    index: SearchIndex,
) -> None:
    index.upsert([entry(f"m{i}", f"note about the garden number {i}") for i in range(10)])

    hits = index.search("r1", top_k=4, text="garden").keyword

    assert len(ids(hits)) == 4


def test_given_entries_when_searching_by_vector_and_keywords_in_one_call_then_both_lists_are_filled(
    index: SearchIndex,
) -> None:
    index.upsert([entry("cat", "my cat sleeps all day", E0), entry("dog", "the dog barks at night", E1)])

    results = index.search("r1", top_k=2, vector=E1, text="cat")

    assert ids(results.vector) == ["dog", "cat"]
    assert ids(results.keyword) == ["cat"]


@pytest.mark.parametrize("asked", ["vector", "keyword", "neither"])
def test_given_one_retriever_asked_when_searching_then_the_other_list_is_none(
    index: SearchIndex, asked: str
) -> None:
    index.upsert([entry("cat", "my cat", E0)])

    results = index.search(
        "r1",
        top_k=2,
        vector=E0 if asked == "vector" else None,
        text="cat" if asked == "keyword" else None,
    )

    assert (results.vector is None) == (asked != "vector")
    assert (results.keyword is None) == (asked != "keyword")


def test_given_an_empty_index_when_searching_then_both_lists_are_empty(index: SearchIndex) -> None:
    results = index.search("r1", top_k=4, vector=E0, text="anything")

    assert results.vector == [] and results.keyword == []


# scope --------------------------------------------------------------------------------------------


def test_given_two_resources_with_the_same_thread_id_when_each_searches_then_it_sees_only_its_own(
    index: SearchIndex,
) -> None:
    index.upsert(
        [
            entry("a1", "secret plans for the launch", E0, resource_id="A", thread_id="shared"),
            entry("b1", "holiday photos", E1, resource_id="B", thread_id="shared"),
        ]
    )

    for thread_id in (None, "shared"):
        b = index.search("B", top_k=10, vector=E0, text="secret plans launch", thread_id=thread_id)
        assert ids(b.vector) == ["b1"], f"resource B saw another resource's vectors (thread {thread_id})"
        assert ids(b.keyword) == [], f"resource B saw another resource's text (thread {thread_id})"
        a = index.search("A", top_k=10, vector=E1, text="holiday photos", thread_id=thread_id)
        assert ids(a.vector) == ["a1"]
        assert ids(a.keyword) == []


def test_given_a_resource_that_never_indexed_when_it_searches_then_nothing_is_found(
    index: SearchIndex,
) -> None:
    index.upsert([entry("a1", "private", E0, resource_id="A")])

    results = index.search("nobody", top_k=5, vector=E0, text="private")

    assert results.vector == [] and results.keyword == []


def test_given_several_threads_when_searching_one_thread_then_only_its_messages_come_back(
    index: SearchIndex,
) -> None:
    index.upsert(
        [
            entry("t1-a", "pasta recipe", E0, thread_id="t1"),
            entry("t2-a", "pasta shopping", at_angle(0.99), thread_id="t2"),
            entry("t1-b", "pasta sauce", at_angle(0.5), thread_id="t1"),
        ]
    )

    scoped = index.search("r1", top_k=10, vector=E0, text="pasta", thread_id="t1")
    everywhere = index.search("r1", top_k=10, vector=E0, text="pasta")

    assert ids(scoped.vector) == ["t1-a", "t1-b"]
    assert sorted(ids(scoped.keyword)) == ["t1-a", "t1-b"]
    assert sorted(ids(everywhere.vector)) == ["t1-a", "t1-b", "t2-a"]
    assert sorted(ids(everywhere.keyword)) == ["t1-a", "t1-b", "t2-a"]
    assert everywhere.vector is not None
    assert {h.message_id: h.thread_id for h in everywhere.vector}["t2-a"] == "t2"


# writes -------------------------------------------------------------------------------------------


def test_given_an_indexed_message_when_it_is_upserted_again_then_it_is_replaced_not_duplicated(
    index: SearchIndex,
) -> None:
    index.upsert([entry("m2", "unrelated", E2)])
    index.upsert([entry("m1", "I adopted a parrot", E0)])  # the most recent write, on purpose
    assert ids(index.search("r1", top_k=10, vector=E0, text="parrot").keyword) == ["m1"]

    index.upsert([entry("m1", "I adopted a kitten", E1)])

    assert index.search("r1", top_k=10, text="parrot").keyword == [], "the old text must no longer match"
    assert ids(index.search("r1", top_k=10, text="kitten").keyword) == ["m1"]
    hits = index.search("r1", top_k=10, vector=E1).vector
    assert ids(hits) == ["m1", "m2"], "one hit per message, with the new vector"
    assert hits is not None and hits[0].score == pytest.approx(1.0, abs=1e-4)


def test_given_a_message_reindexed_with_fewer_chunks_when_searching_then_no_stale_chunk_remains(
    index: SearchIndex,
) -> None:
    index.upsert([entry("m1", "alpha part", E0, chunk=0), entry("m1", "omega part", E1, chunk=1)])
    assert ids(index.search("r1", top_k=10, vector=E1, text="omega").vector) == ["m1"]

    index.upsert([entry("m1", "alpha only", E2, chunk=0)])

    assert index.search("r1", top_k=10, text="omega").keyword == []
    hits = index.search("r1", top_k=10, vector=E1).vector
    assert hits is not None and len(hits) == 1
    assert hits[0].score == pytest.approx(0.0, abs=1e-4), "the removed chunk's vector must not score"


def test_given_a_batch_with_several_messages_when_upserted_then_each_is_searchable(
    index: SearchIndex,
) -> None:
    index.upsert([entry(f"m{i}", f"word{i} common", unit(1, i)) for i in range(5)])

    assert ids(index.search("r1", top_k=10, text="word3").keyword) == ["m3"]
    assert len(ids(index.search("r1", top_k=10, text="common").keyword)) == 5


def test_given_a_chunked_message_when_searching_then_it_is_one_hit_scored_by_its_best_chunk(
    index: SearchIndex,
) -> None:
    index.upsert(
        [
            entry(
                "long",
                "a long first part about the weather, the news, lunch and sailing",
                at_angle(0.2),
                chunk=0,
            ),
            entry("long", "sailing boats, sailing boats", at_angle(0.95), chunk=1),
            entry("long", "third part about lunch", at_angle(0.1), chunk=2),
            entry("short", "sailing trip", at_angle(0.6)),
            entry("other", "gardening", at_angle(0.0)),
        ]
    )

    results = index.search("r1", top_k=10, vector=E0, text="sailing boats")

    assert ids(results.vector) == ["long", "short", "other"]
    assert results.vector is not None
    assert results.vector[0].score == pytest.approx(0.95, abs=1e-4)
    assert ids(results.keyword) == ["long", "short"], "a message ranks by its best chunk, not its worst"


def test_given_chunked_messages_when_searching_with_top_k_then_top_k_distinct_messages_come_back(
    index: SearchIndex,
) -> None:
    entries = [
        entry(f"m{m}", "chunk text", at_angle(0.9 - m / 10 - c / 100), chunk=c)
        for m in range(4)
        for c in range(3)
    ]
    index.upsert(entries)

    results = index.search("r1", top_k=3, vector=E0, text="chunk")

    assert ids(results.vector) == ["m0", "m1", "m2"]
    assert len(set(ids(results.keyword))) == len(ids(results.keyword)) == 3


def test_given_an_upsert_when_its_document_ids_are_deleted_then_exactly_those_chunks_go(
    index: SearchIndex,
) -> None:
    written = index.upsert(
        [entry("m1", "alpha one", E0), entry("m1", "alpha two", E0, chunk=1), entry("m2", "alpha three", E0)]
    )
    assert sorted(written) == ["m1", "m2"] and len(written["m1"]) == 2 and len(written["m2"]) == 1
    index.delete_documents("r1", [written["m1"][1], "no-such-document"])
    found = index.search("r1", top_k=5, text="alpha")
    assert sorted(ids(found.keyword)) == ["m1", "m2"]
    index.delete_documents("r1", written["m1"][:1] + written["m2"])
    assert ids(index.search("r1", top_k=5, text="alpha").keyword) == []


def test_given_messages_when_some_are_deleted_then_they_are_no_longer_found(index: SearchIndex) -> None:
    index.upsert(
        [
            entry("m1", "apples", E0, chunk=0),
            entry("m1", "more apples", E0, chunk=1),
            entry("m2", "apples too", at_angle(0.5)),
            entry("m3", "apples again", at_angle(0.2)),
        ]
    )
    assert len(ids(index.search("r1", top_k=10, vector=E0, text="apples").vector)) == 3

    index.delete_messages("r1", ["m1", "m3", "never-indexed"])

    results = index.search("r1", top_k=10, vector=E0, text="apples")
    assert ids(results.vector) == ["m2"]
    assert ids(results.keyword) == ["m2"]


def test_given_the_same_message_id_in_two_resources_when_one_deletes_it_then_the_other_keeps_it(
    index: SearchIndex,
) -> None:
    index.upsert(
        [entry("m1", "shared id", E0, resource_id="A"), entry("m1", "shared id", E0, resource_id="B")]
    )
    for resource_id in ("A", "B"):
        assert ids(index.search(resource_id, top_k=5, vector=E0, text="shared").vector) == ["m1"]

    index.delete_messages("A", ["m1"])

    assert index.search("A", top_k=5, vector=E0, text="shared").vector == []
    b = index.search("B", top_k=5, vector=E0, text="shared")
    assert ids(b.vector) == ["m1"] and ids(b.keyword) == ["m1"]


def test_given_a_thread_when_it_is_deleted_then_its_messages_are_gone_and_other_threads_stay(
    index: SearchIndex,
) -> None:
    index.upsert(
        [
            entry("t1-a", "tennis lesson", E0, thread_id="t1"),
            entry("t1-b", "tennis racket", E0, thread_id="t1", chunk=0),
            entry("t1-b", "tennis balls", E0, thread_id="t1", chunk=1),
            entry("t2-a", "tennis match", E1, thread_id="t2"),
            entry("other", "tennis club", E0, thread_id="t1", resource_id="r2"),
        ]
    )
    assert len(ids(index.search("r1", top_k=10, vector=E0, text="tennis").vector)) == 3
    assert ids(index.search("r2", top_k=10, vector=E0, text="tennis").vector) == ["other"]

    index.delete_thread("r1", "t1")

    results = index.search("r1", top_k=10, vector=E0, text="tennis")
    assert ids(results.vector) == ["t2-a"]
    assert ids(results.keyword) == ["t2-a"]
    other = index.search("r2", top_k=10, vector=E0, text="tennis", thread_id="t1")
    assert ids(other.vector) == ["other"], "deleting r1's thread t1 must not touch r2's thread t1"
    assert ids(other.keyword) == ["other"]


def test_given_a_deleted_message_when_it_is_indexed_again_then_it_is_found_again(index: SearchIndex) -> None:
    index.upsert([entry("m1", "violin", E0)])
    index.delete_messages("r1", ["m1"])
    assert index.search("r1", top_k=5, vector=E0, text="violin").vector == []

    index.upsert([entry("m1", "violin", E0)])

    assert ids(index.search("r1", top_k=5, vector=E0, text="violin").vector) == ["m1"]


# filters inside the search --------------------------------------------------------------------------


def test_given_the_nearest_entries_fail_the_filter_when_searching_then_top_k_matching_hits_still_return(
    index: SearchIndex,
) -> None:
    # 15 "free" entries are all nearer to the query (and mention it more often) than the 5 "pro" ones.
    entries = [
        entry(f"free{i}", "budget budget budget review", at_angle(0.99 - i / 100), metadata={"tier": "free"})
        for i in range(15)
    ] + [
        entry(
            f"pro{i}",
            f"budget review of item {i} with many other words here",
            at_angle(0.6 - i / 10),
            metadata={"tier": "pro"},
        )
        for i in range(5)
    ]
    index.upsert(entries)

    results = index.search("r1", top_k=4, vector=E0, text="budget", filter={"tier": "pro"})

    assert ids(results.vector) == ["pro0", "pro1", "pro2", "pro3"]
    assert len(ids(results.keyword)) == 4
    assert all(m.startswith("pro") for m in ids(results.keyword))


def _corpus(seed: int = 7, size: int = 40) -> list[IndexEntry]:
    """Entries with varied, sometimes missing or oddly typed metadata, random vectors, and the word 'memo'."""
    rng = random.Random(seed)

    def maybe(*choices: Any) -> Any:
        return rng.choice(choices)

    entries = []
    for i in range(size):
        md: dict[str, Any] = {"role": maybe("user", "assistant"), "thread_id": f"t{i % 3}"}
        for key, value in (
            ("age", maybe(18, 25, 30, 30.0, 30.5, 41, 65, "30", True, None, "MISSING")),
            ("tier", maybe("free", "pro", "team", ["pro", "beta"], ["free"], None, "MISSING")),
            ("active", maybe(True, False, "MISSING")),
            ("score", maybe(0.1, 0.25, 0.5, 0.75, 1, "MISSING")),
            ("note", maybe(None, "hello", "MISSING")),
            ("tags", maybe(["a"], ["a", "b"], ["b", "c"], [], [1, "a"], [["a"]], "MISSING")),
            (
                "profile",
                maybe(
                    {"city": "Paris", "level": 3},
                    {"city": "Berlin", "level": 1},
                    {"city": "Tokyo"},
                    {"level": 5},
                    {"city": {"name": "Paris"}},
                    "n/a",
                    "MISSING",
                ),
            ),
        ):
            if value != "MISSING":
                md[key] = value
        vector = [rng.gauss(0, 1) for _ in range(DIM)]
        words = " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(rng.randint(1, 4)))
        entries.append(entry(f"m{i:02d}", f"memo {words}", vector, thread_id=md["thread_id"], metadata=md))
    return entries


FILTER_CASES: list[tuple[str, dict[str, Any]]] = [
    ("eq-shorthand-string", {"tier": "pro"}),
    ("eq-shorthand-number", {"age": 30}),
    ("eq-float-equals-int", {"age": {"$eq": 30.0}}),
    ("eq-string-never-number", {"age": "30"}),
    ("eq-bool", {"active": True}),
    ("eq-bool-never-number", {"age": True}),
    ("eq-number-never-bool", {"active": 1}),
    ("eq-null-only-explicit", {"note": None}),
    ("ne", {"tier": {"$ne": "pro"}}),
    ("ne-null", {"note": {"$ne": None}}),
    ("gt-number", {"age": {"$gt": 30}}),
    ("gte-number", {"age": {"$gte": 30}}),
    ("lt-float", {"score": {"$lt": 0.5}}),
    ("lte-float", {"score": {"$lte": 0.25}}),
    ("gt-string", {"profile.city": {"$gt": "Berlin"}}),
    ("lt-bool", {"active": {"$lt": True}}),
    ("gte-bool", {"active": {"$gte": False}}),
    ("lte-number-never-bool", {"age": {"$lte": 18}}),
    ("gte-bool-never-number", {"age": {"$gte": False}}),
    ("range", {"age": {"$gte": 20, "$lt": 41}}),
    ("in", {"tier": {"$in": ["pro", "team"]}}),
    ("in-mixed-types", {"age": {"$in": [30, "30", True, None]}}),
    ("nin", {"tier": {"$nin": ["pro", "free"]}}),
    ("nin-null", {"note": {"$nin": [None]}}),
    ("exists", {"score": {"$exists": True}}),
    ("exists-null-counts", {"note": {"$exists": True}}),
    ("not-exists", {"profile.level": {"$exists": False}}),
    ("nested-dotted", {"profile.level": {"$gte": 3}}),
    ("nested-through-non-object", {"profile.city": "Paris"}),
    ("nested-object-never-scalar", {"profile.city": {"$ne": "Paris"}}),
    ("array-contains", {"tags": "a"}),
    ("array-in", {"tags": {"$in": ["c", 1]}}),
    ("array-ne", {"tags": {"$ne": "a"}}),
    ("array-nin", {"tags": {"$nin": ["a"]}}),
    ("array-range", {"tags": {"$gt": "a"}}),
    ("and", {"$and": [{"tier": "pro"}, {"age": {"$gt": 20}}]}),
    ("or", {"$or": [{"tier": "team"}, {"active": False}]}),
    ("not", {"$not": {"tier": "pro"}}),
    ("field-not", {"age": {"$not": {"$gt": 30}}}),
    ("implicit-and", {"tier": "free", "active": True}),
    ("missing-key-ne", {"nope": {"$ne": 1}}),
    ("missing-key-lt", {"nope": {"$lt": 1}}),
    ("missing-key-not-exists", {"nope.deeper": {"$exists": False}}),
    ("role-and-thread", {"role": "assistant", "thread_id": {"$in": ["t0", "t2"]}}),
    (
        "nested-logic",
        {
            "$or": [
                {"$and": [{"age": {"$gte": 30}}, {"active": True}]},
                {"$not": {"score": {"$exists": True}}},
                {"profile.level": {"$not": {"$in": [1, 3]}}, "note": "hello"},
            ]
        },
    ),
]


@pytest.mark.parametrize("retriever", ["vector", "keyword"])
@pytest.mark.parametrize("filter", [f for _, f in FILTER_CASES], ids=[name for name, _ in FILTER_CASES])
def test_given_a_random_corpus_when_searching_with_a_filter_then_hits_are_exactly_the_reference_matches(
    index: SearchIndex, filter: dict[str, Any], retriever: str
) -> None:
    corpus = _corpus()
    index.upsert(corpus)
    query = [0.5, -0.2, 0.1, 0.9, -0.4, 0.3, 0.0, 0.2]
    expected = [e for e in corpus if matches(filter, e.metadata)]
    if retriever == "vector":
        expected.sort(key=lambda e: -cosine(e.vector, query))

    def run(top_k: int) -> list[str]:
        results = index.search(
            "r1",
            top_k=top_k,
            vector=query if retriever == "vector" else None,
            text="memo" if retriever == "keyword" else None,
            filter=filter,
        )
        return ids(results.vector if retriever == "vector" else results.keyword)

    everything, first_three = run(len(corpus)), run(3)

    if retriever == "vector":
        assert everything == [e.message_id for e in expected], (
            "vector hits differ from the reference, in order"
        )
        assert first_three == [e.message_id for e in expected[:3]]
    else:
        assert sorted(everything) == sorted(e.message_id for e in expected), (
            "keyword hits differ from reference"
        )
        assert len(first_three) == min(3, len(expected)) and set(first_three) <= set(everything)


def test_given_a_filter_and_a_thread_scope_when_searching_then_both_apply(index: SearchIndex) -> None:
    corpus = _corpus()
    index.upsert(corpus)
    filter = {"role": "user"}

    results = index.search("r1", top_k=len(corpus), vector=E0, text="memo", thread_id="t1", filter=filter)

    expected = sorted(e.message_id for e in corpus if e.thread_id == "t1" and matches(filter, e.metadata))
    assert sorted(ids(results.vector)) == expected
    assert sorted(ids(results.keyword)) == expected


def test_given_an_empty_filter_when_searching_then_everything_matches(index: SearchIndex) -> None:
    index.upsert([entry("m1", "memo", E0, metadata={"a": 1}), entry("m2", "memo", E1)])

    results = index.search("r1", top_k=5, vector=E0, text="memo", filter={})

    assert sorted(ids(results.vector)) == ["m1", "m2"] and sorted(ids(results.keyword)) == ["m1", "m2"]


def test_given_a_malformed_filter_when_searching_then_invalid_input_names_the_field(
    index: SearchIndex,
) -> None:
    with pytest.raises(InvalidInput) as err:
        index.search("r1", top_k=4, vector=E0, filter={"$and": [{"a": 1}, {"age": {"$regex": "x"}}]})

    assert err.value.field == "filter.$and[1].age.$regex"


# text -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("寿司", "sushi"),
        ("東京", "tokyo"),
        ("タワー", "tokyo"),
        ("🎉", "party"),
        ("🍣", "sushi"),
        ("한국어", "korean"),
        ("Geburtstag", "party"),
        ("café", "cafe"),
    ],
)
def test_given_emoji_and_cjk_text_when_searching_by_keyword_then_it_is_found(
    index: SearchIndex, query: str, expected: str
) -> None:
    index.upsert(
        [
            entry("sushi", "我喜欢吃寿司 🍣", E0),
            entry("tokyo", "東京 タワーに行きました", E1),
            entry("party", "Geburtstag 🎉 party", E2),
            entry("korean", "한국어 문장을 공부해요", E0),
            entry("cafe", "Meet me at the café ☕", E1),
        ]
    )

    hits = index.search("r1", top_k=5, text=query).keyword

    assert ids(hits)[:1] == [expected]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Hauptstrasse", "street"),
        ("HAUPTSTRASSE", "street"),
        ("hauptstraße", "street"),
        ("finale", "ligature"),
        ("ﬁnale", "ligature"),
        ("rock", "fullwidth"),
        ("ｒｏｃｋ", "fullwidth"),
        ("ROCK", "fullwidth"),
        ("naive", "accent"),
    ],
)
def test_given_compatibility_forms_and_case_when_searching_by_keyword_then_they_match_their_plain_letters(
    index: SearchIndex, query: str, expected: str
) -> None:
    """Eszett, ligatures and full-width letters are folded as OpenSearch's ``asciifolding`` folds them, on
    both sides of the match: what a user types and what was stored may be either form."""
    index.upsert(
        [
            entry("street", "Wir treffen uns in der Hauptstraße", E0),
            entry("ligature", "Der ﬁnale Bericht ist fertig", E1),
            entry("fullwidth", "ＲＯＣＫ concert tonight", E2),
            entry("accent", "a NAÏVE question", E0),
        ]
    )

    hits = index.search("r1", top_k=4, text=query).keyword

    assert ids(hits) == [expected]


@pytest.mark.parametrize(
    "query",
    [
        "rock AND NOT roll*",
        '"rock',
        "rock OR",
        "NEAR(rock roll)",
        "text:rock",
        "^rock",
        "rock) (",
        "rock's + -roll",
    ],
)
def test_given_fts_syntax_in_a_query_when_searching_by_keyword_then_it_is_plain_text(
    index: SearchIndex, query: str
) -> None:
    index.upsert([entry("m1", "we love rock and roll", E0), entry("m2", "classical music", E1)])

    hits = index.search("r1", top_k=5, text=query).keyword

    assert ids(hits) == ["m1"]


@pytest.mark.parametrize("query", ["", "   ", "?!...", "— …"])
def test_given_a_query_without_words_when_searching_by_keyword_then_the_list_is_empty(
    index: SearchIndex, query: str
) -> None:
    index.upsert([entry("m1", "anything at all", E0)])

    assert index.search("r1", top_k=5, text=query).keyword == []


# invalid input --------------------------------------------------------------------------------------


@pytest.mark.parametrize("top_k", [0, -1, 1.5, True, "3", None])
def test_given_an_invalid_top_k_when_searching_then_invalid_input(index: SearchIndex, top_k: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        index.search("r1", top_k=top_k, vector=E0)

    assert err.value.field == "top_k"


@pytest.mark.parametrize(
    "vector",
    [[1.0] * (DIM - 1), [1.0] * (DIM + 1), [0.0] * DIM, [math.nan] + [1.0] * (DIM - 1)],
    ids=["short", "long", "zero", "nan"],
)
def test_given_a_bad_query_vector_when_searching_then_invalid_input(
    index: SearchIndex, vector: list[float]
) -> None:
    with pytest.raises(InvalidInput) as err:
        index.search("r1", top_k=4, vector=vector)

    assert err.value.field == "vector"


@pytest.mark.parametrize("vector", [[1.0] * (DIM - 1), [math.inf] + [1.0] * (DIM - 1)], ids=["short", "inf"])
def test_given_a_bad_entry_vector_when_upserting_then_invalid_input_and_nothing_is_written(
    index: SearchIndex, vector: list[float]
) -> None:
    with pytest.raises(InvalidInput) as err:
        index.upsert([entry("ok", "fine", E0), entry("bad", "broken", vector)])

    assert err.value.field == "entries[1].vector"
    assert index.search("r1", top_k=5, text="fine").keyword == [], "a failed batch must write nothing"


# erasure ----------------------------------------------------------------------------------------------


def test_given_a_resource_with_several_threads_when_deleted_then_its_chunks_are_counted_and_gone(
    index: SearchIndex,
) -> None:
    index.upsert(
        [
            entry("a", "piano lesson", E0, thread_id="t1"),
            entry("b", "piano tuner", E0, thread_id="t2", chunk=0),
            entry("b", "piano keys", E0, thread_id="t2", chunk=1),
            entry("c", "piano bench", E1, thread_id="t3"),
            entry("a", "piano recital", E0, thread_id="t1", resource_id="r2"),
        ]
    )

    assert index.delete_resource("r1") == 4

    gone = index.search("r1", top_k=10, vector=E0, text="piano")
    assert (gone.vector, gone.keyword) == ([], [])
    kept = index.search("r2", top_k=10, vector=E0, text="piano")
    assert ids(kept.vector) == ["a"] and ids(kept.keyword) == ["a"], "another resource's chunks stay"
    assert index.delete_resource("r1") == 0


def test_given_an_erased_resource_when_indexed_again_then_only_the_new_chunks_are_found(
    index: SearchIndex,
) -> None:
    index.upsert([entry("old", "cello", E0), entry("older", "cello case", E1)])
    assert len(ids(index.search("r1", top_k=5, vector=E0).vector)) == 2  # warms any per-resource cache
    index.delete_resource("r1")

    index.upsert([entry("new", "cello strings", E0)])

    results = index.search("r1", top_k=5, vector=E0, text="cello")
    assert ids(results.vector) == ["new"] and ids(results.keyword) == ["new"]
    assert index.delete_resource("r1") == 1


def test_given_a_resource_id_that_is_not_an_id_when_deleting_it_then_invalid_input(
    index: SearchIndex,
) -> None:
    with pytest.raises(InvalidInput):
        index.delete_resource("")


# SQLite-specific ------------------------------------------------------------------------------------


def test_sqlite_given_an_index_of_one_dimension_when_opened_with_another_then_invalid_input_names_both(
    tmp_path: Path,
) -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    db = SqliteDatabase(tmp_path / "memory.db")
    SqliteSearchIndex(db, 8)

    with pytest.raises(InvalidInput) as err:
        SqliteSearchIndex(db, 16)

    assert "8" in err.value.message and "16" in err.value.message
    assert err.value.field == "dimension"
    db.close()


def test_sqlite_given_an_index_of_one_model_when_opened_with_another_of_its_size_then_refused_naming_both(
    tmp_path: Path,
) -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    db = SqliteDatabase(tmp_path / "memory.db")
    SqliteSearchIndex(db, DIM, model_id="model-a").upsert([entry("m1", "persistent note", E0)])

    with pytest.raises(InvalidInput) as err:
        SqliteSearchIndex(db, DIM, model_id="model-b")

    assert "model-a" in err.value.message and "model-b" in err.value.message
    assert "memstack reindex" in err.value.message and err.value.field == "embedder"
    assert ids(SqliteSearchIndex(db, DIM, model_id="model-a").search("r1", top_k=1, vector=E0).vector) == [
        "m1"
    ]
    db.close()


def test_sqlite_given_an_index_file_from_before_models_were_recorded_when_opened_then_it_adopts_the_model(
    tmp_path: Path,
) -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    db = SqliteDatabase(tmp_path / "memory.db")
    SqliteSearchIndex(db, DIM)
    SqliteSearchIndex(db, DIM, model_id="model-a")

    with pytest.raises(InvalidInput):
        SqliteSearchIndex(db, DIM, model_id="model-b")
    db.close()


def test_sqlite_given_an_index_file_when_reopened_with_its_dimension_then_entries_are_still_there(
    tmp_path: Path,
) -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    db = SqliteDatabase(tmp_path / "memory.db")
    SqliteSearchIndex(db, DIM).upsert([entry("m1", "persistent note", E0)])
    db.close()

    db = SqliteDatabase(tmp_path / "memory.db")
    results = SqliteSearchIndex(db, DIM).search("r1", top_k=3, vector=E0, text="persistent")

    assert ids(results.vector) == ["m1"] and ids(results.keyword) == ["m1"]
    db.close()


def test_sqlite_given_english_inflections_when_searching_by_keyword_then_porter_stemming_matches_them() -> (
    None
):
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    index = SqliteSearchIndex(SqliteDatabase(":memory:"), DIM)
    index.upsert([entry("m1", "I went hiking with my dogs", E0), entry("m2", "cooking dinner", E1)])

    assert ids(index.search("r1", top_k=5, text="hike dog").keyword) == ["m1"]


def test_sqlite_given_a_cached_resource_when_another_connection_writes_then_the_next_search_sees_it(
    tmp_path: Path,
) -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    reader_db, writer_db = SqliteDatabase(tmp_path / "m.db"), SqliteDatabase(tmp_path / "m.db")
    reader, writer = SqliteSearchIndex(reader_db, DIM), SqliteSearchIndex(writer_db, DIM)
    reader.upsert([entry("m1", "first", E1)])
    assert ids(reader.search("r1", top_k=5, vector=E0).vector) == ["m1"]  # now cached

    writer.upsert([entry("m2", "second", E0)])
    assert ids(reader.search("r1", top_k=5, vector=E0).vector) == ["m2", "m1"]
    writer.delete_messages("r1", ["m2"])
    assert ids(reader.search("r1", top_k=5, vector=E0).vector) == ["m1"]
    writer.delete_thread("r1", "t1")
    assert reader.search("r1", top_k=5, vector=E0).vector == []
    writer.upsert([entry("m3", "third", E0)])
    reader.upsert([entry("m4", "fourth", E1)])  # its own write must not hide the other connection's
    assert ids(reader.search("r1", top_k=5, vector=E0).vector) == ["m3", "m4"]
    reader_db.close()
    writer_db.close()


@pytest.mark.parametrize("cache_bytes", [0, 1, 10_000_000])
def test_sqlite_given_any_vector_cache_size_when_searching_then_results_are_the_same(
    cache_bytes: int,
) -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    index = SqliteSearchIndex(SqliteDatabase(":memory:"), DIM, vector_cache_bytes=cache_bytes)
    corpus = _corpus(seed=11)
    index.upsert(corpus[:20])
    index.search("r1", top_k=5, vector=E0)  # fill the cache, then change the data under it
    index.upsert(corpus[20:])
    index.upsert([entry("m03", "memo", E0, metadata={"tier": "pro"}, thread_id="t0")])
    index.delete_messages("r1", ["m05"])
    index.delete_thread("r1", "t2")
    live = {e.message_id: e for e in corpus if e.message_id != "m05" and e.thread_id != "t2"}
    live["m03"] = entry("m03", "memo", E0, metadata={"tier": "pro"}, thread_id="t0")

    everything = index.search("r1", top_k=40, vector=E1).vector
    filtered = index.search("r1", top_k=40, vector=E1, filter={"tier": {"$in": ["pro", "team"]}}).vector

    ranked = sorted(live.values(), key=lambda e: -cosine(e.vector, E1))
    assert ids(everything) == [e.message_id for e in ranked]
    assert ids(filtered) == [
        e.message_id for e in ranked if matches({"tier": {"$in": ["pro", "team"]}}, e.metadata)
    ]


def test_sqlite_given_rewrites_and_deletes_when_they_are_done_then_no_keyword_entry_is_left_behind() -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    db = SqliteDatabase(":memory:")
    index = SqliteSearchIndex(db, DIM)
    index.upsert(
        [entry("m1", "one", chunk=0), entry("m1", "two", chunk=1), entry("m2", "three", thread_id="t2")]
    )
    index.upsert([entry("m1", "uno")])
    index.upsert([entry("m3", "four"), entry("m4", "five", thread_id="t2")])
    index.delete_messages("r1", ["m3"])
    index.delete_thread("r1", "t2")

    # Every posting must name a live chunk of its resource, and the statistics must count exactly those.
    postings = _postings(db)
    chunks = {
        (r, rowid): length
        for r, rowid, length in db.query("SELECT resource_id, rowid, length FROM search_chunks")
    }
    assert {(r, rowid) for r, _term, rowid in postings} == set(chunks)
    stats = db.query("SELECT resource_id, chunks, tokens FROM search_keyword_stats")
    assert stats == [("r1", 1, sum(chunks.values()))]


def _postings(db: Any) -> list[tuple[str, str, int]]:
    """Every ``(resource_id, term, rowid)`` posting of the SQLite keyword index (blocks and pending)."""
    from memstack.adapters.sqlite.keywords import unpack

    return [
        (resource_id, term, int(rowid))
        for resource_id, term, blob in db.query("SELECT resource_id, term, postings FROM search_postings")
        for rowid in unpack(bytes(blob))["rowid"].tolist()
    ] + db.query(
        "SELECT p.resource_id, j.key, p.rowid FROM search_pending_chunks AS p, json_each(p.counts) AS j"
    )


@pytest.mark.parametrize("cache_bytes", [0, 10_000_000])
def test_sqlite_given_equal_scores_when_searching_then_ties_are_broken_by_message_id(
    cache_bytes: int,
) -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    index = SqliteSearchIndex(SqliteDatabase(":memory:"), DIM, vector_cache_bytes=cache_bytes)
    names = random.Random(3).sample([f"m{i:02d}" for i in range(40)], 40)  # ids in shuffled order
    index.upsert([entry(m, "same words", at_angle(1 - (i % 4) / 10)) for i, m in enumerate(names)])

    results = index.search("r1", top_k=15, vector=E0, text="same words")

    best, second = sorted(names[0::4]), sorted(names[1::4])
    assert ids(results.vector) == best + second[:5]
    assert ids(results.keyword) == sorted(names)[:15]


def test_sqlite_given_a_query_of_only_stop_words_when_searching_by_keyword_then_they_are_searched() -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    index = SqliteSearchIndex(SqliteDatabase(":memory:"), DIM)
    index.upsert([entry("m1", "to be or not to be", E0), entry("m2", "a question of taste", E1)])

    assert ids(index.search("r1", top_k=5, text="Not to be!").keyword) == ["m1"]
    assert ids(index.search("r1", top_k=5, text="to question").keyword) == ["m2"], "stop words are dropped"


def test_given_entries_when_found_then_hits_carry_the_message_seq(index: SearchIndex) -> None:
    index.upsert(
        [
            entry("m7", "seven apples", E0, seq=7),
            entry("m9", "nine apples", at_angle(0.5), seq=9, thread_id="t2"),
        ]
    )
    both = index.search("r1", top_k=2, vector=E0, text="apples")
    assert {(h.message_id, h.thread_id, h.seq) for h in both.vector or []} == {
        ("m7", "t1", 7),
        ("m9", "t2", 9),
    }
    assert {(h.message_id, h.thread_id, h.seq) for h in both.keyword or []} == {
        ("m7", "t1", 7),
        ("m9", "t2", 9),
    }


def test_given_an_all_zero_entry_vector_when_searching_then_found_by_keywords_never_by_vector(
    index: SearchIndex,
) -> None:
    index.upsert([entry("emoji", "thumbs emoji127383", [0.0] * DIM), entry("m2", "other words", E1)])
    found = index.search("r1", top_k=5, vector=E0, text="thumbs")
    assert [h.message_id for h in found.vector or []] == ["m2"]
    assert [h.message_id for h in found.keyword or []] == ["emoji"]


def _reference_bm25(texts: dict[str, str], query: str) -> dict[str, float]:
    """BM25 as FTS5's ``bm25()`` computes it (k1 1.2, b 0.75, idf floored at 1e-6) over ``texts`` alone,
    divided by 2.2 (Lucene's scale), for every text that has a query term."""
    from memstack.adapters.search_text import query_terms
    from memstack.adapters.sqlite.keywords import tokens

    docs = {m: tokens(t) for m, t in texts.items()}
    avgdl = sum(len(d) for d in docs.values()) / len(docs)
    terms = [token for word in query_terms(query) for token in tokens(word)]
    scores: dict[str, float] = {}
    for m, words in docs.items():
        total = 0.0
        for term in terms:
            df = sum(term in d for d in docs.values())
            idf = max(math.log((len(docs) - df + 0.5) / (df + 0.5)), 0) or 1e-6
            tf = words.count(term)
            total += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(words) / avgdl))
        if any(term in words for term in terms):
            scores[m] = total / 2.2
    return scores


def test_sqlite_given_a_corpus_when_searching_keywords_then_scores_are_bm25_of_the_resource_alone() -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    ix = SqliteSearchIndex(SqliteDatabase(":memory:"), DIM)
    rng = random.Random(7)
    words = [
        "apple",
        "banana",
        "cherry",
        "date",
        "elder",
        "fig",
        "grape",
        "honey",
        "iris",
        "juniper",
        "kiwi",
        "lemon",
        "mango",
    ]
    texts = {i: " ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for i in range(300)}
    entries = [
        entry(
            f"m{i:03d}",
            text,
            unit(rng.random() + 0.01, rng.random()),
            thread_id=f"t{i % 3}",
            resource_id="r1" if i % 5 else "r2",
            seq=i,
        )
        for i, text in texts.items()
    ]
    for start in range(0, len(entries), 7):  # batches: postings pending, merged, appended to blocks
        ix.upsert(entries[start : start + 7])
    ix.upsert([entry("m299", "kiwi kiwi", E0, resource_id="r1", thread_id="t2", seq=299)])  # rewritten
    ix.delete_messages("r1", ["m298"])
    texts[299] = "kiwi kiwi"
    del texts[298]
    # what is indexed is each chunk's keyword text: the chunk, then its message's date in words
    own = {f"m{i:03d}": keyword_text(t, T0) for i, t in texts.items() if i % 5}
    for query in ("apple", "banana cherry", "kiwi lemon mango fig", "honey Honey honeys", "zebra"):
        expected = _reference_bm25(own, query)
        for thread_id in (None, "t1"):
            for top_k in (1, 4, 16, 300):
                found = ix.search("r1", top_k=top_k, text=query, thread_id=thread_id).keyword or []
                allowed = {
                    m: score
                    for m, score in expected.items()
                    if thread_id is None or int(m[1:]) % 3 == int(thread_id[1:])
                }
                want = sorted(allowed.items(), key=lambda item: (-item[1], item[0]))[:top_k]
                assert [h.message_id for h in found] == [m for m, _ in want], (query, thread_id, top_k)
                assert [h.score for h in found] == pytest.approx([s for _, s in want], rel=1e-9)


def test_sqlite_given_a_conversation_stored_alone_or_beside_others_then_its_rankings_are_identical(
    tmp_path: Path,
) -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    rng = random.Random(5)
    vocabulary = [
        "trip",
        "dog",
        "hike",
        "paint",
        "school",
        "music",
        "camp",
        "beach",
        "cake",
        "museum",
        "garden",
        "novel",
    ]

    def conversation(resource_id: str, seed: int) -> list[IndexEntry]:
        local = random.Random(seed)
        return [
            entry(
                f"{resource_id}-m{i}",
                " ".join(local.choice(vocabulary) for _ in range(local.randint(2, 9))),
                unit(local.random() + 0.01, local.random(), local.random()),
                resource_id=resource_id,
                thread_id=f"s{i // 10}",
                seq=i,
            )
            for i in range(60)
        ]

    alone = SqliteSearchIndex(SqliteDatabase(tmp_path / "alone.db"), DIM)
    alone.upsert(conversation("me", 1))
    crowded = SqliteSearchIndex(SqliteDatabase(tmp_path / "crowded.db"), DIM)
    for k in range(4):  # other users, with other word frequencies, before and after
        crowded.upsert(conversation(f"other{k}", 10 + k)[: 20 + 10 * k])
        if k == 1:
            crowded.upsert(conversation("me", 1))
    crowded.upsert([entry("x", "dog dog dog dog", E0, resource_id="other0")])

    for _ in range(20):
        query = " ".join(rng.sample(vocabulary, rng.randint(1, 4)))
        a = alone.search("me", top_k=10, text=query, vector=unit(rng.random(), rng.random(), 0.3))
        b = crowded.search("me", top_k=10, text=query, vector=unit(rng.random(), rng.random(), 0.3))
        assert a.keyword == b.keyword, query


@pytest.mark.parametrize("rewriter", ["writer", "reader"])
def test_sqlite_given_a_cached_resource_when_another_connection_erases_it_and_it_is_rewritten_then_no_erased_hit(
    tmp_path: Path, rewriter: str
) -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    reader_db, writer_db = SqliteDatabase(tmp_path / "m.db"), SqliteDatabase(tmp_path / "m.db")
    reader, writer = SqliteSearchIndex(reader_db, DIM), SqliteSearchIndex(writer_db, DIM)
    reader.upsert([entry("old", "first", E0)])
    assert ids(reader.search("r1", top_k=5, vector=E0).vector) == ["old"]  # cached at this generation

    writer.delete_resource("r1")
    # the generation counter restarts: it must not land on the reader's cached one (writer), nor one
    # above it, which the reader would take for its own next write (reader)
    (writer if rewriter == "writer" else reader).upsert([entry("new", "second", E1)])

    assert ids(reader.search("r1", top_k=5, vector=E0).vector) == ["new"], "an erased chunk came back"
    reader_db.close()
    writer_db.close()


def test_sqlite_given_an_erased_resource_when_the_keyword_tables_are_read_then_its_words_are_gone() -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex

    db = SqliteDatabase(":memory:")
    index = SqliteSearchIndex(db, DIM)
    index.upsert([entry(f"k{i}", f"keep common words {i}", resource_id="r2") for i in range(50)])
    index.upsert([entry("m1", "zqxjvword secret"), entry("m2", "another zqxjvword")])
    assert "zqxjvword" in {term for _, term, _ in _postings(db)}

    index.delete_resource("r1")

    assert {r for r, _, _ in _postings(db)} == {"r2"}
    assert db.query("SELECT resource_id FROM search_keyword_stats") == [("r2",)]
    assert ids(index.search("r2", top_k=5, text="common").keyword)
