"""Observer/Reflector output parsing, degenerate detection, the actor's view of observations and the
Observer's view of previous observations (spec §2.9.5)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstack.locomo import load
from memstack.observation.parsing import (
    MAX_LINE_CHARS,
    add_relative_time,
    clean_title,
    is_degenerate,
    optimize_for_context,
    parse_observer_output,
    parse_reflector_output,
    strip_group_tags,
    truncate_observations,
)
from memstack.tokens import default_tokenizer

DATA = Path(__file__).resolve().parents[1] / "data" / "locomo-excerpt.json"
NOW = datetime(2023, 5, 20, 12, 0, tzinfo=UTC)

# --- parsing -------------------------------------------------------------------------------------------


def test_given_a_full_answer_when_parsed_then_observations_and_hints() -> None:
    out = parse_observer_output(
        "<observations>\nDate: May 8, 2023\n* 🔴 (13:56) User stated they went to a support group\n"
        "</observations>\n\n<current-task>\n  Primary: listening  \n</current-task>\n"
        "<suggested-response>Ask how it went</suggested-response>\n"
        "<thread-title>Support group chat</thread-title>\n"
    )
    assert out.observations == "Date: May 8, 2023\n* 🔴 (13:56) User stated they went to a support group"
    assert out.current_task == "Primary: listening"
    assert out.suggested_response == "Ask how it went"
    assert out.thread_title == "Support group chat"
    assert out.working_memory is None
    assert out.threads == {}


def test_given_two_observation_blocks_when_parsed_then_joined_in_order() -> None:
    out = parse_observer_output(
        "<observations>\n* 🔴 a\n</observations>\nsome chatter\n<observations>\n* 🟡 b\n</observations>"
    )
    assert out.observations == "* 🔴 a\n* 🟡 b"


def test_given_a_tag_not_at_line_start_when_parsed_then_it_is_not_a_block() -> None:
    out = parse_observer_output(
        "I will write <observations> now\n<observations>\n* 🔴 real\n</observations>\n"
        "Note: use <current-task> tags. <current-task>inline</current-task>"
    )
    assert out.observations == "* 🔴 real"
    assert out.current_task is None


def test_given_think_tags_when_parsed_then_reasoning_is_ignored() -> None:
    out = parse_observer_output(
        "<think>\n<observations>\n* 🔴 draft\n</observations>\n</think>\n<observations>\n* 🔴 final\n</observations>"
    )
    assert out.observations == "* 🔴 final"


def test_given_reasoning_before_a_lone_closing_think_when_parsed_then_it_is_dropped() -> None:
    out = parse_observer_output(
        "let me think… * 🔴 wrong\n</think>\n<observations>\n* 🔴 right\n</observations>"
    )
    assert out.observations == "* 🔴 right"


def test_given_no_tags_when_parsed_then_observation_like_lines_are_kept() -> None:
    out = parse_observer_output(
        "Sure! Here are the observations:\n\nDate: May 8, 2023\n* 🔴 (13:56) User likes tea\n"
        "  * -> especially green tea\n- 🟡 (14:00) Assistant suggested a shop\n\nLet me know if you need more."
    )
    assert out.observations == (
        "Date: May 8, 2023\n* 🔴 (13:56) User likes tea\n  * -> especially green tea\n- 🟡 (14:00) Assistant suggested a shop"
    )


def test_given_no_tags_and_hints_when_parsed_then_hints_do_not_leak_into_observations() -> None:
    out = parse_observer_output("* 🔴 User likes tea\n<current-task>\n- Primary: tea\n</current-task>")
    assert out.observations == "* 🔴 User likes tea"
    assert out.current_task == "- Primary: tea"


def test_given_an_unclosed_observations_block_when_parsed_then_it_ends_at_the_next_section() -> None:
    out = parse_observer_output("<observations>\n* 🔴 a\n* 🟡 b\n<current-task>Primary: x</current-task>")
    assert out.observations == "* 🔴 a\n* 🟡 b"
    assert out.current_task == "Primary: x"


def test_given_a_very_long_line_when_parsed_then_cut_with_a_marker() -> None:
    out = parse_observer_output(f"<observations>\n* 🔴 {'x' * 20_000}\n* 🟡 short\n</observations>")
    first, second = out.observations.split("\n")
    assert first.endswith(" … [truncated]")
    assert len(first) == MAX_LINE_CHARS + len(" … [truncated]")
    assert second == "* 🟡 short"


def test_given_empty_or_blank_hints_when_parsed_then_none() -> None:
    out = parse_observer_output(
        "<observations>\n* 🔴 a\n</observations>\n<current-task>   </current-task>\n<suggested-response></suggested-response>"
    )
    assert out.current_task is None and out.suggested_response is None


def test_given_a_long_quoted_title_when_parsed_then_cleaned_and_at_most_80_chars() -> None:
    title = '"Planning: ' + "a very long trip across many countries " * 4 + '"'
    out = parse_observer_output(
        f"<observations>\n* 🔴 a\n</observations>\n<thread-title>{title}</thread-title>"
    )
    assert out.thread_title is not None
    assert len(out.thread_title) <= 80
    assert out.thread_title.startswith("Planning a very long trip")
    assert '"' not in out.thread_title and ":" not in out.thread_title
    assert not out.thread_title.endswith(" ")


def test_given_working_memory_when_parsed_then_kept_verbatim_trimmed() -> None:
    wm = "# User\n- **Name**: Caroline\n- **Likes**: painting"
    out = parse_observer_output(
        f"<observations>\n* 🔴 a\n</observations>\n<working-memory>\n{wm}\n</working-memory>"
    )
    assert out.working_memory == wm


def test_given_multi_thread_output_when_parsed_then_per_thread_text_and_hints() -> None:
    out = parse_observer_output(
        "<observations>\n"
        '<thread id="t-1">\nDate: May 8, 2023\n* 🔴 (13:56) User likes tea\n'
        "<current-task>Primary: tea</current-task>\n</thread>\n"
        '<thread id="a&amp;b">\n* 🟡 (14:00) User asked about cake\n</thread>\n'
        "</observations>"
    )
    assert out.threads == {
        "t-1": "Date: May 8, 2023\n* 🔴 (13:56) User likes tea",
        "a&b": "* 🟡 (14:00) User asked about cake",
    }
    assert out.thread_hints == {"t-1": {"current_task": "Primary: tea"}}
    assert "<current-task>" not in out.observations
    assert '<thread id="t-1">' in out.observations and '<thread id="a&amp;b">' in out.observations
    assert out.current_task is None


def test_given_nothing_usable_when_parsed_then_empty_observations_and_no_error() -> None:
    for text in ("", "I cannot help with that.", "<think>only thinking</think>"):
        out = parse_observer_output(text)
        assert out.observations == ""


def test_given_a_reflection_when_parsed_then_same_rules_as_the_observer() -> None:
    text = "<think>x</think>\n<observations>\n* 🔴 merged\n</observations>\n<current-task>Primary: y</current-task>"
    assert parse_reflector_output(text) == parse_observer_output(text)


def test_given_code_fences_around_output_when_parsed_then_fences_dropped() -> None:
    out = parse_observer_output("```xml\n<observations>\n* 🔴 a\n</observations>\n```")
    assert out.observations == "* 🔴 a"


def test_given_title_answers_when_cleaned_then_the_title_alone() -> None:
    assert clean_title('Title: "Trip to Porto"') == "Trip to Porto"
    assert clean_title("<think>hmm</think>\n\n  **Budget: review**  \nextra line") == "Budget review"
    assert clean_title("'Garden plans'") == "Garden plans"
    assert clean_title("   ") == ""
    assert clean_title("x" * 100) == "x" * 80


# --- degenerate ----------------------------------------------------------------------------------------


def _locomo_log() -> str:
    (conv,) = load(DATA)
    lines: list[str] = []
    day = None
    for turns in conv.sessions.values():
        for turn in turns:
            if turn.created_at.date() != day:
                day = turn.created_at.date()
                lines.append(f"\nDate: {turn.created_at:%b} {day.day}, {day.year}")
            speaker, text = turn.text.split(": ", 1)
            lines.append(f"* 🔴 ({turn.created_at:%H:%M}) {speaker} said {text[:160]}")
    return "\n".join(lines).strip()


def test_given_a_real_observation_log_when_checked_then_not_degenerate() -> None:
    log = _locomo_log()
    assert len(log) >= 3_000
    assert not is_degenerate(log)
    assert not is_degenerate(log[:3_000])


def test_given_a_repetition_loop_when_checked_then_degenerate() -> None:
    loop = "* 🟡 (10:00) Assistant checked the configuration file again and found nothing new\n" * 60
    assert is_degenerate("<observations>\n" + loop)


def test_given_a_loop_with_an_odd_period_when_checked_then_degenerate_by_windows() -> None:
    text = "intro " * 10 + "the same thirty-seven chars looping " * 200  # one long line, period 37
    assert "\n" not in text and is_degenerate(text)


def test_given_a_huge_single_line_when_checked_then_degenerate() -> None:
    import random

    rng = random.Random(7)
    line = "".join(rng.choice("abcdefghij ") for _ in range(50_001))
    assert is_degenerate(line)
    assert not is_degenerate(line[:49_999].replace(" ", "\n"))


def test_given_mostly_duplicated_lines_under_2000_chars_when_checked_then_degenerate() -> None:
    lines = ["* 🔴 User repeated the very same statement"] * 8 + [
        f"* 🟡 distinct observation number {i}" for i in range(4)
    ]
    text = "\n".join(lines)
    assert len(text) < 2_000 and is_degenerate(text)


def test_given_few_duplicated_lines_when_checked_then_not_degenerate() -> None:
    text = "\n".join(["* 🔴 User repeated the very same statement"] * 5)
    assert not is_degenerate(text)  # fewer than 10 long lines: too few to judge


# --- the actor's view -------------------------------------------------------------------------------------


def test_given_observations_when_optimized_then_markers_tags_arrows_and_spaces_are_reduced() -> None:
    text = (
        '<observation-group id="g1" range="m1:m3">\n'
        "Date: May 8, 2023\n"
        "* 🔴 (13:56) User   likes [beverage, preference] tea\n"
        "* 🟡 (14:00) Assistant searched shops [tool]\n"
        "  * -> found [Tea House](https://tea.example) and [3 items collapsed]\n"
        "* 🟢 (14:05) User maybe likes coffee   \n"
        "  * ✅ Shop list sent [Image #1: menu.png]\n\n\n\n"
        "</observation-group>"
    )
    assert optimize_for_context(text) == (
        '<observation-group id="g1" range="m1:m3">\n'
        "Date: May 8, 2023\n"
        "* 🔴 (13:56) User likes tea\n"
        "* (14:00) Assistant searched shops\n"
        "  * found [Tea House](https://tea.example) and [3 items collapsed]\n"
        "* (14:05) User maybe likes coffee\n"
        "  * ✅ Shop list sent [Image #1: menu.png]\n\n"
        "</observation-group>"
    )


def test_given_date_groups_when_relative_time_added_then_headers_and_gap_lines() -> None:
    text = (
        "Date: May 1, 2023\n* 🔴 (10:00) a\n\n"
        "Date: May 2, 2023\n* 🔴 (10:00) b\n\n"
        "Date: May 5, 2023\n* 🔴 (10:00) c\n\n"
        "Date: May 19, 2023\n* 🔴 (10:00) d\n"
        "Date: May 20, 2023\n* 🔴 (10:00) e"
    )
    assert add_relative_time(text, NOW) == (
        "Date: May 1, 2023 (2 weeks ago)\n* 🔴 (10:00) a\n\n"
        "Date: May 2, 2023 (2 weeks ago)\n* 🔴 (10:00) b\n\n"
        "[3 days later]\nDate: May 5, 2023 (2 weeks ago)\n* 🔴 (10:00) c\n\n"
        "[2 weeks later]\nDate: May 19, 2023 (yesterday)\n* 🔴 (10:00) d\n"
        "Date: May 20, 2023 (today)\n* 🔴 (10:00) e"
    )


def test_given_annotated_observations_when_relative_time_added_again_then_unchanged() -> None:
    text = "Date: Jan 5, 2023\n* 🔴 a (meaning Jan 9, 2023)\n\nDate: Mar 31, 2023\n* 🔴 b"
    once = add_relative_time(text, NOW)
    assert add_relative_time(once, NOW) == once


def test_given_calendar_edges_when_relative_time_added_then_months_and_years_are_calendar_months() -> None:
    text = (
        "Date: Jan 31, 2023\n* a\nDate: Mar 30, 2023\n* b\nDate: May 20, 2021\n* c\nDate: June 3, 2023\n* d"
    )
    lines = add_relative_time(text, NOW).split("\n")
    assert lines[0] == "Date: Jan 31, 2023 (3 months ago)"  # Apr 31 does not exist; May 20 < the 31st
    assert lines[2] == "[1 month later]"  # Jan 31 → Mar 30: two calendar months less a day
    assert lines[3] == "Date: Mar 30, 2023 (1 month ago)"
    assert lines[5] == "Date: May 20, 2021 (2 years ago)"  # out of order: no gap line before it
    assert lines[7] == "[2 years later]"
    assert lines[8] == "Date: June 3, 2023 (in 2 weeks)"


def test_given_meaning_dates_when_relative_time_added_then_past_intents_likely_happened() -> None:
    text = (
        "Date: May 1, 2023\n"
        "* 🔴 (10:00) User stated they will run a 5k (meaning April 29, 2023)\n"
        "* 🔴 (10:01) User adopted a cat (estimated April 10, 2023)\n"
        "* 🔴 (10:02) User plans to travel (meaning May 25, 2023)\n"
        "* 🔴 (10:03) User said something (meaning sometime soon)"
    )
    lines = add_relative_time(text, NOW).split("\n")
    assert lines[1].endswith("(meaning April 29, 2023 - 3 weeks ago, likely already happened)")
    assert lines[2].endswith("(estimated April 10, 2023 - 1 month ago)")
    assert lines[3].endswith("(meaning May 25, 2023 - in 5 days)")
    assert lines[4].endswith("(meaning sometime soon)")


def test_given_other_date_forms_when_relative_time_added_then_parsed() -> None:
    text = (
        "Date: 2023-05-15\n* a\nDate: Tuesday, May 16, 2023\n* b\nDate: 17 May 2023\n* c\nDate: Someday\n* d"
    )
    out = add_relative_time(text, NOW).split("\n")
    assert out[0] == "Date: 2023-05-15 (5 days ago)"
    assert out[2] == "Date: Tuesday, May 16, 2023 (4 days ago)"
    assert out[4] == "Date: 17 May 2023 (3 days ago)"
    assert out[6] == "Date: Someday"


# --- the Observer's view of previous observations ----------------------------------------------------------


def test_given_text_within_budget_when_truncated_then_unchanged() -> None:
    tok = default_tokenizer()
    assert truncate_observations("* 🔴 a\n* 🟡 b", 100, tok) == ("* 🔴 a\n* 🟡 b", False)


def test_given_budget_zero_when_truncated_then_omitted() -> None:
    tok = default_tokenizer()
    assert truncate_observations("* 🔴 a", 0, tok) == ("", True)
    assert truncate_observations("", 0, tok) == ("", False)
    with pytest.raises(ValueError, match="budget"):
        truncate_observations("x", -1, tok)


def test_given_a_long_log_when_truncated_then_tail_and_old_red_lines_within_budget() -> None:
    tok = default_tokenizer()
    lines = ["Date: Jan 1, 2023", "* 🔴 (09:00) User's name is Caroline"]
    lines += [
        f"* 🟡 (10:{i % 60:02d}) Assistant looked at file number {i} of the archive" for i in range(200)
    ]
    lines += ["Date: Jan 2, 2023"] + [f"* 🟡 (11:{i % 60:02d}) latest item {i}" for i in range(10)]
    text = "\n".join(lines)
    kept, truncated = truncate_observations(text, 300, tok)
    assert truncated
    assert tok.count(kept) <= 300
    out = kept.split("\n")
    assert out[:2] == ["Date: Jan 1, 2023", "* 🔴 (09:00) User's name is Caroline"]
    assert out[-1] == "* 🟡 (11:09) latest item 9"
    assert any(line.startswith("[… ") and "omitted" in line for line in out)
    assert "file number 0 " not in kept


def test_given_a_tiny_budget_when_truncated_then_never_over_budget() -> None:
    tok = default_tokenizer()
    text = "\n".join(f"* 🔴 important fact number {i} about the user" for i in range(50))
    for budget in (1, 5, 20, 60):
        kept, truncated = truncate_observations(text, budget, tok)
        assert truncated and tok.count(kept) <= budget


def test_given_group_tags_when_stripped_then_content_kept() -> None:
    text = '<observation-group id="a" range="m1:m2">\n* 🔴 x\n</observation-group>\ninline <observation-group id="b">y</observation-group>'
    assert strip_group_tags(text) == "* 🔴 x\ninline y"
