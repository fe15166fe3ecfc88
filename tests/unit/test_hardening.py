"""Hostile and odd input: every failure is a memstack error naming the field, and nothing is lost."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memstack import Forbidden, InvalidInput, Memory, PayloadTooLarge, Unavailable
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.store import SqliteMemoryStore
from memstack.cursors import encode_cursor
from memstack.model import Thread
from memstack.ports import IndexEntry


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.local(tmp_path / "m.db", embedder="hash") as m:
        yield m


def test_given_a_message_without_words_when_saved_with_the_hash_embedder_then_stored_and_searchable(
    memory: Memory,
) -> None:
    memory.save_messages(thread_id="t", resource_id="r", messages=["👍", "?", "a real sentence about tea"])
    assert [m.text for m in memory.list_messages(thread_id="t", resource_id="r").messages][:2] == ["👍", "?"]
    memory.recall(thread_id="t", resource_id="r", query="???")  # no vector, no words: no error
    hits = memory.recall(
        thread_id="t", resource_id="r", query="👍", options={"semantic_recall": {"mode": "keyword"}}
    )
    assert [m.text for m in hits.messages][0] == "👍"
    clone = memory.clone_thread(source_thread_id="t", resource_id="r")
    assert len(clone.messages) == 3


def test_given_a_user_mentioning_the_working_memory_tag_when_saved_then_the_text_is_kept_whole(
    memory: Memory,
) -> None:
    text = "How do I use the <working_memory> tag? My flight is at 9am"
    memory.save_messages(thread_id="t", resource_id="r", messages=[text])
    assert memory.list_messages(thread_id="t", resource_id="r").messages[0].text == text


def test_given_a_huge_recalled_message_when_a_budget_is_set_then_the_recall_block_gives_way(
    memory: Memory,
) -> None:
    memory.save_messages(
        thread_id="a", resource_id="r", messages=["pizza recipe: " + "dough flour water salt " * 3000]
    )
    ctx = memory.context(
        thread_id="b",
        resource_id="r",
        message="pizza recipe?",
        options={"message_history": {"max_tokens": 2000}},
    )
    assert ctx.token_count <= 2000
    assert [s.kind for s in ctx.system] == []
    assert ctx.recalled == []


def test_given_a_tool_call_filter_when_recalling_from_other_threads_then_the_block_omits_those_tools(
    memory: Memory,
) -> None:
    memory.save_messages(
        thread_id="a",
        resource_id="r",
        messages=[
            {"role": "user", "content": "list the database rows"},
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "c1", "name": "sql", "args": {"q": "rows"}}],
            },
            {
                "role": "tool",
                "parts": [{"type": "tool_result", "tool_call_id": "c1", "result": "SECRET-ROW " * 50}],
            },
        ],
    )
    ctx = memory.context(
        thread_id="b",
        resource_id="r",
        message="database rows",
        options={"tool_call_filter": {"exclude": ["sql"]}},
    )
    assert "SECRET-ROW" not in ctx.to_openai()["messages"][0]["content"]


def _deep(n: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(n):
        value = {"d": value}
    return {"deep": value}


BAD_SAVES: list[tuple[dict[str, Any], str]] = [
    ({"thread_id": "t\ud800", "messages": ["x"]}, "thread_id"),
    ({"messages": [{"id": "m\ud800", "content": "x"}]}, "messages[0].id"),
    ({"messages": ["lone \ud800 surrogate"]}, "messages[0].parts"),
    ({"messages": [{"content": "x", "metadata": {"k": "\udfff"}}]}, "messages[0].metadata"),
    (
        {"messages": [{"content": "x", "metadata": {"k": {"a": [1] * 3}} | _deep(5000)}]},
        "messages[0].metadata",
    ),
    (
        {
            "messages": [
                {
                    "role": "assistant",
                    "parts": [{"type": "tool_call", "id": "c", "name": "f", "args": {"s": {1}}}],
                }
            ]
        },
        "messages[0].parts",
    ),
    (
        {
            "messages": [
                {
                    "role": "assistant",
                    "parts": [{"type": "tool_call", "id": "c", "name": "f", "args": {"b": b"x"}}],
                }
            ]
        },
        "messages[0].parts",
    ),
    (
        {
            "messages": [
                {"role": "tool", "parts": [{"type": "tool_result", "tool_call_id": "c", "result": math.nan}]}
            ]
        },
        "messages[0].parts",
    ),
    (
        {
            "messages": [
                {"content": "x", "created_at": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))}
            ]
        },
        "messages[0].created_at",
    ),
]


@pytest.mark.parametrize(("kwargs", "field"), BAD_SAVES)
def test_given_hostile_input_when_saving_then_invalid_input_names_the_field(
    memory: Memory, kwargs: dict[str, Any], field: str
) -> None:
    args = {"thread_id": "t", "resource_id": "r", **kwargs}
    with pytest.raises(InvalidInput) as err:
        memory.save_messages(**args)
    assert err.value.field is not None and err.value.field.startswith(field), err.value.field


@pytest.mark.parametrize("key", ["name", "role"])
def test_given_an_author_over_its_size_limit_when_saving_then_payload_too_large_naming_it(
    memory: Memory, key: str
) -> None:
    """A size limit answers ``PayloadTooLarge`` (413) like a title or a message body, not ``InvalidInput``."""
    with pytest.raises(PayloadTooLarge) as err:
        memory.save_messages(
            thread_id="t", resource_id="r", messages=[{"content": "x", "author": {"id": "u", key: "n" * 257}}]
        )
    assert err.value.field == f"messages[0].author.{key}"
    assert "256" in err.value.message
    saved = memory.save_messages(
        thread_id="t", resource_id="r", messages=[{"content": "x", "author": {"id": "u", key: "n" * 256}}]
    )
    assert saved[0].author is not None


def test_given_option_texts_over_their_limits_when_parsed_then_payload_too_large_naming_them() -> None:
    from memstack.config import MAX_OPTION_TEXT_CHARS, MemoryOptions
    from memstack.working_memory.schema import MAX_SCHEMA_BYTES

    long = "t" * (MAX_OPTION_TEXT_CHARS + 1)
    cases = [
        ({"working_memory": {"template": long}}, "working_memory.template"),
        ({"generate_title": {"instructions": long}}, "generate_title.instructions"),
        (
            {"working_memory": {"schema": {"type": "object", "description": "d" * MAX_SCHEMA_BYTES}}},
            "working_memory.schema",
        ),
    ]
    for options, field in cases:
        with pytest.raises(PayloadTooLarge) as err:
            MemoryOptions.parse(options)
        assert err.value.field == field
    with pytest.raises(InvalidInput):  # a malformed one stays InvalidInput
        MemoryOptions.parse({"working_memory": {"template": 3}})


def test_given_a_cyclic_tool_argument_when_saving_then_invalid_input(memory: Memory) -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(InvalidInput):
        memory.save_messages(
            thread_id="t",
            resource_id="r",
            messages=[
                {
                    "role": "assistant",
                    "parts": [{"type": "tool_call", "id": "c", "name": "f", "args": cyclic}],
                }
            ],
        )


@pytest.mark.parametrize(
    "cursor",
    [
        encode_cursor(["abc"]),
        encode_cursor([None]),
        encode_cursor([[1]]),
        encode_cursor([1e19]),
        encode_cursor([True]),
        5,
        "%%%",
    ],
)
def test_given_a_malformed_message_cursor_when_listing_then_invalid_input(
    memory: Memory, cursor: Any
) -> None:
    memory.save_messages(thread_id="t", resource_id="r", messages=["x"])
    with pytest.raises(InvalidInput) as err:
        memory.list_messages(thread_id="t", resource_id="r", cursor=cursor)
    assert err.value.field == "cursor"


@pytest.mark.parametrize("cursor", [encode_cursor([{"a": 1}, "b"]), encode_cursor([1, 2]), ["x"]])
def test_given_a_malformed_thread_cursor_when_listing_then_invalid_input(memory: Memory, cursor: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        memory.list_threads(resource_id="r", cursor=cursor)
    assert err.value.field == "cursor"


@pytest.mark.parametrize("include", ["abc", [5], {"id": "x"}])
def test_given_a_malformed_include_when_listing_then_invalid_input(memory: Memory, include: Any) -> None:
    memory.save_messages(thread_id="t", resource_id="r", messages=["x"])
    with pytest.raises(InvalidInput) as err:
        memory.list_messages(thread_id="t", resource_id="r", include=include)
    assert err.value.field is not None and err.value.field.startswith("include")


def test_given_wrong_types_when_assembling_context_then_invalid_input(memory: Memory) -> None:
    with pytest.raises(InvalidInput):
        memory.context(thread_id="t", resource_id="r", message="x", instructions=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        memory.context(thread_id="t", resource_id="r", message="x", context=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        memory.recall(thread_id="t", resource_id="r", query="bad \ud800")
    one = memory.context(thread_id="t", resource_id="r", message="x", context="a note")  # type: ignore[arg-type]
    assert [m.text for m in one.messages] == ["a note", "x"]


def test_given_a_bad_embedder_or_path_when_building_then_memstack_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        Memory.local(tmp_path / "x.db", embedder=42)  # type: ignore[arg-type]
    (tmp_path / "junk.db").write_bytes(b"not a database" * 100)
    with pytest.raises(Unavailable):
        Memory.local(tmp_path / "junk.db", embedder="hash")


def test_given_a_closed_memory_when_used_then_unavailable(tmp_path: Path) -> None:
    memory = Memory.local(tmp_path / "c.db", embedder="hash")
    memory.close()
    with pytest.raises(Unavailable):
        memory.list_threads(resource_id="r")


def test_given_another_process_holds_the_write_lock_when_saving_then_unavailable_after_the_timeout(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locked.db"
    store = SqliteMemoryStore(SqliteDatabase(path, busy_timeout_ms=50))
    holder = SqliteDatabase(path)
    holder.conn.execute("BEGIN EXCLUSIVE")
    now = datetime.now(UTC)
    with pytest.raises(Unavailable, match="locked"):
        store.create_thread(Thread(id="t", resource_id="r", created_at=now, updated_at=now))
    holder.conn.execute("ROLLBACK")
    store.create_thread(Thread(id="t", resource_id="r", created_at=now, updated_at=now))


def test_given_an_index_entry_whose_message_is_gone_when_recalled_then_dropped_and_removed(
    memory: Memory,
) -> None:
    memory.save_messages(thread_id="t", resource_id="r", messages=["the quick brown fox"])
    ghost = IndexEntry(
        message_id="ghost",
        chunk=0,
        thread_id="t",
        resource_id="r",
        role="user",
        seq=99,
        created_at=datetime.now(UTC),
        text="the quick brown fox jumps",
        vector=memory.embedder.embed_documents(["fox"])[0],
    )
    memory.index.upsert([ghost])
    result = memory.recall(thread_id="t", resource_id="r", query="quick brown fox jumps")
    assert "ghost" not in {h.message_id for h in result.hits}
    keyword = memory.index.search("r", top_k=5, text="jumps").keyword
    assert keyword == []


def test_given_read_only_when_updating_working_memory_then_forbidden(tmp_path: Path) -> None:
    with (
        Memory.local(tmp_path / "ro.db", embedder="hash", read_only=True, working_memory=True) as m,
        pytest.raises(Forbidden),
    ):
        m.update_working_memory(thread_id="t", resource_id="r", working_memory="# x")


def test_given_recall_disabled_when_recalling_then_nothing(memory: Memory) -> None:
    memory.save_messages(thread_id="t", resource_id="r", messages=["hello"])
    assert (
        memory.recall(thread_id="t", resource_id="r", query="hello", options={"semantic_recall": False}).hits
        == []
    )


def test_given_a_message_from_the_past_when_saved_then_the_thread_still_counts_as_active_now(
    memory: Memory,
) -> None:
    memory.create_thread(resource_id="r", thread_id="old")
    memory.create_thread(resource_id="r", thread_id="new")
    memory.save_messages(
        thread_id="old",
        resource_id="r",
        messages=[{"content": "x", "created_at": datetime(2001, 1, 1, tzinfo=UTC)}],
    )
    page = memory.list_threads(resource_id="r", order_by="updated_at")
    assert [t.id for t in page.threads] == ["old", "new"]


def test_given_a_recalled_tool_result_without_its_call_when_its_tool_is_excluded_then_it_does_not_leak(
    memory: Memory,
) -> None:
    memory.save_messages(
        thread_id="a",
        resource_id="r",
        messages=[
            {"role": "user", "content": "check the account"},
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "c1", "name": "secret_tool", "args": {}}],
            },
            {
                "role": "tool",
                "parts": [{"type": "tool_result", "tool_call_id": "c1", "result": "SSN 123-45-6789"}],
            },
            {"role": "assistant", "content": "Done, the zebra account is fine."},
        ],
    )
    stored = memory.list_messages(thread_id="a", resource_id="r").messages[2]
    assert stored.parts[0].name == "secret_tool"  # type: ignore[union-attr]
    ctx = memory.context(
        thread_id="b",
        resource_id="r",
        message="zebra account",
        options={"tool_call_filter": {"exclude": ["secret_tool"]}, "semantic_recall": {"top_k": 1}},
    )
    assert "123-45-6789" not in str(ctx.to_openai())


def test_given_large_thread_and_message_metadata_when_saving_then_refused_before_anything_is_written(
    memory: Memory,
) -> None:
    memory.create_thread(resource_id="r", thread_id="t", metadata={"a": "x" * 40_000})
    with pytest.raises(PayloadTooLarge) as err:
        memory.save_messages(
            thread_id="t", resource_id="r", messages=[{"content": "hi", "metadata": {"b": "y" * 30_000}}]
        )
    assert err.value.field is not None and err.value.field.startswith("messages[0].metadata")
    assert memory.list_messages(thread_id="t", resource_id="r").messages == ()
    with pytest.raises(PayloadTooLarge):
        memory.update_thread(thread_id="t", resource_id="r", metadata={"c": "z" * 40_000})


def test_given_thread_scoped_working_memory_when_saving_messages_then_it_is_not_copied_into_the_index(
    tmp_path: Path,
) -> None:
    with Memory.local(
        tmp_path / "w.db",
        embedder="hash",
        working_memory={"enabled": True, "scope": "thread", "max_tokens": 100_000},
    ) as m:
        m.create_thread(resource_id="r", thread_id="t", metadata={"notes": "x" * 10_000})
        m.update_working_memory(thread_id="t", resource_id="r", working_memory="# Notes\n" + "n" * 15_000)
        m.save_messages(
            thread_id="t", resource_id="r", messages=[{"content": "hello", "metadata": {"b": "y" * 30_000}}]
        )
        with pytest.raises(PayloadTooLarge) as err:
            m.update_working_memory(thread_id="t", resource_id="r", working_memory="\U0001f600" * 15_000)
        assert err.value.field == "working_memory"


def test_given_the_new_message_is_already_stored_when_context_then_it_appears_once(memory: Memory) -> None:
    memory.save_messages(thread_id="t", resource_id="r", messages=[{"id": "u1", "content": "hello there"}])
    ctx = memory.context(thread_id="t", resource_id="r", message={"id": "u1", "content": "hello there"})
    assert [m.id for m in ctx.messages] == ["u1"]


def test_given_typed_metadata_when_listing_threads_then_booleans_never_equal_numbers(memory: Memory) -> None:
    memory.create_thread(resource_id="r", thread_id="flag-true", metadata={"flag": True})
    memory.create_thread(resource_id="r", thread_id="flag-one", metadata={"flag": 1})
    memory.create_thread(resource_id="r", thread_id="flag-text", metadata={"flag": "1"})
    assert [t.id for t in memory.list_threads(resource_id="r", metadata={"flag": True}).threads] == [
        "flag-true"
    ]
    assert [t.id for t in memory.list_threads(resource_id="r", metadata={"flag": 1.0}).threads] == [
        "flag-one"
    ]
    assert [t.id for t in memory.list_threads(resource_id="r", metadata={"flag": "1"}).threads] == [
        "flag-text"
    ]
    with pytest.raises(InvalidInput):
        memory.list_threads(resource_id="r", metadata={"flag": 10**30})


def test_given_more_odd_input_when_used_then_memstack_errors(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InvalidInput):
        memory.create_thread(resource_id="r", title="bad \ud800")
    memory.create_thread(resource_id="r", thread_id="long", title="t" * 1000)
    assert len(memory.clone_thread(source_thread_id="long", resource_id="r").thread.title) == 1000
    monkeypatch.setattr(
        memory.embedder, "embed_query", lambda text: (_ for _ in ()).throw(RuntimeError("down"))
    )
    with pytest.raises(Unavailable):
        memory.recall(
            thread_id="t", resource_id="r", query="anything", options={"semantic_recall": {"mode": "vector"}}
        )
    monkeypatch.setattr(memory.embedder, "embed_query", lambda text: [1.0, 2.0])
    with pytest.raises(Unavailable):
        memory.recall(
            thread_id="t",
            resource_id="r",
            query="anything else",
            options={"semantic_recall": {"mode": "vector"}},
        )


def test_given_an_embedder_missing_symmetric_when_building_then_invalid_input(tmp_path: Path) -> None:
    class Partial:
        model_id = "x"
        dimension = 4

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0, 0, 0] for _ in texts]

        def embed_query(self, text: str) -> list[float]:
            return [1.0, 0, 0, 0]

    with pytest.raises(InvalidInput):
        Memory.local(tmp_path / "p.db", embedder=Partial())  # type: ignore[arg-type]
