"""``MemstackSessionManager`` with Strands Agents installed from the registry: a real ``strands.Agent``
with a scripted model (Converse stream events, no network) and the Memstack tools, over ``Memory`` and over
``MemstackClient`` (``memstack serve`` on loopback)."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("strands", reason="the strands extra is not installed (pip install -e '.[strands]')")

from strands import Agent  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.integrations.strands import MemstackSessionManager  # noqa: E402
from memstack.integrations.testing import scripted_strands_model  # noqa: E402

R = "user-1"


def agent_for(backend: Any, model: Any, thread: str = "trip") -> Agent:
    manager = MemstackSessionManager(thread, memory=backend, resource_id=R)
    return Agent(
        model=model,
        system_prompt="You plan trips.",
        session_manager=manager,
        tools=manager.tools,
        callback_handler=None,
    )


def test_given_an_agent_that_uses_the_memory_tool_when_run_then_the_turn_and_working_memory_are_saved(
    backend: Any, memory: Memory
) -> None:
    model = scripted_strands_model(
        [
            ("tu-1", "update_working_memory", {"memory_markdown": "# User\n- vegetarian"}),
            "Noted.",
        ]
    )
    agent = agent_for(backend, model)
    assert {"update_working_memory", "recall_memories"} <= set(agent.tool_names)

    assert str(agent("I am vegetarian")).strip() == "Noted."

    assert memory.get_working_memory(thread_id="trip", resource_id=R) == "# User\n- vegetarian"
    stored = memory.list_messages(thread_id="trip", resource_id=R).messages
    assert [(m.role, [p.type for p in m.parts]) for m in stored] == [
        ("user", ["text"]),
        ("assistant", ["tool_call"]),
        ("tool", ["tool_result"]),
        ("assistant", ["text"]),
    ]
    assert model.calls[0]["system"].startswith("You plan trips.")


def test_given_a_new_agent_on_the_same_thread_when_invoked_then_memstack_assembles_history_and_memory(
    backend: Any, memory: Memory
) -> None:
    memory.save_messages(
        thread_id="trip",
        resource_id=R,
        messages=[{"role": "user", "content": "Book Lisbon"}, {"role": "assistant", "content": "Booked."}],
    )
    memory.update_working_memory(thread_id="trip", resource_id=R, working_memory="# User\n- name: Ana")
    memory.save_messages(thread_id="old", resource_id=R, messages=["My favourite pastry is pastel de nata"])
    model = scripted_strands_model(["Try a pastel de nata."])

    agent = agent_for(backend, model)
    agent("Which pastry is my favourite?")

    [call] = model.calls
    texts = [b.get("text") for m in call["messages"] for b in m["content"]]
    assert texts == ["Book Lisbon", "Booked.", "Which pastry is my favourite?"]
    assert call["system"].startswith("You plan trips.\n\n")
    assert "name: Ana" in call["system"] and "pastel de nata" in call["system"]
    stored = memory.list_messages(thread_id="trip", resource_id=R).messages
    assert [m.parts[0].text for m in stored][-2:] == [
        "Which pastry is my favourite?",
        "Try a pastel de nata.",
    ]


def test_given_the_recall_tool_when_the_model_calls_it_then_it_reads_only_this_resource(
    backend: Any, memory: Memory
) -> None:
    memory.save_messages(thread_id="old", resource_id=R, messages=["The wifi password is kiwi42"])
    memory.save_messages(
        thread_id="x", resource_id="someone-else", messages=["Their wifi password is mango7"]
    )
    model = scripted_strands_model([("tu-9", "recall_memories", {"query": "wifi password"}), "kiwi42"])
    agent = agent_for(backend, model, thread="new")
    agent("What was the wifi password?")

    result = model.calls[1]["messages"][-1]["content"][0]["toolResult"]
    text = json.dumps(result)
    assert "kiwi42" in text and "mango7" not in text


def test_given_two_invocations_of_one_agent_then_history_is_not_doubled_nor_the_prompt_grown(
    backend: Any, memory: Memory
) -> None:
    model = scripted_strands_model(["Hello.", "Still here."])
    agent = agent_for(backend, model)
    agent("Hi")
    agent("Are you there?")

    texts = [b.get("text") for m in model.calls[1]["messages"] for b in m["content"]]
    assert texts == ["Hi", "Hello.", "Are you there?"]
    assert model.calls[1]["system"] == model.calls[0]["system"]
    assert len(memory.list_messages(thread_id="trip", resource_id=R).messages) == 4
