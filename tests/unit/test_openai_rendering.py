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


def steps_message(*steps: tuple[str | None, str | None]) -> dict[str, Any]:
    """One stored assistant message of several model steps: each ``(text, call id)`` is the step's text
    then its call, immediately answered in the same message (an agent loop's multi-step turn)."""
    parts: list[dict[str, Any]] = []
    for text, cid in steps:
        if text:
            parts.append({"type": "text", "text": text})
        if cid:
            parts.append({"type": "tool_call", "id": cid, "name": "clock", "args": {"n": cid}})
            parts.append({"type": "tool_result", "tool_call_id": cid, "result": f"out-{cid}"})
    return {"role": "assistant", "parts": parts}


def test_given_a_call_its_result_then_the_answer_in_one_message_when_rendered_then_the_answer_comes_last(
    memory: Memory,
) -> None:
    out = render(memory, ["what time is it", steps_message((None, "c1"), ("It is noon", None))])
    assert [(m["role"], m.get("content")) for m in out[1:4]] == [
        ("assistant", None),
        ("tool", "out-c1"),
        ("assistant", "It is noon"),
    ]
    assert out[1]["tool_calls"][0]["id"] == "c1"


def test_given_three_steps_in_one_message_when_rendered_then_each_step_follows_the_results_it_read(
    memory: Memory,
) -> None:
    stored = steps_message(("checking", "c1"), ("now the second", "c2"), ("done", None))
    out = render(memory, ["go", stored])
    shown = [(m["role"], m.get("content"), [c["id"] for c in m.get("tool_calls", [])]) for m in out[1:-1]]
    assert shown == [
        ("assistant", "checking", ["c1"]),
        ("tool", "out-c1", []),
        ("assistant", "now the second", ["c2"]),
        ("tool", "out-c2", []),
        ("assistant", "done", []),
    ]


def test_given_a_step_answered_in_the_next_message_when_rendered_then_its_result_precedes_the_later_text(
    memory: Memory,
) -> None:
    head = {
        "role": "assistant",
        "parts": [
            {"type": "tool_call", "id": "c1", "name": "clock", "args": {}},
            {"type": "text", "text": "after the call"},
        ],
    }
    out = render(memory, ["go", head, result("c1", "noon")])
    assert [m["role"] for m in out[1:4]] == ["assistant", "tool", "assistant"]
    assert out[3]["content"] == "after the call"


def test_given_a_multi_step_message_in_another_thread_when_recalled_then_the_block_keeps_step_order(
    tmp_path: Path,
) -> None:
    with Memory.local(tmp_path / "x.db", embedder="hash") as memory:
        stored = steps_message((None, "c1"), ("The zeppelin lands at noon", None))
        memory.save_messages(
            thread_id="old", resource_id="r", messages=["when does the zeppelin land", stored]
        )
        ctx = memory.context(
            thread_id="new",
            resource_id="r",
            message="zeppelin",
            options={"semantic_recall": {"mode": "keyword", "message_range": 0}},
        )
    block = next(s.text for s in ctx.system if s.kind == "recall")
    line = next(ln for ln in block.splitlines() if "Assistant:" in ln)
    assert line.endswith(
        'Assistant: [called clock({"n": "c1"})] [clock returned: out-c1] The zeppelin lands at noon'
    )
