"""``Memory.index_health`` on both storage backends (SQLite, and DynamoDB under moto): what is indexed,
what was stored but never indexed, and what was indexed by another embedder."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstack import Memory
from tests.store_backends import BACKENDS, memory_on

R = "user-a"


def save(memory: Memory, thread_id: str, count: int) -> None:
    memory.save_messages(
        resource_id=R,
        thread_id=thread_id,
        messages=[{"id": f"{thread_id}-{i}", "content": f"Note {i} about the ferry"} for i in range(count)],
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_given_saves_with_and_without_indexing_then_health_counts_each_state(
    backend: str, tmp_path: Path
) -> None:
    with memory_on(backend, tmp_path, semantic_recall={"top_k": 2}) as memory:
        save(memory, "a", 3)
        memory.index_on_save = False
        save(memory, "b", 2)
        health = memory.index_health(resource_id=R)
        assert (health.threads, health.messages, health.indexed, health.not_indexed, health.stale) == (
            2,
            5,
            3,
            2,
            0,
        )
        assert [(s.message_id, s.state) for s in health.samples] == [
            ("b-0", "not_indexed"),
            ("b-1", "not_indexed"),
        ]
        memory.index_saved(resource_id=R, thread_id="b", message_ids=["b-0", "b-1"])
        assert memory.index_health(resource_id=R).indexed == 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_given_marks_of_another_embedder_then_every_message_is_stale(backend: str, tmp_path: Path) -> None:
    with memory_on(backend, tmp_path, semantic_recall={"top_k": 2}) as memory:
        save(memory, "a", 3)
        planned = {f"a-{i}": "fingerprint-of-another-embedder" for i in range(3)}
        memory.store.set_index_marks(R, planned)
        health = memory.index_health(resource_id=R)
        assert (health.indexed, health.stale, health.embedding_model) == (0, 3, memory.embedder.model_id)


def test_given_more_messages_than_the_limit_across_threads_then_the_answer_says_incomplete(
    tmp_path: Path,
) -> None:
    with memory_on("sqlite", tmp_path, semantic_recall={"top_k": 2}) as memory:
        save(memory, "a", 3)
        save(memory, "b", 3)
        assert [memory.index_health(resource_id=R, limit=n).complete for n in (3, 5, 6, 7)] == [
            False,
            False,
            True,
            True,
        ]
        assert memory.index_health(resource_id=R, limit=3).threads == 1


def test_given_the_limit_at_a_page_boundary_then_the_thread_is_counted_once_and_the_rest_is_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memstack.usecases import inspect

    monkeypatch.setattr(inspect, "_PAGE", 2)
    with memory_on("sqlite", tmp_path, semantic_recall={"top_k": 2}) as memory:
        save(memory, "a", 5)
        health = memory.index_health(resource_id=R, limit=4)
        assert (health.threads, health.messages, health.complete) == (1, 4, False)
        assert memory.index_health(resource_id=R, limit=5).complete is True
