"""Threads and messages through the public ``Memory`` API (embedded default, hash embedder)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstack import Include, InvalidInput, Memory, NotFound, PayloadTooLarge

T = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.local(tmp_path / "m.db", embedder="hash") as m:
        yield m


def test_given_a_batch_with_identical_timestamps_when_listed_then_insertion_order_always(
    memory: Memory,
) -> None:
    for run in range(5):
        tid = f"t{run}"
        memory.save_messages(
            thread_id=tid,
            resource_id="r",
            messages=[
                {"id": f"{tid}-u", "role": "user", "content": "weather in Oslo?", "created_at": T},
                {
                    "id": f"{tid}-c",
                    "role": "assistant",
                    "created_at": T,
                    "parts": [
                        {
                            "type": "tool_call",
                            "id": f"{tid}-call",
                            "name": "weather",
                            "args": {"city": "Oslo"},
                        }
                    ],
                },
                {
                    "id": f"{tid}-r",
                    "role": "tool",
                    "created_at": T,
                    "parts": [
                        {"type": "tool_result", "tool_call_id": f"{tid}-call", "name": "weather", "result": 3}
                    ],
                },
                {"id": f"{tid}-a", "role": "assistant", "content": "It is 3 degrees.", "created_at": T},
            ],
        )
        listed = memory.list_messages(thread_id=tid, resource_id="r", last=10).messages
        assert [m.id for m in listed] == [f"{tid}-u", f"{tid}-c", f"{tid}-r", f"{tid}-a"]


def test_given_a_saved_id_when_saved_again_then_updated_in_place_and_count_unchanged(memory: Memory) -> None:
    memory.save_messages(
        thread_id="t", resource_id="r", messages=[{"id": "m1", "role": "user", "content": "v1"}]
    )
    memory.save_messages(
        thread_id="t", resource_id="r", messages=[{"id": "m1", "role": "user", "content": "v2"}]
    )
    listed = memory.list_messages(thread_id="t", resource_id="r", last=10).messages
    assert [(m.id, m.text) for m in listed] == [("m1", "v2")]
    hits = memory.recall(thread_id="t", resource_id="r", query="v1 v2").hits
    assert [h.message_id for h in hits] == ["m1"]


def test_given_a_missing_thread_when_saving_then_it_is_created_for_the_resource(memory: Memory) -> None:
    memory.save_messages(thread_id="new", resource_id="r", messages=["hello"])
    thread = memory.get_thread(thread_id="new", resource_id="r")
    assert thread.resource_id == "r" and thread.title == ""


def test_given_a_thread_of_resource_a_when_used_as_resource_b_then_not_found(memory: Memory) -> None:
    memory.create_thread(resource_id="a", thread_id="t", title="secret")
    memory.save_messages(thread_id="t", resource_id="a", messages=["a's message"])
    with pytest.raises(NotFound):
        memory.get_thread(thread_id="t", resource_id="b")
    with pytest.raises(NotFound):
        memory.list_messages(thread_id="t", resource_id="b")
    with pytest.raises(NotFound):
        memory.update_thread(thread_id="t", resource_id="b", title="x")
    with pytest.raises(NotFound):
        memory.delete_thread(thread_id="t", resource_id="b")
    assert memory.delete_messages(resource_id="b", message_ids=["whatever"]) == 0
    ctx = memory.context(thread_id="t", resource_id="b", message="a's message")
    assert ctx.message_ids == set()
    # thread ids are scoped to their resource: saving to "t" as b makes (or uses) b's own thread "t"
    memory.save_messages(thread_id="t", resource_id="b", messages=["b writes"])
    assert [m.text for m in memory.list_messages(thread_id="t", resource_id="b").messages] == ["b writes"]
    assert memory.get_thread(thread_id="t", resource_id="a").title == "secret"
    assert [m.text for m in memory.list_messages(thread_id="t", resource_id="a").messages] == ["a's message"]


def test_given_unicode_and_a_100kb_message_when_saved_then_listed_unchanged(memory: Memory) -> None:
    texts = ["party 🎉👩‍👩‍👧‍👦", "我们明天去北京 그리고 서울", "z" * 100_000]
    memory.save_messages(thread_id="t", resource_id="r", messages=texts)
    assert [m.text for m in memory.list_messages(thread_id="t", resource_id="r").messages] == texts


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"thread_id": "", "resource_id": "r", "messages": ["x"]}, "thread_id"),
        ({"thread_id": "t", "resource_id": " ", "messages": ["x"]}, "resource_id"),
        (
            {"thread_id": "t", "resource_id": "r", "messages": ["ok", {"role": "robot", "content": "x"}]},
            "messages[1].role",
        ),
        (
            {
                "thread_id": "t",
                "resource_id": "r",
                "messages": [{"role": "user", "parts": [{"type": "text"}]}],
            },
            "messages[0].parts[0].text",
        ),
        (
            {
                "thread_id": "t",
                "resource_id": "r",
                "messages": [{"role": "user", "parts": [{"type": "video", "url": "x"}]}],
            },
            "messages[0].parts[0]",
        ),
        (
            {
                "thread_id": "t",
                "resource_id": "r",
                "messages": [{"role": "user", "content": "x", "metadata": {"s": {1, 2}}}],
            },
            "messages[0].metadata",
        ),
        (
            {"thread_id": "t", "resource_id": "r", "messages": [{"role": "user", "content": ""}]},
            "messages[0].parts",
        ),
        (
            {"thread_id": "t", "resource_id": "r", "messages": [{"id": "", "role": "user", "content": "x"}]},
            "messages[0].id",
        ),
        (
            {
                "thread_id": "t",
                "resource_id": "r",
                "messages": [{"id": "d", "content": "x"}, {"id": "d", "content": "y"}],
            },
            "messages[1].id",
        ),
        ({"thread_id": "t", "resource_id": "r", "messages": "not a list"}, "messages"),
        (
            {"thread_id": "t", "resource_id": "r", "messages": ["ok", {"role": "system", "content": "x"}]},
            "messages[1].role",
        ),
    ],
)
def test_given_bad_input_when_saving_then_invalid_input_names_the_field_and_nothing_is_written(
    memory: Memory, kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        memory.save_messages(**kwargs)  # type: ignore[arg-type]
    assert err.value.field is not None and err.value.field.startswith(field)
    with pytest.raises(NotFound):
        memory.get_thread(thread_id="t", resource_id="r")


def test_given_too_many_messages_when_saving_then_the_limit_is_named(memory: Memory) -> None:
    with pytest.raises(PayloadTooLarge, match="1000"):
        memory.save_messages(thread_id="t", resource_id="r", messages=["x"] * 1001)


def test_given_bad_thread_input_when_creating_then_invalid_input(memory: Memory) -> None:
    with pytest.raises(InvalidInput) as err:
        memory.create_thread(resource_id="r", metadata={"bad key": 1})
    assert err.value.field == "metadata.bad key"
    with pytest.raises(InvalidInput):
        memory.create_thread(resource_id="r", metadata={"x": float("nan")})
    with pytest.raises(InvalidInput):
        memory.create_thread(resource_id="r", title=5)  # type: ignore[arg-type]


def test_given_threads_when_listed_then_pages_sort_and_filter(memory: Memory) -> None:
    for i in range(5):
        memory.create_thread(resource_id="r", thread_id=f"t{i}", metadata={"even": i % 2 == 0})
    memory.create_thread(resource_id="other", thread_id="x")
    first = memory.list_threads(resource_id="r", limit=2)
    assert len(first.threads) == 2 and first.next_cursor
    rest = memory.list_threads(resource_id="r", limit=10, cursor=first.next_cursor)
    assert len(first.threads) + len(rest.threads) == 5 and rest.next_cursor is None
    evens = memory.list_threads(resource_id="r", metadata={"even": True})
    assert sorted(t.id for t in evens.threads) == ["t0", "t2", "t4"]
    with pytest.raises(InvalidInput):
        memory.list_threads(resource_id="r", order_by="title")
    with pytest.raises(InvalidInput):
        memory.list_threads(resource_id="r", limit=0)


def test_given_a_thread_when_updated_then_partial_and_metadata_merged(memory: Memory) -> None:
    memory.create_thread(resource_id="r", thread_id="t", title="First", metadata={"a": 1, "b": 2})
    updated = memory.update_thread(thread_id="t", resource_id="r", metadata={"b": 3})
    assert updated.title == "First" and updated.metadata == {"a": 1, "b": 3}
    assert memory.update_thread(thread_id="t", resource_id="r", title="Second").metadata == {"a": 1, "b": 3}


def test_given_a_thread_when_deleted_then_messages_and_index_entries_go(memory: Memory) -> None:
    memory.save_messages(thread_id="t", resource_id="r", messages=["the password is swordfish"])
    memory.save_messages(thread_id="keep", resource_id="r", messages=["unrelated"])
    memory.delete_thread(thread_id="t", resource_id="r")
    for mode in ("vector", "keyword", "hybrid"):
        hits = memory.recall(
            thread_id="keep",
            resource_id="r",
            query="password swordfish",
            options={"semantic_recall": {"mode": mode}},
        ).hits
        assert [h.thread_id for h in hits] in ([], ["keep"]), mode
    with pytest.raises(NotFound):
        memory.list_messages(thread_id="t", resource_id="r")


def test_given_messages_when_deleted_then_index_entries_go(memory: Memory) -> None:
    saved = memory.save_messages(thread_id="t", resource_id="r", messages=["alpha bravo", "charlie delta"])
    assert memory.delete_messages(resource_id="r", message_ids=[saved[0].id]) == 1
    hits = memory.recall(
        thread_id="t", resource_id="r", query="alpha bravo", options={"semantic_recall": {"mode": "keyword"}}
    ).hits
    assert [h.message_id for h in hits] == []


def test_given_messages_when_listing_last_and_pages_then_chronological(memory: Memory) -> None:
    memory.save_messages(thread_id="t", resource_id="r", messages=[f"m{i}" for i in range(7)])
    assert [m.text for m in memory.list_messages(thread_id="t", resource_id="r", last=3).messages] == [
        "m4",
        "m5",
        "m6",
    ]
    page1 = memory.list_messages(thread_id="t", resource_id="r", limit=4)
    page2 = memory.list_messages(thread_id="t", resource_id="r", limit=4, cursor=page1.next_cursor)
    assert [m.text for m in page1.messages + page2.messages] == [f"m{i}" for i in range(7)]
    assert page2.next_cursor is None


def test_given_include_when_listing_then_neighbours_from_the_messages_own_thread(memory: Memory) -> None:
    memory.save_messages(
        thread_id="a", resource_id="r", messages=[{"id": f"a{i}", "content": f"a{i}"} for i in range(5)]
    )
    memory.save_messages(thread_id="b", resource_id="r", messages=[{"id": "b0", "content": "b0"}])
    memory.save_messages(thread_id="x", resource_id="other", messages=[{"id": "x0", "content": "x0"}])
    page = memory.list_messages(
        thread_id="b",
        resource_id="r",
        last=5,
        include=[Include("a2", before=1, after=1), {"id": "x0", "after": 1}],
    )
    assert [m.id for m in page.messages] == ["a1", "a2", "a3", "b0"]


def test_given_a_thread_when_cloned_then_new_ids_same_order_and_clone_metadata(memory: Memory) -> None:
    memory.create_thread(resource_id="r", thread_id="src", title="Plans", metadata={"k": "v"})
    memory.save_messages(thread_id="src", resource_id="r", messages=[f"m{i}" for i in range(4)])
    result = memory.clone_thread(
        source_thread_id="src", resource_id="r", new_thread_id="copy", message_limit=3
    )
    assert result.thread.title == "Clone of Plans"
    assert result.thread.metadata["k"] == "v" and result.thread.metadata["clone"]["source_thread_id"] == "src"
    assert [m.text for m in result.messages] == ["m1", "m2", "m3"]
    assert all(m.id not in result.message_id_map for m in result.messages)
    assert [m.text for m in memory.list_messages(thread_id="copy", resource_id="r").messages] == [
        "m1",
        "m2",
        "m3",
    ]
    with pytest.raises(NotFound):
        memory.clone_thread(source_thread_id="src", resource_id="other")


def test_given_a_bad_target_resource_id_when_cloning_then_invalid_input_naming_it(memory: Memory) -> None:
    memory.save_messages(thread_id="src", resource_id="r", messages=["a"])
    with pytest.raises(InvalidInput) as err:
        memory.clone_thread(source_thread_id="src", resource_id="r", target_resource_id="x" * 300)
    assert err.value.field == "target_resource_id"


def test_given_working_memory_tool_calls_and_tags_when_saved_then_history_holds_neither(
    memory: Memory,
) -> None:
    memory.save_messages(
        thread_id="t",
        resource_id="r",
        messages=[
            {
                "role": "assistant",
                "parts": [
                    {"type": "text", "text": "Noted.<working_memory># Name: Ada</working_memory>"},
                    {
                        "type": "tool_call",
                        "id": "c1",
                        "name": "updateWorkingMemory",
                        "args": {"memory": "# Ada"},
                    },
                ],
            },
            {
                "role": "tool",
                "parts": [{"type": "tool_result", "tool_call_id": "c1", "result": {"success": True}}],
            },
        ],
    )
    listed = memory.list_messages(thread_id="t", resource_id="r").messages
    assert [m.text for m in listed] == ["Noted."]
    assert len(listed[0].parts) == 1


def test_given_read_only_when_saving_then_nothing_is_written(tmp_path: Path) -> None:
    with Memory.local(tmp_path / "ro.db", embedder="hash", read_only=True) as m:
        assert m.save_messages(thread_id="t", resource_id="r", messages=["x"]) == []
        with pytest.raises(NotFound):
            m.get_thread(thread_id="t", resource_id="r")
