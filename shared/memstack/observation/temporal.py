"""Temporal-gap markers (spec §2.9.7, Mastra's ``temporalMarkers``).

When a new message arrives at least ``MIN_TEMPORAL_GAP`` after the previous (non-marker) message, a
marker message is put before it so that the model, and the Observer, see that time passed:
``"2 hours 5 minutes later — Thu, Dec 4, 2025, 2:30 PM UTC"``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from memstack.model import Message

__all__ = [
    "MARKER_KIND",
    "MARKER_METADATA_KEY",
    "MIN_TEMPORAL_GAP",
    "format_timestamp",
    "gap_text",
    "is_temporal_marker",
    "marker_metadata",
    "temporal_marker",
]

MIN_TEMPORAL_GAP = timedelta(minutes=10)
"""The smallest gap between two messages that gets a marker (Mastra's ``MIN_TEMPORAL_GAP_MS``)."""

MARKER_METADATA_KEY = "reminder_type"
"""The message-metadata key that tells a marker message from a conversation message."""

MARKER_KIND = "temporal-gap"
"""The value of ``metadata[MARKER_METADATA_KEY]`` on marker messages."""

_UNITS: tuple[tuple[str, int], ...] = (
    ("week", 7 * 24 * 60),
    ("day", 24 * 60),
    ("hour", 60),
    ("minute", 1),
)
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def gap_text(delta: timedelta) -> str:
    """How much later, in words: at most two units, the largest first, each rounded down.

    Units are weeks, days, hours and minutes; a zero second unit is left out. A gap under a minute
    (or negative) reads ``"less than a minute later"``.

    Examples:
        ``timedelta(hours=2, minutes=5, seconds=59)`` → ``"2 hours 5 minutes later"``;
        ``timedelta(days=15, hours=3)`` → ``"2 weeks 1 day later"``; ``timedelta(hours=3)`` →
        ``"3 hours later"``.
    """
    minutes = int(delta.total_seconds() // 60)
    if minutes < 1:
        return "less than a minute later"
    for index, (unit, size) in enumerate(_UNITS):
        if minutes >= size:
            first = minutes // size
            words = [_plural(first, unit)]
            if index + 1 < len(_UNITS):
                next_unit, next_size = _UNITS[index + 1]
                second = (minutes % size) // next_size
                if second:
                    words.append(_plural(second, next_unit))
            return " ".join(words) + " later"
    raise AssertionError("unreachable: minutes >= 1 always matches the minute unit")


def format_timestamp(moment: datetime) -> str:
    """A marker's timestamp in UTC, English names: ``"Thu, Dec 4, 2025, 2:30 PM UTC"``.

    A naive ``moment`` is taken as UTC.
    """
    t = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    hour = t.hour % 12 or 12
    clock = f"{hour}:{t.minute:02d} {'AM' if t.hour < 12 else 'PM'}"
    return f"{_DAYS[t.weekday()]}, {_MONTHS[t.month - 1]} {t.day}, {t.year}, {clock} UTC"


def is_temporal_marker(message: Message) -> bool:
    """Whether ``message`` is a temporal-gap marker (``metadata["reminder_type"] == "temporal-gap"``)."""
    return message.metadata.get(MARKER_METADATA_KEY) == MARKER_KIND


def temporal_marker(previous: Message | None, new: Message) -> str | None:
    """The marker text to put before ``new``, or ``None`` when no marker is due.

    Args:
        previous: the last message before ``new`` that is not itself a marker (the caller skips
            markers), or ``None`` for the first message of a thread.
        new: the arriving message.

    Returns:
        ``"<gap text> — <timestamp of new>"`` when ``new`` is at least ``MIN_TEMPORAL_GAP`` after
        ``previous``, else ``None``.
    """
    if previous is None:
        return None
    delta = new.created_at - previous.created_at
    if delta < MIN_TEMPORAL_GAP:
        return None
    return f"{gap_text(delta)} — {format_timestamp(new.created_at)}"


def marker_metadata(previous: Message | None, new: Message) -> dict[str, Any] | None:
    """The metadata of the marker message before ``new`` (Mastra's marker fields in snake_case), or
    ``None`` when no marker is due.

    Returns:
        ``{"reminder_type": "temporal-gap", "gap_text", "gap_ms", "timestamp", "timestamp_ms",
        "precedes_message_id"}`` (milliseconds as integers; ``timestamp`` as in ``format_timestamp``).
    """
    if previous is None or temporal_marker(previous, new) is None:
        return None
    delta = new.created_at - previous.created_at
    return {
        MARKER_METADATA_KEY: MARKER_KIND,
        "gap_text": gap_text(delta),
        "gap_ms": int(delta.total_seconds() * 1000),
        "timestamp": format_timestamp(new.created_at),
        "timestamp_ms": int(new.created_at.timestamp() * 1000),
        "precedes_message_id": new.id,
    }
