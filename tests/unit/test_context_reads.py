"""The store reads of one ``context()``: the thread's head in one read, and resource-scoped working memory
fetched with the recalled messages, so a turn costs two store requests on DynamoDB."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memstack import Memory
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SqliteSearchIndex
from memstack.adapters.sqlite.store import SqliteMemoryStore
from memstack.adapters.testing import HashEmbedder, ScriptedChatModel
from memstack.errors import Forbidden, InvalidInput, PayloadTooLarge, Throttled, Unavailable
from memstack.tokens import default_tokenizer


class CountingStore:
    """Forwards to a store and counts each method called."""

    def __init__(self, inner: SqliteMemoryStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return target(*args, **kwargs)

        return call


def memory(tmp_path: Path, **options: Any) -> tuple[Memory, CountingStore]:
    db = SqliteDatabase(tmp_path / "m.db")
    store = CountingStore(SqliteMemoryStore(db))
    emb = HashEmbedder()
    mem = Memory(
        store=store,  # type: ignore[arg-type]
        index=SqliteSearchIndex(db, emb.dimension),
        embedder=emb,
        tokenizer=default_tokenizer(),
        options=options,
        chat_model=ScriptedChatModel(),
        background="inline",
    )
    return mem, store


def seed(mem: Memory) -> None:
    mem.save_messages(
        thread_id="old",
        resource_id="r1",
        messages=["I adopted a dog named Biscuit last spring", "Biscuit loves the beach"],
    )
    mem.save_messages(thread_id="t1", resource_id="r1", messages=["hello", "hi Ana"])
    mem.update_working_memory(thread_id="t1", resource_id="r1", working_memory="# User\n- Name: Ana")


@pytest.mark.parametrize("parallel", [False, True])
def test_given_resource_working_memory_and_recall_when_context_then_two_store_reads(
    tmp_path: Path, parallel: bool
) -> None:
    mem, store = memory(tmp_path, working_memory={"enabled": True, "scope": "resource"})
    mem.parallel_recall = parallel
    seed(mem)
    store.calls.clear()
    ctx = mem.context(thread_id="t1", resource_id="r1", message="what is my dog called?")
    assert dict(store.calls) == {"get_thread_with_history": 1, "get_resource_and_windows": 1}
    assert "Name: Ana" in ctx.system[0].text
    assert any("Biscuit" in m.text for m in ctx.recalled)
    mem.close()


def test_given_thread_working_memory_when_context_then_it_comes_with_the_thread_head(tmp_path: Path) -> None:
    mem, store = memory(tmp_path, working_memory={"enabled": True, "scope": "thread"})
    seed(mem)
    store.calls.clear()
    ctx = mem.context(thread_id="t1", resource_id="r1", message="what is my dog called?")
    assert dict(store.calls) == {"get_thread_with_history": 1, "message_windows": 1}
    assert "Name: Ana" in ctx.system[0].text
    mem.close()


def test_given_no_recall_query_when_context_then_the_resource_is_read_alone(tmp_path: Path) -> None:
    mem, store = memory(tmp_path, working_memory={"enabled": True, "scope": "resource"})
    seed(mem)
    store.calls.clear()
    ctx = mem.context(thread_id="t1", resource_id="r1")
    assert dict(store.calls) == {"get_thread_with_history": 1, "get_resource": 1}
    assert "Name: Ana" in ctx.system[0].text
    mem.close()


def test_given_recall_fails_when_context_then_working_memory_is_still_shown(tmp_path: Path) -> None:
    mem, store = memory(tmp_path, working_memory={"enabled": True, "scope": "resource"})
    seed(mem)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("index down")

    mem.recall_engine.search = broken  # type: ignore[method-assign]
    ctx = mem.context(thread_id="t1", resource_id="r1", message="what is my dog called?")
    assert "Name: Ana" in ctx.system[0].text and ctx.recalled == []
    mem.close()


@pytest.mark.parametrize("scope", ["thread", "resource"])
def test_given_observational_memory_when_context_then_the_thread_and_its_tail_are_read_once(
    tmp_path: Path, scope: str
) -> None:
    om = {"scope": scope, "observation": {"message_tokens": 1_000, "buffer_tokens": False}}
    mem, store = memory(
        tmp_path,
        semantic_recall=False,
        working_memory={"enabled": True, "scope": "thread"},
        observational_memory=om,
    )
    seed(mem)
    store.calls.clear()
    mem.context(thread_id="t1", resource_id="r1", message="hi")
    assert dict(store.calls) == {"get_thread": 1, "get_observation_record": 1, "list_messages": 1}
    store.calls.clear()
    mem.context(thread_id="brand-new", resource_id="r1", message="hi")
    # a new thread has nothing to observe; in resource scope the resource's log is still shown
    expected = {"get_thread": 1, **({"get_observation_record": 1} if scope == "resource" else {})}
    assert dict(store.calls) == expected
    mem.close()


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize(
    "error",
    [
        InvalidInput("bad recall option", field="semantic_recall"),
        PayloadTooLarge("query over the limit"),
        Forbidden("no"),
    ],
)
def test_given_recall_rejects_the_callers_input_when_context_then_the_error_reaches_the_caller(
    tmp_path: Path, parallel: bool, error: Exception
) -> None:
    mem, _ = memory(tmp_path, working_memory={"enabled": True, "scope": "resource"})
    mem.parallel_recall = parallel
    seed(mem)

    def rejects(*args: Any, **kwargs: Any) -> Any:
        raise error

    mem.recall_engine.search = rejects  # type: ignore[method-assign]
    with pytest.raises(type(error)):
        mem.context(thread_id="t1", resource_id="r1", message="what is my dog called?")
    mem.close()


@pytest.mark.parametrize("error", [Unavailable("index down"), Throttled("slow down"), RuntimeError("bug")])
def test_given_a_dependency_fails_in_recall_when_context_then_the_turn_goes_on_without_recall(
    tmp_path: Path, error: Exception
) -> None:
    mem, _ = memory(tmp_path, working_memory={"enabled": True, "scope": "resource"})
    seed(mem)

    def fails(*args: Any, **kwargs: Any) -> Any:
        raise error

    mem.recall_engine.search = fails  # type: ignore[method-assign]
    ctx = mem.context(thread_id="t1", resource_id="r1", message="what is my dog called?")
    assert ctx.recalled == [] and "Name: Ana" in ctx.system[0].text
    mem.close()
