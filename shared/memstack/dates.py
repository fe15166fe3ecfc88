"""Dates as recall reads them: the words a message's date is indexed with, and the time a query names.

Conversations are asked about by date ("what did Melanie paint on October 13, 2023?", "when did I go to
the dentist last month?"), yet a message's date lives in ``created_at``, not in its words. So:

* **Indexing** (``date_words``): every indexed chunk's keyword text ends with its message's date in words
  and numbers, ``"October 13 2023"`` (UTC), on every backend (``memstack.adapters.search_text``), so a
  query naming a date or a month finds that day's messages by BM25.
* **Querying** (``query_time_range``): a date, a month, a year or a relative time ("yesterday", "last
  week", "two months ago") in a query is read as a time range in the caller's time zone, relative to the
  caller's ``now``. Recall then adds the range's words that the query lacks to the keyword query
  (``keyword_query``: "yesterday" and "on 2026-03-01" alike) and shows the hits inside the range before
  the others (``memstack.recall.engine``).

Only English is read; a query without a recognised time expression changes nothing.
"""

from __future__ import annotations

import re
from calendar import monthrange
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memstack.errors import InvalidInput

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH = (
    {name: i + 1 for i, name in enumerate(MONTHS)}
    | {name[:3]: i + 1 for i, name in enumerate(MONTHS) if name != "may"}
    | {"sept": 9}
)
_AMBIGUOUS = {"may", "march", "august", "jan", "mar", "aug"}
"""Month names that are also common words ("may I", "a march"): read as months only next to a number or
after "in", "of", "since", "during" or "until"."""

_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_M = "|".join(sorted(_MONTH, key=len, reverse=True))
_ISO = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+({_M})\b\.?,?(?:\s+(\d{{4}}))?", re.I)
_MONTH_DAY = re.compile(rf"\b({_M})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b,?(?:\s+(\d{{4}}))?", re.I)
_MONTH_YEAR = re.compile(rf"\b({_M})\.?,?\s+(\d{{4}})\b", re.I)
_MONTH_ALONE = re.compile(rf"(?:\b(in|of|since|during|until)\s+)?\b({_M})\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of|since)\s+((?:19|20)\d{2})\b", re.I)
_AGO = re.compile(r"\b(\d{1,3}|" + "|".join(_NUMBERS) + r")\s+(day|week|month|year)s?\s+ago\b", re.I)
_RELATIVE = re.compile(
    r"\b(today|tonight|yesterday|last\s+night|(?:last|this|past|previous)\s+(?:week|weekend|month|year))\b",
    re.I,
)

_ANY_TIME = re.compile(rf"\d|\b(?:{_M}|ago|today|tonight|yesterday|night|week|weekend|month|year)\b", re.I)
"""What every expression above contains at least one of (a digit, a month, ``ago``, a relative word): a
query without any names no time, and is told so by one scan instead of every reader's."""


_WORD = re.compile(r"[^\W_]+")

_FIRST_DAY = date.min.toordinal()
"""The calendar's first day (January 1 of year 1) as a proleptic Gregorian ordinal."""
_END_DAY = date.max.toordinal() + 1
"""The ordinal after the calendar's last day (December 31, 9999): where a range running past it ends."""


@dataclass(frozen=True, slots=True)
class TimeRange:
    """A half-open time range ``[start, end)``, aware UTC.

    Attributes:
        start, end: the bounds (a range reaching past the calendar, year 1 to 9999, ends at its edge).
        words: the range's date words as ``date_words`` writes them (``"October 2023"``, ``"October 13
            2023"``), for the keyword query (``keyword_query``).
    """

    start: datetime
    end: datetime
    words: str

    def __contains__(self, moment: datetime) -> bool:
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
        return self.start <= moment < self.end


def date_words(moment: datetime) -> str:
    """The date of ``moment`` (UTC) in words and numbers: ``"October 13 2023"``."""
    day = (moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)).date()
    return f"{MONTHS[day.month - 1].capitalize()} {day.day} {day.year}"


def keyword_query(query: str, when: TimeRange | None) -> str:
    """The keyword search's text for ``query``: the query, then the words of the time it names that it
    does not already hold, compared word by word and case-insensitively.

    Every way of naming a time reaches the keyword search the same way: "yesterday", "on 2026-03-01" and
    "in June" lack the indexed words of their day or month (``"March 1 2026"``, ``"June 2023"``), which
    every indexed chunk ends with (``memstack.adapters.search_text.keyword_text``), while "on March 1,
    2026" already holds them and is unchanged.

    Args:
        query: the query as the caller wrote it.
        when: the time it names (``query_time_range``), or ``None`` (the query is returned as it is).
    """
    if when is None:
        return query
    held = {word.casefold() for word in _WORD.findall(query)}
    missing = [word for word in when.words.split() if word.casefold() not in held]
    return f"{query} {' '.join(missing)}" if missing else query


def time_zone(name: str) -> tzinfo:
    """The IANA time zone ``name`` (``"Europe/Paris"``; ``"UTC"``).

    Raises:
        InvalidInput: an unknown name (field ``semantic_recall.time_zone``).
    """
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidInput(
            f"unknown time zone {name!r}; use an IANA name such as 'Europe/Paris' or 'UTC'",
            field="semantic_recall.time_zone",
        ) from exc


def query_time_range(text: str, now: datetime, zone: tzinfo = UTC) -> TimeRange | None:
    """The time a query names, or ``None``: the first of an ISO date, a day and month (with or without a
    year), a month and year, a relative time, a month alone, a year.

    A day or month without a year is its latest occurrence not after ``now``; ``last week`` is the calendar
    week (Monday first) before ``now``'s; ``N months ago`` is that whole month; ``N days ago`` that day. A
    range that starts after ``now`` is no range: no message is stored there yet.

    A date that does not exist names the finest part of it that does, and never a time outside what it
    states: a day its month lacks ("April 31 2023", "February 29 2025", day 0) names that month of the
    stated year (of the latest such month without a year; "February 29" alone is the latest February 29);
    an ISO date's month outside 1..12 names its year; a year outside the calendar (``datetime``'s 1 to
    9999: "April 0000") names nothing. The expression is still read — no later reader takes its month
    or year out of it and places them elsewhere.

    Date arithmetic never fails: a range reaching past the calendar ("last week" in the first days of
    year 1, "this year" in 9999) is cut at its edge, and one wholly outside it ("yesterday" on January 1
    of year 1) is no range.

    Args:
        text: the query.
        now: the caller's current time (aware; naive is read as UTC), any ``datetime``.
        zone: the caller's time zone: days, weeks and months begin at its midnight.
    """
    if _ANY_TIME.search(text) is None:
        return None
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now
    today = _local_date(now, zone)
    for reader in (_iso, _day_month, _month_year, _relative, _month_alone, _year):
        found = reader(text, today)
        if found is not None:
            when = _range(*found, zone)
            # a time still to come ("this weekend" on a Tuesday) holds no message to recall
            return when if when is not None and when.start <= now else None
    return None


_Found = tuple[int, int]
"""First day and the day after the last, as ordinals (``date.toordinal``); either may lie off the
calendar (``_day_number``), and an empty span (``_NOWHERE``) is an expression that names no time."""

_NOWHERE: _Found = (0, 0)


def _local_date(now: datetime, zone: tzinfo) -> date:
    """``now``'s date in ``zone``; within hours of the calendar's edge, where that date would lie past
    it, the edge's day."""
    try:
        return now.astimezone(zone).date()
    except OverflowError:
        return date.min if now.year == 1 else date.max


def _day_number(year: int, month: int, day: int = 1) -> int:
    """The ordinal of ``day`` (which must exist) of ``month`` of ``year``; a month outside 1..12 carries
    into the year (month 0 is the previous December). A day before year 1 is ``_FIRST_DAY - 1``, one after
    9999 is ``_END_DAY``: past the edge, where ranges are cut."""
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    if year < date.min.year:
        return _FIRST_DAY - 1
    if year > date.max.year:
        return _END_DAY
    return date(year, month, day).toordinal()


def _midnight(day: int, zone: tzinfo) -> datetime:
    """The start of ``day`` (an ordinal inside the calendar, or ``_END_DAY``) in ``zone``, in UTC; the
    calendar's first or last instant where that moment lies past the edge in UTC."""
    if day >= _END_DAY:
        return datetime.max.replace(tzinfo=UTC)
    try:
        return datetime.combine(date.fromordinal(day), time(), tzinfo=zone).astimezone(UTC)
    except OverflowError:
        return (datetime.min if day < _END_DAY // 2 else datetime.max).replace(tzinfo=UTC)


def _range(first: int, after: int, zone: tzinfo) -> TimeRange | None:
    """The days ``[first, after)`` cut to the calendar, as a range in ``zone``; ``None`` when empty."""
    first, after = max(first, _FIRST_DAY), min(after, _END_DAY)
    if after <= first:
        return None
    begin, last = date.fromordinal(first), date.fromordinal(after - 1)
    if after - first == 1:
        words = f"{MONTHS[begin.month - 1].capitalize()} {begin.day} {begin.year}"
    elif (begin.year, begin.month) == (last.year, last.month):
        words = f"{MONTHS[begin.month - 1].capitalize()} {begin.year}"
    elif begin.year == last.year and after - first <= 62:
        words = f"{MONTHS[begin.month - 1].capitalize()} {MONTHS[last.month - 1].capitalize()} {begin.year}"
    else:
        words = f"{begin.year}" if begin.year == last.year else f"{begin.year} {last.year}"
    return TimeRange(_midnight(first, zone), _midnight(after, zone), words)


def _exists(year: int, month: int, day: int) -> bool:
    return date.min.year <= year <= date.max.year and 1 <= day <= monthrange(year, month)[1]


def _month(year: int, month: int) -> _Found:
    return _day_number(year, month), _day_number(year, month + 1)


def _latest_month(month: int, today: date) -> _Found:
    """The latest ``month`` (1..12) that begins on or before ``today``."""
    return _month(today.year if month <= today.month else today.year - 1, month)


def _day(year: int | None, month: int, day: int, today: date) -> _Found:
    """A stated day (``month`` in 1..12): that day; without a year its latest occurrence not after
    ``today``. A day that does not exist names its month (``query_time_range``)."""
    if year is None:
        # February 29 recurs within 8 years (1900 and 2100 are not leap years); other days every year
        for back in range(9):
            y = today.year - back
            if _exists(y, month, day) and date(y, month, day) <= today:
                return _day_number(y, month, day), _day_number(y, month, day) + 1
        return _latest_month(month, today)
    if not date.min.year <= year <= date.max.year:
        return _NOWHERE
    if not _exists(year, month, day):
        return _month(year, month)
    return _day_number(year, month, day), _day_number(year, month, day) + 1


def _iso(text: str, today: date) -> _Found | None:
    m = _ISO.search(text)
    if not m:
        return None
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not 1 <= month <= 12:
        return _NOWHERE if year < date.min.year else (_day_number(year, 1), _day_number(year + 1, 1))
    return _day(year, month, day, today)


def _day_month(text: str, today: date) -> _Found | None:
    m = _DAY_MONTH.search(text)
    if m:
        year = int(m.group(3)) if m.group(3) else None
        return _day(year, _MONTH[m.group(2).lower()], int(m.group(1)), today)
    m = _MONTH_DAY.search(text)
    if m:
        year = int(m.group(3)) if m.group(3) else None
        return _day(year, _MONTH[m.group(1).lower()], int(m.group(2)), today)
    return None


def _month_year(text: str, today: date) -> _Found | None:
    m = _MONTH_YEAR.search(text)
    if not m:
        return None
    year = int(m.group(2))
    return _month(year, _MONTH[m.group(1).lower()]) if year >= date.min.year else _NOWHERE


def _month_alone(text: str, today: date) -> _Found | None:
    for m in _MONTH_ALONE.finditer(text):
        name = m.group(2).lower()
        if name in _AMBIGUOUS and not m.group(1):
            continue
        return _latest_month(_MONTH[name], today)
    return None


def _year(text: str, today: date) -> _Found | None:
    m = _YEAR.search(text)
    return (_day_number(int(m.group(1)), 1), _day_number(int(m.group(1)) + 1, 1)) if m else None


def _relative(text: str, today: date) -> _Found | None:
    m = _AGO.search(text)
    if m:
        raw = m.group(1).lower()
        n = int(raw) if raw.isdigit() else _NUMBERS[raw]
        return _ago(n, m.group(2).lower(), today)
    m = _RELATIVE.search(text)
    if not m:
        return None
    phrase = " ".join(m.group(1).lower().split())
    day = today.toordinal()
    monday = day - today.weekday()
    if phrase in ("today", "tonight"):
        return day, day + 1
    if phrase == "yesterday":
        return day - 1, day
    if phrase == "last night":
        return day - 1, day + 1
    which, unit = phrase.split()
    back = 0 if which == "this" else 1
    if unit == "week":
        return monday - 7 * back, monday - 7 * back + 7
    if unit == "weekend":
        return monday + 5 - 7 * back, monday + 7 - 7 * back
    if unit == "month":
        return _month(today.year, today.month - back)
    return _day_number(today.year - back, 1), _day_number(today.year - back + 1, 1)


def _ago(n: int, unit: str, today: date) -> _Found:
    day = today.toordinal()
    if unit == "day":
        return day - n, day - n + 1
    if unit == "week":
        monday = day - today.weekday() - 7 * n
        return monday, monday + 7
    if unit == "month":
        return _month(today.year, today.month - n)
    return _day_number(today.year - n, 1), _day_number(today.year - n + 1, 1)
