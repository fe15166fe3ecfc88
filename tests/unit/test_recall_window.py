"""Which messages recall shows around its hits (memstack.recall.window): within Mastra's message budget of
``top_k × (before + 1 + after)``, short replies show their session neighbours, overlapping windows leave
room for further hits, and a query naming a time shows that time's hits first."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from memstack.config import SemanticRecallOptions
from memstack.dates import query_time_range
from memstack.fusion import FusedHit
from memstack.model import Message, TextPart
from memstack.recall.window import fetch_span, in_range_first, message_budget, select

T0 = datetime(2023, 5, 8, tzinfo=UTC)


def thread(name: str, texts: list[str], start: datetime = T0) -> list[Message]:
    return [
        Message(
            id=f"{name}-{i}",
            thread_id=name,
            resource_id="r",
            role="user",
            parts=(TextPart(text=text),),
            seq=i,
            created_at=start + timedelta(minutes=i),
        )
        for i, text in enumerate(texts)
    ]


def hit(message: Message) -> FusedHit:
    return FusedHit(message.id, message.thread_id, 1.0, seq=message.seq)


LONG = "this message says something with enough words in it"
OPTIONS = SemanticRecallOptions(top_k=2, message_range=1)


def test_given_options_then_the_budget_is_top_k_windows_of_mastra() -> None:
    assert message_budget(OPTIONS) == 6
    assert message_budget(SemanticRecallOptions(top_k=4, message_range={"before": 0, "after": 2})) == 12


def test_given_hits_far_apart_when_selected_then_top_k_full_windows_and_no_more() -> None:
    a = thread("a", [LONG] * 20)
    chosen = select([hit(a[3]), hit(a[10]), hit(a[16])], a, OPTIONS)
    assert [h.message_id for h in chosen.hits] == ["a-3", "a-10"]
    assert [m.id for m in chosen.messages] == ["a-2", "a-3", "a-4", "a-9", "a-10", "a-11"]


def test_given_adjacent_hits_when_selected_then_the_unused_budget_goes_to_the_next_hit() -> None:
    a = thread("a", [LONG] * 20)
    options = SemanticRecallOptions(top_k=3, message_range=1)
    chosen = select([hit(a[3]), hit(a[4]), hit(a[16]), hit(a[10]), hit(a[0])], a, options)
    # 3 and 4 share neighbours (4 messages), 16 takes 3 more, 10 would overflow 9, 0 adds 0 and 1
    assert [h.message_id for h in chosen.hits] == ["a-3", "a-4", "a-16", "a-0"]
    assert len(chosen.messages) == message_budget(options) == 9


def test_given_a_short_reply_hit_when_selected_then_its_window_reaches_one_further_each_side() -> None:
    texts = [LONG] * 10
    texts[5] = "Yes, definitely!"
    a = thread("a", texts)
    chosen = select([hit(a[5])], a, OPTIONS)
    assert [m.id for m in chosen.messages] == ["a-3", "a-4", "a-5", "a-6", "a-7"]


def test_given_a_short_reply_whose_wider_window_would_overflow_when_selected_then_its_plain_window() -> None:
    texts = [LONG] * 10
    texts[5] = "ah"
    a = thread("a", texts)
    b = thread("b", [LONG])
    chosen = select([hit(a[1]), hit(a[5]), hit(b[0])], a + b, OPTIONS)
    assert [h.message_id for h in chosen.hits] == ["a-1", "a-5"], "a-5's five messages do not fit 6 - 3"
    assert [m.id for m in chosen.messages] == ["a-0", "a-1", "a-2", "a-4", "a-5", "a-6"]


@pytest.mark.parametrize("texts", [["I love my garden", "cars", "boats", "roses"], ["ok", "ok", "ok"]])
def test_given_message_range_0_when_selected_then_the_hits_themselves_and_never_none(
    texts: list[str],
) -> None:
    a = thread("a", texts)
    for top_k in (1, 2):
        options = SemanticRecallOptions(top_k=top_k, message_range=0)
        chosen = select([hit(m) for m in a], a, options)
        assert [h.message_id for h in chosen.hits] == [m.id for m in a[:top_k]]
        assert [m.id for m in chosen.messages] == [h.message_id for h in chosen.hits], "no neighbour"


def test_given_no_neighbours_before_when_a_short_reply_is_selected_then_it_widens_after_only() -> None:
    a = thread("a", ["ah"] * 10)
    chosen = select([hit(a[5])], a, SemanticRecallOptions(top_k=1, message_range={"before": 0, "after": 2}))
    assert [m.id for m in chosen.messages] == ["a-5", "a-6", "a-7"], "one hit's budget is three messages"
    wide = select([hit(a[5])], a, SemanticRecallOptions(top_k=2, message_range={"before": 0, "after": 2}))
    assert [m.id for m in wide.messages] == ["a-5", "a-6", "a-7", "a-8"]
    assert fetch_span(SemanticRecallOptions(message_range={"before": 0, "after": 2})) == (0, 3)


SHAPES = ["ah", LONG]


@pytest.mark.parametrize("before", [0, 1, 2])
@pytest.mark.parametrize("after", [0, 1, 2])
@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_given_any_range_and_threads_of_short_and_long_messages_when_selected_then_within_the_budget_and_never_empty(
    before: int, after: int, top_k: int
) -> None:
    options = SemanticRecallOptions(top_k=top_k, message_range={"before": before, "after": after})
    for shape in itertools.product(SHAPES, repeat=5):
        a = thread("a", list(shape))
        for order in (a, a[::-1], a[2:] + a[:2]):
            chosen = select([hit(m) for m in order], a, options)
            assert chosen.hits and chosen.hits[0] == hit(order[0]), "the best hit is always shown"
            assert len(chosen.messages) <= message_budget(options)
            if before == after == 0:
                assert {m.id for m in chosen.messages} == {h.message_id for h in chosen.hits}


def test_given_a_hit_whose_message_is_gone_when_selected_then_it_is_skipped() -> None:
    a = thread("a", [LONG] * 5)
    ghost = FusedHit("gone", "a", 2.0, seq=99)
    assert [h.message_id for h in select([ghost, hit(a[2])], a, OPTIONS).hits] == ["a-2"]


def test_given_a_query_naming_a_time_when_ordering_then_hits_from_that_time_come_first() -> None:
    may = thread("may", [LONG] * 2)
    october = thread("oct", [LONG] * 2, start=datetime(2023, 10, 13, tzinfo=UTC))
    when = query_time_range("in October 2023", datetime(2023, 11, 1, tzinfo=UTC))
    assert when is not None
    hits = [hit(may[0]), hit(october[1]), hit(may[1]), hit(october[0])]
    ordered = in_range_first(hits, may + october, when)
    assert [h.message_id for h in ordered] == ["oct-1", "oct-0", "may-0", "may-1"]


def test_given_the_best_match_is_a_short_message_when_recall_asks_top_k_1_range_0_then_it_is_shown() -> None:
    from memstack import Memory

    with Memory.local(":memory:", embedder="hash") as memory:
        saved = memory.save_messages(
            thread_id="t",
            resource_id="r",
            messages=["I love my garden", "unrelated filler about cars", "boats are fun to sail"],
        )
        options = {"semantic_recall": {"top_k": 1, "message_range": 0}}
        found = memory.recall(thread_id="q", resource_id="r", query="love garden", options=options)
        assert [h.message_id for h in found.hits] == [saved[0].id]
        assert [m.id for m in found.messages] == [saved[0].id]
        context = memory.context(thread_id="q", resource_id="r", message="love garden", options=options)
        assert [m.id for m in context.recalled] == [saved[0].id]


@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
def test_every_valid_option_asks_an_index_search_for_at_most_its_limit(mode: str) -> None:
    """``top_k`` and ``message_range`` each within their limits can make a budget past what an index
    search returns (100 × (50 + 1 + 50) = 10,100): recall asks for at most ``ports.MAX_TOP_K``."""
    from memstack.ports import MAX_TOP_K
    from memstack.recall.engine import list_depth
    from memstack.recall.window import candidate_count

    for top_k, before, after, candidates in itertools.product(
        (1, 4, 99, 100), (0, 1, 50), (0, 1, 50), (1, 20)
    ):
        options = SemanticRecallOptions.model_validate(
            {
                "mode": mode,
                "top_k": top_k,
                "message_range": {"before": before, "after": after},
                "hybrid": {"candidates": candidates},
            }
        )
        want = candidate_count(options)
        assert 1 <= want <= MAX_TOP_K and 1 <= list_depth(options, want) <= MAX_TOP_K, options
        if message_budget(options) <= MAX_TOP_K:
            assert want == message_budget(options)
