"""How the storage adapters write values: one text form for timestamps and JSON, shared by SQLite and
DynamoDB so the same data sorts and round-trips the same way on both."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any


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
