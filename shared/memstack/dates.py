"""Dates as recall reads them: the words a message's date is indexed with, and the time a query names.

Conversations are asked about by date ("what did Melanie paint on October 13, 2023?", "when did I go to
the dentist last month?"), yet a message's date lives in ``created_at``, not in its words. So:

* **Indexing** (``date_words``): every indexed chunk's keyword text ends with its message's date in words
  and numbers, ``"October 13 2023"`` (UTC), on every backend (``memstack.adapters.search_text``), so a
  query naming a date or a month finds that day's messages by BM25.
* **Querying** (``query_time_range``): a date, a month, a year or a relative time ("yesterday", "last
  week", "two months ago") in a query is read as a time range in the caller's time zone, relative to the
  caller's ``now``. Recall then adds the range's words to the keyword query when the query did not name
  them (a relative time) and shows the hits inside the range before the others
  (``memstack.recall.engine``).

Only English is read; a query without a recognised time expression changes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
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


@dataclass(frozen=True, slots=True)
class TimeRange:
    """A half-open time range ``[start, end)``, aware UTC.

    Attributes:
        start, end: the bounds.
        words: the range's date words as ``date_words`` writes them (``"October 2023"``, ``"October 13
            2023"``), for the keyword query.
        relative: read from a relative expression ("last week"), whose words the query lacks.
    """

    start: datetime
    end: datetime
    words: str
    relative: bool = False

    def __contains__(self, moment: datetime) -> bool:
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
        return self.start <= moment < self.end


def date_words(moment: datetime) -> str:
    """The date of ``moment`` (UTC) in words and numbers: ``"October 13 2023"``."""
    day = (moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)).date()
    return f"{MONTHS[day.month - 1].capitalize()} {day.day} {day.year}"


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

    Args:
        text: the query.
        now: the caller's current time (aware; naive is read as UTC).
        zone: the caller's time zone: days, weeks and months begin at its midnight.
    """
    if _ANY_TIME.search(text) is None:
        return None
    now = (now.replace(tzinfo=UTC) if now.tzinfo is None else now).astimezone(zone)
    today = now.date()
    for reader in (_iso, _day_month, _month_year, _relative, _month_alone, _year):
        found = reader(text, today)
        if found is not None:
            first, last, relative = found
            when = _range(first, last, zone, relative)
            # a time still to come ("this weekend" on a Tuesday) holds no message to recall
            return when if when.start <= now else None
    return None


_Found = tuple[date, date, bool]
"""First day, day after the last, whether read from a relative expression."""


def _range(first: date, after: date, zone: tzinfo, relative: bool) -> TimeRange:
    start = datetime(first.year, first.month, first.day, tzinfo=zone).astimezone(UTC)
    end = datetime(after.year, after.month, after.day, tzinfo=zone).astimezone(UTC)
    last = after - timedelta(days=1)
    if after - first <= timedelta(days=1):
        words = f"{MONTHS[first.month - 1].capitalize()} {first.day} {first.year}"
    elif (first.year, first.month) == (last.year, last.month):
        words = f"{MONTHS[first.month - 1].capitalize()} {first.year}"
    elif first.year == last.year and after - first <= timedelta(days=62):
        words = f"{MONTHS[first.month - 1].capitalize()} {MONTHS[last.month - 1].capitalize()} {first.year}"
    else:
        words = f"{first.year}" if first.year == last.year else f"{first.year} {last.year}"
    return TimeRange(start, end, words, relative)


def _month_start(year: int, month: int) -> date:
    return date(year + (month - 1) // 12, (month - 1) % 12 + 1, 1)


def _day(year: int | None, month: int, day: int, today: date) -> _Found | None:
    try:
        when = date(year if year is not None else today.year, month, day)
        if year is None and when > today:
            when = date(today.year - 1, month, day)
    except ValueError:
        return None
    return when, when + timedelta(days=1), False


def _iso(text: str, today: date) -> _Found | None:
    m = _ISO.search(text)
    return _day(int(m.group(1)), int(m.group(2)), int(m.group(3)), today) if m else None


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


def _month(year: int, month: int) -> _Found:
    return _month_start(year, month), _month_start(year, month + 1), False


def _month_year(text: str, today: date) -> _Found | None:
    m = _MONTH_YEAR.search(text)
    return _month(int(m.group(2)), _MONTH[m.group(1).lower()]) if m else None


def _month_alone(text: str, today: date) -> _Found | None:
    for m in _MONTH_ALONE.finditer(text):
        name = m.group(2).lower()
        if name in _AMBIGUOUS and not m.group(1):
            continue
        month = _MONTH[name]
        year = today.year if month <= today.month else today.year - 1
        return _month(year, month)
    return None


def _year(text: str, today: date) -> _Found | None:
    m = _YEAR.search(text)
    return (date(int(m.group(1)), 1, 1), date(int(m.group(1)) + 1, 1, 1), False) if m else None


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
    monday = today - timedelta(days=today.weekday())
    spans: dict[str, tuple[date, date]] = {
        "today": (today, today + timedelta(days=1)),
        "tonight": (today, today + timedelta(days=1)),
        "yesterday": (today - timedelta(days=1), today),
        "last night": (today - timedelta(days=1), today + timedelta(days=1)),
        "this week": (monday, monday + timedelta(days=7)),
        "this weekend": (monday + timedelta(days=5), monday + timedelta(days=7)),
        "this month": (_month_start(today.year, today.month), _month_start(today.year, today.month + 1)),
        "this year": (date(today.year, 1, 1), date(today.year + 1, 1, 1)),
    }
    for past in ("last", "past", "previous"):
        spans[f"{past} week"] = (monday - timedelta(days=7), monday)
        spans[f"{past} weekend"] = (monday - timedelta(days=2), monday)
        spans[f"{past} month"] = (
            _month_start(today.year, today.month - 1),
            _month_start(today.year, today.month),
        )
        spans[f"{past} year"] = (date(today.year - 1, 1, 1), date(today.year, 1, 1))
    first, after = spans[phrase]
    return first, after, True


def _ago(n: int, unit: str, today: date) -> _Found | None:
    if unit == "day":
        when = today - timedelta(days=n)
        return when, when + timedelta(days=1), True
    if unit == "week":
        monday = today - timedelta(days=today.weekday() + 7 * n)
        return monday, monday + timedelta(days=7), True
    if unit == "month":
        return _month_start(today.year, today.month - n), _month_start(today.year, today.month - n + 1), True
    if today.year - n < 1:
        return None
    return date(today.year - n, 1, 1), date(today.year - n + 1, 1, 1), True
