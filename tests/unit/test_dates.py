"""Dates as recall reads them (memstack.dates): the words a message's date is indexed with, and the time
range a query names, in the caller's time zone."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from memstack.config import SemanticRecallOptions
from memstack.dates import MONTHS, date_words, keyword_query, query_time_range, time_zone
from memstack.errors import InvalidInput

NOW = datetime(2023, 10, 20, 15, 0, tzinfo=UTC)  # a Friday


def span(text: str, now: datetime = NOW, zone: str = "UTC") -> tuple[str, str, str] | None:
    found = query_time_range(text, now, time_zone(zone))
    if found is None:
        return None
    return (found.start.isoformat(), found.end.isoformat(), found.words)


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
    start, end, words = found
    assert (start[:10], end[:10], words) == expected


def test_given_relative_times_when_read_then_ranges_are_calendar_units_before_now() -> None:
    assert span("what did I do yesterday") == (
        "2023-10-19T00:00:00+00:00",
        "2023-10-20T00:00:00+00:00",
        "October 19 2023",
    )
    last_week = span("the movie I saw last week")
    assert last_week is not None and last_week[:2] == (
        "2023-10-09T00:00:00+00:00",
        "2023-10-16T00:00:00+00:00",
    )
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


# --- dates that do not exist: the finest stated part that does, never outside the stated year ----------

SPELLINGS = {
    "iso": lambda y, m, d: f"what happened on {y:04d}-{m:02d}-{d:02d}?",
    "month day year": lambda y, m, d: f"what happened on {MONTHS[m - 1].capitalize()} {d} {y:04d}?",
    "month day, year": lambda y, m, d: f"what happened on {MONTHS[m - 1][:3]}. {d}th, {y:04d}?",
    "day month year": lambda y, m, d: f"what happened on {d} {MONTHS[m - 1]} {y:04d}?",
    "day of month, year": lambda y, m, d: (
        f"what happened on the {d}th of {MONTHS[m - 1].capitalize()}, {y:04d}?"
    ),
}
"""Every reader of a stated day, each spelling it reads (``memstack.dates``: ISO, month-day, day-month)."""

LATE = datetime(9999, 12, 31, tzinfo=UTC)
"""A ``now`` after every stated date, so no range is dropped as still to come."""


def utc_day(year: int, month: int, day: int = 1) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


def day_end(year: int, month: int, day: int) -> datetime:
    """Where the day ends: the next day's first instant, or the calendar's last after its last day."""
    if (year, month, day) == (9999, 12, 31):
        return datetime.max.replace(tzinfo=UTC)
    return utc_day(year, month, day) + timedelta(days=1)


def month_end(year: int, month: int) -> datetime:
    """Where ``month`` ends: the next month's first instant, or the calendar's last after December 9999."""
    if month < 12:
        return utc_day(year, month + 1)
    return utc_day(year + 1, 1) if year < 9999 else datetime.max.replace(tzinfo=UTC)


@pytest.mark.parametrize("spelling", list(SPELLINGS))
@pytest.mark.parametrize("year", [1, 2023, 2024, 2025, 2100, 9999])
def test_given_every_day_number_of_every_month_when_read_then_the_day_if_it_exists_else_its_month(
    spelling: str, year: int
) -> None:
    for month in range(1, 13):
        days = calendar.monthrange(year, month)[1]
        for day in range(0, 33):
            text = SPELLINGS[spelling](year, month, day)
            found = query_time_range(text, LATE)
            assert found is not None, text
            if 1 <= day <= days:
                want = (utc_day(year, month, day), day_end(year, month, day))
            else:
                want = (utc_day(year, month), month_end(year, month))
            assert (found.start, found.end) == want, text
            assert found.start.year == year, f"{text}: the stated year is kept"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what did we plan on April 31 2023?", ("2023-04-01", "2023-05-01", "April 2023")),
        ("what did we plan on 31 April 2023?", ("2023-04-01", "2023-05-01", "April 2023")),
        ("the party on Feb 29 2023", ("2023-02-01", "2023-03-01", "February 2023")),
        ("on 2023-02-30", ("2023-02-01", "2023-03-01", "February 2023")),
        ("on 2023-13-01", ("2023-01-01", "2024-01-01", "2023")),
        ("on 2023-00-10", ("2023-01-01", "2024-01-01", "2023")),
        ("what did we plan on April 31?", ("2023-04-01", "2023-05-01", "April 2023")),
        ("the party on February 29", ("2020-02-29", "2020-03-01", "February 29 2020")),
    ],
)
def test_given_a_date_that_does_not_exist_when_read_then_the_finest_part_that_does(
    query: str, expected: tuple[str, str, str]
) -> None:
    found = span(query)
    assert found is not None, query
    assert (found[0][:10], found[1][:10], found[2]) == expected


@pytest.mark.parametrize("query", ["in April 0000", "on April 31 0000", "on 0000-04-10", "on 0000-13-01"])
def test_given_a_year_off_the_calendar_when_read_then_no_range_and_no_other_reader_places_it(
    query: str,
) -> None:
    assert span(query) is None, "'April' alone would be read as this year's April"


# --- date arithmetic at the calendar's edges never fails -----------------------------------------------

PHRASES = [
    "today",
    "tonight",
    "yesterday",
    "last night",
    *(f"{w} {u}" for w in ("this", "last", "past", "previous") for u in ("week", "weekend", "month", "year")),
    *(f"{n} {u} ago" for n in ("a", "two", "12", "999") for u in ("days", "weeks", "months", "years")),
    "in June",
    "in January",
    "in December",
    "on March 3",
    "on February 29",
    "on 29 February",
    "in 2023",
    "on 2023-05-08",
    "in May 2023",
]
"""One of each kind every reader reads, relative and absolute."""

EDGES = [
    datetime.min.replace(tzinfo=UTC),
    datetime(1, 1, 1, 9, tzinfo=UTC),
    datetime(1, 1, 6, tzinfo=UTC),
    datetime(1, 3, 1, tzinfo=timezone(timedelta(hours=-12))),
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
    datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-12))),
    datetime(9999, 12, 31, tzinfo=UTC),
    datetime.max.replace(tzinfo=UTC),
    datetime.max,
]
"""``now`` at and near the first and last instants a ``datetime`` holds, in UTC and far from it."""


@pytest.mark.parametrize("zone", ["UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago", "Asia/Tokyo"])
@pytest.mark.parametrize("now", EDGES, ids=str)
def test_given_now_at_the_calendars_edges_when_any_reader_reads_then_a_range_within_it_or_none(
    now: datetime, zone: str
) -> None:
    aware = now.replace(tzinfo=UTC) if now.tzinfo is None else now
    for phrase in PHRASES:
        found = query_time_range(f"what did I do {phrase}", now, time_zone(zone))
        if found is not None:
            assert found.start < found.end, phrase
            assert found.start <= aware, f"{phrase}: a range still to come is no range"
            assert found.start.tzinfo is UTC and found.end.tzinfo is UTC


def test_given_the_first_day_of_the_calendar_when_reading_times_before_it_then_no_range() -> None:
    first = datetime(1, 1, 1, 12, tzinfo=UTC)
    assert span("what did I say yesterday", first) is None
    assert span("what did I say last year", first) is None
    assert span("two weeks ago", first) is None
    assert span("what did I say today", first) is not None
    this_year = span("this year", datetime(9999, 6, 1, tzinfo=UTC))
    assert this_year is not None and this_year[0] == "9999-01-01T00:00:00+00:00", "cut at the calendar's end"


# --- the keyword query -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "keywords"),
    [
        ("What did we talk about on 2026-03-01?", "What did we talk about on 2026-03-01? March 1"),
        ("What did we talk about on March 1, 2026?", "What did we talk about on March 1, 2026?"),
        ("what did I do yesterday", "what did I do yesterday March 9 2026"),
        ("camping in june", "camping in june 2025"),
        ("how was my week", "how was my week"),
    ],
)
def test_given_any_time_a_query_names_when_searching_keywords_then_the_words_it_lacks_are_added(
    query: str, keywords: str
) -> None:
    when = query_time_range(query, datetime(2026, 3, 10, 12, tzinfo=UTC))
    assert keyword_query(query, when) == keywords
