"""Writes under concurrency (issue 13 items 2–5), on SQLite and on DynamoDB (moto): optimistic
concurrency for turns, contiguous DynamoDB batches, working-memory limits on every path, titles set
field-level."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memstack import Conflict
from memstack.adapters.dynamodb import DynamoDBMemoryStore
from memstack.adapters.testing import RecordingScheduler, ScriptedChatModel
from memstack.errors import InvalidInput, PayloadTooLarge
from memstack.model import Message, TextPart
from tests.store_backends import BACKENDS, memory_on


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


# --- item 2: expected_last_seq --------------------------------------------------------------------------


def test_given_the_last_seq_of_a_context_when_the_thread_moved_then_the_save_is_a_conflict(
    backend: str, tmp_path: Path
) -> None:
    with memory_on(backend, tmp_path) as memory:
        ctx = memory.context(resource_id="r", thread_id="t", message="hi")
        assert ctx.last_seq == 0
        memory.save_messages(resource_id="r", thread_id="t", messages=["a", "b"], expected_last_seq=0)
        ctx = memory.context(resource_id="r", thread_id="t", message="hi")
        assert ctx.last_seq == 2
        memory.save_messages(resource_id="r", thread_id="t", messages=["other turn"])
        with pytest.raises(Conflict) as err:
            memory.save_messages(
                resource_id="r", thread_id="t", messages=["late"], expected_last_seq=ctx.last_seq
            )
        assert err.value.field == "expected_last_seq"
        texts = [m.text for m in memory.list_messages(resource_id="r", thread_id="t").messages]
        assert texts == ["a", "b", "other turn"], "a refused save writes nothing"


def test_given_two_turns_from_one_read_when_saved_concurrently_then_exactly_one_lands(
    backend: str, tmp_path: Path
) -> None:
    with memory_on(backend, tmp_path) as memory:
        memory.save_messages(resource_id="r", thread_id="t", messages=["start"])
        last = memory.context(resource_id="r", thread_id="t").last_seq
        barrier = threading.Barrier(4)
        outcomes: list[str] = []

        def turn(i: int) -> None:
            barrier.wait()
            try:
                memory.save_messages(
                    resource_id="r", thread_id="t", messages=[f"turn {i}"], expected_last_seq=last
                )
                outcomes.append("saved")
            except Conflict:
                outcomes.append("conflict")

        threads = [threading.Thread(target=turn, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["conflict", "conflict", "conflict", "saved"]
        assert len(memory.list_messages(resource_id="r", thread_id="t").messages) == 2


def test_given_no_expected_last_seq_when_saving_then_nothing_changes(backend: str, tmp_path: Path) -> None:
    with memory_on(backend, tmp_path) as memory:
        memory.save_messages(resource_id="r", thread_id="t", messages=["a"])
        memory.save_messages(resource_id="r", thread_id="t", messages=["b"])
        thread = memory.get_thread(resource_id="r", thread_id="t")
        assert thread.last_seq == 2


def test_given_a_bad_expected_last_seq_when_saving_then_invalid_input(tmp_path: Path) -> None:
    with memory_on("sqlite", tmp_path) as memory, pytest.raises(InvalidInput) as err:
        memory.save_messages(resource_id="r", thread_id="t", messages=["a"], expected_last_seq=-1)
    assert err.value.field == "expected_last_seq"


# --- item 3: a batch over several DynamoDB transactions stays contiguous ---------------------------------


def _another_process_store(store: Any) -> Any:
    """The same table through a store of its own, as another Lambda would hold (a store's in-process lock
    would otherwise make the two writers take turns); SQLite's one file needs no second store."""
    if not isinstance(store, DynamoDBMemoryStore):
        return store
    return DynamoDBMemoryStore(table_name=store.table_name, region="us-east-1")


def _message(message_id: str) -> Message:
    return Message(
        id=message_id,
        thread_id="t",
        resource_id="r",
        role="user",
        parts=(TextPart(text="B"),),
        created_at=datetime.now(UTC),
    )


def test_given_a_120_message_batch_and_another_writer_when_saved_together_then_the_batch_is_contiguous(
    backend: str, tmp_path: Path
) -> None:
    with memory_on(backend, tmp_path) as memory:
        memory.save_messages(resource_id="r", thread_id="t", messages=[{"id": "s", "content": "start"}])
        batch = [{"id": f"a{i}", "role": "user", "content": f"A {i}"} for i in range(120)]
        stop = threading.Event()
        other = _another_process_store(memory.store)

        def other_writer() -> None:
            # a busy writer, not a tight loop: one that never yields starves the batch's seq reservation,
            # which then gives up with Conflict after its attempts (documented; retrying is safe)
            n = 0
            while not stop.wait(0.002):
                other.save_messages("r", "t", [_message(f"b{n}")])
                n += 1

        writer = threading.Thread(target=other_writer)
        writer.start()
        try:
            memory.save_messages(resource_id="r", thread_id="t", messages=batch)
        finally:
            stop.set()
            writer.join()
        messages = memory.list_messages(resource_id="r", thread_id="t", limit=1000).messages
        owners = "".join(m.id[0] for m in messages if m.id != "s")
        runs = [run for run in owners.replace("b", " ").split() if run]
        assert runs == ["a" * 120], f"another writer's message landed inside the batch: {owners}"
        assert "b" in owners, "the other writer wrote while the batch was saved"
        seqs = [m.seq for m in messages if m.id.startswith("a")]
        assert seqs == list(range(seqs[0], seqs[0] + 120))


def test_given_a_multi_transaction_save_that_fails_part_way_then_the_error_names_saved_and_unsaved_ids(
    tmp_path: Path,
) -> None:
    with memory_on("dynamodb", tmp_path) as memory:
        store: Any = memory.store
        batch = [{"id": f"a{i}", "role": "user", "content": f"A {i}"} for i in range(120)]
        original = store._commit
        commits: list[int] = []

        def failing_commit(plan: Any) -> None:
            commits.append(1)
            if len(commits) == 2:
                raise PayloadTooLarge("the second transaction was refused", field="messages")
            original(plan)

        store._commit = failing_commit
        with pytest.raises(PayloadTooLarge) as err:
            memory.save_messages(resource_id="r", thread_id="t", messages=batch)
        store._commit = original
        saved, unsaved = err.value.saved_ids, err.value.unsaved_ids
        assert saved is not None and unsaved is not None
        assert saved + unsaved == [f"a{i}" for i in range(120)] and saved
        assert saved[0] in err.value.message and unsaved[-1] in err.value.message
        stored = [m.id for m in memory.list_messages(resource_id="r", thread_id="t", limit=1000).messages]
        assert stored == saved
        memory.save_messages(resource_id="r", thread_id="t", messages=batch)
        stored = [m.id for m in memory.list_messages(resource_id="r", thread_id="t", limit=1000).messages]
        assert stored == [f"a{i}" for i in range(120)], "saving the batch again completes it, in order"


# --- item 4: working-memory limits on every path ---------------------------------------------------------


def test_given_working_memory_off_in_the_options_when_thread_metadata_seeds_an_oversized_one_then_refused(
    backend: str, tmp_path: Path
) -> None:
    big = "word " * 3_000  # 15,000 characters (under the 16,000 cap), 3,001 tokens (over the 2,000 default)
    with memory_on(backend, tmp_path) as memory:
        with pytest.raises(PayloadTooLarge) as created:
            memory.create_thread(resource_id="r", thread_id="t", metadata={"working_memory": big})
        memory.create_thread(resource_id="r", thread_id="t")
        with pytest.raises(PayloadTooLarge) as updated:
            memory.update_thread(resource_id="r", thread_id="t", metadata={"working_memory": big})
        with pytest.raises(PayloadTooLarge) as direct:
            memory.update_working_memory(
                resource_id="r",
                thread_id="t",
                working_memory=big,
                options={"working_memory": {"enabled": True, "scope": "thread"}},
            )
    refusals = {err.value.message for err in (created, updated, direct)}
    assert refusals == {
        "working_memory has 3001 tokens, over the limit of 2000 tokens (working_memory.max_tokens)"
    }


def test_given_a_per_call_max_tokens_over_the_configured_when_updating_then_refused_naming_the_limit(
    tmp_path: Path,
) -> None:
    with memory_on("sqlite", tmp_path, working_memory={"enabled": True, "max_tokens": 100}) as memory:
        with pytest.raises(InvalidInput) as err:
            memory.update_working_memory(
                resource_id="r", working_memory="x", options={"working_memory": {"max_tokens": 10_000}}
            )
        assert "limit of 100 tokens" in err.value.message
        memory.update_working_memory(
            resource_id="r", working_memory="x", options={"working_memory": {"max_tokens": 50}}
        )
        with pytest.raises(PayloadTooLarge):
            memory.update_working_memory(
                resource_id="r", working_memory="y " * 80, options={"working_memory": {"max_tokens": 50}}
            )


# --- item 5: titles set field-level -------------------------------------------------------------------------


def test_given_working_memory_updated_while_the_title_is_computed_then_the_title_is_kept(
    backend: str, tmp_path: Path
) -> None:
    chat = ScriptedChatModel()
    options: dict[str, Any] = {"generate_title": True, "working_memory": {"enabled": True, "scope": "thread"}}
    with memory_on(backend, tmp_path, chat_model=chat, scheduler=RecordingScheduler(), **options) as memory:
        memory.save_messages(resource_id="r", thread_id="t", messages=["Plan my trip to Porto"])
        read = memory.get_thread(resource_id="r", thread_id="t")
        memory.update_working_memory(resource_id="r", thread_id="t", working_memory="# Trip\n- Porto")
        assert memory.observation.generate_title(memory.options, read) == "Scripted title"
        assert memory.get_thread(resource_id="r", thread_id="t").title == "Scripted title"
        assert memory.get_working_memory(resource_id="r", thread_id="t") == "# Trip\n- Porto"


def test_given_an_id_of_the_batch_deleted_while_it_is_saved_then_conflict_naming_what_was_saved(
    tmp_path: Path,
) -> None:
    with memory_on("dynamodb", tmp_path) as memory:
        store: Any = memory.store
        memory.save_messages(resource_id="r", thread_id="t", messages=[{"id": "a119", "content": "old"}])
        batch = [{"id": f"a{i}", "role": "user", "content": f"A {i}"} for i in range(120)]
        original = store._commit

        def deleting_commit(plan: Any) -> None:
            original(plan)
            store.delete_messages("r", ["a119"])  # after the first transaction: the last one's id is gone

        store._commit = deleting_commit
        with pytest.raises(Conflict) as err:
            memory.save_messages(resource_id="r", thread_id="t", messages=batch)
        store._commit = original
        assert err.value.field == "messages.id" and "a119" in err.value.message
        assert err.value.unsaved_ids is not None and "a119" in err.value.unsaved_ids
