"""Context assembly: layers in order, semantic recall, working memory, budget, tool filter, OpenAI shape."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstack import InvalidInput, Memory
from memstack.context import cross_thread_block
from memstack.model import Message

KEYWORD = {"semantic_recall": {"mode": "keyword"}}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.local(tmp_path / "m.db", embedder="hash") as m:
        yield m


def say(memory: Memory, thread: str, *texts: str, resource: str = "r", **extra: Any) -> list[Message]:
    return memory.save_messages(
        thread_id=thread,
        resource_id=resource,
        messages=[{"role": "user", "content": t, **extra} for t in texts],
    )


def test_given_history_when_context_then_last_messages_in_order_then_new_message(memory: Memory) -> None:
    say(memory, "t", *[f"turn {i}" for i in range(15)])
    ctx = memory.context(thread_id="t", resource_id="r", message="next", options={"semantic_recall": False})
    assert [m.text for m in ctx.messages] == [f"turn {i}" for i in range(5, 15)] + ["next"]
    assert len(ctx.history_ids) == 10


def test_given_last_messages_false_when_context_then_no_history(memory: Memory) -> None:
    say(memory, "t", "a", "b")
    ctx = memory.context(
        thread_id="t",
        resource_id="r",
        message="c",
        options={"last_messages": False, "semantic_recall": False},
    )
    assert [m.text for m in ctx.messages] == ["c"]


def test_given_all_layers_when_context_then_order_matches_the_design(memory: Memory) -> None:
    say(memory, "old", "I adopted a greyhound called Comet")
    say(memory, "t", *[f"filler {i}" for i in range(12)])
    ctx = memory.context(
        thread_id="t",
        resource_id="r",
        message="what is my greyhound called?",
        instructions="You are helpful.",
        context=[{"role": "user", "content": "call-time note"}],
        options={"working_memory": {"enabled": True}, "last_messages": 2},
    )
    kinds = [s.kind for s in ctx.system]
    assert kinds == ["instructions", "working_memory", "recall"]
    assert "Comet" in ctx.system[2].text
    assert [m.text for m in ctx.messages][-2:] == ["call-time note", "what is my greyhound called?"]
    out = ctx.to_openai()
    assert out["messages"][0] == {"role": "system", "content": "You are helpful."}
    assert out["tools"][0]["function"]["name"] == "updateWorkingMemory"
    assert out["messages"][-1] == {"role": "user", "content": "what is my greyhound called?"}


def test_given_a_same_thread_hit_when_context_then_interleaved_by_order_and_deduplicated(
    memory: Memory,
) -> None:
    say(memory, "t", "my locker code is 4417", *[f"chatter number {i}" for i in range(20)])
    ctx = memory.context(
        thread_id="t",
        resource_id="r",
        message="what is my locker code?",
        options={
            **KEYWORD,
            "last_messages": 3,
            "semantic_recall": {"mode": "keyword", "message_range": 0, "top_k": 1},
        },
    )
    texts = [m.text for m in ctx.messages]
    assert texts[0] == "my locker code is 4417"
    assert texts[1:4] == ["chatter number 17", "chatter number 18", "chatter number 19"]
    assert all(s.kind != "recall" for s in ctx.system)
    assert len(texts) == len(set(texts))


def test_given_a_hit_in_history_when_context_then_not_shown_twice(memory: Memory) -> None:
    say(memory, "t", "the wifi password is hunter2")
    ctx = memory.context(thread_id="t", resource_id="r", message="wifi password?", options=KEYWORD)
    assert [m.text for m in ctx.messages].count("the wifi password is hunter2") == 1


def test_given_thread_scope_when_context_then_other_threads_not_recalled(memory: Memory) -> None:
    say(memory, "other", "my passport number is X123")
    ctx = memory.context(
        thread_id="t",
        resource_id="r",
        message="passport number?",
        options={"semantic_recall": {"scope": "thread"}},
    )
    assert ctx.recalled == []


def test_given_another_resource_when_context_then_nothing_recalled(memory: Memory) -> None:
    say(memory, "t", "the launch code is 0000", resource="a")
    ctx = memory.context(thread_id="t2", resource_id="b", message="launch code?")
    assert ctx.recalled == [] and ctx.system == []


def test_given_message_range_when_recalled_then_neighbours_come_along(memory: Memory) -> None:
    # "after …" indexes the hit's words too (recall.engine.keyword_context); its own words make it rank below
    say(memory, "old", "before", "my cat is named Pixel", "after that we went home", "unrelated later")
    ctx = memory.context(
        thread_id="t",
        resource_id="r",
        message="cat named?",
        options={"semantic_recall": {"mode": "keyword", "top_k": 1}},
    )
    assert [m.text for m in ctx.recalled] == ["before", "my cat is named Pixel", "after that we went home"]
    wide = memory.context(
        thread_id="t",
        resource_id="r",
        message="cat named?",
        options={
            "semantic_recall": {"mode": "keyword", "top_k": 1, "message_range": {"before": 0, "after": 2}}
        },
    )
    assert [m.text for m in wide.recalled] == [
        "my cat is named Pixel",
        "after that we went home",
        "unrelated later",
    ]


def test_given_a_filter_whose_nearest_neighbours_fail_it_when_recalling_then_only_matching_hits_fill_the_budget(
    memory: Memory,
) -> None:
    for i in range(15):
        say(memory, f"noise{i}", f"the blue car is parked outside {i}", metadata={"kind": "noise"})
    for i in range(5):
        say(memory, f"keep{i}", f"a car {i}", metadata={"kind": "keep"})
    for mode in ("vector", "keyword", "hybrid"):
        result = memory.recall(
            thread_id="q",
            resource_id="r",
            query="the blue car is parked outside",
            options={"semantic_recall": {"mode": mode, "top_k": 4, "filter": {"kind": {"$eq": "keep"}}}},
        )
        # each matching message is alone in its thread, so its window costs one message of the budget of
        # top_k x 3 = 12: all five fit, and none of the nearer, filtered-out ones
        assert len(result.hits) == 5, mode
        assert all(h.thread_id.startswith("keep") for h in result.hits), mode


def test_given_a_filter_on_thread_metadata_when_recalling_then_it_matches_the_snapshot(
    memory: Memory,
) -> None:
    memory.create_thread(resource_id="r", thread_id="work", metadata={"area": "work"})
    memory.create_thread(resource_id="r", thread_id="home", metadata={"area": "home"})
    say(memory, "work", "deadline is friday")
    say(memory, "home", "deadline for the garden is friday")
    result = memory.recall(
        thread_id="q",
        resource_id="r",
        query="deadline friday",
        options={"semantic_recall": {"filter": {"area": "home"}}},
    )
    assert [h.thread_id for h in result.hits] == ["home"]


def test_given_a_failing_index_when_context_then_history_only_and_a_warning(
    memory: Memory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    say(memory, "t", "hello there")

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("index down")

    monkeypatch.setattr(memory.index, "search", broken)
    with caplog.at_level(logging.WARNING):
        ctx = memory.context(thread_id="t", resource_id="r", message="hello?")
    assert [m.text for m in ctx.messages] == ["hello there", "hello?"]
    assert "semantic recall failed" in caplog.text
    assert "hello" not in caplog.text.replace("semantic recall failed", "")


def test_given_a_failing_embedder_when_context_in_vector_mode_then_history_only(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    say(memory, "t", "hello there")
    monkeypatch.setattr(memory.embedder, "embed_query", lambda text: (_ for _ in ()).throw(OSError("down")))
    ctx = memory.context(
        thread_id="t",
        resource_id="r",
        message="something new",
        options={"semantic_recall": {"mode": "vector"}},
    )
    assert [m.text for m in ctx.messages] == ["hello there", "something new"]


def test_given_tool_calls_when_rendered_then_openai_tool_messages_pair_up(memory: Memory) -> None:
    memory.save_messages(
        thread_id="t",
        resource_id="r",
        messages=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "c1", "name": "weather", "args": {"city": "Oslo"}}],
            },
            {
                "role": "tool",
                "parts": [
                    {"type": "tool_result", "tool_call_id": "c1", "name": "weather", "result": {"c": 3}}
                ],
            },
            {"role": "assistant", "parts": [{"type": "tool_call", "id": "c2", "name": "orphan", "args": {}}]},
            {"role": "assistant", "content": "3 degrees"},
        ],
    )
    msgs = memory.context(thread_id="t", resource_id="r", message="thanks").to_openai()["messages"]
    assert msgs[1]["tool_calls"][0] == {
        "id": "c1",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
    }
    assert msgs[2] == {"role": "tool", "tool_call_id": "c1", "content": '{"c": 3}'}
    assert all(c["id"] != "c2" for m in msgs for c in m.get("tool_calls", []))


def test_given_a_tool_call_filter_when_context_then_named_tools_are_left_out(memory: Memory) -> None:
    memory.save_messages(
        thread_id="t",
        resource_id="r",
        messages=[
            {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "search", "args": {}}]},
            {"role": "tool", "parts": [{"type": "tool_result", "tool_call_id": "c1", "result": "found"}]},
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "c2", "name": "weather", "args": {}}],
            },
            {"role": "tool", "parts": [{"type": "tool_result", "tool_call_id": "c2", "result": "sunny"}]},
        ],
    )
    ctx = memory.context(
        thread_id="t", resource_id="r", message="ok", options={"tool_call_filter": {"exclude": ["search"]}}
    )
    names = {c["function"]["name"] for m in ctx.to_openai()["messages"] for c in m.get("tool_calls", [])}
    assert names == {"weather"}
    all_out = memory.context(thread_id="t", resource_id="r", message="ok", options={"tool_call_filter": {}})
    assert [m.text for m in all_out.messages] == ["ok"]
    assert len(memory.list_messages(thread_id="t", resource_id="r").messages) == 4


def test_given_a_token_budget_when_over_then_oldest_dropped_and_tool_pairs_kept_together(
    memory: Memory,
) -> None:
    memory.save_messages(
        thread_id="t",
        resource_id="r",
        messages=[
            {"role": "user", "content": "word " * 200},
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "c1", "name": "lookup", "args": {"q": "x " * 100}}],
            },
            {"role": "tool", "parts": [{"type": "tool_result", "tool_call_id": "c1", "result": "y " * 100}]},
            {"role": "assistant", "content": "recent answer"},
        ],
    )
    full = memory.context(thread_id="t", resource_id="r", message="now", options={"semantic_recall": False})
    budget = full.token_count - 150
    ctx = memory.context(
        thread_id="t",
        resource_id="r",
        message="now",
        options={"semantic_recall": False, "message_history": {"max_tokens": budget}},
    )
    assert ctx.token_count <= budget
    ids = [m.role for m in ctx.messages]
    assert ids.count("tool") == 0 or ("assistant" in ids and ids.count("tool") == 1)
    roles_with_calls = [
        m for m in ctx.messages if any(p.type in ("tool_call", "tool_result") for p in m.parts)
    ]
    assert len(roles_with_calls) in (0, 2)
    assert ctx.messages[-1].text == "now"
    tight = memory.context(
        thread_id="t",
        resource_id="r",
        message="now",
        options={"semantic_recall": False, "message_history": {"max_tokens": 30}},
    )
    assert [m.text for m in tight.messages] == ["recent answer", "now"]
    assert tight.token_count <= 30


def test_given_per_call_overrides_when_context_then_deep_merged_over_configured(tmp_path: Path) -> None:
    with Memory.local(
        tmp_path / "o.db", embedder="hash", semantic_recall={"top_k": 2, "mode": "keyword"}
    ) as m:
        merged = m.options.merged({"semantic_recall": {"message_range": 3}})
        assert merged.semantic_recall.top_k == 2
        assert merged.semantic_recall.mode == "keyword"
        assert merged.semantic_recall.message_range.before == 3
        assert m.options.semantic_recall.message_range.before == 1


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"semantic_recall": {"top_k": -1}}, "semantic_recall.top_k"),
        ({"semantic_recall": {"mode": "magic"}}, "semantic_recall.mode"),
        ({"semantic_recall": {"filter": {"$where": "1"}}}, "semantic_recall.filter"),
        ({"last_messages": -3}, "last_messages"),
        ({"unknown_option": 1}, "unknown_option"),
    ],
)
def test_given_bad_options_when_context_then_invalid_input_names_them(
    memory: Memory, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        memory.context(thread_id="t", resource_id="r", message="x", options=options)
    assert err.value.field is not None and err.value.field.startswith(field)


def test_given_cross_thread_hits_when_formatted_then_dated_and_one_per_line(memory: Memory) -> None:
    from datetime import UTC, datetime

    msgs = memory.save_messages(
        thread_id="old",
        resource_id="r",
        messages=[
            {"role": "user", "content": "hi", "created_at": datetime(2025, 1, 5, 15, 7, tzinfo=UTC)},
            {"role": "assistant", "content": "hello", "created_at": datetime(2025, 1, 6, 9, 8, tzinfo=UTC)},
        ],
    )
    block = cross_thread_block(reversed(msgs))
    lines = block.splitlines()
    assert lines[2] == "the following messages are from 2025, Jan, 5"
    assert lines[3] == "Message from previous conversation at 3:07 PM: User: hi"
    assert lines[4] == "the following messages are from 2025, Jan, 6"
    assert lines[5] == "Message from previous conversation at 9:08 AM: Assistant: hello"
    assert lines[-1] == "<end_remembered_from_other_conversation>"


def test_given_authors_when_rendered_then_the_model_sees_who_said_what(memory: Memory) -> None:
    memory.save_messages(
        thread_id="shared",
        resource_id="team",
        messages=[
            {
                "role": "user",
                "content": "I'll take the budget review",
                "author": {"id": "u1", "name": "Priya"},
            },
            {"role": "user", "content": "I'll do the slides", "author": {"id": "u2", "name": "Tom"}},
        ],
    )
    out = memory.context(thread_id="shared", resource_id="team", message="who does what?").to_openai()[
        "messages"
    ]
    assert out[0] == {"role": "user", "content": "Priya: I'll take the budget review", "name": "Priya"}
    recall_block = memory.context(thread_id="new", resource_id="team", message="budget review").system[0].text
    assert "User (Priya): I'll take the budget review" in recall_block


def test_given_a_symmetric_embedder_when_the_query_is_saved_then_its_embedding_is_reused(
    memory: Memory,
) -> None:
    cache = memory.recall_engine.cache
    memory.context(
        thread_id="t",
        resource_id="r",
        message="remember the milk",
        options={"semantic_recall": {"mode": "vector"}},
    )
    misses = cache.misses
    say(memory, "t", "remember the milk")
    assert cache.misses == misses


def test_given_parallel_recall_when_context_then_same_result_as_inline_and_failures_still_fall_back(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    say(memory, "old", "my bike is a red Bianchi")
    say(memory, "t", "hello", "how are you")
    inline = memory.context(thread_id="t", resource_id="r", message="what bike do I have?")
    memory.parallel_recall = True
    try:
        parallel = memory.context(thread_id="t", resource_id="r", message="what bike do I have?")
        assert parallel.system == inline.system and parallel.recalled == inline.recalled
        assert parallel.messages[:-1] == inline.messages[:-1] and parallel.token_count == inline.token_count
        monkeypatch.setattr(
            memory.index, "search", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("down"))
        )
        degraded = memory.context(thread_id="t", resource_id="r", message="what bike do I have?")
        assert [m.text for m in degraded.messages] == ["hello", "how are you", "what bike do I have?"]
    finally:
        memory.parallel_recall = False


def test_given_a_threshold_when_recalling_by_vector_then_dissimilar_messages_are_left_out(
    memory: Memory,
) -> None:
    say(memory, "old", "the quick brown fox jumps over the lazy dog", "zzz qqq xxx")
    loose = memory.recall(
        thread_id="t",
        resource_id="r",
        query="quick brown fox",
        options={"semantic_recall": {"mode": "vector"}},
    )
    strict = memory.recall(
        thread_id="t",
        resource_id="r",
        query="quick brown fox",
        options={"semantic_recall": {"mode": "vector", "threshold": 0.5}},
    )
    assert len(loose.hits) == 2
    assert [h.message_id for h in strict.hits] == [loose.hits[0].message_id]
    assert all(h.score >= 0.5 for h in strict.hits)


def test_given_a_message_longer_than_a_chunk_when_recalled_then_found_once_by_text_in_its_tail(
    memory: Memory,
) -> None:
    long_text = "filler " * 5000 + "the treasure is buried under the old oak"
    saved = say(memory, "old", long_text)
    hits = memory.recall(
        thread_id="t",
        resource_id="r",
        query="treasure buried oak",
        options={"semantic_recall": {"chunk_chars": 1000}},
    ).hits
    assert [h.message_id for h in hits] == [saved[0].id]


def test_given_no_path_when_building_the_local_default_then_the_file_is_dot_memstack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Memory.local(embedder="hash") as m:
        m.save_messages(thread_id="t", resource_id="r", messages=["persisted"])
    assert (tmp_path / ".memstack" / "memory.db").is_file()
    with Memory.local(embedder="hash") as again:
        assert [x.text for x in again.list_messages(thread_id="t", resource_id="r").messages] == ["persisted"]


def test_given_a_database_indexed_by_one_embedder_when_reopened_with_another_of_its_size_then_refused(
    tmp_path: Path,
) -> None:
    from memstack.adapters.hash_embed import HashEmbedder

    class OtherModel(HashEmbedder):
        def __init__(self) -> None:
            super().__init__(256)
            self.model_id = "other-256"

    with Memory.local(tmp_path / "m.db", embedder="hash") as memory:
        say(memory, "t", "the zeppelin lands at noon")

    with pytest.raises(InvalidInput) as err:
        Memory.local(tmp_path / "m.db", embedder=OtherModel())

    assert "hash-256" in err.value.message and "other-256" in err.value.message
    assert "memstack reindex" in err.value.message
