"""What a thread costs (``ModelUsage`` on the observation record, ``GET …/observations``): embedding calls
counted beside the Observer's, Reflector's and titles', written with the record's next write or on their
own past ``FLUSH_CALLS``, kept when observational memory is off, and summed per resource."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memstack.adapters.testing import HashEmbedder, ScriptedChatModel
from memstack.api import AuthConfig, create_app
from memstack.model import ModelUsage
from memstack.observation.usage import FLUSH_CALLS
from memstack.ports import Vector
from memstack.tokens import default_tokenizer
from tests.integration.events import Api
from tests.observation_support import om_memory, save_sentences

R = "user-a"
OM: dict[str, Any] = {"observation": {"message_tokens": 1_000, "buffer_tokens": False}}
RECALL: dict[str, Any] = {"top_k": 2, "mode": "vector"}


class CountingEmbedder(HashEmbedder):
    """The hash embedder, keeping every request's texts."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[list[str]] = []

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        self.requests.append(list(texts))
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> Vector:
        self.requests.append([text])
        return super().embed_query(text)

    def expected(self, since: int = 0) -> tuple[int, int, int]:
        """(calls, texts, tokens) as the record should count them: of every request from the ``since``-th."""
        tokenizer = default_tokenizer()
        texts = [t for request in self.requests[since:] for t in request]
        return len(self.requests) - since, len(texts), sum(tokenizer.count(t) for t in texts)


def embedding(usage: ModelUsage) -> tuple[int, int, int]:
    return usage.embedding_calls, usage.embedding_texts, usage.embedding_tokens


def save(memory: Any, thread_id: str, count: int, start: int = 1) -> None:
    save_sentences(memory, R, thread_id, start, count)


def test_given_recall_and_observation_when_a_thread_is_used_then_every_embedding_is_on_its_record(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "memory.db")
    emb = CountingEmbedder()
    with om_memory(
        ScriptedChatModel(), path=path, embedder=emb, observational_memory=OM, semantic_recall=RECALL
    ) as memory:
        save(memory, "t1", 40)
        memory.context(thread_id="t1", resource_id=R, message="where did I go hiking?")
        observed = memory.get_observation_record(resource_id=R, thread_id="t1")
        assert observed is not None and observed.usage.observer_calls >= 1
        assert 0 < observed.usage.embedding_calls <= len(emb.requests)  # folded into the Observer's write
    # closing writes what was still pending: the record then holds every request made for the thread
    with om_memory(ScriptedChatModel(), path=path, observational_memory=OM) as reopened:
        record = reopened.get_observation_record(resource_id=R, thread_id="t1")
    assert record is not None
    assert embedding(record.usage) == emb.expected()
    assert record.usage.observer_calls == observed.usage.observer_calls


def test_given_a_cached_query_when_context_repeats_then_no_embedding_is_counted(tmp_path: Path) -> None:
    path = str(tmp_path / "memory.db")
    emb = CountingEmbedder()
    with om_memory(None, path=path, embedder=emb, semantic_recall=RECALL) as memory:
        save(memory, "t1", 2)
        for _ in range(3):
            memory.context(thread_id="t1", resource_id=R, message="where did I go hiking?")
    with om_memory(None, path=path) as reopened:
        record = reopened.get_observation_record(resource_id=R, thread_id="t1")
    assert record is not None
    assert embedding(record.usage) == emb.expected() == (3, 3, emb.expected()[2])  # two saves, one query


def test_given_observation_off_when_a_title_is_made_then_its_cost_is_on_a_record_of_its_own() -> None:
    chat = ScriptedChatModel()
    with om_memory(chat, observational_memory=False, generate_title=True) as memory:
        save(memory, "t1", 2)
        memory.settled(5)
        record = memory.get_observation_record(resource_id=R, thread_id="t1")
    assert chat.count("title") == 1
    assert record is not None
    assert record.usage.title_calls == 1 and record.usage.observer_calls == 0
    assert record.active_observations == "" and record.cursor == {}


def test_given_observation_off_when_embeddings_pile_up_then_they_are_written_once_the_flush_point_is_reached() -> (
    None
):
    emb = CountingEmbedder()
    with om_memory(None, embedder=emb, semantic_recall=RECALL) as memory:
        save(memory, "t1", FLUSH_CALLS - 1)
        assert memory.get_observation_record(resource_id=R, thread_id="t1") is None  # no write per save
        save(memory, "t1", 1, start=FLUSH_CALLS)
        record = memory.get_observation_record(resource_id=R, thread_id="t1")
        assert record is not None
        assert embedding(record.usage) == emb.expected()
        assert record.usage.embedding_calls == FLUSH_CALLS


def test_given_a_stream_indexer_when_it_indexes_saved_messages_then_their_embeddings_are_counted() -> None:
    emb = CountingEmbedder()
    with om_memory(None, embedder=emb, semantic_recall=RECALL) as memory:
        memory.index_on_save = False
        save(memory, "t1", FLUSH_CALLS)
        assert emb.requests == []
        for i in range(1, FLUSH_CALLS + 1):
            memory.index_saved(resource_id=R, thread_id="t1", message_ids=[f"t1-m{i}"])
        record = memory.get_observation_record(resource_id=R, thread_id="t1")
    assert record is not None
    assert embedding(record.usage) == emb.expected()
    assert record.usage.embedding_calls == FLUSH_CALLS


def test_given_resource_scope_when_two_threads_embed_then_the_resource_record_counts_both(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "memory.db")
    emb = CountingEmbedder()
    om = {**OM, "scope": "resource"}
    with om_memory(
        ScriptedChatModel(), path=path, embedder=emb, observational_memory=om, semantic_recall=RECALL
    ) as memory:
        save(memory, "t1", 5)
        save(memory, "t2", 5)
    with om_memory(ScriptedChatModel(), path=path, observational_memory=om) as reopened:
        record = reopened.get_observation_record(resource_id=R, thread_id="t2")
        total = reopened.resource_usage(resource_id=R)
    assert record is not None and record.thread_id is None
    assert embedding(record.usage) == emb.expected()
    assert (total.usage, total.records, total.complete) == (record.usage, 1, True)


def test_given_threads_with_costs_when_observations_are_read_with_resource_usage_then_the_sum_comes_back() -> (
    None
):
    chat = ScriptedChatModel()
    with om_memory(chat, observational_memory=False, generate_title=True) as memory:
        for thread_id in ("t1", "t2", "t3"):
            save(memory, thread_id, 2)
        memory.settled(5)
        api = Api(create_app(memory, auth=AuthConfig()).resolve, R)
        plain = api.get("/v1/threads/t1/observations")
        summed = api.get("/v1/threads/t1/observations", query={"resource_usage": "true"})
    assert plain.status == 200 and plain.body["resource_usage"] is None
    assert plain.body["record"]["usage"]["title_calls"] == 1
    assert summed.status == 200, summed.raw
    total = summed.body["resource_usage"]
    assert (total["usage"]["title_calls"], total["records"], total["complete"]) == (3, 3, True)
    assert chat.count("title") == 3


REMOVALS = ("delete_thread", "erase_resource")
SCOPES: dict[str, Any] = {"off": False, "thread": OM, "resource": {**OM, "scope": "resource"}}


def remove(memory: Any, removal: str, thread_id: str) -> None:
    if removal == "delete_thread":
        memory.delete_thread(thread_id=thread_id, resource_id=R)
    else:
        memory.erase_resource(resource_id=R)


@pytest.mark.parametrize("removal", REMOVALS)
@pytest.mark.parametrize("scope", list(SCOPES))
def test_given_usage_pending_when_its_thread_is_removed_and_made_again_then_the_new_one_starts_at_nothing(
    tmp_path: Path, removal: str, scope: str
) -> None:
    """What a deleted thread (or an erased resource) cost goes with it: counts still pending in the process
    are not written onto a new thread of the same id, nor onto the resource's next record."""
    path = str(tmp_path / "memory.db")
    emb = CountingEmbedder()
    options = {"observational_memory": SCOPES[scope], "semantic_recall": RECALL}
    with om_memory(ScriptedChatModel(), path=path, embedder=emb, **options) as memory:
        save(memory, "t1", 3)
        memory.context(thread_id="t1", resource_id=R, message="what did I say?")
        assert emb.requests, "calls are pending"
        remove(memory, removal, "t1")
        made_again = len(emb.requests)
        save(memory, "t1", 1, start=10)  # a text not embedded before (the query cache would answer it)
    with om_memory(ScriptedChatModel(), path=path, **options) as reopened:
        record = reopened.get_observation_record(resource_id=R, thread_id="t1")
    assert record is not None
    assert embedding(record.usage) == emb.expected(made_again) == (1, 1, emb.expected(made_again)[2])


@pytest.mark.parametrize("scope", list(SCOPES))
def test_given_usage_pending_when_the_resource_is_erased_then_closing_writes_nothing_back(
    tmp_path: Path, scope: str
) -> None:
    path = str(tmp_path / "memory.db")
    options = {"observational_memory": SCOPES[scope], "semantic_recall": RECALL}
    with om_memory(ScriptedChatModel(), path=path, embedder=CountingEmbedder(), **options) as memory:
        save(memory, "t1", 3)
        memory.context(thread_id="t1", resource_id=R, message="what did I say?")
        erased = memory.erase_resource(resource_id=R)
        assert erased.counts["threads"] == 1
        # a turn in flight during the erase counts its embedding after it
        memory._core.observation.usage.add_embedding((R, "t1"), ["a late query"])
    with om_memory(ScriptedChatModel(), path=path, **options) as reopened:
        assert reopened.resource_usage(resource_id=R).records == 0
        again = reopened.erase_resource(resource_id=R)
    assert set(again.counts.values()) == {0}, again.counts
