"""``memstack.transfer.reindex`` on the embedded default: a database moves to another embedder (the
SQLite index rebuilt in place, ``SqliteSearchIndex(rebuild=True)``), recall works with the new one, and a
stopped rebuild resumes where it stopped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from memstack.adapters.hash_embed import HashEmbedder
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SqliteSearchIndex
from memstack.bootstrap import build_local
from memstack.errors import InvalidInput, Unavailable
from memstack.ports import Vector
from memstack.transfer import Selection, reindex

VECTOR = {"semantic_recall": {"mode": "vector", "top_k": 1, "message_range": 0, "scope": "resource"}}
TOPICS = ["sailing to Norway", "baking sourdough bread", "a violin concert", "fixing the bicycle"]


def filled(path: Path, threads: int = 4) -> None:
    with build_local(path=path, embedder="hash", options=VECTOR, background="inline") as memory:
        for n in range(threads):
            memory.save_messages(
                resource_id="user-a", thread_id=f"t{n}", messages=[f"I talked about {TOPICS[n % 4]} today"]
            )


def recall_thread(memory: object, query: str) -> str:
    result = memory.recall(resource_id="user-a", thread_id="other", query=query)  # type: ignore[attr-defined]
    return str(result.hits[0].thread_id)


class Stopping(HashEmbedder):
    """A hash embedder that is interrupted (as by Ctrl-C) at its ``stop_at``-th request."""

    def __init__(self, dimension: int, stop_at: int) -> None:
        super().__init__(dimension)
        self.calls, self.stop_at = 0, stop_at

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        self.calls += 1
        if self.calls == self.stop_at:
            raise KeyboardInterrupt
        return super().embed_documents(texts)


def test_given_a_database_on_one_embedder_when_reindexed_with_another_then_it_records_it_and_recall_works(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memory.db"
    filled(db)

    with build_local(path=db, embedder=HashEmbedder(128), options=VECTOR, rebuild_index=True) as memory:
        report = reindex(memory, Selection())

    assert (report.threads, report.messages, report.model_id, report.dimension) == (4, 4, "hash-128", 128)
    assert report.chunks == 4
    with build_local(path=db, embedder=HashEmbedder(128), options=VECTOR) as memory:
        assert recall_thread(memory, "sourdough bread") == "t1"
    with pytest.raises(InvalidInput) as err:
        build_local(path=db, embedder="hash", options=VECTOR)
    assert "memstack reindex" in err.value.message and "128-dimensional" in err.value.message


def test_given_a_reindex_stopped_midway_when_run_again_then_it_resumes_and_only_then_the_index_opens(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memory.db"
    filled(db)

    stopping = Stopping(128, stop_at=3)
    with (
        build_local(path=db, embedder=stopping, options=VECTOR, rebuild_index=True) as memory,
        pytest.raises(KeyboardInterrupt),
    ):
        reindex(memory, Selection())

    with pytest.raises(InvalidInput) as err:
        build_local(path=db, embedder=HashEmbedder(128), options=VECTOR)
    assert "has not finished" in err.value.message
    with build_local(path=db, embedder=HashEmbedder(128), options=VECTOR, rebuild_index=True) as memory:
        report = reindex(memory, Selection())
    assert report.messages == 4 and report.chunks == 2  # the two threads done before the stop are skipped
    with build_local(path=db, embedder=HashEmbedder(128), options=VECTOR) as memory:
        assert [recall_thread(memory, TOPICS[n]) for n in range(4)] == ["t0", "t1", "t2", "t3"]


def test_given_one_resource_when_reindexed_with_the_same_embedder_then_only_unindexed_messages_are_embedded(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memory.db"
    filled(db)

    with build_local(path=db, embedder="hash", options=VECTOR) as memory:
        report = reindex(memory, Selection(resource_id="user-a"))

    assert (report.messages, report.chunks) == (4, 0)


def test_given_a_rebuilt_file_when_its_index_is_opened_with_the_old_dimension_then_refused(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memory.db"
    filled(db, threads=1)
    with build_local(path=db, embedder=HashEmbedder(128), options=VECTOR, rebuild_index=True) as memory:
        reindex(memory, Selection())

    database = SqliteDatabase(db)
    try:
        assert SqliteSearchIndex(database, 128, model_id="hash-128").rebuilding is False
        with pytest.raises(InvalidInput) as err:
            SqliteSearchIndex(database, 256, model_id="hash-256")
        assert "128-dimensional" in err.value.message
    finally:
        database.close()


def test_given_semantic_recall_off_when_reindexing_then_invalid_input(tmp_path: Path) -> None:
    off = {"semantic_recall": False}
    with (
        build_local(path=tmp_path / "m.db", embedder="hash", options=off) as memory,
        pytest.raises(InvalidInput) as err,
    ):
        reindex(memory, Selection())
    assert err.value.field == "semantic_recall"


def test_given_a_stopped_rebuild_when_rebuilt_back_to_the_first_model_then_every_message_is_searchable_again(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memory.db"
    filled(db)  # indexed with hash-256: every message marked for it
    stopping = Stopping(128, stop_at=3)  # a rebuild for hash-128 drops the chunks, embeds two threads, stops
    with (
        build_local(path=db, embedder=stopping, options=VECTOR, rebuild_index=True) as memory,
        pytest.raises(KeyboardInterrupt),
    ):
        reindex(memory, Selection())

    with build_local(path=db, embedder="hash", options=VECTOR, rebuild_index=True) as memory:
        report = reindex(memory, Selection())  # the operator goes back to the first model instead

    assert report.chunks == 4  # the two threads still marked for hash-256 had lost their chunks too
    with build_local(path=db, embedder="hash", options=VECTOR) as memory:
        assert [recall_thread(memory, TOPICS[n]) for n in range(4)] == ["t0", "t1", "t2", "t3"]


class Renamed(HashEmbedder):
    """The hash embedder under another model id: same dimension, another vector space as far as the index
    knows (as wordllama's 256 dimensions are to the hash embedder's)."""

    def __init__(self) -> None:
        super().__init__(256)
        self.model_id = "renamed-256"


def test_given_a_running_memory_when_another_process_reindexes_the_file_then_it_neither_writes_nor_searches_vectors(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memory.db"
    filled(db)
    hybrid = {"semantic_recall": {**VECTOR["semantic_recall"], "mode": "hybrid"}}
    with build_local(path=db, embedder="hash", options=VECTOR, background="inline") as running:
        assert recall_thread(running, "sourdough bread") == "t1"
        with build_local(path=db, embedder=Renamed(), options=VECTOR, rebuild_index=True) as other:
            reindex(other, Selection())

        # the running process's vector search and indexing are refused, naming the new model ...
        with pytest.raises(Unavailable) as err:
            running.recall(resource_id="user-a", thread_id="other", query="sourdough bread")
        assert "renamed-256" in err.value.message
        kept = running.save_messages(
            resource_id="user-a", thread_id="t9", messages=["a kayak trip on the fjord"]
        )
        assert kept.unindexed == (kept[0].id,)
        assert kept.index_error is not None and "renamed-256" in kept.index_error
        # ... its saves keep their messages, and keyword search (no vectors) still answers
        page = running.list_messages(resource_id="user-a", thread_id="t9")
        assert [m.text for m in page.messages] == ["a kayak trip on the fjord"]
        keyword = {"semantic_recall": {**VECTOR["semantic_recall"], "mode": "keyword"}}
        found = running.recall(resource_id="user-a", thread_id="other", query="sourdough", options=keyword)
        assert found.hits[0].thread_id == "t1"
        # a turn's context degrades to history instead of failing
        running.context(resource_id="user-a", thread_id="t1", message="bread?", options=hybrid)

    # restarted with the new model, the message saved in between is indexed for it and found
    with build_local(path=db, embedder=Renamed(), options=VECTOR) as restarted:
        assert recall_thread(restarted, "kayak fjord") == "t9"
