"""Nothing indexed is wrong (issue 13): recall back-fills ``top_k`` when hits lost their rows, chunks fit the
embedder's token limit in every script, a deterministic refusal is ``InvalidInput``, a malformed embedding
answer is never cached — on the embedded default and on the AWS backend (DynamoDB under moto, OpenSearch on
its double in both modes)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from memstack.adapters.hash_embed import HashEmbedder
from memstack.errors import InvalidInput, Unavailable
from memstack.tokens import TiktokenTokenizer
from tests.backend_support import BACKENDS, Backend, open_backend

R, T = "r1", "t1"
KEYWORD = {"semantic_recall": {"mode": "keyword", "top_k": 3, "message_range": 0, "scope": "thread"}}


class TokenLimitedEmbedder(HashEmbedder):
    """Refuses a text over 8,191 ``cl100k_base`` tokens, as OpenAI's embeddings API does (HTTP 400, which
    the OpenAI adapter raises as ``InvalidInput``)."""

    LIMIT = 8_191

    def __init__(self) -> None:
        super().__init__()
        self.tokens = TiktokenTokenizer("cl100k_base")
        self.longest = 0

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        for text in texts:
            n = self.tokens.count(text)
            self.longest = max(self.longest, n)
            if n > self.LIMIT:
                raise InvalidInput(f"this model's maximum context length is {self.LIMIT} tokens, not {n}")
        return super().embed_documents(texts)


class FlakyEmbedder(HashEmbedder):
    """Answers one malformed batch (a vector one number short), then good ones."""

    def __init__(self) -> None:
        super().__init__()
        self.bad = 1

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        out = super().embed_documents(texts)
        if self.bad:
            self.bad -= 1
            return [v[:-1] for v in out]
        return out


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with open_backend(request.param, tmp_path) as opened:
        yield opened


def test_given_top_hits_whose_rows_are_gone_when_recalled_then_top_k_is_back_filled(backend: Backend) -> None:
    memory = backend.memory
    saved = memory.save_messages(
        thread_id=T,
        resource_id=R,
        messages=[f"harbour note {i} " + "harbour " * (10 - i) for i in range(8)],
    )
    first = memory.recall(thread_id=T, resource_id=R, query="harbour", options=KEYWORD)
    assert len(first.hits) == 3
    # rows gone from the store but not from the index (a TTL expiry, a crash before the index clean-up)
    backend.store.delete_messages(R, [h.message_id for h in first.hits[:2]])

    again = memory.recall(thread_id=T, resource_id=R, query="harbour", options=KEYWORD)

    gone = {h.message_id for h in first.hits[:2]}
    assert len(again.hits) == 3, "recall returned fewer than top_k while the index held more"
    assert not gone & {h.message_id for h in again.hits}
    assert {h.message_id for h in again.hits} <= {m.id for m in saved}
    assert {m.id for m in again.messages} == {h.message_id for h in again.hits}


@pytest.mark.parametrize(
    "text",
    [
        "東京の港で船を待つ。" * 1_700,  # 17,000 characters of Japanese without a space
        "漢字" * 8_000,
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" * 256,  # 16,384 characters of hex
    ],
    ids=["japanese", "chinese", "hex"],
)
def test_given_text_of_any_script_when_saved_then_every_chunk_fits_the_embedders_token_limit(
    tmp_path: Path, text: str
) -> None:
    embedder = TokenLimitedEmbedder()
    with open_backend("sqlite", tmp_path, embedder) as backend:
        backend.memory.save_messages(thread_id=T, resource_id=R, messages=[f"ledger {text}"])
        found = backend.memory.recall(thread_id=T, resource_id=R, query="ledger", options=KEYWORD)

    assert 0 < embedder.longest <= TokenLimitedEmbedder.LIMIT
    assert len(found.hits) == 1


def test_given_an_embedder_that_refuses_the_text_when_saved_then_stored_unindexed_and_not_retried(
    tmp_path: Path,
) -> None:
    class Refusing(HashEmbedder):
        def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
            raise InvalidInput("input rejected by the model")

    with open_backend("sqlite", tmp_path, Refusing()) as backend:
        saved = backend.memory.save_messages(thread_id=T, resource_id=R, messages=["hello"])

        assert saved.unindexed == (saved[0].id,)
        assert saved.index_error is not None and saved.index_error.startswith("InvalidInput")
        assert not backend.memory.index_retry.pending, "no retry can mend a refusal of the text"
        assert [m.text for m in backend.memory.list_messages(thread_id=T, resource_id=R).messages] == [
            "hello"
        ]


def test_given_a_malformed_embedding_answer_when_saved_again_then_the_bad_vector_was_not_cached(
    tmp_path: Path,
) -> None:
    for name in BACKENDS:
        with open_backend(name, tmp_path / name, FlakyEmbedder()) as backend:
            first = backend.memory.save_messages(
                thread_id=T, resource_id=R, messages=[{"id": "m1", "content": "kelp"}]
            )
            assert first.unindexed == ("m1",), name

            backend.memory.save_messages(
                thread_id=T, resource_id=R, messages=[{"id": "m1", "content": "kelp"}]
            )

            found = backend.memory.recall(thread_id=T, resource_id=R, query="kelp", options=KEYWORD)
            assert [h.message_id for h in found.hits] == ["m1"], name


def test_given_messages_stored_but_never_indexed_when_the_database_is_opened_then_they_become_searchable(
    tmp_path: Path,
) -> None:
    from memstack import Memory

    with Memory.local(tmp_path / "m.db", embedder="hash") as memory:
        memory.index_on_save = False  # what a crash between the store's commit and inline indexing leaves
        memory.save_messages(thread_id=T, resource_id=R, messages=["the lighthouse keeper is named Ada"])
        assert memory.recall(thread_id=T, resource_id=R, query="lighthouse", options=KEYWORD).hits == []

    with Memory.local(tmp_path / "m.db", embedder="hash") as memory:
        found = memory.recall(thread_id=T, resource_id=R, query="lighthouse", options=KEYWORD)
        assert len(found.hits) == 1
        assert memory.reconcile_index() == 0  # healed once: nothing is left to reconcile


class PickyEmbedder(HashEmbedder):
    """Refuses any batch with a text containing ``refuse`` (``InvalidInput``) and, while ``down``, any with
    ``outage`` (``Unavailable``)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if any("refuse" in t for t in texts):
            raise InvalidInput("input rejected by the model")
        if self.down and any("outage" in t for t in texts):
            raise Unavailable("the embedding endpoint timed out")
        return super().embed_documents(texts)


def test_given_messages_saved_but_never_indexed_when_reconciled_then_searchable_once_on_every_backend(
    backend: Backend,
) -> None:
    memory = backend.memory
    memory.index_on_save = False  # a crash after the store's commit, or stream records given up on
    memory.save_messages(thread_id=T, resource_id=R, messages=["the lighthouse keeper is named Ada"])
    memory.save_messages(thread_id="t2", resource_id="r2", messages=["the lighthouse is red"])
    assert memory.recall(thread_id=T, resource_id=R, query="lighthouse", options=KEYWORD).hits == []

    assert memory.reconcile_index() > 0

    for rid, tid in ((R, T), ("r2", "t2")):
        assert (
            len(memory.recall(thread_id=tid, resource_id=rid, query="lighthouse", options=KEYWORD).hits) == 1
        )
    assert memory.reconcile_index() == 0
    if backend.double is not None:
        # the keyword text is the chunk, then a line with its message's date in words (search_text.keyword_text)
        texts = sorted(
            d["text"].rsplit("\n", 1)[0] for d in backend.double.documents(memory.index.name).values()
        )  # type: ignore[attr-defined]
        assert texts == ["the lighthouse is red", "the lighthouse keeper is named Ada"]


def test_given_a_thread_the_embedder_refuses_when_reconciled_then_the_other_threads_are_indexed(
    tmp_path: Path,
) -> None:
    for name in BACKENDS:
        with open_backend(name, tmp_path / name, PickyEmbedder()) as backend:
            memory = backend.memory
            memory.index_on_save = False
            memory.save_messages(thread_id="t1", resource_id=R, messages=["please refuse this"])
            memory.save_messages(thread_id="t2", resource_id=R, messages=["the harbour is quiet"])

            assert memory.reconcile_index() == 1

            found = memory.recall(thread_id="t2", resource_id=R, query="harbour", options=KEYWORD)
            assert len(found.hits) == 1, name


def test_given_the_embedder_down_for_one_thread_when_reconciled_then_unavailable_and_the_next_run_heals_it(
    tmp_path: Path,
) -> None:
    embedder = PickyEmbedder()
    with open_backend("aws-serverless", tmp_path, embedder) as backend:
        memory = backend.memory
        memory.index_on_save = False
        memory.save_messages(thread_id="t1", resource_id=R, messages=["an outage at the harbour"])
        memory.save_messages(thread_id="t2", resource_id=R, messages=["the harbour is quiet"])

        with pytest.raises(Unavailable, match="1 unindexed messages of 1 threads"):
            memory.reconcile_index()
        assert len(memory.recall(thread_id="t2", resource_id=R, query="quiet", options=KEYWORD).hits) == 1

        embedder.down = False
        assert memory.reconcile_index() == 1
        assert len(memory.recall(thread_id="t1", resource_id=R, query="outage", options=KEYWORD).hits) == 1


def test_given_a_limit_out_of_range_when_reconciling_then_invalid_input_naming_it(backend: Backend) -> None:
    for limit in (0, 10_001, True):
        with pytest.raises(InvalidInput, match="limit must be an integer from 1 to 10000"):
            backend.memory.reconcile_index(limit=limit)


def test_given_an_indexer_marking_during_a_save_on_serverless_when_both_finish_then_no_stale_chunk_stays(
    tmp_path: Path,
) -> None:
    from typing import Any

    with open_backend("aws-serverless", tmp_path) as backend:
        memory, double = backend.memory, backend.double
        assert double is not None
        memory.index_on_save = False  # the deployed API: the stream indexer indexes
        memory.save_messages(thread_id=T, resource_id=R, messages=[{"id": "m0", "content": "old harbour"}])
        store: Any = backend.store
        real_commit = store._commit
        raced: list[bool] = []

        def commit_after_the_first_indexer(plan: Any) -> None:
            # the save has read m0's pointer; the indexer of the first save's record runs to the end now
            if not raced:
                raced.append(True)
                memory.index_saved(resource_id=R, thread_id=T, message_ids=["m0"])
            real_commit(plan)

        store._commit = commit_after_the_first_indexer
        double.delay_visibility(60)  # Serverless: a search cannot find the chunk just written
        try:
            memory.save_messages(
                thread_id=T, resource_id=R, messages=[{"id": "m0", "content": "new lighthouse"}]
            )
            memory.index_saved(resource_id=R, thread_id=T, message_ids=["m0"])  # the second save's record
        finally:
            double.delay_visibility(0)
            store._commit = real_commit

        assert raced
        texts = [d["text"].rsplit("\n", 1)[0] for d in double.documents(memory.index.name).values()]  # type: ignore[attr-defined]
        assert texts == ["new lighthouse"]
