"""The shipped fakes' own features, beyond the port contracts they pass in tests/contract/: the scripted
chat model's rules and hooks, its built-in Observer and Reflector against the real prompts, and the
recording scheduler's bookkeeping."""

from __future__ import annotations

import threading

import pytest

from memstack.adapters.testing import DEGENERATE, ChatCall, RecordingScheduler, ScriptedChatModel
from memstack.errors import Unavailable
from memstack.observation.parsing import is_degenerate, parse_observer_output, parse_reflector_output
from memstack.observation.prompts import (
    TITLE_INSTRUCTIONS,
    observer_history_message,
    observer_system_prompt,
    reflector_system_prompt,
    reflector_task_prompt,
)
from memstack.ports import ChatResult, ObservationJob

USER = [{"role": "user", "content": "hi"}]


def observer_request(transcript: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": observer_system_prompt()},
        {"role": "user", "content": observer_history_message(transcript)},
    ]


def reflector_request(observations: str, level: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": reflector_system_prompt()},
        {"role": "user", "content": reflector_task_prompt(observations, level=level)},
    ]


def test_given_the_real_prompts_when_classified_then_observer_reflector_and_title() -> None:
    chat = ScriptedChatModel()
    chat.complete(observer_request("User (12:00): hello"))
    chat.complete(reflector_request("* 🟡 (12:00) a", 0))
    chat.complete(
        [{"role": "system", "content": TITLE_INSTRUCTIONS}, {"role": "user", "content": "User: hi"}]
    )
    assert [call.kind for call in chat.calls] == ["observer", "reflector", "title"]


def test_given_a_transcript_when_observed_then_one_parsable_observation_per_line() -> None:
    answer = ScriptedChatModel(words=3).complete(
        observer_request(
            "Date: May 8, 2023\nUser (12:00): where is the new bakery?\nAssistant (12:01): on Elm street"
        )
    )
    parsed = parse_observer_output(answer.text)
    lines = [line for line in parsed.observations.splitlines() if line.startswith("* ")]
    assert lines == ["* 🔴 (12:00) where is the", "* 🟡 (12:00) on Elm street"]
    assert parsed.current_task and parsed.suggested_response


def test_given_a_higher_compression_level_when_reflected_then_a_shorter_log_keeping_every_red_line() -> None:
    log = "Date: May 8, 2023\n" + "\n".join(
        f"* {'🔴' if i % 5 == 0 else '🟡'} (12:00) fact {i}" for i in range(40)
    )
    chat = ScriptedChatModel()
    sizes = []
    for level in range(1, 5):
        kept = parse_reflector_output(chat.complete(reflector_request(log, level)).text).observations
        assert all(f"fact {i}" in kept for i in range(0, 40, 5)), f"a 🔴 line was dropped at level {level}"
        sizes.append(len(kept.splitlines()))
    assert sizes[0] > sizes[1] > sizes[2] > sizes[3]


def test_given_the_degenerate_answer_then_the_parser_rejects_it() -> None:
    assert is_degenerate(DEGENERATE)


def test_given_a_script_then_replies_error_and_respond_answer_in_that_order() -> None:
    seen: list[str] = []
    chat = ScriptedChatModel(
        ["first", ChatResult(text="second", input_tokens=3), lambda call: f"third for {call.kind}"],
        respond=lambda call: "from respond",
    )
    assert [chat.complete(USER).text for _ in range(4)] == [
        "first",
        "second",
        "third for title",
        "from respond",
    ]
    chat.enqueue(Unavailable("down"))
    with pytest.raises(Unavailable):
        chat.complete(USER)
    failing = ScriptedChatModel(
        ["ok"], error=RuntimeError("boom"), respond=lambda call: seen.append("x") or ""
    )
    assert failing.complete(USER).text == "ok"
    with pytest.raises(RuntimeError, match="boom"):
        failing.complete(USER)
    assert seen == [], "error wins over respond"
    assert len(failing.calls) == 2, "a call that raises is still recorded"


def test_given_on_call_when_completing_then_it_sees_the_recorded_call_before_the_answer() -> None:
    order: list[str] = []
    chat = ScriptedChatModel(on_call=lambda call: order.append(f"on_call {len(chat.calls)}"))
    chat.complete(USER, tools=[{"type": "function"}], max_output_tokens=9, temperature=0.5)
    assert order == ["on_call 1"]
    assert chat.calls[0] == ChatCall(
        kind="title",
        model="observer",
        messages=USER,
        tools=[{"type": "function"}],
        max_output_tokens=9,
        temperature=0.5,
    )


def test_given_a_twin_of_another_model_then_it_shares_the_script_and_the_log() -> None:
    chat = ScriptedChatModel(["from the script"], model="base")
    small = chat.with_model("small")
    assert small.model_id == "scripted/small"
    assert small.complete(USER).text == "from the script"
    chat.complete(USER)
    assert [call.model for call in chat.calls] == ["small", "base"]
    assert small.calls is chat.calls


def test_given_calls_from_threads_when_scripted_then_each_reply_is_used_once() -> None:
    chat = ScriptedChatModel([f"reply {i}" for i in range(40)])
    answers: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(10):
            text = chat.complete(USER).text
            with lock:
                answers.append(text)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(answers) == sorted(f"reply {i}" for i in range(40))


def job(key: str) -> ObservationJob:
    return ObservationJob(resource_id="r", thread_id="t", key=key, reason="threshold")


def test_given_jobs_taken_off_when_a_key_comes_again_then_it_is_still_a_repeat() -> None:
    scheduler = RecordingScheduler()
    scheduler.submit(job("a"))
    assert scheduler.jobs.pop(0).key == "a"
    scheduler.submit(job("a"))
    scheduler.submit(job("b"))
    assert [j.key for j in scheduler.jobs] == ["b"]
    assert scheduler.submitted == ["a", "b"]


def test_given_a_refused_key_when_submitted_later_then_it_is_accepted() -> None:
    scheduler = RecordingScheduler(failing={"a"})
    with pytest.raises(Unavailable):
        scheduler.submit(job("a"))
    scheduler.failing.clear()
    scheduler.submit(job("a"))
    assert scheduler.submitted == ["a"]
