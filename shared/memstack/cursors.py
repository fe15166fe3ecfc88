"""Opaque page cursors: the sort key of the last item of a page, as URL-safe base64 JSON.

Adapters and the core share them, so every backend's cursors look alike and are validated alike.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from memstack.errors import InvalidInput


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode_cursor(values: Sequence[Any]) -> str:
    """An opaque, URL-safe cursor for the given sort key values."""
    return base64.urlsafe_b64encode(_dumps(list(values)).encode()).decode().rstrip("=")


def decode_cursor(cursor: object, size: int, kinds: tuple[type, ...] = (str,)) -> list[Any]:
    """The sort key values of a cursor made by ``encode_cursor``, each of one of ``kinds``.

    Raises:
        InvalidInput: the cursor is malformed or was made for another listing.
    """
    if not isinstance(cursor, str):
        raise InvalidInput("cursor must be a string", field="cursor")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        values = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("cursor is malformed", field="cursor") from None
    if (
        not isinstance(values, list)
        or len(values) != size
        or any(isinstance(v, bool) or not isinstance(v, kinds) for v in values)
        or any(isinstance(v, int) and not 0 <= v < 2**62 for v in values)
    ):
        raise InvalidInput("cursor is malformed", field="cursor")
    return values
