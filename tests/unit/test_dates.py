"""Dates as recall reads them (memstack.dates): the words a message's date is indexed with, and the time
range a query names, in the caller's time zone."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from memstack.config import SemanticRecallOptions
from memstack.dates import date_words, query_time_range, time_zone
from memstack.errors import InvalidInput

NOW = datetime(2023, 10, 20, 15, 0, tzinfo=UTC)  # a Friday


def span(text: str, now: datetime = NOW, zone: str = "UTC") -> tuple[str, str, str, bool] | None:
    found = query_time_range(text, now, time_zone(zone))
    if found is None:
        return None
    return (found.start.isoformat(), found.end.isoformat(), found.words, found.relative)


def test_given_a_moment_when_written_in_words_then_month_day_and_year_in_utc() -> None:
    assert date_words(datetime(2023, 5, 8, 23, 30, tzinfo=ZoneInfo("America/New_York"))) == "May 9 2023"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did she paint on October 13, 2023?", ("2023-10-13", "2023-10-14", "October 13 2023")),
        ("What did Gina find on 1 February, 2023?", ("2023-02-01", "2023-02-02", "February 1 2023")),
        ("what happened on 2023-05-08", ("2023-05-08", "2023-05-09", "May 8 2023")),
        ("What setback did she face in October 2023?", ("2023-10-01", "2023-11-01", "October 2023")),
        ("When did Melanie go camping in June?", ("2023-06-01", "2023-07-01", "June 2023")),
        ("plans for December?", ("2022-12-01", "2023-01-01", "December 2022")),
        ("trips in 2022", ("2022-01-01", "2023-01-01", "2022")),
    ],
)
def test_given_a_query_naming_a_date_when_read_then_its_range_is_the_latest_such_time_not_after_now(
    query: str, expected: tuple[str, str, str]
) -> None:
    found = span(query)
    assert found is not None, query
    start, end, words, relative = found
    assert (start[:10], end[:10], words) == expected
    assert not relative


def test_given_relative_times_when_read_then_ranges_are_calendar_units_before_now() -> None:
    assert span("what did I do yesterday")[:3] == (  # type: ignore[index]
        "2023-10-19T00:00:00+00:00",
        "2023-10-20T00:00:00+00:00",
        "October 19 2023",
    )
    last_week = span("the movie I saw last week")
    assert last_week is not None and last_week[:2] == (
        "2023-10-09T00:00:00+00:00",
        "2023-10-16T00:00:00+00:00",
    )
    assert last_week[3], "a relative time is marked so recall adds its words to the keyword query"
    assert span("a museum two months ago")[2] == "August 2023"  # type: ignore[index]
    assert span("3 days ago")[2] == "October 17 2023"  # type: ignore[index]


def test_given_a_time_still_to_come_when_read_then_no_range() -> None:
    assert span("what should I cook this weekend?") is None, "on a Friday the weekend has not begun"
    sunday = span("what did I cook this weekend?", datetime(2023, 10, 22, 12, tzinfo=UTC))
    assert sunday is not None and sunday[:2] == ("2023-10-21T00:00:00+00:00", "2023-10-23T00:00:00+00:00")


def test_given_a_time_zone_when_reading_yesterday_then_the_days_begin_at_its_midnight() -> None:
    late_in_tokyo = datetime(2023, 10, 20, 16, 0, tzinfo=UTC)  # already Oct 21, 01:00 in Tokyo
    found = span("yesterday", late_in_tokyo, "Asia/Tokyo")
    assert found is not None
    assert found[:2] == ("2023-10-19T15:00:00+00:00", "2023-10-20T15:00:00+00:00")


def test_given_month_names_that_are_words_when_not_used_as_dates_then_no_range() -> None:
    assert span("May I ask what you like to march for?") is None
    assert span("How is your sister doing?") is None
    assert span("what did we do in May")[2] == "May 2023"  # type: ignore[index]


def test_given_an_unknown_time_zone_when_given_as_an_option_then_invalid_input_names_it() -> None:
    with pytest.raises(InvalidInput) as caught:
        time_zone("Mars/Olympus")
    assert caught.value.field == "semantic_recall.time_zone"
    with pytest.raises(ValueError, match="unknown time zone"):
        SemanticRecallOptions(time_zone="Mars/Olympus")
    assert SemanticRecallOptions.model_validate({"now": "2023-10-20T15:00:00Z"}).now == NOW


def test_given_any_text_when_read_then_the_quick_scan_never_hides_a_time_a_reader_finds() -> None:
    """``query_time_range`` skips its readers when ``_ANY_TIME`` finds nothing: that scan must fire for
    every text some reader reads a time from (else a time in a query would be missed silently)."""
    from memstack import dates, locomo
    from memstack.demo import default_data_path

    readers = (
        dates._iso,
        dates._day_month,
        dates._month_year,
        dates._relative,
        dates._month_alone,
        dates._year,
    )
    today = NOW.date()
    texts = [q.text for conv in locomo.load(default_data_path()) for q in conv.questions]
    texts += [
        "what did we do last  night?",
        "PAST WEEKEND plans",
        "two weeks ago",
        "an year ago",
        "Sept. 3rd",
        "the 3rd of march",
        "in 2019",
        "١٢ ago",  # non-ASCII digits: the readers' \d takes them too
        "since Aug",
        "this Year",
    ]
    read = [t for t in texts if any(r(t, today) is not None for r in readers)]
    assert len(read) > 10, "the corpus must hold texts that name times"
    missed = [t for t in read if dates._ANY_TIME.search(t) is None]
    assert missed == []
    assert dates._ANY_TIME.search("How is your sister doing?") is None
