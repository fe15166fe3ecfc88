"""Indexing saved messages exactly once (``Memory.index_saved``): replays of a stream batch neither re-embed
nor duplicate, on the embedded default and on an OpenSearch Serverless collection (the double), where
document ids cannot de-duplicate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstack import Memory
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SqliteSearchIndex
from memstack.adapters.sqlite.store import SqliteMemoryStore
from memstack.adapters.testing import HashEmbedder
from memstack.errors import PayloadTooLarge
from memstack.ports import SearchIndex
from memstack.tokens import default_tokenizer


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def embed_documents(self, texts: Any) -> list[list[float]]:
        self.texts += len(texts)
        return super().embed_documents(texts)


def make(tmp_path: Path, index: SearchIndex | None = None) -> tuple[Memory, CountingEmbedder]:
    db = SqliteDatabase(tmp_path / "m.db")
    emb = CountingEmbedder()
    mem = Memory(
        store=SqliteMemoryStore(db),
        index=index if index is not None else SqliteSearchIndex(db, emb.dimension),
        embedder=emb,
        tokenizer=default_tokenizer(),
    )
    return mem, emb


def save_unindexed(mem: Memory, texts: list[str]) -> list[str]:
    """Save without indexing, as the AWS API does before the stream indexer runs."""
    saved = mem.store.save_messages(
        "r1", "t1", [mem_message(i, t) for i, t in enumerate(texts)], create=thread()
    )
    return [m.id for m in saved]


def thread() -> Any:
    from datetime import UTC, datetime

    from memstack.model import Thread

    at = datetime(2024, 5, 1, tzinfo=UTC)
    return Thread(id="t1", resource_id="r1", created_at=at, updated_at=at)


def mem_message(i: int, text: str) -> Any:
    from datetime import UTC, datetime

    from memstack.model import Message, TextPart

    return Message(
        id=f"m{i}",
        thread_id="t1",
        resource_id="r1",
        role="user",
        parts=(TextPart(text=text),),
        created_at=datetime(2024, 5, 1, tzinfo=UTC),
    )


TEXTS = ["my dog Biscuit loves the beach", "I work as a nurse in Lisbon", "we met in 2019 at a concert"]


def test_given_saved_messages_when_indexed_twice_then_the_replay_writes_and_embeds_nothing(
    tmp_path: Path,
) -> None:
    mem, emb = make(tmp_path)
    ids = save_unindexed(mem, TEXTS)
    assert mem.index_saved(resource_id="r1", thread_id="t1", message_ids=ids) == 3
    assert emb.texts == 3
    assert mem.index_saved(resource_id="r1", thread_id="t1", message_ids=ids) == 0
    assert emb.texts == 3
    found = mem.recall(thread_id="t1", resource_id="r1", query="what is my dog called")
    assert found.hits[0].message_id == "m0"


def test_given_an_edited_message_when_indexed_again_then_it_and_the_next_are_reindexed(
    tmp_path: Path,
) -> None:
    mem, emb = make(tmp_path)
    ids = save_unindexed(mem, TEXTS)
    mem.index_saved(resource_id="r1", thread_id="t1", message_ids=ids)
    mem.store.save_messages("r1", "t1", [mem_message(1, "I work as a teacher in Porto")])
    # the next message's keyword text carries the edited one's (recall.engine.keyword_context); its own
    # text, and so its embedding, is unchanged: one new text embedded
    assert mem.index_saved(resource_id="r1", thread_id="t1", message_ids=ids) == 2
    assert emb.texts == 4
    found = mem.recall(
        thread_id="t1",
        resource_id="r1",
        query="teacher Porto",
        options={"semantic_recall": {"mode": "keyword"}},
    )
    assert found.hits[0].message_id == "m1"


def test_given_deleted_messages_or_thread_when_indexed_then_they_are_skipped(tmp_path: Path) -> None:
    mem, _ = make(tmp_path)
    ids = save_unindexed(mem, TEXTS)
    mem.store.delete_messages("r1", ["m0"])
    assert mem.index_saved(resource_id="r1", thread_id="t1", message_ids=ids) == 2
    assert mem.index_saved(resource_id="r2", thread_id="t1", message_ids=ids) == 0
    mem.store.delete_thread("r1", "t1")
    assert mem.index_saved(resource_id="r1", thread_id="t1", message_ids=ids) == 0


def test_given_too_many_ids_when_indexed_then_the_limit_is_named(tmp_path: Path) -> None:
    mem, _ = make(tmp_path)
    with pytest.raises(PayloadTooLarge, match="message_ids"):
        mem.index_saved(resource_id="r1", thread_id="t1", message_ids=[f"m{i}" for i in range(1001)])


@pytest.fixture
def serverless_index() -> Iterator[tuple[SearchIndex, Any]]:
    from tests.contract import opensearch_support

    with opensearch_support.opensearch_serverless_index(HashEmbedder().dimension) as index:
        yield index, opensearch_support.shared_double("serverless")


def test_given_a_serverless_collection_when_a_batch_is_replayed_or_reindexed_within_the_delay_then_stored_once(
    tmp_path: Path, serverless_index: tuple[Any, Any]
) -> None:
    index, double = serverless_index
    mem, _ = make(tmp_path, index)
    ids = save_unindexed(mem, TEXTS)
    double.delay_visibility(60)  # new documents stay invisible to search, as on Serverless for a while
    try:
        for _ in range(3):  # the stream delivers the batch three times
            mem.index_saved(resource_id="r1", thread_id="t1", message_ids=ids)
        # without the marks each replay would add a copy: search cannot see the earlier ones to delete;
        # re-indexing (an update) deletes the previous chunks by the ids kept with the marks
        for _ in range(2):
            mem.recall_engine.index_messages(
                mem.store.get_thread("r1", "t1"),
                mem.store.get_messages("r1", ["m0"]),
                mem.options.semantic_recall,
            )  # type: ignore[arg-type]
    finally:
        double.delay_visibility(0)
    copies = sorted(d["message_id"] for d in double.documents(index.name).values())
    assert copies == ["m0", "m1", "m2"]


def test_given_stream_indexing_when_saving_then_nothing_is_indexed_until_index_saved(tmp_path: Path) -> None:
    mem, emb = make(tmp_path)
    mem.index_on_save = False
    saved = mem.save_messages(thread_id="t1", resource_id="r1", messages=TEXTS)
    assert emb.texts == 0
    assert mem.recall(thread_id="t1", resource_id="r1", query="dog Biscuit").hits == []
    assert mem.index_saved(resource_id="r1", thread_id="t1", message_ids=[m.id for m in saved]) == 3
    assert mem.recall(thread_id="t1", resource_id="r1", query="dog Biscuit").hits != []


def test_given_stream_indexing_setting_when_loaded_then_it_is_read() -> None:
    from memstack.settings import load_settings

    assert load_settings().indexing == "inline"
    assert load_settings(indexing="stream").indexing == "stream"


def test_given_a_serverless_collection_when_a_message_is_updated_within_the_delay_then_no_stale_chunk(
    tmp_path: Path, serverless_index: tuple[Any, Any]
) -> None:
    index, double = serverless_index
    mem, _ = make(tmp_path, index)
    double.delay_visibility(60)
    try:
        mem.save_messages(thread_id="t1", resource_id="r1", messages=[{"id": "m0", "content": "old harbour"}])
        mem.save_messages(
            thread_id="t1", resource_id="r1", messages=[{"id": "m0", "content": "new lighthouse"}]
        )
    finally:
        double.delay_visibility(0)
    texts = [d["text"].splitlines()[0] for d in double.documents(index.name).values()]
    assert texts == ["new lighthouse"], "the keyword text is the chunk, then its date in words"


def test_given_two_indexers_of_one_batch_when_they_interleave_then_one_copy_is_kept(
    tmp_path: Path, serverless_index: tuple[Any, Any]
) -> None:
    index, double = serverless_index
    mem, _ = make(tmp_path, index)
    ids = save_unindexed(mem, TEXTS)
    store = mem.store
    real_marks = store.set_index_marks
    raced: list[int] = []

    def racing_marks(*args: Any, **kwargs: Any) -> list[str]:
        # the first indexer writes its documents, then a second indexer of the same batch runs whole
        # before the first one marks
        if not raced:
            raced.append(1)
            mem.index_saved(resource_id="r1", thread_id="t1", message_ids=ids)
        return real_marks(*args, **kwargs)

    store.set_index_marks = racing_marks  # type: ignore[method-assign]
    double.delay_visibility(60)
    try:
        mem.index_saved(resource_id="r1", thread_id="t1", message_ids=ids)
    finally:
        double.delay_visibility(0)
        store.set_index_marks = real_marks  # type: ignore[method-assign]
    stored = double.documents(index.name)
    assert sorted(d["message_id"] for d in stored.values()) == ["m0", "m1", "m2"]
    marked = {mid: state.documents for mid, state in store.get_index_state("r1", ids).items()}
    assert marked == {
        d["message_id"]: (doc_id,) for doc_id, d in stored.items()
    }  # the marks name the copy kept
