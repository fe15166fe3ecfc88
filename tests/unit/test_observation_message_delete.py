"""``delete_messages`` while the Observer is working on those messages: its result is discarded, on SQLite
and on DynamoDB (moto), as a thread deleted mid-observation already is. Every observation record that may
hold the run's base is rewritten by the delete (``ObservationEngine.forget_messages``), so the run loses its
compare-and-set; its retry finds a message of its batch gone and drops the result, and the remaining
messages are observed again without it. Buffered chunks over a deleted message are dropped too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from memstack import Memory
from memstack.adapters.testing import ChatCall, ScriptedChatModel
from tests.store_backends import BACKENDS, memory_on

R, T = "res-1", "thread-1"
MARKER = re.compile(r"MSG\d+x\d+")


def seen_ids(call: ChatCall) -> str:
    """An Observer that writes one line per message marker it was shown (``/tmp/tw2/badllm.py``'s ids)."""
    if call.kind != "observer":
        return "Scripted title"
    ids = dict.fromkeys(MARKER.findall(call.last_content))
    body = "\n".join(f"* 🔴 (10:00) saw {i}" for i in ids)
    return f"<observations>\nDate: Dec 1, 2026\n{body}\n</observations>"


def save_five(memory: Memory) -> list[str]:
    ids: list[str] = []
    for k in range(5):
        saved = memory.save_messages(
            thread_id=T, resource_id=R, messages=[f"MSG0x{k} secret-{k} " + "word " * 40]
        )
        ids += [m.id for m in saved]
    return ids


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scope", ["thread", "resource"])
def test_given_the_observer_running_when_one_of_its_messages_is_deleted_then_its_result_is_not_committed(
    backend: str, scope: str, tmp_path: Path
) -> None:
    holder: dict[str, Any] = {"armed": False}

    def delete_mid_call(call: ChatCall) -> None:
        if call.kind == "observer" and holder["armed"] and "MSG0x1" in call.last_content:
            holder["armed"] = False
            memory: Memory = holder["memory"]
            assert memory.delete_messages(resource_id=R, message_ids=["m1"]) == 1

    chat = ScriptedChatModel(respond=seen_ids, on_call=delete_mid_call)
    options = {"scope": scope, "observation": {"message_tokens": 200, "buffer_tokens": False}}
    with memory_on(backend, tmp_path, chat_model=chat, observational_memory=options) as memory:
        holder["memory"] = memory
        holder["armed"] = True
        # one batch over message_tokens: the first observation sees all five messages
        saved = memory.save_messages(
            thread_id=T,
            resource_id=R,
            messages=[
                {"id": f"m{k}", "role": "user", "content": f"MSG0x{k} secret-{k} " + "word " * 40}
                for k in range(5)
            ],
        )
        memory.settled(30)
        memory.observe(resource_id=R, thread_id=T)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert holder["armed"] is False, "the delete ran during an Observer call"
        assert rec is not None
        assert "MSG0x1" not in rec.active_observations
        assert chat.count("observer") >= 2  # the discarded result was observed again
        assert MARKER.findall(rec.active_observations) == ["MSG0x0", "MSG0x2", "MSG0x3", "MSG0x4"]
        assert rec.observed_seq(T) == saved[-1].seq


def test_given_a_buffered_chunk_over_a_message_when_it_is_deleted_then_the_chunk_is_never_activated() -> None:
    from tests.observation_support import om_memory

    chat = ScriptedChatModel(respond=seen_ids)
    options = {"observation": {"message_tokens": 2_000, "buffer_tokens": 0.1, "buffer_activation": 1.0}}
    with om_memory(chat, observational_memory=options) as memory:
        ids = save_five(memory)
        memory.settled(30)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.buffered_chunks, "the test needs a buffered chunk"
        assert any("MSG0x1" in c.observations for c in rec.buffered_chunks)
        before = rec.version
        assert memory.delete_messages(resource_id=R, message_ids=[ids[1]]) == 1
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None
        assert not any("MSG0x1" in c.observations for c in rec.buffered_chunks)
        assert rec.version > before
        for k in range(5, 60):  # past message_tokens: what is buffered activates, the rest is observed
            memory.save_messages(thread_id=T, resource_id=R, messages=[f"MSG0x{k} " + "word " * 40])
        memory.settled(30)
        memory.observe(resource_id=R, thread_id=T)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and "MSG0x0" in rec.active_observations
        assert "MSG0x1" not in MARKER.findall(rec.active_observations)
        assert not any("MSG0x1" in MARKER.findall(c.observations) for c in rec.buffered_chunks)


def test_given_an_observed_message_when_it_is_deleted_then_its_observation_stays() -> None:
    """Observations already committed are summaries, not the messages (docs/observational-memory.md)."""
    from tests.observation_support import om_memory

    chat = ScriptedChatModel(respond=seen_ids)
    with om_memory(
        chat, observational_memory={"observation": {"message_tokens": 200, "buffer_tokens": False}}
    ) as memory:
        ids = save_five(memory)
        memory.settled(30)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and "MSG0x1" in rec.active_observations
        memory.delete_messages(resource_id=R, message_ids=[ids[1]])
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and "MSG0x1" in rec.active_observations
