"""What the Observer, the Reflector and the title model write can only enter a record as valid, plain,
unforged text: whatever a chat model answers (an adapter's or a caller's own ``ChatModel``), the record
stays writable and its structure stays Memstack's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from memstack.adapters.testing import ScriptedChatModel
from memstack.observation.usage import MeteredChat, UsageMeter
from memstack.ports import ChatResult
from tests.observation_support import om_memory

R, T = "res-1", "thread-1"
NO_BUFFER: dict[str, Any] = {"observation": {"message_tokens": 300, "buffer_tokens": False}}

# half of a surrogate pair, as a JSON escape a model or a proxy may send: decoded, UTF-8 cannot encode it
LONE_SURROGATES = ["\ud83d", "\ude00", "\udfff\ud800", "\ud800x"]


def save_turns(memory: Any, turns: int = 3) -> None:
    """Save ``turns`` user/assistant pairs of ~100 tokens each: over ``message_tokens`` = 300 at the end."""
    memory.save_messages(
        thread_id=T,
        resource_id=R,
        messages=[
            {"role": "user", "content": "I'm allergic to peanuts. " + "I also like tea. " * 30},
            {"role": "assistant", "content": "Noted."},
        ],
    )
    for i in range(turns - 1):
        memory.save_messages(
            thread_id=T,
            resource_id=R,
            messages=[
                {"role": "user", "content": f"turn {i} " + "filler words " * 40},
                {"role": "assistant", "content": "ok"},
            ],
        )


class _RawModel:
    """A caller's own ``ChatModel``: answers exactly what it is given, tool calls included."""

    model_id = "custom/raw"

    def __init__(self, text: str, tool_calls: list[dict[str, Any]] | None = None) -> None:
        self.result = ChatResult(text=text, tool_calls=tool_calls or [], input_tokens=5, output_tokens=2)

    def complete(self, messages: Sequence[dict[str, Any]], **_: Any) -> ChatResult:
        return self.result


# --- valid text: lone surrogates ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", LONE_SURROGATES)
def test_given_any_chat_model_answering_a_lone_surrogate_when_metered_then_text_and_tool_calls_are_utf8(
    bad: str,
) -> None:
    call = {"id": f"c{bad}", "type": "function", "function": {"name": "f", "arguments": f'{{"q": "{bad}"}}'}}
    chat = MeteredChat(_RawModel(f"* 🔴 likes {bad} tea", [call]), UsageMeter(), (R, T), "observer")

    result = chat.complete([{"role": "user", "content": "hi"}])

    assert "\ufffd" in result.text and "likes" in result.text
    result.text.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError
    for tool_call in result.tool_calls:
        repr(tool_call).encode("utf-8")
        str(tool_call["id"]).encode("utf-8")
        tool_call["function"]["arguments"].encode("utf-8")
    assert (result.input_tokens, result.output_tokens) == (5, 2)


@pytest.mark.parametrize("bad", LONE_SURROGATES)
def test_given_an_observer_answer_with_a_lone_surrogate_when_observed_then_committed_as_valid_text(
    bad: str,
) -> None:
    answer = f"<observations>\nDate: May 8, 2023\n* 🔴 (12:01) User is allergic to peanuts {bad} here\n</observations>"
    with om_memory(ScriptedChatModel(script=[answer]), observational_memory=NO_BUFFER) as memory:
        save_turns(memory)
        rec = memory.get_observation_record(thread_id=T, resource_id=R)

    assert rec.last_error is None
    assert "User is allergic to peanuts \ufffd" in rec.active_observations
    assert rec.cursor == {T: 6}


def test_given_a_title_answer_with_a_lone_surrogate_when_titled_then_the_title_is_valid_text() -> None:
    chat = ScriptedChatModel(respond=lambda call: "Tea \ud83d talk")
    with om_memory(chat, generate_title=True) as memory:
        memory.save_messages(
            thread_id=T, resource_id=R, messages=[{"role": "user", "content": "let's talk about tea"}]
        )
        title = memory.get_thread(thread_id=T, resource_id=R).title

    assert title == "Tea \ufffd talk"
