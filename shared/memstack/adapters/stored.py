"""How the storage adapters write values: one text form for timestamps and JSON, shared by SQLite and
DynamoDB so the same data sorts and round-trips the same way on both."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from memstack.errors import Conflict


def ts(value: datetime) -> str:
    """Fixed-width ISO-8601 UTC with microseconds (``2024-05-01T12:00:00.000000Z``): text order is time
    order, and aware UTC datetimes round-trip exactly."""
    # isoformat pads the year to four digits; strftime("%Y") does not on every platform (year 999 → "999")
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def dt(value: str) -> datetime:
    """The aware datetime of a ``ts`` string."""
    return datetime.fromisoformat(value)  # Python >= 3.11 reads the trailing "Z" as UTC


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII kept as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def check_last_seq(thread_id: str, last_seq: int, expected: int | None) -> None:
    """The optimistic-concurrency check of ``save_messages(expected_last_seq=...)``.

    Raises:
        Conflict: ``expected`` is given and the thread's last ``seq`` is another (field
            ``expected_last_seq``); a missing thread has last ``seq`` 0.
    """
    if expected is not None and last_seq != expected:
        raise Conflict(
            f"thread {thread_id!r} moved on: its last seq is {last_seq}, not the expected {expected}",
            field="expected_last_seq",
        )
