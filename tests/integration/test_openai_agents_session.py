"""``MemstackSession`` with the OpenAI Agents SDK installed from the registry: the SDK's own ``Runner``
drives an agent with a scripted model (no network) and a function tool, over ``Memory`` and over
``MemstackClient`` (``memstack serve`` on loopback)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents", reason="the agents extra is not installed (pip install -e '.[agents]')")

from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled  # noqa: E402
from agents.memory.session import Session  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.integrations.openai_agents import MemstackSession, items_to_messages, messages_to_items  # noqa: E402
from memstack.integrations.testing import scripted_agents_model  # noqa: E402

R = "user-1"
set_tracing_disabled(True)


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_given_the_session_then_it_satisfies_the_sdks_session_protocol(memory: Memory) -> None:
    assert isinstance(MemstackSession("t", memory=memory, resource_id=R), Session)


def test_given_an_agent_run_with_a_tool_when_run_again_then_history_comes_back_from_memstack(
    backend: Any, memory: Memory
) -> None:
    model = scripted_agents_model(
        [("call_1", "get_weather", {"city": "Lisbon"}), "It is sunny in Lisbon.", "You asked about Lisbon."]
    )
    agent = Agent(name="assistant", instructions="Help.", model=model, tools=[get_weather])

    async def run() -> tuple[str, str]:
        first = await Runner.run(
            agent, "Weather in Lisbon?", session=MemstackSession("trip", memory=backend, resource_id=R)
        )
        # a new session object, as in a new process: everything comes back from Memstack
        second = await Runner.run(
            agent, "What did I ask?", session=MemstackSession("trip", memory=backend, resource_id=R)
        )
        return first.final_output, second.final_output

    assert asyncio.run(run()) == ("It is sunny in Lisbon.", "You asked about Lisbon.")
    stored = memory.list_messages(resource_id=R, thread_id="trip").messages
    assert [(m.role, [p.type for p in m.parts]) for m in stored] == [
        ("user", ["text"]),
        ("assistant", ["tool_call"]),
        ("tool", ["tool_result"]),
        ("assistant", ["text"]),
        ("user", ["text"]),
        ("assistant", ["text"]),
    ]
    replayed = model.inputs[2]
    assert [i.get("type", "message") for i in replayed] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    assert replayed[1]["call_id"] == "call_1" and replayed[2]["output"] == "sunny in Lisbon"


def test_given_the_input_callback_when_run_then_working_memory_and_other_threads_reach_the_model_once(
    backend: Any, memory: Memory
) -> None:
    memory.update_working_memory(thread_id="new", resource_id=R, working_memory="# User\n- vegetarian")
    memory.save_messages(thread_id="old", resource_id=R, messages=["My favourite snack is roasted chestnuts"])
    model = scripted_agents_model(["Try chestnuts."])
    agent = Agent(name="assistant", instructions="Help.", model=model)
    session = MemstackSession("new", memory=backend, resource_id=R)

    async def run() -> None:
        await Runner.run(
            agent,
            "Any snack ideas like my favourite snack?",
            session=session,
            run_config=RunConfig(session_input_callback=session.input_callback),
        )

    asyncio.run(run())
    [lead, *rest] = model.inputs[0]
    assert (
        lead["role"] == "system"
        and "vegetarian" in lead["content"]
        and "roasted chestnuts" in lead["content"]
    )
    assert rest[-1]["content"] == "Any snack ideas like my favourite snack?"
    stored = memory.list_messages(resource_id=R, thread_id="new").messages
    assert [m.role for m in stored] == ["user", "assistant"], "the memory item is never saved back"


def test_given_items_when_popped_and_cleared_then_memstack_follows(backend: Any, memory: Memory) -> None:
    session = MemstackSession("t", memory=backend, resource_id=R)

    async def run() -> tuple[Any, Any, list[Any], list[Any]]:
        await session.add_items([{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}])
        popped = await session.pop_item()
        left = await session.get_items()
        await session.clear_session()
        await session.clear_session()  # a second clear of a missing thread is fine
        return popped, await session.pop_item(), left, await session.get_items()

    popped, nothing, left, cleared = asyncio.run(run())
    assert popped == {"role": "assistant", "content": "two"} and nothing is None
    assert left == [{"role": "user", "content": "one"}] and cleared == []
    assert memory.list_threads(resource_id=R).threads == ()


def test_given_items_memstack_cannot_express_when_saved_then_they_come_back_unchanged() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking"}]}
    items = [{"role": "developer", "content": "hidden"}, reasoning, {"role": "user", "content": "hi"}]
    messages = items_to_messages(items)
    assert [m["role"] for m in messages] == ["assistant", "user"]
    assert messages[0]["parts"] == [{"type": "reasoning", "text": "thinking"}]
    with Memory.local(":memory:", embedder="hash") as memory:
        memory.save_messages(thread_id="t", resource_id=R, messages=messages)
        back = messages_to_items(memory.list_messages(thread_id="t", resource_id=R).messages)
    assert back == [reasoning, {"role": "user", "content": "hi"}]
