"""``semantic_recall.threshold`` in hybrid mode is a relevance floor on each retriever's normalised score,
and vector hits without similarity never fill ``top_k`` (issue 13, item 8) — on the embedded default and on
the AWS backend (DynamoDB under moto, OpenSearch on its double in both modes)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memstack.fusion import KEYWORD_HALF_SCORE, keyword_relevance
from tests.backend_support import BACKENDS, Backend, open_backend

R, T = "r1", "t1"
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")


class OneHotEmbedder:
    """One dimension per word of ``WORDS``: texts sharing no such word have cosine similarity exactly 0."""

    model_id = "one-hot-8"
    dimension = len(WORDS)
    symmetric = True

    def _embed(self, text: str) -> list[float]:
        words = set(text.lower().split())
        return [1.0 if w in words else 0.0 for w in WORDS]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with open_backend(request.param, tmp_path, OneHotEmbedder()) as opened:
        # one thread each: a message's keyword text carries the previous message of its thread
        # (recall.engine.keyword_context), and these entries must share no word but the common ones
        for i, word in enumerate(WORDS):
            opened.memory.save_messages(
                thread_id=f"log{i}", resource_id=R, messages=[f"{word} is the log entry number {i}"]
            )
        yield opened


def hybrid(**extra: Any) -> dict[str, Any]:
    return {
        "semantic_recall": {"mode": "hybrid", "top_k": 4, "message_range": 0, "scope": "resource", **extra}
    }


def texts(backend: Backend, query: str, options: dict[str, Any]) -> list[str]:
    found = backend.memory.recall(thread_id=T, resource_id=R, query=query, options=options)
    by_id = {m.id: m.text for m in found.messages}
    return [by_id[h.message_id] for h in found.hits]


def test_given_one_related_message_when_recalled_in_hybrid_then_unrelated_vector_hits_do_not_fill_top_k(
    backend: Backend,
) -> None:
    assert texts(backend, "alpha", hybrid()) == ["alpha is the log entry number 0"]


def test_given_a_query_of_common_words_when_recalled_with_a_threshold_then_nothing_is_relevant(
    backend: Backend,
) -> None:
    assert len(texts(backend, "is the log entry", hybrid())) == 4  # without a floor, common words match
    assert texts(backend, "is the log entry", hybrid(threshold=0.1)) == []


def test_given_a_threshold_when_recalled_in_hybrid_then_either_retriever_can_vouch_for_a_hit(
    backend: Backend,
) -> None:
    assert texts(backend, "bravo", hybrid(threshold=0.9)) == ["bravo is the log entry number 1"]  # vector
    assert texts(backend, "number 3", hybrid(threshold=0.1)) == ["delta is the log entry number 3"]  # keyword


def test_given_bm25_scores_when_normalised_then_saturating_at_the_documented_half_score() -> None:
    assert keyword_relevance(0.0) == 0.0 and keyword_relevance(-1.0) == 0.0
    assert keyword_relevance(KEYWORD_HALF_SCORE) == 0.5
    assert 0.9 < keyword_relevance(100.0) < 1.0
