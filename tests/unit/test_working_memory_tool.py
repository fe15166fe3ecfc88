"""``Memory.apply_tool_call`` in markdown and vnext modes: ownership, the template guard, size caps,
read-only, and initial working memory from thread metadata (spec §2.7)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstack import InvalidInput, Memory, NotFound, PayloadTooLarge
from memstack.config import DEFAULT_WORKING_MEMORY_TEMPLATE
from memstack.model import ToolCallPart, ToolResultPart
from memstack.working_memory.service import document_version

WM = {"working_memory": {"enabled": True}}
VNEXT = {"working_memory": {"enabled": True, "version": "vnext", "template": "# Notes"}}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.local(tmp_path / "m.db", embedder="hash", **WM) as m:
        yield m


def call(arguments: dict[str, Any], name: str = "updateWorkingMemory") -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def part(message: Any) -> ToolResultPart:
    p = message.parts[0]
    assert isinstance(p, ToolResultPart)
    return p


def test_given_a_markdown_call_when_applied_then_the_document_is_replaced(memory: Memory) -> None:
    out = memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"memory": "# Name: Ada"}))
    assert part(out).result == {
        "success": True,
        "message": "Working memory saved.",
        "version": document_version("# Name: Ada"),  # for the model's next call in the same turn
    }
    assert out.thread_id == "t" and out.role == "tool" and part(out).name == "updateWorkingMemory"
    assert memory.get_working_memory(thread_id="t", resource_id="r") == "# Name: Ada"
    assert memory.get_thread(thread_id="t", resource_id="r").resource_id == "r"  # created when missing


def test_given_a_tool_call_part_when_applied_then_it_works_like_an_openai_call(memory: Memory) -> None:
    tc = ToolCallPart(id="p1", name="updateWorkingMemory", args={"memory": "# Likes: tea"})
    out = memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=tc)
    assert part(out).tool_call_id == "p1" and not part(out).is_error
    assert memory.get_working_memory(thread_id="t", resource_id="r") == "# Likes: tea"


def test_given_another_resources_thread_id_when_applied_then_the_intruder_gets_its_own_and_the_owners_is_untouched(
    memory: Memory,
) -> None:
    # thread ids are scoped to their resource: "t" of the intruder is a new thread of its own
    memory.create_thread(resource_id="owner", thread_id="t")
    memory.apply_tool_call(thread_id="t", resource_id="owner", tool_call=call({"memory": "# owner's"}))
    out = memory.apply_tool_call(thread_id="t", resource_id="intruder", tool_call=call({"memory": "# x"}))
    assert part(out).result["success"] is True
    assert memory.get_working_memory(thread_id="t", resource_id="intruder") == "# x"
    assert memory.get_working_memory(thread_id="t", resource_id="owner") == "# owner's"
    assert memory.get_thread(thread_id="t", resource_id="intruder").resource_id == "intruder"
    assert memory.get_thread(thread_id="t", resource_id="owner").resource_id == "owner"


def test_given_stored_data_when_the_bare_template_is_sent_then_refused_readably(memory: Memory) -> None:
    memory.update_working_memory(thread_id="t", resource_id="r", working_memory="# Name: Ada")
    bare = "  " + DEFAULT_WORKING_MEMORY_TEMPLATE.replace("\n", "\n\n") + " "
    out = memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"memory": bare}))
    assert part(out).result["success"] is False and not part(out).is_error
    assert "template" in part(out).result["message"]
    assert memory.get_working_memory(thread_id="t", resource_id="r") == "# Name: Ada"


def test_given_nothing_stored_when_the_bare_template_is_sent_then_it_is_saved(memory: Memory) -> None:
    out = memory.apply_tool_call(
        thread_id="t", resource_id="r", tool_call=call({"memory": DEFAULT_WORKING_MEMORY_TEMPLATE})
    )
    assert part(out).result["success"] is True


def test_given_memory_as_an_object_in_markdown_mode_when_applied_then_error_result(memory: Memory) -> None:
    out = memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"memory": {"a": 1}}))
    assert part(out).is_error and "string" in part(out).result["message"]


def test_given_another_tools_call_when_applied_then_invalid_input(memory: Memory) -> None:
    with pytest.raises(InvalidInput):
        memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({}, name="search"))


def test_given_read_only_when_a_call_arrives_then_error_result_and_nothing_written(memory: Memory) -> None:
    out = memory.apply_tool_call(
        thread_id="t", resource_id="r", tool_call=call({"memory": "# x"}), options={"read_only": True}
    )
    assert part(out).is_error and "read-only" in part(out).result["message"]
    assert memory.get_working_memory(thread_id="t", resource_id="r") is None


def test_given_a_document_over_the_token_cap_when_updated_then_the_limit_is_named(tmp_path: Path) -> None:
    with Memory.local(
        tmp_path / "c.db", embedder="hash", working_memory={"enabled": True, "max_tokens": 50}
    ) as m:
        with pytest.raises(PayloadTooLarge, match="limit of 50 tokens") as err:
            m.update_working_memory(thread_id="t", resource_id="r", working_memory="word " * 200)
        assert err.value.field == "working_memory"
        out = m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"memory": "word " * 200}))
        assert part(out).is_error and "50 tokens" in part(out).result["message"]


def test_given_a_1mb_input_when_applied_then_rejected_fast_before_parsing(memory: Memory) -> None:
    huge = {
        "id": "c",
        "type": "function",
        "function": {"name": "updateWorkingMemory", "arguments": "[" * 1_000_000},
    }
    start = time.perf_counter()
    with pytest.raises(PayloadTooLarge, match="262144 bytes"):
        memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=huge)
    with pytest.raises(PayloadTooLarge, match="262144 bytes"):
        memory.update_working_memory(thread_id="t", resource_id="r", working_memory="x" * 1_000_000)
    assert time.perf_counter() - start < 0.5


def test_given_vnext_when_appending_then_text_is_added_and_duplicates_rejected(tmp_path: Path) -> None:
    with Memory.local(tmp_path / "v.db", embedder="hash", **VNEXT) as m:
        m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"newMemory": "- likes tea"}))
        m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"newMemory": "- lives in Oslo"}))
        dup = m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"newMemory": "- likes tea"}))
        assert part(dup).result["success"] is False and "already" in part(dup).result["message"]
        assert m.get_working_memory(thread_id="t", resource_id="r") == "- likes tea\n- lives in Oslo"
        assert (
            "newMemory"
            in m.context(thread_id="t", resource_id="r", message="x").tools[0]["function"]["parameters"][
                "properties"
            ]
        )


def test_given_vnext_when_clarifying_with_a_search_string_then_replaced_in_place(tmp_path: Path) -> None:
    with Memory.local(tmp_path / "v.db", embedder="hash", **VNEXT) as m:
        m.update_working_memory(thread_id="t", resource_id="r", working_memory="- likes tea\n- lives in Oslo")
        args = {
            "newMemory": "- lives in Bergen",
            "searchString": "- lives in Oslo",
            "updateReason": "clarify-existing-memory",
        }
        m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call(args))
        assert m.get_working_memory(thread_id="t", resource_id="r") == "- likes tea\n- lives in Bergen"


def test_given_vnext_when_replacing_without_search_string_then_rejected(tmp_path: Path) -> None:
    with Memory.local(tmp_path / "v.db", embedder="hash", **VNEXT) as m:
        out = m.apply_tool_call(
            thread_id="t",
            resource_id="r",
            tool_call=call({"newMemory": "x", "updateReason": "clarify-existing-memory"}),
        )
        assert part(out).is_error and "searchString" in part(out).result["message"]


def test_given_vnext_resource_scope_when_replace_irrelevant_then_appended_instead(tmp_path: Path) -> None:
    with Memory.local(tmp_path / "v.db", embedder="hash", **VNEXT) as m:
        m.update_working_memory(thread_id="t", resource_id="r", working_memory="- works at ACME")
        args = {
            "newMemory": "- plans a trip",
            "searchString": "- works at ACME",
            "updateReason": "replace-irrelevant-memory",
        }
        m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call(args))
        assert m.get_working_memory(thread_id="t", resource_id="r") == "- works at ACME\n- plans a trip"


def test_given_vnext_when_context_then_vnext_guidelines_are_shown(tmp_path: Path) -> None:
    with Memory.local(tmp_path / "v.db", embedder="hash", **VNEXT) as m:
        text = m.context(thread_id="t", resource_id="r", message="x").system[0].text
        assert (
            "searchString" in text
            and "no reason to remove" in text
            and "<working_memory_template>\n# Notes" in text
        )


def test_given_vnext_with_a_schema_when_configured_then_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="vnext"):
        Memory.local(
            ":memory:", embedder="hash", working_memory={"version": "vnext", "schema": {"type": "object"}}
        )


def test_given_initial_working_memory_in_thread_metadata_when_created_then_resource_scope_gets_it(
    memory: Memory,
) -> None:
    memory.create_thread(resource_id="r", thread_id="t1", metadata={"working_memory": "# Name: Ada"})
    assert memory.get_working_memory(thread_id="t2", resource_id="r") == "# Name: Ada"


def test_given_initial_working_memory_in_thread_scope_when_created_then_only_that_thread_has_it(
    memory: Memory,
) -> None:
    opts = {"working_memory": {"enabled": True, "scope": "thread"}}
    memory.create_thread(resource_id="r", thread_id="t1", metadata={"working_memory": "# Plan: A"})
    assert memory.get_working_memory(thread_id="t1", resource_id="r", options=opts) == "# Plan: A"
    assert memory.get_working_memory(thread_id="t2", resource_id="r", options=opts) is None


def test_given_initial_working_memory_over_the_cap_when_creating_a_thread_then_nothing_is_created(
    tmp_path: Path,
) -> None:
    with Memory.local(
        tmp_path / "seed.db", embedder="hash", working_memory={"enabled": True, "max_tokens": 10}
    ) as m:
        with pytest.raises(PayloadTooLarge):
            m.create_thread(resource_id="r", thread_id="t", metadata={"working_memory": "word " * 100})
        with pytest.raises(NotFound):
            m.get_thread(thread_id="t", resource_id="r")


def test_given_working_memory_in_updated_metadata_when_resource_scoped_then_copied_to_the_resource(
    tmp_path: Path,
) -> None:
    with Memory.local(tmp_path / "upd.db", embedder="hash", working_memory=True) as m:
        m.create_thread(resource_id="r", thread_id="t")
        m.update_thread(thread_id="t", resource_id="r", metadata={"working_memory": "# Name: Ada"})
        assert m.get_working_memory(thread_id="other", resource_id="r") == "# Name: Ada"


@pytest.mark.parametrize(
    ("options", "stored", "seed"),
    [
        ({"enabled": True}, "# User\n- allergy: peanuts", "# scratch"),
        (
            {"enabled": True, "schema": {"type": "object", "properties": {"allergy": {"type": "string"}}}},
            '{"allergy": "peanuts"}',
            '{"allergy": "none"}',
        ),
    ],
    ids=["markdown", "json"],
)
@pytest.mark.parametrize("how", ["create", "update"])
def test_given_resource_working_memory_when_a_thread_carries_some_in_metadata_then_the_resource_keeps_its_own(
    tmp_path: Path, options: dict[str, Any], stored: str, seed: str, how: str
) -> None:
    with Memory.local(tmp_path / "keep.db", embedder="hash", working_memory=options) as m:
        m.update_working_memory(resource_id="r", thread_id="first", working_memory=stored)
        before = m.get_working_memory(resource_id="r", thread_id="first")
        if how == "create":
            m.create_thread(resource_id="r", thread_id="new", metadata={"working_memory": seed})
        else:
            m.create_thread(resource_id="r", thread_id="new")
            m.update_thread(resource_id="r", thread_id="new", metadata={"working_memory": seed})
        assert m.get_working_memory(resource_id="r", thread_id="other") == before
        assert m.get_thread(resource_id="r", thread_id="new").metadata["working_memory"] == seed


def test_given_hostile_tool_arguments_when_applied_then_error_results_not_exceptions(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    with Memory.local(
        tmp_path / "h.db", embedder="hash", working_memory={"enabled": True, "schema": schema}
    ) as m:
        deep = '{"memory":{"x":' + '{"a":' * 3000 + "1" + "}" * 3000 + "}}"
        surrogate = '{"memory": {"name": "\\ud800"}}'
        for raw in (deep, surrogate):
            out = m.apply_tool_call(
                thread_id="t",
                resource_id="r",
                tool_call={
                    "id": "c",
                    "type": "function",
                    "function": {"name": "updateWorkingMemory", "arguments": raw},
                },
            )
            part = out.parts[0]
            assert isinstance(part, ToolResultPart) and part.is_error
        assert m.get_working_memory(thread_id="t", resource_id="r") is None


def test_given_invalid_initial_json_working_memory_when_creating_a_thread_then_refused(
    tmp_path: Path,
) -> None:
    schema = {"type": "object", "properties": {"age": {"type": "integer"}}}
    with Memory.local(
        tmp_path / "s.db", embedder="hash", working_memory={"enabled": True, "schema": schema}
    ) as m:
        with pytest.raises(InvalidInput):
            m.create_thread(resource_id="r", thread_id="t", metadata={"working_memory": '{"age": "x"}'})
        m.create_thread(
            resource_id="r", thread_id="t2", metadata={"working_memory": '{"age": 3, "name": null}'}
        )
        assert json.loads(m.get_working_memory(thread_id="t2", resource_id="r") or "{}") == {"age": 3}


def test_given_vnext_text_that_is_part_of_a_line_when_appended_then_it_is_not_a_duplicate(
    tmp_path: Path,
) -> None:
    with Memory.local(
        tmp_path / "v.db", embedder="hash", working_memory={"enabled": True, "version": "vnext"}
    ) as m:
        m.update_working_memory(thread_id="t", resource_id="r", working_memory="- City: Paris")
        args = json.dumps({"newMemory": "Paris"})
        call = {"id": "c", "type": "function", "function": {"name": "updateWorkingMemory", "arguments": args}}
        m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call)
        assert m.get_working_memory(thread_id="t", resource_id="r") == "- City: Paris\nParis"
        m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call)
        assert m.get_working_memory(thread_id="t", resource_id="r") == "- City: Paris\nParis"


def test_given_an_empty_markdown_update_over_data_when_applied_then_refused(tmp_path: Path) -> None:
    with Memory.local(tmp_path / "e.db", embedder="hash", working_memory=True) as m:
        m.update_working_memory(thread_id="t", resource_id="r", working_memory="# Name: Ada")
        call = {
            "id": "c",
            "type": "function",
            "function": {"name": "updateWorkingMemory", "arguments": '{"memory": "  "}'},
        }
        m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call)
        assert m.get_working_memory(thread_id="t", resource_id="r") == "# Name: Ada"


def test_given_the_result_of_apply_tool_call_when_rendered_then_a_chat_completions_tool_message(
    tmp_path: Path,
) -> None:
    from memstack.context import tool_messages

    with Memory.local(tmp_path / "r.db", embedder="hash", working_memory=True) as m:
        call = {
            "id": "call_9",
            "type": "function",
            "function": {"name": "updateWorkingMemory", "arguments": '{"memory": "# Ada"}'},
        }
        out = m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call)
        (message,) = tool_messages(out)
        assert message["role"] == "tool" and message["tool_call_id"] == "call_9"
        assert json.loads(message["content"])["success"] is True
