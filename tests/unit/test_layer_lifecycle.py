"""Each layer answers the lifecycle events: a clone copies what a thread owns without touching its resource,
a delete leaves nothing of the thread in any layer (also in a resource-scoped observation log), and an
erasure leaves nothing of the resource."""

from __future__ import annotations

from typing import Any

from memstack import Memory
from memstack.adapters.testing import ChatCall, ScriptedChatModel
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


def everything_shown(memory: Memory, thread: str, resource: str = R) -> str:
    ctx = memory.context(thread_id=thread, resource_id=resource, message="what do you remember?")
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
