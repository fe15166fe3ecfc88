"""Working memory, first cut: markdown template, scopes, system message, tool definition."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memstack import InvalidInput, Memory, NotFound, PayloadTooLarge
from memstack.config import DEFAULT_WORKING_MEMORY_TEMPLATE
from memstack.memory import strip_tags

WM = {"working_memory": {"enabled": True}}
THREAD_WM = {"working_memory": {"enabled": True, "scope": "thread"}}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.local(tmp_path / "m.db", embedder="hash", **WM) as m:
        yield m


def test_given_nothing_stored_when_context_then_default_template_and_null_data(memory: Memory) -> None:
    ctx = memory.context(thread_id="t", resource_id="r", message="hi")
    text = ctx.system[0].text
    assert "<working_memory_template>\n# User Information\n- **First Name**:" in text
    assert "<working_memory_data>\nnull\n</working_memory_data>" in text
    assert ctx.tools[0]["function"]["parameters"]["required"] == ["memory"]
    assert DEFAULT_WORKING_MEMORY_TEMPLATE.startswith("\n# User Information\n- **First Name**: \n")


def test_given_resource_scope_when_updated_then_every_thread_of_the_resource_sees_it(memory: Memory) -> None:
    memory.update_working_memory(thread_id="t1", resource_id="r", working_memory="# Name: Ada")
    assert memory.get_working_memory(thread_id="t2", resource_id="r") == "# Name: Ada"
    assert memory.get_working_memory(thread_id="t1", resource_id="other") is None
    assert "# Name: Ada" in memory.context(thread_id="t9", resource_id="r", message="x").system[0].text


def test_given_thread_scope_when_updated_then_only_that_thread_sees_it(memory: Memory) -> None:
    memory.create_thread(resource_id="r", thread_id="t1")
    memory.update_working_memory(
        thread_id="t1", resource_id="r", working_memory="# Plan: A", options=THREAD_WM
    )
    assert memory.get_working_memory(thread_id="t1", resource_id="r", options=THREAD_WM) == "# Plan: A"
    assert memory.get_working_memory(thread_id="t2", resource_id="r", options=THREAD_WM) is None
    assert memory.get_working_memory(thread_id="t1", resource_id="r") is None
    with pytest.raises(NotFound):
        memory.update_working_memory(thread_id="t1", resource_id="b", working_memory="x", options=THREAD_WM)


def test_given_read_only_when_context_then_read_only_message_and_no_tool(memory: Memory) -> None:
    memory.update_working_memory(thread_id="t", resource_id="r", working_memory="# Likes: tea")
    ctx = memory.context(thread_id="t", resource_id="r", message="hi", options={"read_only": True})
    assert ctx.tools == []
    assert "READ-ONLY" in ctx.system[0].text and "# Likes: tea" in ctx.system[0].text


def test_given_disabled_when_used_then_none_and_update_refused(tmp_path: Path) -> None:
    with Memory.local(tmp_path / "off.db", embedder="hash") as m:
        assert m.get_working_memory(thread_id="t", resource_id="r") is None
        with pytest.raises(InvalidInput):
            m.update_working_memory(thread_id="t", resource_id="r", working_memory="x")
        assert m.context(thread_id="t", resource_id="r", message="x").tools == []


def test_given_an_oversized_document_when_updated_then_the_limit_is_named(memory: Memory) -> None:
    with pytest.raises(PayloadTooLarge, match="16000"):
        memory.update_working_memory(thread_id="t", resource_id="r", working_memory="x" * 16_001)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a<working_memory>x</working_memory>b", "ab"),
        ("a<working_memory>x<working_memory>y</working_memory>z</working_memory>b", "ab"),
        ("a<working_memory>never closed", "a"),
        ("stray</working_memory> close", "stray close"),
        ("no tags", "no tags"),
    ],
)
def test_given_working_memory_tags_when_stripped_then_linear_and_balanced(text: str, expected: str) -> None:
    assert strip_tags(text, "working_memory") == expected


def test_given_a_huge_unbalanced_input_when_stripped_then_fast() -> None:
    text = "<working_memory>" * 50_000 + "x"
    assert strip_tags(text, "working_memory") == ""


def test_given_tens_of_thousands_of_tags_when_stripped_then_linear_time() -> None:
    import time

    text = (
        "<working_memory>" * 20_000
        + "x"
        + "</working_memory>" * 20_001
        + "a</working_memory>" * 20_000
        + "end"
    )
    start = time.perf_counter()
    assert strip_tags(text, "working_memory") == "a" * 20_000 + "end"
    # a guard against the quadratic scan this replaced (6.5 s for 58,000 tags), not a speed target
    assert time.perf_counter() - start < 2.0
