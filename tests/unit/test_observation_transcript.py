"""The Observer transcript, its batches under a token cap, message token counts (spec §2.9.3, §2.9.5) and
temporal-gap markers (spec §2.9.7)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memstack.context import render_openai
from memstack.locomo import load
from memstack.model import (
    Author,
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from memstack.observation.temporal import (
    MIN_TEMPORAL_GAP,
    format_timestamp,
    gap_text,
    is_temporal_marker,
    marker_metadata,
    temporal_marker,
)
from memstack.observation.transcript import (
    count_message_tokens,
    format_transcript,
    thread_block,
    transcript_batches,
    truncate_to_tokens,
)
from memstack.tokens import default_tokenizer

DATA = Path(__file__).resolve().parents[1] / "data" / "locomo-excerpt.json"
T0 = datetime(2025, 12, 4, 14, 30, tzinfo=UTC)
TOK = default_tokenizer()


def msg(seq: int, role: str, *parts: Part | str, at: timedelta = timedelta(), **extra: Any) -> Message:
    return Message(
        id=f"m{seq}",
        thread_id="t",
        resource_id="r",
        role=role,
        parts=tuple(TextPart(text=p) if isinstance(p, str) else p for p in parts),
        created_at=T0 + at,
        seq=seq,
        **extra,
    )


# --- format ----------------------------------------------------------------------------------------------


def test_given_a_turn_with_tools_when_formatted_then_the_observer_format() -> None:
    messages = [
        msg(1, "user", "I moved to Lisbon"),
        msg(2, "assistant", "Congratulations!", at=timedelta(seconds=30)),
        msg(
            3,
            "assistant",
            ToolCallPart(id="c1", name="weather", args={"city": "Lisbon"}),
            at=timedelta(minutes=1),
        ),
        msg(4, "tool", ToolResultPart(tool_call_id="c1", result={"temp_c": 21}), at=timedelta(minutes=1)),
        msg(5, "assistant", "It is 21 °C there.", at=timedelta(minutes=2)),
    ]
    assert format_transcript(messages, tokenizer=TOK) == (
        "Dec 4 2025:\n"
        "User (14:30): I moved to Lisbon\n"
        "Assistant: Congratulations!\n"
        "Assistant (14:31):\n"
        'Tool Call weather: {"city": "Lisbon"}\n'
        'Tool Result weather: {"temp_c": 21}\n'
        "Assistant (14:32): It is 21 °C there."
    )


def test_given_a_new_day_when_formatted_then_a_date_line_and_the_time_again() -> None:
    messages = [msg(1, "user", "late"), msg(2, "user", "next day", at=timedelta(days=1))]
    assert format_transcript(messages, tokenizer=TOK) == (
        "Dec 4 2025:\nUser (14:30): late\nDec 5 2025:\nUser (14:30): next day"
    )


def test_given_attachments_reasoning_errors_and_authors_when_formatted_then_placeholders_and_labels() -> None:
    messages = [
        msg(
            1,
            "user",
            "see these",
            ImagePart(url="s3://b/cat.png", caption="my cat"),
            FilePart(url="s3://b/cv.pdf", media_type="application/pdf", name="cv.pdf"),
            ImagePart(url="https://x/y.png"),
            author=Author(id="u1", name="Ana"),
        ),
        msg(
            2,
            "assistant",
            ReasoningPart(text="thinking about cats"),
            ToolCallPart(id="c9", name="lookup", args={}),
            ToolResultPart(tool_call_id="c9", name="lookup", result="boom", is_error=True),
        ),
    ]
    assert format_transcript(messages, tokenizer=TOK) == (
        "Dec 4 2025:\n"
        "User (Ana) (14:30): see these\n"
        "[Image #1: my cat]\n"
        "[File #1: cv.pdf]\n"
        "[Image #2: https://x/y.png]\n"
        "Assistant:\n"
        "Reasoning: thinking about cats\n"
        "Tool Call lookup: {}\n"
        "Tool Error lookup: boom"
    )


def test_given_a_repeated_tool_call_id_when_formatted_then_shown_once() -> None:
    call = ToolCallPart(id="c1", name="search", args={"q": "x"})
    result = ToolResultPart(tool_call_id="c1", name="search", result=[1])
    text = format_transcript(
        [msg(1, "assistant", call, result), msg(2, "assistant", call, result)], tokenizer=TOK
    )
    assert text.count("Tool Call search") == 1 and text.count("Tool Result search") == 1


def test_given_a_huge_tool_result_when_formatted_then_cut_to_the_token_limit_with_a_marker() -> None:
    big = " ".join(f"row{i}" for i in range(20_000))
    text = format_transcript(
        [msg(1, "tool", ToolResultPart(tool_call_id="c", name="sql", result=big))],
        tokenizer=TOK,
        tool_result_max_tokens=500,
    )
    line = text.split("\n")[1]
    assert line.startswith("Tool Result sql: row0 row1")
    assert re.search(r"… \[truncated: the result is \d+ tokens, 500 shown\]$", line)
    shown = line.removeprefix("Tool Result sql: ").split(" … [truncated")[0]
    assert TOK.count(shown) <= 500 and TOK.count(shown) >= 490


def test_given_a_temporal_marker_message_when_formatted_then_its_text_alone() -> None:
    earlier = msg(1, "user", "hello")
    later = msg(3, "user", "back again", at=timedelta(hours=2, minutes=5))
    marker_text = temporal_marker(earlier, later)
    assert marker_text is not None
    marker = msg(
        2, "system", marker_text, at=timedelta(hours=2, minutes=5), metadata=marker_metadata(earlier, later)
    )
    assert is_temporal_marker(marker) and not is_temporal_marker(later)
    assert format_transcript([earlier, marker, later], tokenizer=TOK) == (
        "Dec 4 2025:\nUser (14:30): hello\n2 hours 5 minutes later — Thu, Dec 4, 2025, 4:35 PM UTC\nUser (16:35): back again"
    )


def test_given_a_thread_id_when_thread_block_then_wrapped_and_escaped() -> None:
    assert thread_block('a"b', "x") == '<thread id="a&quot;b">\nx\n</thread>'


# --- batches ---------------------------------------------------------------------------------------------


def _locomo_messages() -> list[Message]:
    (conv,) = load(DATA)
    out: list[Message] = []
    for turns in conv.sessions.values():
        for turn in turns:
            out.append(
                Message(
                    id=turn.message_id,
                    thread_id="t",
                    resource_id="r",
                    role=turn.role,
                    parts=(TextPart(text=turn.text),),
                    created_at=turn.created_at,
                    seq=len(out) + 1,
                )
            )
    return out


def test_given_real_turns_when_batched_then_every_message_once_in_order_and_each_batch_fits() -> None:
    messages = _locomo_messages()
    batches = transcript_batches(messages, tokenizer=TOK, max_tokens=200)
    assert len(batches) >= 3
    assert [i for b in batches for i in b.message_ids] == [m.id for m in messages]
    for batch in batches:
        assert batch.tokens == TOK.count(batch.text) <= 200
        assert re.match(r"[A-Z][a-z]{2} \d{1,2} \d{4}:\n\S+ \(\d\d:\d\d\): ", batch.text), batch.text[:40]
        assert batch.first_seq == int(messages[[m.id for m in messages].index(batch.message_ids[0])].seq)
    assert batches[0].first_seq == 1 and batches[-1].last_seq == len(messages)


def test_given_everything_fits_when_batched_then_one_batch_equal_to_the_transcript() -> None:
    messages = _locomo_messages()
    (batch,) = transcript_batches(messages, tokenizer=TOK, max_tokens=100_000)
    assert batch.text == format_transcript(messages, tokenizer=TOK)


def test_given_a_50k_token_message_when_batched_then_parts_each_fit_and_cover_the_text() -> None:
    words = " ".join(f"word{i}" for i in range(50_000))
    assert TOK.count(words) >= 50_000
    messages = [
        msg(1, "user", "before"),
        msg(2, "user", words, at=timedelta(minutes=1)),
        msg(3, "user", "after"),
    ]
    batches = transcript_batches(messages, tokenizer=TOK, max_tokens=10_000)
    parts = [b for b in batches if b.message_ids == ["m2"]]
    assert len(parts) >= 5
    assert batches[0].message_ids == ["m1"] and batches[-1].message_ids == ["m3"]
    pieces = []
    for i, batch in enumerate(parts, start=1):
        assert batch.tokens <= 10_000
        header = f"Dec 4 2025:\nUser (14:31) (part {i} of {len(parts)}): "
        assert batch.text.startswith(header)
        pieces.append(batch.text.removeprefix(header))
    assert "".join(pieces) == words


def test_given_the_same_input_when_batched_twice_then_identical() -> None:
    messages = _locomo_messages()
    assert transcript_batches(messages, tokenizer=TOK, max_tokens=300) == transcript_batches(
        messages, tokenizer=TOK, max_tokens=300
    )


def test_given_messages_that_show_nothing_when_batched_then_still_covered() -> None:
    empty = msg(1, "system", "   ")
    messages = [empty, msg(2, "user", "hi"), msg(3, "system", "")]
    (batch,) = transcript_batches(messages, tokenizer=TOK, max_tokens=100)
    assert batch.message_ids == ["m1", "m2", "m3"] and (batch.first_seq, batch.last_seq) == (1, 3)
    (only,) = transcript_batches([empty], tokenizer=TOK, max_tokens=100)
    assert only.text == "" and only.tokens == 0 and only.message_ids == ["m1"]
    assert transcript_batches([], tokenizer=TOK, max_tokens=100) == []


def test_given_a_tiny_cap_when_batched_then_value_error() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        transcript_batches([msg(1, "user", "x")], tokenizer=TOK, max_tokens=99)


def test_given_a_text_when_truncated_to_tokens_then_longest_fitting_prefix() -> None:
    text = "alpha beta gamma " * 1_000
    cut = truncate_to_tokens(text, 100, TOK)
    assert text.startswith(cut) and TOK.count(cut) <= 100 < TOK.count(text[: len(cut) + 1])
    assert truncate_to_tokens("short", 100, TOK) == "short"
    assert truncate_to_tokens("short", 0, TOK) == ""


# --- token counts ------------------------------------------------------------------------------------------


def test_given_text_messages_when_counted_then_text_plus_four_per_message() -> None:
    messages = [msg(1, "user", "hello there"), msg(2, "assistant", "general kenobi")]
    expected = TOK.count("hello there") + TOK.count("general kenobi") + 8
    assert count_message_tokens(messages, TOK) == expected


def test_given_a_paired_tool_call_when_counted_then_it_matches_the_rendered_chat_messages() -> None:
    messages = [
        msg(1, "user", "weather?"),
        msg(2, "assistant", ToolCallPart(id="c1", name="weather", args={"city": "Lisbon"})),
        msg(3, "tool", ToolResultPart(tool_call_id="c1", name="weather", result={"temp_c": 21})),
    ]
    rendered = render_openai([], messages)
    # the chat shape merges the result into one "tool" message per call: same content tokens and count
    from memstack.context import count_tokens

    assert count_message_tokens(messages, TOK) == count_tokens(TOK, rendered, [])


def test_given_reasoning_and_images_when_counted_then_reasoning_skipped_images_flat() -> None:
    plain = count_message_tokens([msg(1, "user", "look")], TOK)
    with_extras = count_message_tokens(
        [
            msg(
                1,
                "user",
                "look",
                ReasoningPart(text="long reasoning " * 50),
                ImagePart(url="https://x/a.png"),
            )
        ],
        TOK,
    )
    assert with_extras == plain + 765


# --- temporal markers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        (timedelta(seconds=30), "less than a minute later"),
        (timedelta(minutes=1), "1 minute later"),
        (timedelta(minutes=10, seconds=59), "10 minutes later"),
        (timedelta(hours=1), "1 hour later"),
        (timedelta(hours=2, minutes=5, seconds=59), "2 hours 5 minutes later"),
        (timedelta(days=1, hours=1, minutes=30), "1 day 1 hour later"),
        (timedelta(days=3, minutes=59), "3 days later"),
        (timedelta(days=15, hours=3), "2 weeks 1 day later"),
        (timedelta(weeks=10), "10 weeks later"),
    ],
)
def test_given_a_gap_when_gap_text_then_at_most_two_units_rounded_down(
    delta: timedelta, expected: str
) -> None:
    assert gap_text(delta) == expected


def test_given_messages_under_ten_minutes_apart_when_marker_then_none() -> None:
    first = msg(1, "user", "a")
    assert temporal_marker(None, first) is None
    assert temporal_marker(first, msg(2, "user", "b", at=MIN_TEMPORAL_GAP - timedelta(seconds=1))) is None
    assert marker_metadata(first, msg(2, "user", "b", at=timedelta(minutes=3))) is None


def test_given_a_ten_minute_gap_when_marker_then_gap_text_and_timestamp() -> None:
    first = msg(1, "user", "a")
    second = msg(2, "user", "b", at=MIN_TEMPORAL_GAP)
    assert temporal_marker(first, second) == "10 minutes later — Thu, Dec 4, 2025, 2:40 PM UTC"
    meta = marker_metadata(first, second)
    assert meta == {
        "reminder_type": "temporal-gap",
        "gap_text": "10 minutes later",
        "gap_ms": 600_000,
        "timestamp": "Thu, Dec 4, 2025, 2:40 PM UTC",
        "timestamp_ms": int((T0 + MIN_TEMPORAL_GAP).timestamp() * 1000),
        "precedes_message_id": "m2",
    }


def test_given_midnight_and_noon_when_timestamp_then_12_hour_clock() -> None:
    assert format_timestamp(datetime(2024, 2, 29, 0, 5, tzinfo=UTC)) == "Thu, Feb 29, 2024, 12:05 AM UTC"
    assert format_timestamp(datetime(2024, 3, 3, 12, 0)) == "Sun, Mar 3, 2024, 12:00 PM UTC"
