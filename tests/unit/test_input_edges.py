"""Inputs at the edges of what JSON and datetimes allow: stored and read back, or refused up front —
never accepted and then unreadable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memstack import InvalidInput, Memory
from memstack.model import MAX_JSON_DEPTH


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    return Memory.local(tmp_path / "m.db", embedder="hash")


@pytest.mark.parametrize(
    "created_at", ["0999-06-01T00:00:00Z", "0001-01-01T00:00:00", "0100-02-03T04:05:06.7Z"]
)
def test_given_an_early_created_at_when_saved_then_the_thread_reads_back(
    memory: Memory, created_at: str
) -> None:
    memory.save_messages(
        thread_id="t1",
        resource_id="r1",
        messages=[{"role": "user", "content": "old", "created_at": created_at}],
    )
    page = memory.list_messages(thread_id="t1", resource_id="r1")
    assert [m.text for m in page.messages] == ["old"]
    assert memory.context(thread_id="t2", resource_id="r1", message="old").recalled != []


def test_given_metadata_at_the_depth_limit_when_saved_then_it_round_trips(memory: Memory) -> None:
    meta = {"a": nested(MAX_JSON_DEPTH - 1)}
    saved = memory.save_messages(
        thread_id="t1", resource_id="r1", messages=[{"role": "user", "content": "x", "metadata": meta}]
    )
    assert memory.list_messages(thread_id="t1", resource_id="r1").messages[0].metadata == meta
    assert saved[0].metadata == meta


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"role": "user", "content": "x", "metadata": {"a": nested(500)}}, "messages[0].metadata"),
        (
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "c", "name": "f", "args": {"a": nested(100)}}],
            },
            "messages[0].parts[0].args",
        ),
        (
            {"role": "tool", "parts": [{"type": "tool_result", "tool_call_id": "c", "result": nested(100)}]},
            "messages[0].parts[0].result",
        ),
    ],
)
def test_given_json_nested_too_deep_when_saved_then_refused_and_nothing_written(
    memory: Memory, message: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        memory.save_messages(thread_id="t1", resource_id="r1", messages=[message])
    assert err.value.field is not None and err.value.field.startswith(field)
    assert str(MAX_JSON_DEPTH) in str(err.value)
    assert memory.list_threads(resource_id="r1").threads == ()  # not even the thread was made


def test_given_thread_metadata_nested_too_deep_when_created_then_refused(memory: Memory) -> None:
    with pytest.raises(InvalidInput, match="nested deeper"):
        memory.create_thread(thread_id="t1", resource_id="r1", metadata={"a": nested(200)})
