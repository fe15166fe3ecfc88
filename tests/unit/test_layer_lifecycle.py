"""Each layer answers the lifecycle events: a clone copies what a thread owns without touching its resource,
a delete leaves nothing of the thread in any layer (also in a resource-scoped observation log), and an
erasure leaves nothing of the resource."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memstack import Memory
from memstack.adapters.testing import ChatCall, ScriptedChatModel
from memstack.errors import NotFound, Unavailable
from memstack.observation.engine import split_log
from tests.observation_support import om_memory

R, A, B = "res-1", "thread-a", "thread-b"

RESOURCE_OM: dict[str, Any] = {
    "scope": "resource",
    "observation": {"message_tokens": 1_000, "buffer_tokens": False},
    "reflection": {"observation_tokens": 100_000},
}


def said(thread: str, i: int) -> str:
    return f"Note zebra{thread[-1]}{i} from {thread}: a long tale of hiking trips, lakes and painting classes with my sister near the old mill by the river."


def fill(memory: Memory, thread: str, count: int, resource: str = R) -> None:
    memory.save_messages(
        thread_id=thread,
        resource_id=resource,
        messages=[
            {"id": f"{thread}-m{i}", "role": "user" if i % 2 else "assistant", "content": said(thread, i)}
            for i in range(count)
        ],
    )


def marker(thread: str) -> str:
    return f"zebra{thread[-1]}"


def everything_shown(
    memory: Memory, thread: str, resource: str = R, options: dict[str, Any] | None = None
) -> str:
    ctx = memory.context(
        thread_id=thread, resource_id=resource, message="what do you remember?", options=options
    )
    return "\n".join([s.text for s in ctx.system] + [m.text for m in ctx.messages])


# clone ---------------------------------------------------------------------------------------------


def test_given_resource_scoped_working_memory_when_a_seeded_thread_is_cloned_then_the_newer_document_stays() -> (
    None
):
    with Memory.local(":memory:", "hash", working_memory={"enabled": True, "scope": "resource"}) as memory:
        memory.create_thread(resource_id=R, thread_id=A, metadata={"working_memory": "# User\n- Name: Ana"})
        memory.update_working_memory(
            thread_id=A, resource_id=R, working_memory="# User\n- Name: Ana\n- City: Lisbon"
        )
        memory.clone_thread(source_thread_id=A, resource_id=R, new_thread_id="copy")
        assert memory.get_working_memory(thread_id=A, resource_id=R) == "# User\n- Name: Ana\n- City: Lisbon"


def test_given_thread_scoped_working_memory_when_cloned_then_the_clone_has_its_own_copy() -> None:
    with Memory.local(":memory:", "hash", working_memory={"enabled": True, "scope": "thread"}) as memory:
        fill(memory, A, 2)
        memory.update_working_memory(thread_id=A, resource_id=R, working_memory="# Notes\n- likes tea")
        result = memory.clone_thread(source_thread_id=A, resource_id=R, new_thread_id="copy")
        assert memory.get_working_memory(thread_id="copy", resource_id=R) == "# Notes\n- likes tea"
        assert result.thread.metadata["working_memory"] == "# Notes\n- likes tea"
        memory.update_working_memory(
            thread_id="copy", resource_id=R, working_memory="# Notes\n- likes coffee"
        )
        assert memory.get_working_memory(thread_id=A, resource_id=R) == "# Notes\n- likes tea"


def test_given_a_thread_scoped_observation_record_when_cloned_then_the_clone_keeps_it_with_its_own_ids() -> (
    None
):
    options = {**RESOURCE_OM, "scope": "thread", "retrieval": True}
    chat = ScriptedChatModel()
    with om_memory(chat, observational_memory=options) as memory:
        fill(memory, A, 40)
        calls = chat.count("observer")
        source = memory.get_observation_record(resource_id=R, thread_id=A)
        assert source is not None and source.observed_seq(A) > 0
        result = memory.clone_thread(source_thread_id=A, resource_id=R, new_thread_id="copy")
        copy = memory.get_observation_record(resource_id=R, thread_id="copy")
        assert copy is not None and copy.version >= 1
        assert copy.observed_seq("copy") == source.observed_seq(A)
        assert marker(A) in copy.active_observations
        first = next(iter(result.message_id_map))
        assert f'range="{first}:' not in copy.active_observations
        assert f'range="{result.message_id_map[first]}:' in copy.active_observations
        assert chat.count("observer") == calls  # the copies are not observed a second time
        assert memory.get_observation_record(resource_id=R, thread_id=A) == source


def test_given_a_thread_when_cloned_into_another_resource_of_the_caller_then_it_lands_there() -> None:
    with Memory.local(":memory:", "hash") as memory:
        fill(memory, A, 3)
        result = memory.clone_thread(
            source_thread_id=A, resource_id=R, new_thread_id="moved", target_resource_id="res-2"
        )
        assert result.thread.resource_id == "res-2"
        page = memory.list_messages(thread_id="moved", resource_id="res-2")
        assert [m.text for m in page.messages] == [said(A, i) for i in range(3)]
        hits = memory.recall(thread_id="moved", resource_id="res-2", query=f"{marker(A)}1")
        assert hits.messages and all(m.resource_id == "res-2" for m in hits.messages)


# the turn ------------------------------------------------------------------------------------------


def test_given_resource_scoped_observations_when_a_new_thread_starts_then_it_sees_them() -> None:
    with om_memory(ScriptedChatModel(), observational_memory=RESOURCE_OM) as memory:
        fill(memory, A, 40)
        ctx = memory.context(thread_id="new-thread", resource_id=R, message="what do you remember?")
        assert any(s.kind == "observations" and marker(A) in s.text for s in ctx.system)
        assert [m.text for m in ctx.messages][-1] == "what do you remember?"


# delete --------------------------------------------------------------------------------------------


def test_given_resource_scoped_observations_when_a_thread_is_deleted_then_other_threads_no_longer_see_it() -> (
    None
):
    with om_memory(ScriptedChatModel(), observational_memory=RESOURCE_OM) as memory:
        fill(memory, A, 40)
        fill(memory, B, 40)
        rec = memory.get_observation_record(resource_id=R, thread_id=B)
        assert (
            rec is not None and marker(A) in rec.active_observations and marker(B) in rec.active_observations
        )
        memory.delete_thread(thread_id=A, resource_id=R)
        rec = memory.get_observation_record(resource_id=R, thread_id=B)
        assert rec is not None and marker(A) not in rec.active_observations
        assert marker(B) in rec.active_observations and A not in rec.cursor
        assert all(piece.strip() for piece in split_log(rec.active_observations))
        assert marker(A) not in everything_shown(memory, B)


def test_given_a_reflection_that_merged_a_thread_when_it_is_deleted_then_the_reflection_goes_too() -> None:
    options = {**RESOURCE_OM, "reflection": {"observation_tokens": 400}}
    with om_memory(ScriptedChatModel(words=30), observational_memory=options) as memory:
        fill(memory, A, 40)
        fill(memory, B, 40)
        rec = memory.get_observation_record(resource_id=R, thread_id=B)
        assert rec is not None and rec.generation_count >= 1 and A in rec.reflected_threads
        memory.delete_thread(thread_id=A, resource_id=R)
        rec = memory.get_observation_record(resource_id=R, thread_id=B)
        assert rec is not None and marker(A) not in rec.active_observations and rec.cursor == {}
        shown = everything_shown(memory, B)
        assert marker(A) not in shown and f"{marker(B)}39" in shown  # B's messages are unobserved again


def test_given_an_observer_still_running_when_its_thread_is_deleted_then_nothing_of_it_is_committed() -> None:
    holder: dict[str, Any] = {"done": True}

    def delete_once(call: ChatCall) -> None:
        if not holder.get("done"):
            holder["done"] = True
            holder["memory"].delete_thread(thread_id=A, resource_id=R)

    deleting_mid_call = ScriptedChatModel(on_call=delete_once)
    with om_memory(deleting_mid_call, background="inline", observational_memory=RESOURCE_OM) as memory:
        holder["memory"] = memory
        fill(memory, B, 40)
        holder["done"] = False
        fill(memory, A, 40)
        rec = memory.get_observation_record(resource_id=R, thread_id=B)
        assert rec is not None and marker(A) not in rec.active_observations
        assert marker(B) in rec.active_observations


def test_given_a_delete_that_failed_part_way_when_deleted_again_then_it_finishes_and_answers_not_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with om_memory(ScriptedChatModel(), observational_memory=RESOURCE_OM) as memory:
        fill(memory, A, 40)
        fill(memory, B, 2)
        real = memory.store.put_observation_record
        with monkeypatch.context() as patch:
            patch.setattr(memory.store, "put_observation_record", fail_once(real))
            with pytest.raises(Unavailable):
                memory.delete_thread(thread_id=A, resource_id=R)
        with pytest.raises(NotFound):
            memory.delete_thread(thread_id=A, resource_id=R)
        assert marker(A) not in everything_shown(memory, B)


def test_given_observations_written_under_per_call_options_when_deleted_then_they_go_too() -> None:
    with Memory.local(":memory:", "hash", chat_model=ScriptedChatModel(), background="inline") as memory:
        fill(memory, A, 40)
        fill(memory, B, 2)
        per_call = {"observational_memory": {**RESOURCE_OM, "obscure_thread_ids": False}}
        memory.context(thread_id=A, resource_id=R, message="hi", options=per_call)  # observes synchronously
        assert marker(A) in everything_shown(memory, B, options=per_call)
        memory.delete_thread(thread_id=A, resource_id=R)  # the configured options have the layer off
        assert marker(A) not in everything_shown(memory, B, options=per_call)
        hashed = {"observational_memory": RESOURCE_OM}
        assert marker(A) not in everything_shown(memory, B, options=hashed)


def test_given_an_observer_that_writes_a_closing_thread_tag_when_its_thread_is_deleted_then_nothing_stays() -> (
    None
):
    tricky = "<observations>\n* 🟡 (12:00) user typed </thread> then said SECRETPIN 4471\n</observations>"
    with om_memory(
        ScriptedChatModel(respond=lambda call: tricky), observational_memory=RESOURCE_OM
    ) as memory:
        fill(memory, A, 40)
        rec = memory.get_observation_record(resource_id=R, thread_id=A)
        assert rec is not None and "SECRETPIN" in rec.active_observations
        fill(memory, B, 2)
        memory.delete_thread(thread_id=A, resource_id=R)
        assert "SECRETPIN" not in everything_shown(memory, B)


def test_given_a_clone_in_resource_scope_when_its_source_is_deleted_then_the_clone_keeps_its_observations() -> (
    None
):
    chat = ScriptedChatModel()
    with om_memory(chat, observational_memory=RESOURCE_OM) as memory:
        fill(memory, A, 40)
        memory.clone_thread(source_thread_id=A, resource_id=R, new_thread_id="copy")
        calls = chat.count("observer")
        memory.delete_thread(thread_id=A, resource_id=R)
        rec = memory.get_observation_record(resource_id=R, thread_id="copy")
        assert rec is not None and rec.observed_seq("copy") > 0 and f"{marker(A)}1" in rec.active_observations
        assert f"{marker(A)}1" in everything_shown(memory, "copy")
        assert chat.count("observer") == calls


def test_given_a_clone_that_left_messages_behind_when_cloned_then_it_starts_unobserved() -> None:
    options = {**RESOURCE_OM, "scope": "thread"}
    with om_memory(ScriptedChatModel(), observational_memory=options) as memory:
        fill(memory, A, 40)
        memory.clone_thread(source_thread_id=A, resource_id=R, new_thread_id="copy", message_limit=5)
        assert memory.get_observation_record(resource_id=R, thread_id="copy") is None
        assert f"{marker(A)}0" not in everything_shown(memory, "copy")


def test_given_working_memory_given_for_the_clone_when_cloned_then_the_callers_document_wins() -> None:
    with Memory.local(":memory:", "hash", working_memory={"enabled": True, "scope": "thread"}) as memory:
        fill(memory, A, 1)
        memory.update_working_memory(thread_id=A, resource_id=R, working_memory="# Source")
        memory.clone_thread(
            source_thread_id=A, resource_id=R, new_thread_id="copy", metadata={"working_memory": "# Mine"}
        )
        assert memory.get_working_memory(thread_id="copy", resource_id=R) == "# Mine"


# erase ---------------------------------------------------------------------------------------------


def test_given_a_resource_with_every_layer_when_erased_then_nothing_of_it_remains_and_others_stay() -> None:
    options = {**RESOURCE_OM, "scope": "resource"}
    with om_memory(
        ScriptedChatModel(),
        observational_memory=options,
        working_memory={"enabled": True, "scope": "resource"},
        semantic_recall={"top_k": 3},
    ) as memory:
        for resource in (R, "res-2"):
            fill(memory, A, 40, resource)
            fill(memory, B, 3, resource)
            memory.update_working_memory(resource_id=resource, working_memory="# User\n- Name: Ana")
        receipt = memory.erase_resource(resource_id=R)
        assert receipt.counts["threads"] == 2 and receipt.counts["messages"] == 43
        assert receipt.counts["working_memory"] == 1 and receipt.counts["observation_records"] == 1
        assert receipt.counts["index_documents"] >= 43
        assert memory.list_threads(resource_id=R).threads == ()
        assert memory.get_working_memory(resource_id=R) is None
        assert memory.get_observation_record(resource_id=R, thread_id=A) is None
        assert memory.recall(thread_id=A, resource_id=R, query=f"{marker(A)}1").messages == []
        assert len(memory.list_threads(resource_id="res-2").threads) == 2
        assert memory.get_working_memory(resource_id="res-2") == "# User\n- Name: Ana"
        again = memory.erase_resource(resource_id=R)
        assert set(again.counts.values()) == {0}


def fail_once(real: Callable[..., Any]) -> Callable[..., Any]:
    """``real``, raising ``Unavailable`` on its first call (a backend failing part way)."""
    calls = []

    def call(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise Unavailable("the store failed (injected)")
        return real(*args, **kwargs)

    return call
