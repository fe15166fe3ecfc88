"""The observational-memory engine end to end on the embedded store, with a scripted Observer/Reflector.

Small thresholds (message_tokens 1,000; buffer every 200; keep 200; observations reflect at 600) so a few
dozen short messages cross every point.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from memstack.adapters.testing import DEGENERATE, ChatCall, RecordingScheduler, ScriptedChatModel
from memstack.errors import InvalidInput
from memstack.observation.engine import BOUNDARY, ObservationFailed, split_log
from tests.observation_support import om_memory, save_sentences, sentence

R, T = "res-1", "thread-1"

SMALL: dict[str, Any] = {
    "observation": {"message_tokens": 1_000, "buffer_tokens": 0.2, "buffer_activation": 0.8},
    "reflection": {"observation_tokens": 600},
}
NO_BUFFER: dict[str, Any] = {
    "observation": {"message_tokens": 1_000, "buffer_tokens": False},
    "reflection": {"observation_tokens": 100_000},
}


def save(memory: Any, start: int, count: int, thread: str = T) -> None:
    save_sentences(memory, R, thread, start, count)


def observed_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("* ")]


def test_chat_model_is_required_when_the_layer_is_on() -> None:
    with pytest.raises(InvalidInput) as err:
        om_memory(None, observational_memory=SMALL)
    assert err.value.field == "chat_model"


@pytest.mark.parametrize(
    "overrides",
    [{"observational_memory": True}, {"observational_memory": SMALL}, {"generate_title": True}],
    ids=["om-true", "om-options", "generate-title"],
)
@pytest.mark.parametrize("thread_size", [0, 3])
def test_given_no_chat_model_when_a_call_turns_on_what_needs_one_then_it_is_refused_at_once(
    overrides: dict[str, Any], thread_size: int
) -> None:
    with om_memory(None) as memory:
        if thread_size:
            save(memory, 1, thread_size)
        with pytest.raises(InvalidInput) as err:
            memory.context(resource_id=R, thread_id=T, message="hello", options=overrides)
        assert err.value.field == "chat_model"
        memory.context(resource_id=R, thread_id=T, message="hello")


def test_nothing_happens_below_the_first_buffer_point() -> None:
    chat = ScriptedChatModel()
    with om_memory(chat, observational_memory=SMALL) as memory:
        save(memory, 1, 3)
        assert chat.calls == []
        assert memory.get_observation_record(resource_id=R, thread_id=T) is None
        ctx = memory.context(thread_id=T, resource_id=R, message="hi")
        assert [m.id for m in ctx.messages][:3] == [f"{T}-m1", f"{T}-m2", f"{T}-m3"]
        assert not any(s.kind == "observations" for s in ctx.system)


def test_buffered_chunks_continue_right_after_the_cursor_then_activate_a_prefix() -> None:
    chat = ScriptedChatModel()
    with om_memory(chat, observational_memory=SMALL) as memory:
        save(memory, 1, 12)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.buffered_chunks, "buffering should have started"
        assert rec.active_observations == "" and rec.observed_seq(T) == 0
        expected_from = 1
        for chunk in rec.buffered_chunks:  # contiguous, no overlap, no gap
            assert chunk.from_seq == expected_from
            expected_from = chunk.to_seq + 1
        # buffered observations are not shown yet: the model still sees every message
        ctx = memory.context(thread_id=T, resource_id=R, message="hi")
        assert not any(s.kind == "observations" for s in ctx.system)

        save(memory, 13, 30)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.active_observations
        cursor = rec.observed_seq(T)
        assert cursor > 0
        assert all(c.from_seq > cursor for c in rec.buffered_chunks)
        ctx = memory.context(thread_id=T, resource_id=R, message="hi")
        shown = [m for m in ctx.messages if m.id.startswith(T)]
        assert shown and min(m.seq for m in shown) == cursor + 1  # exactly the unobserved tail
        kinds = [s.kind for s in ctx.system]
        assert "observations" in kinds
        texts = [s.text for s in ctx.system if s.kind == "observations"]
        assert "<observations>" in texts and "</observations>" in texts
        assert ctx.messages[0].id == "om-continuation"


def test_without_buffering_the_threshold_observes_everything_synchronously() -> None:
    chat = ScriptedChatModel()
    with om_memory(chat, observational_memory=NO_BUFFER) as memory:
        save(memory, 1, 40)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.buffered_chunks == ()
        assert chat.count("observer") >= 1
        # one batch of at most message_tokens was committed; the rest (under the threshold) stays a tail
        assert rec.pending_message_tokens < 1_000
        last_observed = rec.observed_seq(T)
        lines = observed_lines(rec.active_observations)
        assert len(lines) == last_observed  # one scripted line per observed message, none repeated
        assert len({line for line in lines}) == len(lines)


def test_two_racing_triggers_never_observe_the_same_messages_twice(tmp_path: Path) -> None:
    db = tmp_path / "race.db"
    barrier = threading.Barrier(2, timeout=20)

    def gate(call: ChatCall) -> None:
        if call.kind == "observer":
            barrier.wait()  # both runs have read the same snapshot before either writes

    def gated() -> ScriptedChatModel:
        return ScriptedChatModel(on_call=gate)

    quiet = RecordingScheduler()
    with om_memory(gated(), path=str(db), scheduler=quiet, observational_memory=NO_BUFFER) as setup:
        save(setup, 1, 40)  # jobs recorded, not run
    a = om_memory(gated(), path=str(db), scheduler=RecordingScheduler(), observational_memory=NO_BUFFER)
    b = om_memory(gated(), path=str(db), scheduler=RecordingScheduler(), observational_memory=NO_BUFFER)
    errors: list[BaseException] = []

    def run(memory: Any) -> None:
        try:
            memory.observe(resource_id=R, thread_id=T)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(m,)) for m in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    rec = a.get_observation_record(resource_id=R, thread_id=T)
    assert rec is not None
    cursor = rec.observed_seq(T)
    assert cursor >= 38
    lines = observed_lines(rec.active_observations)
    assert len(lines) == cursor and len(set(lines)) == cursor  # every message once: none skipped, none twice
    a.close()
    b.close()


def test_degenerate_observer_output_is_retried_once() -> None:
    chat = ScriptedChatModel([DEGENERATE])
    with om_memory(chat, observational_memory=NO_BUFFER) as memory:
        save(memory, 1, 40)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.observed_seq(T) > 0
        assert "the same line again" not in rec.active_observations
        assert chat.count("observer") >= 2


def test_twice_degenerate_observer_commits_nothing_and_records_the_failure() -> None:
    chat = ScriptedChatModel([DEGENERATE, DEGENERATE])
    quiet = RecordingScheduler()
    with om_memory(chat, scheduler=quiet, observational_memory=NO_BUFFER) as memory:
        save(memory, 1, 40)
        with pytest.raises(ObservationFailed):
            memory.observe(resource_id=R, thread_id=T)
        leased = memory.get_observation_record(resource_id=R, thread_id=T)
        # only the mark taken before the model ran: no observations, the cursor unmoved
        assert leased is not None and leased.active_observations == "" and leased.observed_seq(T) == 0
        assert leased.pending_since is not None
        chat.enqueue(DEGENERATE, DEGENERATE)
        memory.run_observation_job(quiet.jobs[-1])  # the local Catch: recorded, not raised
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.failure_count == 1 and rec.pending_since is not None
        assert rec.last_error is not None and rec.last_error.startswith("ObservationFailed")
        assert rec.active_observations == "" and rec.observed_seq(T) == 0
        jobs = memory.observation_work(idle_seconds=0)
        assert [(j.resource_id, j.thread_id, j.reason) for j in jobs] == [(R, T, "sweep")]
        memory.run_observation_job(jobs[0])  # the sweep's retry succeeds and clears the failure
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.failure_count == 0 and rec.pending_since is None
        assert rec.observed_seq(T) >= 38


def reflected_setup(chat: ScriptedChatModel) -> Any:
    options = {
        "observation": {"message_tokens": 1_000, "buffer_tokens": False},
        "reflection": {"observation_tokens": 600},
    }
    return om_memory(chat, scheduler=RecordingScheduler(), observational_memory=options)


def observed_past_reflection(memory: Any) -> Any:
    """Save 120 messages and observe them: the observations end over the reflection threshold (600)."""
    save(memory, 1, 120)
    for _ in range(4):
        memory.observe(resource_id=R, thread_id=T)
    record = memory.get_observation_record(resource_id=R, thread_id=T)
    assert record is not None and record.observation_tokens >= 600
    return record


def test_reflection_compresses_below_the_threshold_as_a_new_generation() -> None:
    chat = ScriptedChatModel()
    with reflected_setup(chat) as memory:
        before = observed_past_reflection(memory)
        result = memory.reflect(resource_id=R, thread_id=T)
        after = memory.get_observation_record(resource_id=R, thread_id=T)
        assert after is not None
        # observing itself reflects between batches once over the threshold: this is one more generation
        assert result.reflected and after.generation_count == before.generation_count + 1
        assert after.origin_type == "reflection"
        assert after.observation_tokens < 600 < before.observation_tokens
        assert after.observed_seq(T) == before.observed_seq(T)


@pytest.mark.parametrize("bad", [["", "", "", ""], [DEGENERATE] * 4, ["<observations>\n</observations>"] * 4])
def test_a_failed_or_degenerate_reflection_keeps_the_old_observations(bad: list[str]) -> None:
    chat = ScriptedChatModel()
    with reflected_setup(chat) as memory:
        before = observed_past_reflection(memory)
        chat.enqueue(*bad)
        chat.calls.clear()
        with pytest.raises(ObservationFailed):
            memory.reflect(resource_id=R, thread_id=T)
        after = memory.get_observation_record(resource_id=R, thread_id=T)
        assert after is not None
        assert after.active_observations == before.active_observations
        assert after.generation_count == before.generation_count
        assert chat.count("reflector") == 4  # the whole ladder was tried


def test_resource_scope_shares_one_log_across_threads() -> None:
    chat = ScriptedChatModel()
    options = {
        "scope": "resource",
        "observation": {"message_tokens": 1_000},
        "reflection": {"observation_tokens": 100_000},
    }
    with om_memory(chat, observational_memory=options, generate_title=False) as memory:
        save(memory, 1, 40, thread="thread-a")
        save(memory, 1, 40, thread="thread-b")
        assert memory.store.get_observation_record(R, "thread-a") is None
        rec = memory.store.get_observation_record(R, None)
        assert rec is not None and rec.scope == "resource"
        assert rec.observed_seq("thread-a") > 0 and rec.observed_seq("thread-b") > 0
        assert rec.active_observations.count("<thread id=") >= 2
        assert "thread-a" not in rec.active_observations  # thread ids are obscured in resource scope
        ctx = memory.context(thread_id="thread-b", resource_id=R, message="what did we talk about?")
        observations = "\n".join(s.text for s in ctx.system if s.kind == "observations")
        assert observations.count("<thread id=") >= 2  # thread-a's observations are visible here
        assert all(m.thread_id == "thread-b" for m in ctx.messages if m.id.startswith("thread-"))


def test_above_block_after_context_observes_synchronously() -> None:
    chat = ScriptedChatModel()
    quiet = RecordingScheduler()  # the background never runs
    with om_memory(chat, scheduler=quiet, observational_memory=SMALL) as memory:
        save(memory, 1, 60)  # well above block_after (1,200 tokens)
        assert memory.get_observation_record(resource_id=R, thread_id=T) is None
        assert quiet.jobs, "saves should have scheduled background work"
        ctx = memory.context(thread_id=T, resource_id=R, message="hi")
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.observed_seq(T) > 0
        assert any(s.kind == "observations" for s in ctx.system)
        assert all(m.seq > rec.observed_seq(T) for m in ctx.messages if m.id.startswith(T))
        assert ctx.token_count < 1_000 + 600 + 1_500  # observations replaced the long tail


def test_below_block_after_context_never_calls_the_model() -> None:
    chat = ScriptedChatModel()
    with om_memory(chat, scheduler=RecordingScheduler(), observational_memory=SMALL) as memory:
        save(memory, 1, 25)  # over message_tokens, under block_after
        memory.context(thread_id=T, resource_id=R, message="hi")
        assert chat.calls == []


def test_one_huge_message_is_observed_in_pieces() -> None:
    chat = ScriptedChatModel()
    huge = " ".join(sentence(i) for i in range(400))  # ~10k tokens, ten times message_tokens
    with om_memory(chat, observational_memory=NO_BUFFER) as memory:
        memory.save_messages(thread_id=T, resource_id=R, messages=[{"role": "user", "content": huge}])
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.observed_seq(T) == 1
        assert chat.count("observer") >= 10
        for call in chat.calls:
            assert memory.tokenizer.count(call.last_content) <= 1_100


def test_log_pieces_are_split_on_message_boundaries() -> None:
    text = "a\n\n" + BOUNDARY.format(at="2024-01-01T00:00:00Z") + "\n\nb"
    assert split_log(text) == ["a", "b"]


def test_titles_are_generated_once_and_never_overwrite_a_set_title() -> None:
    chat = ScriptedChatModel()
    with om_memory(chat, generate_title=True) as memory:
        save(memory, 1, 1)
        assert memory.get_thread(thread_id=T, resource_id=R).title == "Scripted title"
        save(memory, 2, 2)
        assert chat.count("title") == 1
        memory.create_thread(resource_id=R, thread_id="named", title="My own title")
        save(memory, 1, 2, thread="named")
        assert memory.get_thread(thread_id="named", resource_id=R).title == "My own title"
        assert chat.count("title") == 1


def test_a_title_set_while_the_model_runs_wins() -> None:
    with om_memory(ScriptedChatModel(), scheduler=RecordingScheduler(), generate_title=True) as memory:
        save(memory, 1, 1)
        stale = memory.get_thread(thread_id=T, resource_id=R)
        memory.update_thread(thread_id=T, resource_id=R, title="Set by the user")
        assert memory.observation.generate_title(memory.options, stale) is None
        assert memory.get_thread(thread_id=T, resource_id=R).title == "Set by the user"


def test_background_thread_scheduler_settles() -> None:
    chat = ScriptedChatModel()
    with om_memory(chat, background="thread", observational_memory=NO_BUFFER) as memory:
        save(memory, 1, 40)
        assert memory.settled(30)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.observed_seq(T) > 0


def recall_call(**args: Any) -> dict[str, Any]:
    import json

    return {"id": "call-1", "type": "function", "function": {"name": "recall", "arguments": json.dumps(args)}}


def test_retrieval_wraps_groups_with_ranges_and_recall_reads_them_back() -> None:
    chat = ScriptedChatModel()
    options = {**NO_BUFFER, "retrieval": {"scope": "thread"}}
    with om_memory(chat, observational_memory=options) as memory:
        save(memory, 1, 40)
        save(memory, 1, 3, thread="other-thread")
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None
        import re

        ranges = re.findall(r'<observation-group id="\w+" range="([^"]+):([^"]+)">', rec.active_observations)
        assert ranges and ranges[0][0] == f"{T}-m1"
        ctx = memory.context(thread_id=T, resource_id=R, message="what exactly did I say?")
        assert "recall" in [t["function"]["name"] for t in ctx.tools]
        first, last = ranges[0]
        result = memory.apply_recall_tool(
            thread_id=T, resource_id=R, tool_call=recall_call(cursor=first, limit=5)
        )
        part = result.parts[0]
        assert not part.is_error
        assert [m["id"] for m in part.result["messages"]] == [f"{T}-m{i}" for i in range(1, 6)]
        assert part.result["has_more"] is True
        back = memory.apply_recall_tool(
            thread_id=T, resource_id=R, tool_call=recall_call(cursor=last, page=-1, limit=3)
        )
        seq_last = int(last.rsplit("m", 1)[1])
        assert [m["id"] for m in back.parts[0].result["messages"]] == [
            f"{T}-m{i}" for i in range(seq_last - 2, seq_last + 1)
        ]
        # ownership: another thread's message (thread scope) and another resource's read as not found
        other = memory.apply_recall_tool(
            thread_id=T, resource_id=R, tool_call=recall_call(cursor="other-thread-m1")
        )
        assert other.parts[0].is_error and "no message" in other.parts[0].result["error"]
        foreign = memory.apply_recall_tool(
            thread_id=T, resource_id="someone-else", tool_call=recall_call(cursor=first)
        )
        assert foreign.parts[0].is_error
        bad = memory.apply_recall_tool(
            thread_id=T, resource_id=R, tool_call=recall_call(cursor=first, limit=99)
        )
        assert bad.parts[0].is_error and "limit" in bad.parts[0].result["error"]


def test_recall_tool_refused_without_retrieval() -> None:
    with (
        om_memory(ScriptedChatModel(), observational_memory=NO_BUFFER) as memory,
        pytest.raises(InvalidInput),
    ):
        memory.apply_recall_tool(thread_id=T, resource_id=R, tool_call=recall_call(cursor="x"))


def test_manage_working_memory_lets_the_observer_rewrite_it() -> None:
    wm_answer = (
        "<observations>\nDate: May 8, 2023\n* 🔴 (12:00) User likes hiking\n</observations>\n"
        "<working-memory>\n# User\n- Hobby: hiking\n</working-memory>"
    )
    chat = ScriptedChatModel([wm_answer])
    options = {**NO_BUFFER, "observation": {**NO_BUFFER["observation"], "manage_working_memory": True}}
    with om_memory(chat, observational_memory=options, working_memory={"enabled": True}) as memory:
        memory.update_working_memory(thread_id=T, resource_id=R, working_memory="# User\n- Hobby: unknown")
        save(memory, 1, 40)
        assert memory.get_working_memory(thread_id=T, resource_id=R) == "# User\n- Hobby: hiking"
        task = str(chat.calls[0].messages[0]["content"])
        assert "Hobby: unknown" in task  # the Observer is shown the current document to rewrite


def test_temporal_markers_remind_the_model_of_a_gap() -> None:
    from datetime import UTC, datetime

    chat = ScriptedChatModel()
    options = {**NO_BUFFER, "temporal_markers": True}
    with om_memory(chat, observational_memory=options) as memory:
        memory.save_messages(
            thread_id=T,
            resource_id=R,
            messages=[
                {
                    "role": "user",
                    "content": "see you later",
                    "created_at": datetime(2024, 5, 1, 9, 0, tzinfo=UTC),
                }
            ],
        )
        late = {
            "role": "user",
            "content": "back again",
            "created_at": datetime(2024, 5, 1, 11, 5, tzinfo=UTC),
        }
        ctx = memory.context(thread_id=T, resource_id=R, message=late)
        texts = [m.text for m in ctx.messages]
        assert texts[-1] == "back again"
        assert texts[-2].startswith("<system-reminder>2 hours 5 minutes later")
        soon = {"role": "user", "content": "one more", "created_at": datetime(2024, 5, 1, 9, 5, tzinfo=UTC)}
        assert not any(
            "system-reminder" in t
            for t in (m.text for m in memory.context(thread_id=T, resource_id=R, message=soon).messages)
        )


def test_the_sweep_activates_buffered_chunks_of_an_idle_thread() -> None:
    from datetime import timedelta

    chat = ScriptedChatModel()
    options = {**SMALL, "activate_after_idle": "1m"}
    with om_memory(chat, observational_memory=options) as memory:
        save(memory, 1, 12)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.buffered_chunks and not rec.active_observations
        assert rec.pending_since is not None  # idle activation is due later: the sweep will find it

        class Later:
            def now(self) -> Any:
                from memstack.model import utcnow

                return utcnow() + timedelta(minutes=5)

        memory.observation.clock = Later()
        jobs = memory.observation_work(idle_seconds=60)
        assert [j.thread_id for j in jobs] == [T]
        memory.run_observation_job(jobs[0])
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.buffered_chunks == () and rec.active_observations
        assert rec.pending_since is None


def test_tool_calls_and_results_are_observed() -> None:
    chat = ScriptedChatModel()
    with om_memory(chat, observational_memory=NO_BUFFER) as memory:
        memory.save_messages(
            thread_id=T,
            resource_id=R,
            messages=[
                {"role": "user", "content": "What's the weather in Lisbon?"},
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "tool_call", "id": "c1", "name": "weather", "args": {"city": "Lisbon"}}
                    ],
                },
                {
                    "role": "tool",
                    "parts": [
                        {"type": "tool_result", "tool_call_id": "c1", "name": "weather", "result": {"t": 21}}
                    ],
                },
            ],
        )
        save(memory, 1, 40)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.observed_seq(T) >= 3
        history = chat.calls[0].last_content
        assert "Tool Call weather" in history and "Tool Result weather" in history


def test_per_agent_models_switch_the_endpoints_model() -> None:
    chat = ScriptedChatModel(model="base-model")
    options = {**NO_BUFFER, "observation": {**NO_BUFFER["observation"], "model": "small-observer"}}
    with om_memory(chat, observational_memory=options) as memory:
        save(memory, 1, 40)
    used = {call.model for call in chat.calls}
    assert used == {"small-observer"}


def test_sweep_jobs_of_an_unchanged_record_get_a_new_key_each_minute() -> None:
    from datetime import timedelta

    chat = ScriptedChatModel([DEGENERATE, DEGENERATE])
    quiet = RecordingScheduler()
    with om_memory(chat, scheduler=quiet, observational_memory=NO_BUFFER) as memory:
        save(memory, 1, 40)
        memory.run_observation_job(quiet.jobs[-1])  # fails twice: recorded for the sweep
        from memstack.model import utcnow

        class Fixed:
            def __init__(self, at: Any) -> None:
                self.at = at

            def now(self) -> Any:
                return self.at

        start = utcnow().replace(second=0, microsecond=0) + timedelta(minutes=1)
        memory.observation.clock = Fixed(start)
        first = memory.observation_work(idle_seconds=0)
        memory.observation.clock = Fixed(start + timedelta(seconds=30))
        again = memory.observation_work(idle_seconds=0)
        assert len(first) == 1 and [j.key for j in first] == [j.key for j in again]  # same minute: one run
        memory.observation.clock = Fixed(start + timedelta(minutes=6))
        later = memory.observation_work(idle_seconds=0)
        assert later[0].key != first[0].key and len(later[0].key) <= 80


def test_an_empty_observer_answer_is_never_committed_on_the_buffering_path() -> None:
    empty = ""  # no answer at all (an empty <observations> block is a valid "nothing new")
    chat = ScriptedChatModel([empty, empty])
    quiet = RecordingScheduler()
    with om_memory(chat, scheduler=quiet, observational_memory=SMALL) as memory:
        save(memory, 1, 12)
        memory.run_observation_job(quiet.jobs[-1])
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.buffered_chunks == () and rec.failure_count == 1
        memory.run_observation_job(memory.observation.job(rec, T, 12, "retry"))  # a good answer now
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert (
            rec is not None
            and rec.buffered_chunks
            and all(c.observations.strip() for c in rec.buffered_chunks)
        )
        assert rec.failure_count == 0


def test_a_model_that_raises_never_fails_the_turn_and_is_not_retried_every_turn() -> None:
    chat = ScriptedChatModel(error=RuntimeError("the endpoint sent HTML"))
    with om_memory(chat, scheduler=RecordingScheduler(), observational_memory=SMALL) as memory:
        save(memory, 1, 60)  # above block_after; the background never ran
        ctx = memory.context(thread_id=T, resource_id=R, message="hi")  # must not raise
        assert ctx.messages[-1].text == "hi"
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.failure_count == 1
        assert rec.last_error == "Unavailable: the Observer model call failed (RuntimeError)"
        calls = len(chat.calls)
        memory.context(thread_id=T, resource_id=R, message="again")  # within a minute: no new attempt
        assert len(chat.calls) == calls


def test_retrieval_groups_survive_buffering_and_reflection() -> None:
    import re

    chat = ScriptedChatModel()
    options = {**SMALL, "retrieval": {"scope": "thread"}}
    with om_memory(chat, observational_memory=options) as memory:
        save(memory, 1, 45)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.active_observations
        pieces = split_log(rec.active_observations)
        assert pieces and all(p.startswith("<observation-group ") for p in pieces)
        for chunk in rec.buffered_chunks:
            assert (
                chunk.observations.startswith('<observation-group id="')
                and f'range="{T}-m{chunk.from_seq}:' in chunk.observations
            )
        before = re.findall(r'range="([^"]+)"', rec.active_observations)
        result = memory.reflect(resource_id=R, thread_id=T)
        after = memory.get_observation_record(resource_id=R, thread_id=T)
        assert after is not None
        if result.reflected and not result.buffered:
            assert 'kind="reflection"' in after.active_observations
            first = re.findall(r'range="([^"]+)"', after.active_observations)[0]
            assert first.split(":")[0] == before[0].split(":")[0]
        else:
            assert after.buffered_reflection is not None and 'kind="reflection"' in after.buffered_reflection


def test_split_range_handles_ids_with_colons() -> None:
    from memstack.observation.recall_tool import split_range

    assert split_range("m1:m9") == ("m1", "m9")
    assert split_range("conv-26:D1:3:conv-26:D2:8") == ("conv-26:D1:3", "conv-26:D2:8")
    assert split_range("a&quot;b:c") == ('a"b', "c")


def test_a_failed_reflection_backs_off() -> None:
    chat = ScriptedChatModel()
    with reflected_setup(chat) as memory:
        observed_past_reflection(memory)
        chat.enqueue("", "", "", "")
        with pytest.raises(ObservationFailed):
            memory.reflect(resource_id=R, thread_id=T)
        memory.record_observation_failure(
            resource_id=R, thread_id=T, error="ReflectionFailed: every attempt empty"
        )
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and not memory.observation.reflection_due(
            memory.options.observational_memory, rec
        )
        assert memory.reflect(resource_id=R, thread_id=T).reflected is False
        save(memory, 121, 5)  # saves do not clear a reflection failure
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.failure_count == 1


def test_a_failed_title_is_tried_again_by_a_later_save() -> None:
    from datetime import timedelta

    chat = ScriptedChatModel([RuntimeError("down")])
    with om_memory(chat, generate_title=True) as memory:
        save(memory, 1, 1)
        assert memory.get_thread(thread_id=T, resource_id=R).title == ""

        class Later:
            def now(self) -> Any:
                from memstack.model import utcnow

                return utcnow() + timedelta(minutes=2)

        memory.observation.clock = Later()  # the engine keys background jobs by its clock
        save(memory, 2, 1)
        assert memory.get_thread(thread_id=T, resource_id=R).title == "Scripted title"


def test_recall_reads_a_long_message_in_pieces_and_threads_from_either_end() -> None:
    chat = ScriptedChatModel()
    options = {**NO_BUFFER, "retrieval": True}  # resource scope for the tool
    long_text = " ".join(f"word{i}" for i in range(6_000))
    with om_memory(chat, observational_memory=options) as memory:
        memory.save_messages(
            thread_id=T, resource_id=R, messages=[{"id": "long", "role": "user", "content": long_text}]
        )
        save(memory, 1, 5)
        first = (
            memory.apply_recall_tool(
                thread_id=T, resource_id=R, tool_call=recall_call(cursor="long", detail="high", limit=1)
            )
            .parts[0]
            .result
        )
        assert first["truncated"] and len(first["messages"]) == 1
        offset = first["next_char_offset"]
        assert long_text.startswith(first["messages"][0]["text"].split(": ", 1)[1][:50])
        rest = (
            memory.apply_recall_tool(
                thread_id=T,
                resource_id=R,
                tool_call=recall_call(cursor="long", detail="high", limit=1, char_offset=offset),
            )
            .parts[0]
            .result
        )
        assert rest["messages"][0]["text"] and rest["messages"][0]["text"] != first["messages"][0]["text"]
        start = memory.apply_recall_tool(
            thread_id=T, resource_id=R, tool_call=recall_call(thread_id="current", limit=2)
        )
        assert [m["id"] for m in start.parts[0].result["messages"]] == ["long", f"{T}-m1"]
        end = memory.apply_recall_tool(
            thread_id=T, resource_id=R, tool_call=recall_call(thread_id=T, page=-1, limit=2)
        )
        assert [m["id"] for m in end.parts[0].result["messages"]] == [f"{T}-m4", f"{T}-m5"]
        threads = memory.apply_recall_tool(thread_id=T, resource_id=R, tool_call=recall_call(mode="threads"))
        assert [t["id"] for t in threads.parts[0].result["threads"]] == [T]
        nowhere = memory.apply_recall_tool(
            thread_id=T, resource_id=R, tool_call=recall_call(thread_id="nope")
        )
        assert nowhere.parts[0].is_error


def test_a_thread_deleted_while_the_observer_runs_ends_the_step_quietly() -> None:
    holder: dict[str, Any] = {}

    deleting = ScriptedChatModel(on_call=lambda _: holder["memory"].delete_thread(thread_id=T, resource_id=R))
    quiet = RecordingScheduler()
    with om_memory(deleting, scheduler=quiet, observational_memory=NO_BUFFER) as memory:
        holder["memory"] = memory
        save(memory, 1, 40)
        result = memory.observe(resource_id=R, thread_id=T)
        assert result.observed_messages == 0
        assert memory.store.get_observation_record(R, T) is None  # no orphan record


def test_a_time_budget_stops_new_model_calls_but_keeps_what_was_committed() -> None:
    chat = ScriptedChatModel()
    quiet = RecordingScheduler()
    options = {
        "observation": {"message_tokens": 1_000, "buffer_tokens": False},
        "reflection": {"observation_tokens": 100_000},
    }
    with om_memory(chat, scheduler=quiet, observational_memory=options) as memory:
        save(memory, 1, 200)  # ~5 batches of backlog, nothing observed yet
        assert memory.observe(resource_id=R, thread_id=T, time_budget=0).observed_messages == 0
        assert chat.count("observer") == 0
        result = memory.observe(resource_id=R, thread_id=T)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and chat.count("observer") >= 4  # one commit per batch
        assert result.observed_messages == rec.observed_seq(T) >= 160
