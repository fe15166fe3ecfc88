"""Thread titles (spec §2.6, §3.6): the title transcript and one generation through a scripted model."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from memstack.adapters.testing import ScriptedChatModel
from memstack.errors import Unavailable
from memstack.model import (
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from memstack.observation.prompts import TITLE_INSTRUCTIONS
from memstack.observation.titles import generate_title, title_transcript


def scripted(*answers: str) -> ScriptedChatModel:
    """A chat model that answers ``answers`` in order and records what it was asked."""
    return ScriptedChatModel(answers)


def msg(role: str, *parts: Part | str) -> Message:
    return Message(
        id=f"m-{role}",
        thread_id="t",
        resource_id="r",
        role=role,
        parts=tuple(TextPart(text=p) if isinstance(p, str) else p for p in parts),
        created_at=datetime(2025, 1, 1, tzinfo=UTC),
    )


def test_given_every_part_kind_when_title_transcript_then_spec_lines() -> None:
    messages = [
        msg(
            "user",
            "  Plan my trip to Porto  ",
            FilePart(url="s3://b/" + "x" * 200, media_type="application/pdf"),
        ),
        msg(
            "assistant",
            ReasoningPart(text="they want a plan"),
            ToolCallPart(id="c1", name="search", args={"q": "y" * 300}),
            "Sure.",
        ),
        msg("tool", ToolResultPart(tool_call_id="c1", result="z" * 300)),
        msg("user", ImagePart(url="https://x/map.png", media_type="image/png"), ""),
    ]
    lines = title_transcript(messages).split("\n")
    assert lines[0] == "User: Plan my trip to Porto"
    assert lines[1] == "User added application/pdf file: " + ("s3://b/" + "x" * 200)[:100]
    assert lines[2] == "Reasoning: they want a plan"
    assert (
        lines[3].startswith('Tool Call search: {"q": "yyy')
        and len(lines[3]) == len("Tool Call search: ") + 200
    )
    assert lines[4] == "Assistant: Sure."
    assert lines[5] == "Tool Result search: " + "z" * 200
    assert lines[6] == "User added image/png file: https://x/map.png"
    assert len(lines) == 7


def test_given_an_answer_when_generate_title_then_one_call_with_instructions_and_transcript() -> None:
    chat = scripted("Trip to Porto")
    assert generate_title(chat, [msg("user", "Plan my trip to Porto")]) == "Trip to Porto"
    (call,) = chat.calls
    assert call.messages == [
        {"role": "system", "content": TITLE_INSTRUCTIONS},
        {"role": "user", "content": "User: Plan my trip to Porto"},
    ]
    assert call.temperature is None and call.tools is None


def test_given_custom_instructions_when_generate_title_then_they_are_the_system_message() -> None:
    chat = scripted("Porto")
    generate_title(chat, [msg("user", "hi")], instructions="Three words, in French.")
    assert chat.calls[0].messages[0] == {"role": "system", "content": "Three words, in French."}


@pytest.mark.parametrize(
    ("answer", "title"),
    [
        ('"Trip to Porto"', "Trip to Porto"),
        ("<think>The user wants a title: trip.</think>\n\nTrip: Porto in May", "Trip Porto in May"),
        ("Title: Porto weekend\n\nThis title summarises the request.", "Porto weekend"),
        ("  ‘Garden plans’  ", "Garden plans"),
    ],
)
def test_given_a_messy_answer_when_generate_title_then_cleaned(answer: str, title: str) -> None:
    assert generate_title(scripted(answer), [msg("user", "x")]) == title


def test_given_a_long_answer_when_generate_title_then_cut_on_a_word_boundary() -> None:
    answer = "Planning a two week family holiday in northern Portugal with stops in Porto Braga and Guimaraes"
    title = generate_title(scripted(answer), [msg("user", "x")])
    assert len(title) <= 80
    assert answer.startswith(title) and answer[len(title)] == " "


@pytest.mark.parametrize("answer", ["", "   ", "<think>nothing to say</think>", '""'])
def test_given_an_empty_answer_when_generate_title_then_unavailable(answer: str) -> None:
    with pytest.raises(Unavailable, match="no title"):
        generate_title(scripted(answer), [msg("user", "x")])


def test_given_generate_title_when_an_untitled_thread_is_cloned_then_the_clone_is_titled_by_its_next_save() -> (
    None
):
    """An untitled clone stays untitled (not ``Clone of``), so ``generate_title`` titles it as it titles any
    untitled thread."""
    from memstack import Memory

    chat = scripted("Oslo trip")
    with Memory.local(
        ":memory:", embedder="hash", chat_model=chat, generate_title=True, background="inline"
    ) as memory:
        memory.create_thread(thread_id="src", resource_id="r")
        assert (
            memory.clone_thread(source_thread_id="src", resource_id="r", new_thread_id="cl").thread.title
            == ""
        )
        memory.save_messages(thread_id="cl", resource_id="r", messages=["Plan my trip to Oslo"])
        memory.settled()
        assert memory.get_thread(thread_id="cl", resource_id="r").title == "Oslo trip"


TRANSCRIPT_MESSAGE = "Plan my trip to Bergen in June, please. <b>bold</b>\n\nline2"


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("I'm sorry, but I can't help with that request.", "refusal"),
        ("Unfortunately, I cannot title this conversation.", "refusal"),
        ("<observations>\n* 🔴 (10:00) User fact number 0\n</observations>", "markup"),
        ('{"observations": ["user likes tea"], "note": "json instead"}', "markup"),
        ('[{"title": "Trip"}]', "markup"),
        ("User: Plan my trip to Bergen in June, please. <b>bold</b>\n\nline2", "echo of the transcript"),
        (TITLE_INSTRUCTIONS + "\nUser: Plan my trip", "echo of the prompt"),
        ("The user " + "wants help with many things " * 10, "over-long"),
        ("Bergen trip\n\n" + "An explanation of the title. " * 60, "over-long"),
    ],
)
def test_given_an_answer_that_is_not_a_title_when_generate_title_then_unavailable_and_nothing_returned(
    answer: str, problem: str
) -> None:
    with pytest.raises(Unavailable, match=f"not a title \\({problem}\\)"):
        generate_title(scripted(answer), [msg("user", TRANSCRIPT_MESSAGE)])


@pytest.mark.parametrize(
    "answer",
    ["Bergen trip in June", "Plan my trip to Bergen", "[Draft] Bergen itinerary", "2025 Bergen trip"],
)
def test_given_a_title_in_the_users_words_when_generate_title_then_it_is_kept(answer: str) -> None:
    assert generate_title(scripted(answer), [msg("user", TRANSCRIPT_MESSAGE)]) == answer


@pytest.mark.parametrize("bad", ["I'm sorry, but I can't help with that request.", '{"title": "x"}'])
def test_given_a_non_title_answer_when_saving_then_the_thread_stays_untitled_and_a_later_save_titles_it(
    bad: str,
) -> None:
    """A refused answer is a failed title call: not saved, tried again by a later save (at most once a
    minute: ``ObservationEngine.title_job``)."""
    from datetime import timedelta

    from memstack import Memory
    from memstack.model import utcnow

    class Later:
        def now(self) -> datetime:
            return utcnow() + timedelta(minutes=2)

    chat = scripted(bad)
    with Memory.local(
        ":memory:", embedder="hash", chat_model=chat, generate_title=True, background="inline"
    ) as memory:
        memory.save_messages(thread_id="t", resource_id="r", messages=[TRANSCRIPT_MESSAGE])
        memory.settled()
        assert memory.get_thread(thread_id="t", resource_id="r").title == ""
        memory.observation.clock = Later()  # the engine keys background jobs by its clock
        memory.save_messages(thread_id="t", resource_id="r", messages=["second message"])
        memory.settled()
        assert memory.get_thread(thread_id="t", resource_id="r").title == "Scripted title"


REMOVALS = ("delete_thread", "erase_resource", "delete_messages")


@pytest.mark.parametrize("removal", REMOVALS)
def test_given_a_title_in_flight_when_its_messages_are_removed_then_no_title_from_them_is_ever_set(
    tmp_path: object, removal: str
) -> None:
    """A title computed from messages deleted while the model was answering is not written: not on the
    thread whose message went, and not on a new thread made under the same id meanwhile (as the Observer's
    commits, docs/observational-memory.md "Guards")."""
    import threading
    from pathlib import Path

    from memstack import Memory

    asked, release = threading.Event(), threading.Event()

    def hold(call: object) -> None:
        if getattr(call, "kind", None) == "title":
            asked.set()
            release.wait(10)

    def title_of(call: object) -> str:  # the first words the user said, as a title model might answer
        said = re.search(r"User: (.*)", str(getattr(call, "last_content", "")))
        return " ".join(said.group(1).split()[:3]).title() if said else "Untitled"

    model = ScriptedChatModel(on_call=hold, respond=title_of)
    path = Path(str(tmp_path)) / "memory.db"
    with Memory.local(path, embedder="hash", chat_model=model, generate_title=True) as memory:
        memory.save_messages(
            thread_id="t",
            resource_id="u",
            messages=[{"id": "m1", "role": "user", "content": "my test results"}],
        )
        assert asked.wait(10)
        if removal == "delete_messages":
            assert memory.delete_messages(resource_id="u", message_ids=["m1"]) == 1
        else:
            getattr(memory, removal)(
                **({"thread_id": "t"} if removal == "delete_thread" else {}), resource_id="u"
            )
            memory.save_messages(thread_id="t", resource_id="u", messages=["let's plan a party"])
        release.set()
        memory.settled(10)
        # untitled: a later save titles it from what it holds then (title_job: at most once a minute)
        assert memory.get_thread(thread_id="t", resource_id="u").title == ""  # type: ignore[union-attr]
