"""Conformance suite of the ``ChatModel`` port: the OpenAI adapter (mocked HTTP) and the shipped scripted
fake run it unchanged (subjects in ``CHAT_FACTORIES``, tests/contract/model_support.py).

The contract, from ``memstack.ports.ChatModel`` and its users (the Observer, the Reflector, titles):

* ``model_id`` is a non-empty name that does not change;
* ``complete`` takes OpenAI-shaped messages and forwards ``tools``, ``max_output_tokens`` and
  ``temperature`` as asked (and only when given);
* the answer is a ``ChatResult``: its text, its tool calls as OpenAI dicts (``arguments`` a JSON string),
  its token usage as non-negative ints;
* backend failures raise ``Unavailable``, refused or unsendable input raises ``InvalidInput``;
* ``with_model`` (the per-agent ``model`` options) gives a model named after the new model, on the same
  backend, and refuses an empty name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from memstack.errors import InvalidInput, Unavailable
from memstack.ports import ChatModel, ChatResult

from .model_support import CHAT_FACTORIES, ChatSubject

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hello there"},
]
TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "updateWorkingMemory", "arguments": '{"memory": "# User\\n- Name: Ana"}'},
}
TOOLS = [{"type": "function", "function": {"name": "updateWorkingMemory", "parameters": {"type": "object"}}}]


@pytest.fixture(params=sorted(CHAT_FACTORIES))
def subject(request: pytest.FixtureRequest) -> Iterator[ChatSubject]:
    with CHAT_FACTORIES[request.param]() as made:
        yield made


def test_given_a_chat_model_then_it_satisfies_the_port_with_a_stable_name(subject: ChatSubject) -> None:
    model = subject.model
    assert isinstance(model, ChatModel)
    assert isinstance(model.model_id, str) and model.model_id
    subject.answer(ChatResult(text="ok"))
    before = model.model_id
    model.complete(MESSAGES)
    assert model.model_id == before


def test_given_an_answer_when_completed_then_its_text_no_tool_calls_and_the_usage(
    subject: ChatSubject,
) -> None:
    subject.answer(ChatResult(text="Hi!", input_tokens=12, output_tokens=3))
    result = subject.model.complete(MESSAGES)
    assert isinstance(result, ChatResult)
    assert (result.text, result.tool_calls) == ("Hi!", [])
    assert (result.input_tokens, result.output_tokens) == (12, 3)


def test_given_a_tool_call_answer_when_completed_then_openai_shaped_tool_calls_and_empty_text(
    subject: ChatSubject,
) -> None:
    subject.answer(ChatResult(text="", tool_calls=[TOOL_CALL]))
    result = subject.model.complete(MESSAGES, tools=TOOLS)
    assert result.text == ""
    assert result.tool_calls == [TOOL_CALL]
    assert isinstance(json.loads(result.tool_calls[0]["function"]["arguments"]), dict)


def test_given_options_when_completed_then_messages_tools_cap_and_temperature_are_forwarded(
    subject: ChatSubject,
) -> None:
    subject.answer(ChatResult(text="ok"))
    subject.model.complete(MESSAGES, tools=TOOLS, max_output_tokens=50, temperature=0.2)
    subject.answer(ChatResult(text="ok"))
    subject.model.complete(MESSAGES)
    with_options, bare = subject.sent()
    assert with_options["messages"] == MESSAGES and bare["messages"] == MESSAGES
    assert with_options["tools"] == TOOLS
    assert (with_options["max_completion_tokens"], with_options["temperature"]) == (50, 0.2)
    assert not {"tools", "max_completion_tokens", "temperature"} & set(bare), "unset options are not sent"


def test_given_a_failing_backend_when_completing_then_unavailable(subject: ChatSubject) -> None:
    subject.fail()
    with pytest.raises(Unavailable):
        subject.model.complete(MESSAGES)


def test_given_a_refused_input_when_completing_then_invalid_input(subject: ChatSubject) -> None:
    subject.refuse()
    with pytest.raises(InvalidInput):
        subject.model.complete(MESSAGES)


def test_given_text_no_endpoint_can_receive_when_completing_then_invalid_input_and_nothing_sent(
    subject: ChatSubject,
) -> None:
    subject.answer(ChatResult(text="ok"))
    with pytest.raises(InvalidInput) as caught:
        subject.model.complete([{"role": "user", "content": "lone \ud800 surrogate"}])
    assert caught.value.field == "messages"
    assert subject.sent() == []


def test_given_another_model_name_when_switched_then_named_after_it_on_the_same_backend(
    subject: ChatSubject,
) -> None:
    switch = getattr(subject.model, "with_model", None)
    assert switch is not None, "every shipped chat model can switch models (spec §2.9.1 per-agent models)"
    small = switch("small-observer")
    assert isinstance(small, ChatModel)
    assert small.model_id.endswith("small-observer") and small.model_id != subject.model.model_id
    subject.answer(ChatResult(text="from the small model"))
    assert small.complete(MESSAGES).text == "from the small model"
    assert subject.sent()[-1]["model"] == "small-observer"
    with pytest.raises(InvalidInput):
        switch("")
