"""Markdown working memory never loses a fact silently (issue 13 item 1): the version of the document the
model was shown travels from ``context()`` to ``apply_tool_call``; a call made from a document that has
since moved on is refused with the current document, on SQLite and on DynamoDB (moto)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstack import Conflict, InvalidInput, Memory
from memstack.working_memory.service import document_version
from tests.store_backends import BACKENDS, memory_on
from tests.working_memory_support import update_call

WM = {"enabled": True}
WRITERS = 16


def _result(message: Any) -> dict[str, Any]:
    result: dict[str, Any] = message.parts[0].result
    return result


@pytest.fixture(params=BACKENDS)
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    with memory_on(request.param, tmp_path, working_memory=WM) as m:
        yield m


def _race(memory: Memory, call: Callable[[int], dict[str, Any]], **kwargs: Any) -> dict[int, dict[str, Any]]:
    """``WRITERS`` concurrent ``apply_tool_call``s of ``call(i)`` (released together): writer → its result,
    or ``None`` for a writer that got ``Conflict`` (it was told too)."""
    barrier = threading.Barrier(WRITERS)
    told: dict[int, Any] = {}

    def write(i: int) -> None:
        barrier.wait()
        try:
            told[i] = _result(
                memory.apply_tool_call(resource_id="r", thread_id="t", tool_call=call(i), **kwargs)
            )
        except Conflict:
            told[i] = None

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(told) == WRITERS
    return told


def _assert_none_lost_silently(memory: Memory, told: dict[int, Any]) -> str:
    """Exactly one writer won, and every other one got a refusal showing the stored document (or
    ``Conflict``); returns the stored document."""
    stored = memory.get_working_memory(resource_id="r", thread_id="t") or ""
    succeeded = {i for i, r in told.items() if r is not None and r["success"]}
    silently_lost = {i for i in succeeded if f"- fact {i}" not in stored}
    assert not silently_lost, f"writers {sorted(silently_lost)} were told success but their fact is gone"
    assert len(succeeded) == 1, "exactly one call made from the shared read can win"
    for r in told.values():
        if r is not None and not r["success"]:
            assert r["current_memory"] == stored, "the refusal shows the document as it is now"
    return stored


def test_given_n_tool_calls_from_one_read_when_applied_concurrently_then_no_fact_is_lost_silently(
    memory: Memory,
) -> None:
    memory.update_working_memory(resource_id="r", thread_id="t", working_memory="# Facts\n- base")
    ctx = memory.context(resource_id="r", thread_id="t", message="hi")

    told = _race(
        memory,
        lambda i: update_call(f"c{i}", f"# Facts\n- base\n- fact {i}"),
        working_memory_version=ctx.working_memory_version,
    )

    _assert_none_lost_silently(memory, told)


def test_given_a_stale_call_when_the_model_redoes_it_with_the_context_then_both_facts_are_kept(
    memory: Memory,
) -> None:
    memory.update_working_memory(resource_id="r", thread_id="t", working_memory="# Facts")
    ctx_a = memory.context(resource_id="r", thread_id="t", message="a")
    ctx_b = memory.context(resource_id="r", thread_id="t", message="b")
    first = memory.apply_tool_call(
        resource_id="r", thread_id="t", tool_call=update_call("a", "# Facts\n- likes tea"), context=ctx_a
    )
    assert _result(first)["success"] is True

    refused = memory.apply_tool_call(
        resource_id="r", thread_id="t", tool_call=update_call("b", "# Facts\n- lives in Oslo"), context=ctx_b
    )
    result = _result(refused)
    assert result["success"] is False and refused.parts[0].is_error
    assert result["current_memory"] == "# Facts\n- likes tea"
    # the model has now seen the current document: its redo, on that document, is written
    redo = memory.apply_tool_call(
        resource_id="r",
        thread_id="t",
        tool_call=update_call("b2", "# Facts\n- likes tea\n- lives in Oslo"),
        context=ctx_b,
    )
    assert _result(redo)["success"] is True
    assert (
        memory.get_working_memory(resource_id="r", thread_id="t") == "# Facts\n- likes tea\n- lives in Oslo"
    )


def test_given_thread_scope_when_the_title_changes_meanwhile_then_the_model_view_is_not_stale(
    tmp_path: Path,
) -> None:
    with memory_on("sqlite", tmp_path, working_memory={"enabled": True, "scope": "thread"}) as memory:
        memory.create_thread(resource_id="r", thread_id="t")
        ctx = memory.context(resource_id="r", thread_id="t", message="hi")
        memory.update_thread(resource_id="r", thread_id="t", title="Renamed")
        msg = memory.apply_tool_call(
            resource_id="r", thread_id="t", tool_call=update_call("c", "# Notes\n- x"), context=ctx
        )
        assert _result(msg)["success"] is True, "an unrelated field of the thread moved, not the document"


def test_given_a_context_when_read_then_it_carries_the_version_and_the_http_answer_too(
    memory: Memory,
) -> None:
    ctx = memory.context(resource_id="r", thread_id="t", message="hi")
    assert isinstance(ctx.working_memory_version, str) and ctx.working_memory_version
    memory.update_working_memory(resource_id="r", thread_id="t", working_memory="# changed")
    after = memory.context(resource_id="r", thread_id="t", message="hi")
    assert after.working_memory_version != ctx.working_memory_version


# the version in the model's own call: a caller that passes back only the tool call ------------------


def _shown_version(ctx: Any) -> str:
    """The version the model reads in the working-memory system message (what it copies into its call)."""
    text = next(
        m["content"]
        for m in ctx.to_openai()["messages"]
        if m["role"] == "system" and "WORKING_MEMORY" in m["content"]
    )
    found = re.search(r'`version`: "([0-9a-f]{16})"', text)
    assert found, "the system message states the document's version"
    return found.group(1)


def test_given_a_context_when_shown_then_the_tool_declares_version_and_the_message_states_it(
    memory: Memory,
) -> None:
    memory.update_working_memory(resource_id="r", thread_id="t", working_memory="# Facts\n- base")
    ctx = memory.context(resource_id="r", thread_id="t", message="hi")
    (tool,) = [t for t in ctx.tools if t["function"]["name"] == "updateWorkingMemory"]
    assert tool["function"]["parameters"]["properties"]["version"]["type"] == "string"
    assert tool["function"]["parameters"]["required"] == ["memory"]  # Mastra-shaped calls still work
    assert _shown_version(ctx) == ctx.working_memory_version


def test_given_n_model_calls_carrying_the_shown_version_when_only_the_calls_are_passed_back_then_none_lost_silently(
    memory: Memory,
) -> None:
    memory.update_working_memory(resource_id="r", thread_id="t", working_memory="# Facts\n- base")
    shown = _shown_version(memory.context(resource_id="r", thread_id="t", message="hi"))

    # the default path: no context, no version argument, only the model's call
    told = _race(memory, lambda i: update_call(f"c{i}", f"# Facts\n- base\n- fact {i}", shown))

    _assert_none_lost_silently(memory, told)
    assert all(r["version"] != shown for r in told.values() if r is not None and not r["success"])


def test_given_a_refused_model_call_when_redone_with_the_answered_version_then_both_facts_are_kept(
    memory: Memory,
) -> None:
    memory.update_working_memory(resource_id="r", thread_id="t", working_memory="# Facts")
    shown = _shown_version(memory.context(resource_id="r", thread_id="t", message="a"))
    first = memory.apply_tool_call(
        resource_id="r", thread_id="t", tool_call=update_call("a", "# Facts\n- likes tea", shown)
    )
    refused = memory.apply_tool_call(
        resource_id="r", thread_id="t", tool_call=update_call("b", "# Facts\n- lives in Oslo", shown)
    )
    assert _result(first)["success"] is True
    assert (
        _result(refused)["success"] is False and _result(refused)["current_memory"] == "# Facts\n- likes tea"
    )

    redo = memory.apply_tool_call(
        resource_id="r",
        thread_id="t",
        tool_call=update_call("b2", "# Facts\n- likes tea\n- lives in Oslo", _result(refused)["version"]),
    )
    assert _result(redo)["success"] is True
    again = memory.apply_tool_call(  # the same turn's next call uses the version its success answered
        resource_id="r",
        thread_id="t",
        tool_call=update_call(
            "b3", "# Facts\n- likes tea\n- lives in Oslo\n- has a cat", _result(redo)["version"]
        ),
    )
    assert _result(again)["success"] is True
    assert memory.get_working_memory(resource_id="r", thread_id="t") == (
        "# Facts\n- likes tea\n- lives in Oslo\n- has a cat"
    )


def test_given_a_call_without_a_version_when_applied_then_it_replaces_as_before(memory: Memory) -> None:
    memory.update_working_memory(resource_id="r", thread_id="t", working_memory="# Facts\n- old")
    msg = memory.apply_tool_call(resource_id="r", thread_id="t", tool_call=update_call("c", "# Facts\n- new"))
    assert _result(msg)["success"] is True
    assert memory.get_working_memory(resource_id="r", thread_id="t") == "# Facts\n- new"


# a version of another JSON type than string: never ignored -------------------------------------------


def _call_with_version(call_id: str, memory: object, version: object) -> dict[str, Any]:
    """A model call whose ``version`` argument is ``version`` as JSON, whatever its type."""
    return {
        "id": call_id,
        "type": "function",
        "function": {
            "name": "updateWorkingMemory",
            "arguments": json.dumps({"memory": memory, "version": version}),
        },
    }


def _digits_only_document() -> str:
    """A document whose version (16 hex digits) has no letter, so a model could send it as a JSON number."""
    for i in range(100_000):
        document = f"# Facts\n- base\n- moved on {i}"
        if document_version(document).isdigit():
            return document
    raise AssertionError("no digits-only version among 100,000 documents")


NOT_VERSIONS = [True, False, 12, 1.5, 1e20, ["x"], [], {"a": 1}, {}, "zz", ""]


@pytest.mark.parametrize("version", NOT_VERSIONS, ids=repr)
def test_given_a_version_of_any_other_type_when_a_markdown_call_carries_it_then_refused_and_nothing_lost(
    memory: Memory, version: object
) -> None:
    memory.update_working_memory(resource_id="r", thread_id="t", working_memory="# Facts\n- base")
    memory.context(resource_id="r", thread_id="t", message="hi")
    moved_on = "# Facts\n- base\n- allergic to peanuts"
    memory.update_working_memory(resource_id="r", thread_id="t", working_memory=moved_on)

    told = _result(
        memory.apply_tool_call(
            resource_id="r", thread_id="t", tool_call=_call_with_version("c", "# Facts\n- coffee", version)
        )
    )

    assert told["success"] is False, f"a version {version!r} was taken as no version and overwrote"
    assert memory.get_working_memory(resource_id="r", thread_id="t") == moved_on
    assert told["current_memory"] == moved_on and told["version"] == document_version(moved_on)
    assert "copy it unchanged" in told["message"]


def test_given_a_digits_only_version_sent_as_a_number_when_current_then_written_and_when_stale_refused(
    memory: Memory,
) -> None:
    document = _digits_only_document()
    memory.update_working_memory(resource_id="r", thread_id="t", working_memory=document)
    number = int(document_version(document))

    written = _result(
        memory.apply_tool_call(
            resource_id="r", thread_id="t", tool_call=_call_with_version("a", f"{document}\n- tea", number)
        )
    )
    stale = _result(
        memory.apply_tool_call(
            resource_id="r", thread_id="t", tool_call=_call_with_version("b", f"{document}\n- Oslo", number)
        )
    )

    assert written["success"] is True, "the digits the model copied are the version"
    assert stale["success"] is False and "changed since you read it" in stale["message"]
    assert memory.get_working_memory(resource_id="r", thread_id="t") == f"{document}\n- tea"


def test_given_a_null_version_when_applied_then_it_is_no_version_and_replaces_as_before(
    memory: Memory,
) -> None:
    memory.update_working_memory(resource_id="r", thread_id="t", working_memory="# Facts\n- old")
    told = _result(
        memory.apply_tool_call(
            resource_id="r", thread_id="t", tool_call=_call_with_version("c", "# Facts\n- new", None)
        )
    )
    assert told["success"] is True  # a strict provider's padding null means "not given"
    assert memory.get_working_memory(resource_id="r", thread_id="t") == "# Facts\n- new"


JSON_WM = {
    "working_memory": {
        "enabled": True,
        "schema": {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": "string"}}},
    }
}


@pytest.mark.parametrize("version", [*NOT_VERSIONS, None, "0123456789abcdef"], ids=repr)
def test_given_json_mode_when_a_call_carries_a_version_of_any_type_then_it_merges_and_keeps_the_other_writers_field(
    memory: Memory, version: object
) -> None:
    memory.update_working_memory(
        resource_id="r", thread_id="t", working_memory={"name": "Ada"}, options=JSON_WM
    )
    memory.update_working_memory(  # another writer, after the model's read
        resource_id="r", thread_id="t", working_memory={"city": "Oslo"}, options=JSON_WM
    )

    told = _result(
        memory.apply_tool_call(
            resource_id="r",
            thread_id="t",
            tool_call=_call_with_version("c", {"name": "Bo"}, version),
            options=JSON_WM,
        )
    )

    assert told["success"] is True
    stored = memory.get_working_memory(resource_id="r", thread_id="t", options=JSON_WM)
    assert json.loads(stored or "") == {"name": "Bo", "city": "Oslo"}


def test_given_a_callers_version_that_is_not_a_string_when_applied_then_invalid_input_naming_it(
    memory: Memory,
) -> None:
    with pytest.raises(InvalidInput) as err:
        memory.apply_tool_call(
            resource_id="r",
            thread_id="t",
            tool_call=update_call("c", "# Facts"),
            working_memory_version=12,  # type: ignore[arg-type]  # what an untyped caller may pass
        )
    assert err.value.field == "working_memory_version"
    assert memory.get_working_memory(resource_id="r", thread_id="t") is None
