"""Indexable text, chunking and hybrid fusion."""

from __future__ import annotations

from datetime import UTC, datetime

from memstack.fusion import fuse
from memstack.model import Author, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from memstack.ports import IndexHit
from memstack.text import chunk_text, searchable_text


def message(*parts: object, author: Author | None = None) -> Message:
    return Message(
        id="m",
        thread_id="t",
        resource_id="r",
        role="assistant",
        parts=parts,
        created_at=datetime.now(UTC),
        author=author,  # type: ignore[arg-type]
    )


def test_given_tool_parts_when_indexed_then_names_args_and_results_are_text_truncated() -> None:
    m = message(
        TextPart(text="Let me check."),
        ToolCallPart(id="c", name="get_weather", args={"city": "Oslo"}),
        ToolResultPart(tool_call_id="c", name="get_weather", result={"temp": "x" * 5000}),
        ReasoningPart(text="secret chain of thought"),
    )
    text = searchable_text(m, tool_text_chars=100)
    assert "Let me check." in text and 'get_weather({"city": "Oslo"})' in text
    assert "get_weather result:" in text and len(text.splitlines()[-1]) == 100
    assert "secret" not in text


def test_given_an_author_when_indexed_then_the_name_leads() -> None:
    assert searchable_text(message(TextPart(text="hi"), author=Author(id="u1", name="Ana"))) == "Ana: hi"


def test_given_long_text_when_chunked_then_bounded_nonempty_and_lossless_on_words() -> None:
    words = [f"w{i}" for i in range(5000)]
    chunks = chunk_text(" ".join(words), 1000)
    assert all(0 < len(c) <= 1000 for c in chunks)
    assert " ".join(chunks).split() == words
    assert chunk_text("   ", 10) == []
    assert chunk_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def hits(*ids: str) -> list[IndexHit]:
    return [IndexHit(i, "t", 1.0 / (n + 1)) for n, i in enumerate(ids)]


def test_given_a_weak_vector_list_when_fused_then_strong_keyword_top_hits_survive() -> None:
    keyword = hits("k1", "k2", "k3", "k4")
    vector = hits("v1", "v2", "v3", "v4")
    fused = fuse(vector, keyword, top_k=4, vector_weight=0.5, keyword_weight=1.0, rank_constant=5)
    assert [h.message_id for h in fused][:2] == ["k1", "k2"]


def test_given_a_hit_whose_neighbours_matched_when_fused_then_it_outranks_an_equal_lone_hit() -> None:
    keyword = [
        IndexHit("lone", "a", 1.0, seq=50),
        IndexHit("mid", "b", 1.0, seq=10),
        IndexHit("next", "b", 1.0, seq=11),
    ]
    vector = [IndexHit("next", "b", 0.9, seq=11)]
    fused = fuse(
        vector,
        keyword,
        top_k=3,
        vector_weight=0.5,
        keyword_weight=1.0,
        rank_constant=5,
        neighbour_weight=0.25,
        before=1,
        after=1,
    )
    order = [h.message_id for h in fused]
    assert order.index("mid") < order.index("lone")
    plain = [
        h.message_id
        for h in fuse(vector, keyword, top_k=3, vector_weight=0.5, keyword_weight=1.0, rank_constant=5)
    ]
    assert plain.index("lone") < plain.index("mid")


def test_given_agreement_when_fused_then_a_hit_in_both_lists_ranks_first() -> None:
    fused = fuse(hits("a", "b"), hits("b", "c"), top_k=3, vector_weight=1, keyword_weight=1, rank_constant=60)
    assert fused[0].message_id == "b" and fused[0].vector_rank == 2 and fused[0].keyword_rank == 1


def test_given_ties_when_fused_then_order_is_stable() -> None:
    a = fuse(hits("x", "y"), [], top_k=2, vector_weight=1, keyword_weight=1, rank_constant=60)
    b = fuse(hits("x", "y"), [], top_k=2, vector_weight=1, keyword_weight=1, rank_constant=60)
    assert a == b and [h.message_id for h in a] == ["x", "y"]


def test_given_two_lists_when_fused_then_each_hit_keeps_each_retrievers_own_score_of_its_best_chunk() -> None:
    vector = [IndexHit("b", "t", 0.9), IndexHit("a", "t", 0.5), IndexHit("b", "t", 0.4)]
    keyword = [IndexHit("b", "t", 7.5), IndexHit("c", "t", 3.0)]
    fused = {
        h.message_id: h
        for h in fuse(vector, keyword, top_k=3, vector_weight=1, keyword_weight=1, rank_constant=60)
    }
    assert (fused["b"].vector_score, fused["b"].keyword_score) == (0.9, 7.5)
    assert (fused["a"].vector_score, fused["a"].keyword_score) == (0.5, None)
    assert (fused["c"].vector_score, fused["c"].keyword_score) == (None, 3.0)
