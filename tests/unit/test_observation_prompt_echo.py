"""A model that repeats its prompt must not plant the prompt's examples as facts about the user.

The Observer's and Reflector's prompts carry an example ``<observations>`` block ("User stated they are
training for a half marathon …") and hint templates; an answer that hands them back is refused like an
empty one (``parsing.without_prompt_text``): nothing committed, the cursor where it was, retried later.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from memstack.adapters.testing import ChatCall, ScriptedChatModel
from memstack.observation import prompts
from memstack.observation.parsing import (
    parse_observer_output,
    parse_reflector_output,
    without_prompt_text,
)
from tests.observation_support import om_memory

R, T = "res-1", "thread-1"
EXAMPLE_FACTS = ("half marathon", "knee", "running shoes", "carb loading", "lasagne")


def observer_variant(**flags: Any) -> tuple[str, str]:
    """``(instructions, whole request text)`` of one Observer prompt variant."""
    buffering = flags.pop("buffering")
    system = prompts.observer_system_prompt(**flags)
    task = prompts.observer_task_prompt(
        previous="Date: May 1, 2025\n* 🔴 (10:00) User lives in Oslo",
        truncated=True,
        prior_current_task="Primary: planning a trip",
        prior_suggested_response="Ask about dates",
        prior_thread_title="Trip planning",
        buffering=buffering,
        working_memory="# User\n- Name: Ana" if flags.get("manage_working_memory") else None,
    )
    history = prompts.observer_history_message("[User 10:00]: I like tea\n- and my cat is called Tom")
    return prompts.observer_instructions(system, buffering=buffering), f"{system}\n\n{task}\n{history}"


OBSERVER_VARIANTS = [
    {
        "multi_thread": multi,
        "thread_title": title,
        "current_task": task,
        "suggested_response": suggested,
        "manage_working_memory": wm,
        "instruction": instruction,
        "buffering": buffering,
    }
    for multi, title, task, suggested, wm, instruction, buffering in itertools.product(
        (False, True),
        (False, True),
        (False, True),
        (False, True),
        (False, True),
        (None, "Always note the user's pets.\n- Record pet names exactly"),
        (False, True),
    )
]


SINGLE_THREAD: dict[str, Any] = {
    "multi_thread": False,
    "thread_title": False,
    "current_task": True,
    "suggested_response": True,
    "manage_working_memory": False,
    "instruction": None,
    "buffering": False,
}
"""The default Observer prompt: thread scope, both hints, no title or working memory."""


@pytest.mark.parametrize("flags", OBSERVER_VARIANTS)
def test_given_every_observer_prompt_variant_when_the_answer_repeats_it_then_nothing_is_left(
    flags: dict[str, Any],
) -> None:
    instructions, request = observer_variant(**dict(flags))
    raw = parse_observer_output(request)
    assert "half marathon" in raw.observations  # what the parser alone would commit
    parsed = without_prompt_text(raw, instructions)
    assert parsed.observations == ""
    assert parsed.threads == {} and parsed.thread_hints == {}
    assert parsed.current_task is None and parsed.suggested_response is None
    assert parsed.thread_title is None and parsed.working_memory is None


@pytest.mark.parametrize(
    ("multi_thread", "current_task", "suggested_response", "level"),
    list(
        itertools.product(
            (False, True), (False, True), (False, True), range(prompts.MAX_COMPRESSION_LEVEL + 1)
        )
    ),
)
def test_given_every_reflector_prompt_variant_when_the_answer_repeats_it_then_nothing_is_left(
    multi_thread: bool, current_task: bool, suggested_response: bool, level: int
) -> None:
    system = prompts.reflector_system_prompt(
        multi_thread=multi_thread,
        instruction="Keep pet names.",
        current_task=current_task,
        suggested_response=suggested_response,
    )
    observations = "Date: May 1, 2025\n* 🔴 (10:00) User lives in Oslo"
    request = f"{system}\n\n{prompts.reflector_task_prompt(observations, level=level)}"
    instructions = f"{system}\n\n{prompts.reflector_task_prompt('', level=level)}"
    raw = parse_reflector_output(request)
    assert "half marathon" in raw.observations
    assert without_prompt_text(raw, instructions).observations == ""


def test_given_real_lines_beside_the_example_when_cleaned_then_only_the_real_lines_and_hints_stay() -> None:
    instructions, _ = observer_variant(**{**SINGLE_THREAD, "thread_title": True})
    answer = (
        "<observations>\nDate: Mar 3, 2025\n"
        "* 🔴 (09:12) User stated they are training for a half marathon on April 27, 2025\n"
        "*   🔴 (09:13)   user prefers short answers without bullet lists\n"  # respaced, recased
        "\nDate: Mar 4, 2025\n"
        "* 🔴 (11:00) User stated their cat is called Tom\n</observations>\n"
        "<current-task>\nWhat the assistant is working on right now:\nPrimary: naming the cat's vet\n"
        "</current-task>\n"
        "<suggested-response>\nA short note on how the assistant should continue when the conversation "
        "resumes: what to say or do next.\n</suggested-response>"
    )
    parsed = without_prompt_text(parse_observer_output(answer), instructions)
    assert parsed.observations == "Date: Mar 4, 2025\n* 🔴 (11:00) User stated their cat is called Tom"
    assert parsed.current_task == "Primary: naming the cat's vet"
    assert parsed.suggested_response is None


def test_given_the_prior_current_task_repeated_when_cleaned_then_it_stays() -> None:
    """Only the instructions count: a hint the Observer keeps from the prior metadata is its answer."""
    instructions, _ = observer_variant(**SINGLE_THREAD)
    answer = "<observations>\n* 🔴 (10:00) User asked about Oslo\n</observations>\n<current-task>Primary: planning a trip</current-task>"
    parsed = without_prompt_text(parse_observer_output(answer), instructions)
    assert parsed.current_task == "Primary: planning a trip"


def echo_all(call: ChatCall) -> str:
    """The whole prompt back: every message's text, system first (``/tmp/tw2/badllm.py``'s echoall)."""
    return "\n".join(str(m.get("content", "")) for m in call.messages)


OBSERVATION = {"message_tokens": 300, "buffer_tokens": False}


@pytest.mark.parametrize(
    "options",
    [
        {"scope": "thread", "observation": OBSERVATION},
        {"scope": "resource", "observation": OBSERVATION},
        {
            "scope": "thread",
            "observation": {**OBSERVATION, "thread_title": True, "manage_working_memory": True},
        },
        {
            "scope": "thread",
            "observation": {
                **OBSERVATION,
                "continuation_hints": {"current_task": False, "suggested_response": False},
            },
        },
        {"scope": "thread", "observation": {"message_tokens": 2_000, "buffer_tokens": 0.2}},
    ],
    ids=["thread", "resource", "title-and-working-memory", "no-hints", "buffered"],
)
def test_given_an_observer_that_repeats_its_prompt_when_observing_then_nothing_is_committed(
    options: dict[str, Any],
) -> None:
    chat = ScriptedChatModel(respond=echo_all)
    with om_memory(chat, observational_memory=options, working_memory={"enabled": True}) as memory:
        for i in range(6):
            memory.save_messages(
                thread_id=T, resource_id=R, messages=[f"I like tea, turn {i}. " + "word " * 80]
            )
        memory.settled(30)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert chat.count("observer") >= 2
        assert rec is not None
        assert rec.cursor == {}  # not moved past the real messages
        assert rec.active_observations == ""
        assert not any(c.observations.strip() for c in rec.buffered_chunks)
        assert rec.current_task is None and rec.suggested_response is None
        assert rec.failure_count >= 1 and (rec.last_error or "").startswith("ObservationFailed")
        shown = memory.context(thread_id=T, resource_id=R, message="hi").to_openai()
        text = "\n".join(str(m["content"]) for m in shown["messages"])
        assert not any(fact in text for fact in EXAMPLE_FACTS)
        assert "turn 0" in text  # the real messages are still unobserved history
        assert memory.get_thread(thread_id=T, resource_id=R).title == ""
        wm = memory.get_working_memory(thread_id=T, resource_id=R) or ""
        assert "rewritten in full" not in wm


def test_given_a_reflector_that_repeats_its_prompt_when_reflecting_then_the_log_is_unchanged() -> None:
    def answer(call: ChatCall) -> str:
        if call.kind == "reflector":
            return echo_all(call)
        return chat.observe(call.last_content)  # the built-in Observer

    # a log larger than the prompt's example, all 🟡: only the prompt-text check can refuse the echo
    chat = ScriptedChatModel(respond=answer, words=40)
    options = {
        "observation": {"message_tokens": 500, "buffer_tokens": False},
        "reflection": {"observation_tokens": 700},
    }
    with om_memory(chat, observational_memory=options) as memory:
        for i in range(40):
            memory.save_messages(
                thread_id=T,
                resource_id=R,
                messages=[f"I like tea, turn {i}. " + " ".join(f"w{i}x{j}" for j in range(40))],
            )
        memory.settled(30)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert chat.count("reflector") >= 1
        assert rec is not None and "I like tea, turn" in rec.active_observations  # the Observer's log
        assert (rec.last_error or "").startswith("ReflectionFailed")
        assert not any(fact in rec.active_observations for fact in EXAMPLE_FACTS)
