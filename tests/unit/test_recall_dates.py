"""Dated recall end to end: a query naming a date, a month or a relative time (in the caller's time zone)
prefers that time's messages, with the same hits on the embedded SQLite index and on OpenSearch (the test
double), since the dates are indexed through the shared keyword text and read by the engine."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memstack import Memory
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SqliteSearchIndex
from memstack.adapters.sqlite.store import SqliteMemoryStore
from memstack.adapters.testing import HashEmbedder
from memstack.ports import SearchIndex
from memstack.tokens import default_tokenizer

SESSIONS = {
    "t1-may": datetime(2023, 5, 8, 14, 0, tzinfo=UTC),
    "t2-aug": datetime(2023, 8, 14, 9, 0, tzinfo=UTC),
    "t3-oct": datetime(2023, 10, 13, 18, 0, tzinfo=UTC),
}
TEXTS = ["I painted a picture today", "it shows a quiet lake at dawn", "my kids loved it"]
NOW = datetime(2023, 10, 20, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "opensearch"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    db = SqliteDatabase(tmp_path / "m.db")
    embedder = HashEmbedder()
    if request.param == "sqlite":
        index: SearchIndex = SqliteSearchIndex(db, embedder.dimension)
        yield from _memory(db, index, embedder)
        return
    from tests.contract import opensearch_support

    with opensearch_support.opensearch_managed_index(embedder.dimension) as index:
        yield from _memory(db, index, embedder)


def _memory(db: SqliteDatabase, index: SearchIndex, embedder: HashEmbedder) -> Iterator[Memory]:
    memory = Memory(
        store=SqliteMemoryStore(db), index=index, embedder=embedder, tokenizer=default_tokenizer()
    )
    for thread, start in SESSIONS.items():
        memory.save_messages(
            thread_id=thread,
            resource_id="r",
            messages=[
                {
                    "id": f"{thread}-{i}",
                    "role": "user",
                    "content": text,
                    "created_at": start + timedelta(minutes=i),
                }
                for i, text in enumerate(TEXTS)
            ],
        )
    yield memory
    memory.close()


def recalled(memory: Memory, query: str, **recall: Any) -> list[str]:
    options = {"semantic_recall": {"top_k": 1, "message_range": 0, "now": NOW, **recall}}
    return [
        h.message_id for h in memory.recall(thread_id="q", resource_id="r", query=query, options=options).hits
    ]


def test_given_the_same_words_in_three_sessions_when_a_query_names_a_month_then_that_months_message_wins(
    memory: Memory,
) -> None:
    assert recalled(memory, "what did I paint in August?") == ["t2-aug-0"]
    assert recalled(memory, "the picture I painted on October 13, 2023") == ["t3-oct-0"]
    assert recalled(memory, "which picture did I paint in May 2023") == ["t1-may-0"]


def test_given_a_relative_time_when_recalling_then_it_is_read_against_now_in_the_callers_time_zone(
    memory: Memory,
) -> None:
    assert recalled(memory, "the picture I painted last week") == ["t3-oct-0"]
    assert recalled(memory, "the picture I painted two months ago") == ["t2-aug-0"]
    # 2023-10-14 01:30 in Auckland is still the 13th in UTC: "yesterday" there is the 13th
    late = {"now": datetime(2023, 10, 14, 1, 30, tzinfo=UTC), "time_zone": "Pacific/Auckland"}
    assert recalled(memory, "the picture I painted yesterday", **late) == ["t3-oct-0"]


def test_given_many_days_of_one_topic_when_a_query_names_a_day_in_any_spelling_then_that_days_message_wins(
    memory: Memory,
) -> None:
    # one message a day, all with the same words: only the date tells them apart, and the day asked
    # about is not among the first candidates of either retriever unless its date words are searched
    start = datetime(2023, 3, 1, 12, 0, tzinfo=UTC)
    memory.save_messages(
        thread_id="budget",
        resource_id="r",
        messages=[
            {
                "id": f"b-{day:03d}",
                "content": "we reviewed the quarterly budget figures",
                "created_at": start + timedelta(days=day),
            }
            for day in range(150)
        ],
    )
    target = "b-100"  # 2023-06-09
    for query in ("what about the budget on June 9, 2023?", "what about the budget on 2023-06-09?"):
        assert recalled(memory, query) == [target], query
