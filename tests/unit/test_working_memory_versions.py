"""Markdown working memory never loses a fact silently (issue 13 item 1): the version of the document the
model was shown travels from ``context()`` to ``apply_tool_call``; a call made from a document that has
since moved on is refused with the current document, on SQLite and on DynamoDB (moto)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from memstack import Conflict, Memory
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


def test_given_n_tool_calls_from_one_read_when_applied_concurrently_then_no_fact_is_lost_silently(
    memory: Memory,
) -> None:
    memory.update_working_memory(resource_id="r", thread_id="t", working_memory="# Facts\n- base")
    ctx = memory.context(resource_id="r", thread_id="t", message="hi")
    base = "# Facts\n- base"
    barrier = threading.Barrier(WRITERS)
    told: dict[int, dict[str, Any]] = {}
    conflicts: list[int] = []

    def write(i: int) -> None:
        barrier.wait()
        try:
            msg = memory.apply_tool_call(
                resource_id="r",
                thread_id="t",
                tool_call=update_call(f"c{i}", f"{base}\n- fact {i}"),
                working_memory_version=ctx.working_memory_version,
            )
            told[i] = _result(msg)
        except Conflict:
            conflicts.append(i)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    stored = memory.get_working_memory(resource_id="r", thread_id="t") or ""
    kept = {i for i in range(WRITERS) if f"- fact {i}" in stored}
    succeeded = {i for i, r in told.items() if r["success"]}
    silently_lost = succeeded - kept
    assert not silently_lost, f"writers {sorted(silently_lost)} were told success but their fact is gone"
    assert len(succeeded) == 1, "exactly one call made from the shared read can win"
    for r in told.values():
        if not r["success"]:
            assert r["current_memory"] == stored, "the refusal shows the document as it is now"
    assert len(told) + len(conflicts) == WRITERS


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
