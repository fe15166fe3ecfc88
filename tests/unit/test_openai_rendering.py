"""``to_openai()`` always produces a message list chat-completions accepts, whatever tool shapes were saved."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstack import Memory


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.local(tmp_path / "m.db", embedder="hash", semantic_recall=False, last_messages=50) as m:
        yield m


def assert_valid_chat(messages: list[dict[str, Any]]) -> None:
    """Chat-completions rules: every tool_call is answered right after its assistant message, exactly once;
    every tool message answers a call of that run; no empty contents; valid roles and function names."""
    pending: list[str] = []
    for item in messages:
        assert item["role"] in ("system", "user", "assistant", "tool"), item
        if item["role"] == "tool":
            assert item["tool_call_id"] in pending, f"tool message without its call: {item}"
            pending.remove(item["tool_call_id"])
            continue
        assert not pending, f"calls left unanswered before {item}: {pending}"
        if item["role"] == "assistant" and item.get("tool_calls"):
            ids = [c["id"] for c in item["tool_calls"]]
            assert len(ids) == len(set(ids)) and all(ids)
            for c in item["tool_calls"]:
                name = c["function"]["name"]
                assert 1 <= len(name) <= 64 and all(ch.isalnum() or ch in "_-" for ch in name), name
            pending = ids
        else:
            assert item.get("content"), f"empty content: {item}"
    assert not pending


def call(cid: str, name: str = "clock", role: str = "assistant", text: str | None = None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    return {"role": role, "parts": [*parts, {"type": "tool_call", "id": cid, "name": name, "args": {}}]}


def result(cid: str, value: Any = 1, role: str = "tool") -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "tool_result", "tool_call_id": cid, "result": value}]}


def render(memory: Memory, messages: list[Any], **options: Any) -> list[dict[str, Any]]:
    memory.save_messages(thread_id="t", resource_id="r", messages=messages)
    out = memory.context(thread_id="t", resource_id="r", message="next", options=options or None).to_openai()
    assert_valid_chat(out["messages"])
    return list(out["messages"])


def test_given_a_tool_call_id_reused_in_a_later_turn_when_rendered_then_each_turn_pairs_its_own(
    memory: Memory,
) -> None:
    out = render(memory, ["A", call("call_0"), result("call_0", 1), "B", call("call_0"), result("call_0", 2)])
    tools = [m for m in out if m["role"] == "tool"]
    assert [t["content"] for t in tools] == ["1", "2"]


def test_given_the_history_window_cuts_a_call_from_its_result_when_rendered_then_the_orphan_is_left_out(
    memory: Memory,
) -> None:
    out = render(memory, ["A", call("c1"), result("c1"), "B"], last_messages=2)
    assert [m["role"] for m in out] == ["user", "user"]


def test_given_an_anthropic_style_user_result_when_rendered_then_it_answers_the_call(memory: Memory) -> None:
    out = render(memory, [call("c1", text="checking"), result("c1", {"t": 3}, role="user"), "thanks"])
    assert out[0]["content"] == "checking" and out[0]["tool_calls"][0]["id"] == "c1"
    assert out[1] == {"role": "tool", "tool_call_id": "c1", "content": '{"t": 3}'}


def test_given_a_call_and_its_result_in_one_message_when_rendered_then_paired(memory: Memory) -> None:
    both = {
        "role": "assistant",
        "parts": [
            {"type": "tool_call", "id": "c1", "name": "clock", "args": {}},
            {"type": "tool_result", "tool_call_id": "c1", "result": "noon"},
        ],
    }
    out = render(memory, [both])
    assert out[0]["tool_calls"][0]["id"] == "c1" and out[1]["content"] == "noon"


@pytest.mark.parametrize(
    "messages",
    [
        [result("c1"), call("c1")],  # result before its call
        [call("c1"), "interruption", result("c1")],  # a message between call and result
        [call("c1", role="tool"), result("c1")],  # a call from a non-assistant role
        [call(""), result("")],  # empty id
        [call("c1", name="get weather!"), result("c1")],  # a name the API would refuse
        [{"role": "assistant", "parts": [call("c1")["parts"][0], call("c1")["parts"][0]]}, result("c1")],
        [call("c1"), call("c2"), result("c2"), result("c1")],
    ],
)
def test_given_odd_tool_shapes_when_rendered_then_the_request_is_still_valid(
    memory: Memory, messages: list[Any]
) -> None:
    render(memory, messages)


def test_given_a_budget_and_reused_ids_when_trimmed_then_the_oldest_turn_goes_first(memory: Memory) -> None:
    big = "word " * 300
    memory.save_messages(
        thread_id="t",
        resource_id="r",
        messages=[big, call("c0"), result("c0", "old"), big, call("c0"), result("c0", "new")],
    )
    full = memory.context(thread_id="t", resource_id="r", message="next")
    ctx = memory.context(
        thread_id="t",
        resource_id="r",
        message="next",
        options={"message_history": {"max_tokens": full.token_count - 200}},
    )
    out = ctx.to_openai()["messages"]
    assert_valid_chat(out)
    assert [m["content"] for m in out if m["role"] == "tool"] == ["new"]


def test_given_tool_turns_when_slightly_over_budget_then_only_the_oldest_turns_go(memory: Memory) -> None:
    turns: list[Any] = []
    for n in range(4):
        turns += [
            f"question {n} " + "word " * 40,
            call(f"c{n}"),
            result(f"c{n}", "data " * 40),
            f"answer {n}",
        ]
    memory.save_messages(thread_id="t", resource_id="r", messages=turns)
    full = memory.context(thread_id="t", resource_id="r", message="next")
    ctx = memory.context(
        thread_id="t",
        resource_id="r",
        message="next",
        options={"message_history": {"max_tokens": full.token_count - 1}},
    )
    assert_valid_chat(ctx.to_openai()["messages"])
    kept = [m.text for m in ctx.messages if m.text.startswith("answer")]
    assert "answer 3" in kept and len(ctx.messages) >= 8
    assert ctx.token_count <= full.token_count * 3 // 4 + 20
