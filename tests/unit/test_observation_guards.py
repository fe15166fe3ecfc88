"""Nothing bad is committed, no record gets stuck: the guards on what a model answer may change
(``memstack.observation.guards``), the Observer's "nothing new", and what the Observer is shown.

Each test scripts the misbehaving answer an adversarial tester found and checks the record afterwards.
"""

from __future__ import annotations

from typing import Any

import pytest

from memstack.adapters.testing import RecordingScheduler, ScriptedChatModel
from memstack.observation.context import continuation_message
from memstack.observation.guards import lost_high_priority, new_lines_only, reflection_problem
from memstack.tokens import default_tokenizer
from tests.observation_support import huge_answers, om_memory, sentence

R, T = "res-1", "thread-1"

NO_BUFFER: dict[str, Any] = {
    "observation": {"message_tokens": 1_000, "buffer_tokens": False},
    "reflection": {"observation_tokens": 100_000},
}
REFLECT_AT_600: dict[str, Any] = {
    "observation": {"message_tokens": 1_000, "buffer_tokens": False},
    "reflection": {"observation_tokens": 600},
}

FACTS = [
    "* 🔴 (09:00) User's daughter Mia was born on 3 March 2019",
    "* 🔴 (09:05) User is allergic to penicillin",
    "* 🔴 (09:10) User's flight to Oslo leaves on 14 June at 07:40",
    "* 🔴 (09:15) User's landlord is called Mr Okafor",
]


def save(memory: Any, start: int, count: int, text: Any = sentence) -> None:
    memory.save_messages(
        thread_id=T,
        resource_id=R,
        messages=[
            {"id": f"m{i}", "role": "user" if i % 2 else "assistant", "content": text(i)}
            for i in range(start, start + count)
        ],
    )


def log_over_threshold(memory: Any) -> str:
    """Observe 40 messages, then put a log of ~1,000 tokens (over 600) with four 🔴 facts on the record."""
    save(memory, 1, 40)
    memory.observe(resource_id=R, thread_id=T, reason="threshold")
    rec = memory.get_observation_record(resource_id=R, thread_id=T)
    filler = "\n".join(
        f"* 🟡 (10:{i % 60:02d}) User mentioned errand number {i} about the garden" for i in range(60)
    )
    text = "Date: May 8, 2023\n" + "\n".join(FACTS) + "\n" + filler
    memory.store.put_observation_record(
        rec.model_copy(
            update={"active_observations": text, "observation_tokens": memory.tokenizer.count(text)}
        ),
        expected_version=rec.version,
    )
    return text


# --- item 2: reflections are checked before they replace the log --------------------------------------


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("short lines repeated", "<observations>\n" + "* ok\n" * 300 + "</observations>"),
        (
            "larger than its input",
            "<observations>\n"
            + "\n".join(
                [
                    *FACTS,
                    *(
                        f"* 🟡 User described garden errand {i} in {i % 7 + 2} careful steps"
                        for i in range(200)
                    ),
                ]
            )
            + "\n</observations>",
        ),
        (
            "a refusal",
            "<observations>\nI'm sorry, but I can't help with reorganising these notes.\n</observations>",
        ),
        (
            "a merge that lost three of four facts",
            "<observations>\nDate: May 8, 2023\n* 🔴 User is allergic to penicillin\n</observations>",
        ),
    ],
)
def test_given_a_bad_reflection_at_every_level_when_reflecting_then_the_old_log_stays_and_the_failure_is_recorded(
    name: str, answer: str
) -> None:
    chat = ScriptedChatModel()
    with om_memory(chat, scheduler=RecordingScheduler(), observational_memory=REFLECT_AT_600) as memory:
        before = log_over_threshold(memory)
        chat.enqueue(*[answer] * 4)
        with pytest.raises(Exception) as err:
            memory.reflect(resource_id=R, thread_id=T)
        assert type(err.value).__name__ == "ReflectionFailed", name
        assert chat.count("reflector") == 4  # every level of the ladder was tried
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec.active_observations == before, name
        assert rec.generation_count == 0


def test_given_a_bad_first_level_and_a_good_second_when_reflecting_then_the_good_one_is_committed() -> None:
    good = (
        "<observations>\nDate: May 8, 2023\n"
        + "\n".join(FACTS)
        + "\n* 🟡 User ran garden errands\n</observations>"
    )
    chat = ScriptedChatModel()
    with om_memory(chat, scheduler=RecordingScheduler(), observational_memory=REFLECT_AT_600) as memory:
        log_over_threshold(memory)
        chat.enqueue("<observations>\n" + "* ok\n" * 300 + "</observations>", good)
        result = memory.reflect(resource_id=R, thread_id=T)
        assert result.reflected and result.level == 2
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert all(fact in rec.active_observations for fact in FACTS)


def test_given_facts_merged_into_one_line_when_checked_then_every_fact_counts_as_kept() -> None:
    merged = (
        "* 🔴 Family and travel: daughter Mia born 3 March 2019; allergic to penicillin; flight to Oslo "
        "leaves 14 June 07:40; landlord called Mr Okafor"
    )
    assert lost_high_priority("\n".join(FACTS), merged) == []
    assert len(lost_high_priority("\n".join(FACTS), "* 🔴 User is allergic to penicillin")) == 3
    # a number changed is a fact lost, whatever the words
    assert lost_high_priority(FACTS[2], "* 🔴 User's flight to Oslo leaves on 15 June at 07:40") == [FACTS[2]]


def test_given_a_reflection_not_smaller_than_its_input_when_checked_then_it_is_refused() -> None:
    tokenizer = default_tokenizer()
    before = "\n".join(FACTS)
    assert reflection_problem(before, before, before, tokenizer) is not None
    assert reflection_problem(before + "\n* 🟡 filler about the garden", before, before, tokenizer) is None


def test_given_an_observation_line_already_in_the_log_when_observed_again_then_it_is_not_added_twice() -> (
    None
):
    answer = "<observations>\nDate: May 8, 2023\n* 🔴 (12:00) User is allergic to penicillin\n</observations>"
    chat = ScriptedChatModel([answer, answer])
    with om_memory(chat, scheduler=RecordingScheduler(), observational_memory=NO_BUFFER) as memory:
        save(memory, 1, 40)
        memory.observe(resource_id=R, thread_id=T, reason="threshold")
        first = memory.get_observation_record(resource_id=R, thread_id=T).observed_seq(T)
        save(memory, 41, 40)
        memory.observe(resource_id=R, thread_id=T, reason="threshold")
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec.active_observations.count("User is allergic to penicillin") == 1
        assert rec.observed_seq(T) > first  # the duplicate batch still moved the cursor
    assert new_lines_only("Date: May 8\n* a", "Date: May 9\n* a\n* b") == "Date: May 9\n* b"


# --- item 6: "nothing to observe" moves the cursor -----------------------------------------------------


@pytest.mark.parametrize(
    "answer", ["<observations>\n</observations>", "No new observations.", "(nothing new)"]
)
def test_given_an_observer_that_finds_nothing_new_when_observing_then_the_cursor_moves_and_it_is_not_asked_again(
    answer: str,
) -> None:
    chat = ScriptedChatModel([answer] * 50)
    with om_memory(chat, observational_memory=NO_BUFFER) as memory:
        for i in range(1, 61):  # every save schedules (inline) once over message_tokens
            save(
                memory,
                i,
                1,
                text=lambda i: f"Small talk {i}: lovely weather today, isn't it, quite sunny and warm.",
            )
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.observed_seq(T) > 0 and rec.failure_count == 0
        assert rec.active_observations == ""
        # one call per span over the threshold, not one per save
        assert chat.count("observer") <= 3, chat.count("observer")


def test_given_an_observer_that_answers_nothing_when_saves_keep_coming_then_it_backs_off() -> None:
    chat = ScriptedChatModel([""] * 100)
    with om_memory(chat, observational_memory=NO_BUFFER) as memory:
        for i in range(1, 61):
            save(memory, i, 1)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.observed_seq(T) == 0 and rec.failure_count >= 1
        assert chat.count("observer") <= 4, chat.count("observer")  # 2 attempts per run, then backoff


# --- item 4: the Observer is prompted as a system ------------------------------------------------------


def test_given_reminders_in_the_history_when_observing_then_instructions_are_system_and_reminders_are_not_transcript() -> (
    None
):
    chat = ScriptedChatModel()
    with om_memory(chat, scheduler=RecordingScheduler(), observational_memory=NO_BUFFER) as memory:
        memory.save_messages(
            thread_id=T,
            resource_id=R,
            messages=[
                {
                    "id": "r1",
                    "role": "user",
                    "content": "<system-reminder>Always answer in French.</system-reminder>",
                },
                {"id": "r2", "role": "user", "content": "I adopted a cat named Turing"},
            ],
        )
        save(memory, 1, 40)
        memory.observe(resource_id=R, thread_id=T, reason="threshold")
        request = next(call.messages for call in chat.calls if call.kind == "observer")
        assert [m["role"] for m in request] == ["system", "user"]
        assert "Record only what the previous observations do not already say" in request[0]["content"]
        transcript = request[1]["content"]
        assert "<transcript>" in transcript and "adopted a cat named Turing" in transcript
        assert "Always answer in French" not in transcript
        assert "system-reminder" not in transcript


def test_given_a_caller_that_saves_ctx_messages_back_when_saving_then_the_continuation_reminder_is_dropped() -> (
    None
):
    chat = ScriptedChatModel()
    with om_memory(chat, scheduler=RecordingScheduler(), observational_memory=NO_BUFFER) as memory:
        reminder = continuation_message(T, R)
        saved = memory.save_messages(
            thread_id=T,
            resource_id=R,
            messages=[
                {"id": reminder.id, "role": "user", "content": reminder.text},
                {"id": "other-id", "role": "user", "content": reminder.text},
                {"id": "u1", "role": "user", "content": "hello"},
            ],
        )
        assert [m.id for m in saved] == ["u1"]
        assert [m.id for m in memory.store.list_messages(R, T, limit=10)] == ["u1"]


# --- item 3: the Observer's working-memory rewrite is checked ------------------------------------------

ADA = "# User\n- Name: Ada Lovelace\n- City: London\n- Pets: cat, dog"
MANAGE: dict[str, Any] = {
    **NO_BUFFER,
    "observation": {**NO_BUFFER["observation"], "manage_working_memory": True},
}


def observer_answer(observations: str, working_memory: str) -> str:
    return f"<observations>\n{observations}\n</observations>\n<working-memory>\n{working_memory}\n</working-memory>"


def small_talk(i: int) -> str:
    return f"hi there {i}, how are you doing today? all good over here, thanks for asking."


def wm_after(answer: str, talk: Any = small_talk, current: str = ADA, **options: Any) -> str | None:
    chat = ScriptedChatModel([answer] * 10)
    with om_memory(
        chat,
        scheduler=RecordingScheduler(),
        observational_memory=MANAGE,
        working_memory={"enabled": True, **options},
    ) as memory:
        memory.update_working_memory(thread_id=T, resource_id=R, working_memory=current)
        save(memory, 1, 80, text=talk)
        memory.observe(resource_id=R, thread_id=T, reason="threshold")
        assert chat.count("observer") >= 1
        value: str | None = memory.get_working_memory(thread_id=T, resource_id=R)
        return value


def test_given_small_talk_when_the_observer_rewrites_filled_fields_then_the_document_stays() -> None:
    answer = observer_answer("* 🟡 (12:00) User said hi", "# User\n- Name: Ada\n- Location: UK")
    assert wm_after(answer) == ADA


def test_given_messages_about_a_field_when_the_observer_rewrites_it_then_the_rewrite_is_applied() -> None:
    rewrite = "# User\n- Name: Ada Lovelace\n- City: Paris\n- Pets: cat, dog"
    answer = observer_answer("* 🔴 (12:00) User moved to Paris", rewrite)
    assert wm_after(answer, talk=lambda i: f"Update {i}: I moved from London to Paris last month.") == rewrite


def test_given_an_observer_that_found_nothing_new_when_it_returns_a_document_then_nothing_is_written() -> (
    None
):
    answer = observer_answer(
        "", "# User\n- Name: Ada Lovelace\n- City: London\n- Pets: cat, dog\n- Mood: chatty"
    )
    assert wm_after(answer) == ADA


def test_given_json_mode_when_the_observer_leaves_a_key_out_then_it_is_merged_not_replaced() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": "string"}}}
    current = '{"name": "Ada Lovelace", "city": "London"}'
    answer = observer_answer("* 🟡 (12:00) User said hi", '{"name": "Ada Lovelace", "pet": "cat"}')
    after = wm_after(answer, current=current, schema=schema)
    assert after is not None and '"city": "London"' in after and '"pet": "cat"' in after


# --- item 7: the record cap never deadlocks ------------------------------------------------------------


CAPPED: dict[str, Any] = {
    "observation": {"message_tokens": 1_000, "buffer_tokens": False},
    "reflection": {"observation_tokens": 4_000},
}


def test_given_huge_answers_and_a_failing_reflector_when_a_backlog_is_observed_then_the_record_stays_bounded() -> (
    None
):
    chat = huge_answers(2_000)  # ~90k tokens, ~330 KB an answer: one alone nearly fills the record
    with om_memory(chat, scheduler=RecordingScheduler(), observational_memory=CAPPED) as memory:
        save(memory, 1, 400)  # ~11k tokens: a backlog of about eleven batches
        for _ in range(3):
            memory.observe(resource_id=R, thread_id=T, reason="threshold")
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        _, _, pending = memory.observation.view(memory.options.observational_memory, R, T)
        assert rec is not None and pending < 1_000, "every batch over message_tokens was committed"
        t = memory.observation.thresholds(memory.options.observational_memory, rec)
        assert rec.observation_tokens <= t.reflection_block_after + t.observation_tokens // 2
        assert rec.last_error is not None and rec.last_error.startswith("ReflectionFailed")
        # the key facts of the batches since the last truncation are all there, the older ones as 🔴 lines
        assert f"Key fact {chat.count('observer')}:" in rec.active_observations
        assert rec.active_observations.count("🔴") >= 3
        # and the thread keeps working: more messages are observed, no PayloadTooLarge
        seen = rec.observed_seq(T)
        save(memory, 401, 80)
        memory.observe(resource_id=R, thread_id=T, reason="threshold")
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.observed_seq(T) > seen
        ctx = memory.context(thread_id=T, resource_id=R, message="what is my locker code?")
        observations = sum(memory.tokenizer.count(s.text) for s in ctx.system if s.kind == "observations")
        assert observations <= t.reflection_block_after + t.observation_tokens // 2
