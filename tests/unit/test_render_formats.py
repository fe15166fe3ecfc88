"""``ModelContext.to_bedrock()`` / ``to_anthropic()``: the same steps, tool pairing and tools as
``to_openai()``; the three tool-use shapes through ``apply_tool_call``; a multi-step tool conversation
round-tripped through each format (rendered, answered in the format, read back, saved, rendered again)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memstack import Memory
from memstack.errors import InvalidInput, PayloadTooLarge
from memstack.render import from_anthropic, from_converse, to_anthropic_request, to_converse_request
from memstack.working_memory.tools import TOOL_NAME, parse_tool_call, to_openai_tool_call

R, T = "user-1", "trip"
WITH_TOOLS: dict[str, Any] = {
    "embedder": "hash",
    "semantic_recall": False,
    "working_memory": {"enabled": True},
}

# user asks; the assistant calls two tools at once; both answer; the assistant calls a third; it fails;
# the assistant answers in text.
CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": "Plan my trip to Lisbon"},
    {
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "Checking weather and flights."},
            {"type": "tool_call", "id": "c1", "name": "weather", "args": {"city": "Lisbon"}},
            {"type": "tool_call", "id": "c2", "name": "flights", "args": {"to": "LIS"}},
        ],
    },
    {
        "role": "tool",
        "parts": [
            {"type": "tool_result", "tool_call_id": "c1", "name": "weather", "result": {"sky": "sun"}},
            {"type": "tool_result", "tool_call_id": "c2", "name": "flights", "result": ["TP123"]},
        ],
    },
    {"role": "assistant", "parts": [{"type": "tool_call", "id": "c3", "name": "hotels", "args": {}}]},
    {
        "role": "tool",
        "parts": [
            {
                "type": "tool_result",
                "tool_call_id": "c3",
                "name": "hotels",
                "result": "down",
                "is_error": True,
            }
        ],
    },
    {"role": "assistant", "content": "Sunny, flight TP123; hotels later."},
]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.local(tmp_path / "m.db", **WITH_TOOLS) as m:
        yield m


def steps_openai(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, what) for each step of a chat-completions request: text, tool:<name>, result:<id>."""
    out = []
    for m in request["messages"]:
        if m["role"] == "tool":
            out.append(("user", f"result:{m['tool_call_id']}"))
            continue
        role = "user" if m["role"] == "user" else m["role"]
        if m.get("content"):
            out.append((role, "text"))
        out += [(role, f"tool:{c['function']['name']}:{c['id']}") for c in m.get("tool_calls") or ()]
    return out


def steps_converse(request: dict[str, Any]) -> list[tuple[str, str]]:
    out = [("system", "text") for _ in request["system"] if "text" in _]
    for m in request["messages"]:
        for b in m["content"]:
            if "text" in b:
                out.append((m["role"], "text"))
            elif "toolUse" in b:
                out.append((m["role"], f"tool:{b['toolUse']['name']}:{b['toolUse']['toolUseId']}"))
            elif "toolResult" in b:
                out.append((m["role"], f"result:{b['toolResult']['toolUseId']}"))
    return out


def steps_anthropic(request: dict[str, Any]) -> list[tuple[str, str]]:
    out = [("system", "text") for _ in request.get("system", [])]
    for m in request["messages"]:
        for b in m["content"]:
            kind = b["type"]
            if kind == "text":
                out.append((m["role"], "text"))
            elif kind == "tool_use":
                out.append((m["role"], f"tool:{b['name']}:{b['id']}"))
            elif kind == "tool_result":
                out.append((m["role"], f"result:{b['tool_use_id']}"))
    return out


def alternates(messages: list[dict[str, Any]]) -> bool:
    return all(a["role"] != b["role"] for a, b in zip(messages, messages[1:], strict=False))


def context(memory: Memory, message: str = "And the hotel?") -> Any:
    return memory.context(thread_id=T, resource_id=R, message=message, instructions="You plan trips.")


def test_given_a_tool_conversation_when_rendered_for_each_api_then_same_steps_in_the_same_order(
    memory: Memory,
) -> None:
    memory.save_messages(thread_id=T, resource_id=R, messages=CONVERSATION)
    ctx = context(memory)
    openai_steps = steps_openai(ctx.to_openai())
    system = sum(1 for m in ctx.to_openai()["messages"] if m["role"] == "system")
    expected = [("system", "text")] * system + [s for s in openai_steps if s[0] != "system"]

    assert steps_converse(ctx.to_bedrock()) == expected
    assert steps_anthropic(ctx.to_anthropic()) == expected
    assert ("assistant", "tool:weather:c1") in expected and ("user", "result:c3") in expected


def test_given_a_tool_conversation_when_rendered_then_roles_alternate_and_results_follow_their_calls(
    memory: Memory,
) -> None:
    memory.save_messages(thread_id=T, resource_id=R, messages=CONVERSATION)
    bedrock, anthropic = context(memory).to_bedrock(), context(memory).to_anthropic()

    assert alternates(bedrock["messages"]) and alternates(anthropic["messages"])
    for request, steps in ((bedrock, steps_converse(bedrock)), (anthropic, steps_anthropic(anthropic))):
        calls = [s[1].split(":")[2] for s in steps if s[1].startswith("tool:")]
        results = [s[1].split(":")[1] for s in steps if s[1].startswith("result:")]
        assert calls == results == ["c1", "c2", "c3"], request
    # the first user message after the calls starts with the results (Anthropic's rule)
    after = anthropic["messages"][2]["content"]
    assert [b["type"] for b in after[:2]] == ["tool_result", "tool_result"]
    assert bedrock["messages"][2]["content"][0]["toolResult"]["content"] == [{"json": {"sky": "sun"}}]


def test_given_working_memory_when_rendered_then_each_format_offers_the_update_tool(memory: Memory) -> None:
    ctx = context(memory)
    [openai_tool] = ctx.to_openai()["tools"]
    [spec] = ctx.to_bedrock()["toolConfig"]["tools"]
    [anthropic_tool] = ctx.to_anthropic()["tools"]
    assert spec["toolSpec"]["name"] == anthropic_tool["name"] == openai_tool["function"]["name"] == TOOL_NAME
    assert (
        spec["toolSpec"]["inputSchema"]["json"]
        == anthropic_tool["input_schema"]
        == openai_tool["function"]["parameters"]
    )
    assert ctx.to_bedrock()["system"][0] == {"text": "You plan trips."}
    assert ctx.to_anthropic()["system"][0] == {"type": "text", "text": "You plan trips."}


ANSWERS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {
    "openai": lambda cid, args: {
        "id": cid,
        "type": "function",
        "function": {"name": TOOL_NAME, "arguments": json.dumps(args)},
    },
    "bedrock": lambda cid, args: {"toolUse": {"toolUseId": cid, "name": TOOL_NAME, "input": args}},
    "bedrock-inner": lambda cid, args: {"toolUseId": cid, "name": TOOL_NAME, "input": args},
    "anthropic": lambda cid, args: {"type": "tool_use", "id": cid, "name": TOOL_NAME, "input": args},
}


@pytest.mark.parametrize("shape", sorted(ANSWERS))
def test_given_a_working_memory_call_in_each_shape_when_applied_then_memory_is_updated(
    memory: Memory, shape: str
) -> None:
    call = ANSWERS[shape]("w1", {"memory": f"# User\n- prefers {shape}"})
    result = memory.apply_tool_call(thread_id=T, resource_id=R, tool_call=call)
    assert result.parts[0].tool_call_id == "w1" and not result.parts[0].is_error
    assert f"prefers {shape}" in (memory.get_working_memory(thread_id=T, resource_id=R) or "")


@pytest.mark.parametrize("shape", ["bedrock", "anthropic"])
def test_given_input_that_is_not_an_object_when_parsed_then_an_error_for_the_model_not_an_exception(
    shape: str,
) -> None:
    call = ANSWERS[shape]("w1", {})
    (call.get("toolUse") or call)["input"] = ["not", "an", "object"]
    parsed = parse_tool_call(call)
    assert parsed.arguments is None and parsed.error == "the arguments must be a JSON object"
    assert json.loads(to_openai_tool_call(call)["function"]["arguments"]) == ["not", "an", "object"]


@pytest.mark.parametrize(
    ("call", "field"),
    [
        ({"toolUse": {"name": "x", "input": {}}}, "tool_call.toolUse.toolUseId"),
        ({"type": "tool_use", "id": "a", "input": {}}, "tool_call.name"),
        ({"name": "x", "arguments": "{}"}, "tool_call"),
    ],
)
def test_given_a_malformed_call_of_any_shape_when_parsed_then_invalid_input_names_the_field(
    call: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_tool_call(call)
    assert err.value.field == field


def test_given_a_huge_tool_use_input_when_parsed_then_payload_too_large_before_parsing() -> None:
    with pytest.raises(PayloadTooLarge):
        parse_tool_call(
            {"type": "tool_use", "id": "a", "name": TOOL_NAME, "input": {"memory": "x" * 2_000_000}}
        )


@pytest.mark.parametrize(
    ("render", "read", "answer"),
    [
        ("to_bedrock", from_converse, "bedrock"),
        ("to_anthropic", from_anthropic, "anthropic"),
    ],
)
def test_given_a_multi_step_tool_conversation_when_round_tripped_through_a_format_then_nothing_is_lost(
    tmp_path: Path, render: str, read: Callable[[list[dict[str, Any]]], list[dict[str, Any]]], answer: str
) -> None:
    # Given a conversation saved once, rendered in the format and read back into a second memory
    with (
        Memory.local(tmp_path / "a.db", **WITH_TOOLS) as first,
        Memory.local(tmp_path / "b.db", **WITH_TOOLS) as second,
    ):
        first.save_messages(thread_id=T, resource_id=R, messages=CONVERSATION)
        rendered = getattr(first.context(thread_id=T, resource_id=R), render)()
        second.save_messages(thread_id=T, resource_id=R, messages=read(rendered["messages"]))

        # Then the second renders exactly the same request in every format
        a, b = first.context(thread_id=T, resource_id=R), second.context(thread_id=T, resource_id=R)
        assert b.to_openai()["messages"] == a.to_openai()["messages"]
        assert getattr(b, render)()["messages"] == rendered["messages"]

        # When the model answers in the format with a working-memory call, it is applied and the turn saved
        call = ANSWERS[answer]("w9", {"memory": "# Trip\n- Lisbon"})
        result = second.apply_tool_call(thread_id=T, resource_id=R, tool_call=call)
        turn = [{"role": "assistant", "content": [call["toolUse"]] if "toolUse" in call else [call]}]
        if answer == "bedrock":
            turn = [{"role": "assistant", "content": [{"text": "Noted."}, call]}]
        second.save_messages(thread_id=T, resource_id=R, messages=[*read(turn), result])

        # Then working memory holds it; its call and result are not stored (spec §2.4), the text is
        assert "Lisbon" in (second.get_working_memory(thread_id=T, resource_id=R) or "")
        final = getattr(second.context(thread_id=T, resource_id=R), render)()
        assert "w9" not in json.dumps(final)
        if answer == "bedrock":
            assert final["messages"][-1]["content"][-1] == {"text": "Noted."}


def test_given_an_error_result_when_read_back_then_is_error_is_kept() -> None:
    converse = [
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": "c", "content": [{"text": "boom"}], "status": "error"}}],
        }
    ]
    anthropic = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c", "content": "boom", "is_error": True}],
        }
    ]
    for read, messages in ((from_converse, converse), (from_anthropic, anthropic)):
        [tool] = read(messages)
        assert tool == {
            "role": "tool",
            "parts": [{"type": "tool_result", "tool_call_id": "c", "result": "boom", "is_error": True}],
        }


def test_given_a_mid_conversation_system_message_when_rendered_then_it_stays_in_place_as_user_text() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "It is Monday."},
        {"role": "assistant", "content": "hello"},
    ]
    converse = to_converse_request(messages)
    assert converse["system"] == [{"text": "Be brief."}]
    assert converse["messages"][0] == {
        "role": "user",
        "content": [{"text": "hi"}, {"text": "System: It is Monday."}],
    }
    anthropic = to_anthropic_request(messages)
    assert anthropic["messages"][0]["content"][1] == {"type": "text", "text": "System: It is Monday."}


def test_given_tool_history_but_no_tools_when_rendered_for_bedrock_then_tool_blocks_become_text() -> None:
    messages = [
        {"role": "user", "content": "time?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "clock", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": '"12:00"'},
    ]
    request = to_converse_request(messages)
    assert "toolConfig" not in request
    assert request["messages"][1] == {"role": "assistant", "content": [{"text": "[called clock({})]"}]}
    assert "toolUse" not in json.dumps(request)
    assert to_anthropic_request(messages)["messages"][1]["content"][0]["type"] == "tool_use"


def test_given_images_when_rendered_then_data_urls_are_bytes_for_bedrock_and_base64_for_anthropic() -> None:
    png = base64.b64encode(b"\x89PNG...").decode()
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
                {"type": "image_url", "image_url": {"url": "https://x.test/a.jpg"}},
            ],
        }
    ]
    blocks = to_converse_request(messages)["messages"][0]["content"]
    assert blocks[1] == {"image": {"format": "png", "source": {"bytes": b"\x89PNG..."}}}
    assert blocks[2] == {"text": "[image: https://x.test/a.jpg]"}
    blocks = to_anthropic_request(messages)["messages"][0]["content"]
    assert blocks[1]["source"] == {"type": "base64", "media_type": "image/png", "data": png}
    assert blocks[2]["source"] == {"type": "url", "url": "https://x.test/a.jpg"}
