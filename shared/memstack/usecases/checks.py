"""Argument checks shared by the use cases: each raises ``InvalidInput`` or ``PayloadTooLarge`` naming the
field and the limit."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from memstack.errors import InvalidInput, PayloadTooLarge
from memstack.model import Message, check_metadata, check_text

MAX_BATCH = 1_000
"""Most messages one ``save_messages`` call takes (and most ids one deletion or index call takes)."""

MAX_PAGE = 1_000
"""Largest page size of ``list_threads``/``list_messages``."""

MAX_INSTRUCTIONS_CHARS = 1_000_000
"""Most characters of caller instructions one ``context()`` call takes."""

MAX_INCLUDE = 100
"""Most ``include`` items one ``list_messages`` call takes."""

MAX_TITLE_CHARS = 1_000
"""Longest thread title, in characters."""

MAX_RECONCILE = 10_000
"""Most unindexed messages one ``reconcile_index`` call takes on (a scheduled run finishes well within a
Lambda's timeout; the next run takes the rest)."""

MAX_SEQ = 2**63 - 1
"""The largest ``seq`` a caller may name (``expected_last_seq``): SQLite's largest integer."""

_METADATA_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_FORBIDDEN_KEYS = {"__proto__", "constructor", "prototype"}


def check_limit(value: object, field: str, maximum: int, minimum: int = 1) -> int:
    """``value`` if it is an integer in ``minimum..maximum``.

    Raises:
        InvalidInput: naming ``field`` and the range.
    """
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise InvalidInput(f"{field} must be an integer from {minimum} to {maximum}", field=field)
    return value


def check_batch(values: object, field: str, *, empty_ok: bool = True) -> Sequence[Any]:
    """``values`` if it is a list or tuple of at most ``MAX_BATCH`` items.

    Raises:
        InvalidInput: not a list (or empty when ``empty_ok`` is false). PayloadTooLarge: over the limit.
    """
    if not isinstance(values, list | tuple) or (not empty_ok and not values):
        raise InvalidInput(f"{field} must be a {'' if empty_ok else 'non-empty '}list", field=field)
    if len(values) > MAX_BATCH:
        raise PayloadTooLarge(f"{field} exceeds the limit of {MAX_BATCH} per call", field=field)
    return values


def as_batch(values: object, field: str, *, empty_ok: bool = True) -> list[Any]:
    """``values`` as a new list if it is a list or tuple of at most ``MAX_BATCH`` items (``check_batch``).

    A string is refused, never taken as a sequence of one-character items: ``"abc"`` given for a list of
    ids or messages is a caller's mistake that would otherwise touch ``a``, ``b`` and ``c``.

    Raises:
        InvalidInput: not a list or tuple (or empty when ``empty_ok`` is false). PayloadTooLarge: over the
            limit.
    """
    return list(check_batch(values, field, empty_ok=empty_ok))


def as_context_messages(value: object, field: str = "context") -> list[Any] | None:
    """Call-time context messages (``Memory.context(context=...)``) as a list, ``None`` when not given.

    One message — a string, a dict or a ``Message`` — counts as a list of that one message (so
    ``context="abc"`` adds one user message, never three); anything else must be a list or tuple of at
    most ``MAX_BATCH`` messages. ``Memory`` and both HTTP clients apply this one rule.

    Raises:
        InvalidInput: not a message or a list of them (field ``context``). PayloadTooLarge: over the limit.
    """
    if value is None:
        return None
    if isinstance(value, str | dict | Message):
        return [value]
    if not isinstance(value, list | tuple):
        raise InvalidInput(f"{field} must be a list of messages", field=field)
    return as_batch(value, field)


def check_title(title: object) -> str:
    """A thread title: text of at most ``MAX_TITLE_CHARS`` characters.

    Raises:
        InvalidInput: not text. PayloadTooLarge: too long.
    """
    if not isinstance(title, str):
        raise InvalidInput("title must be a string", field="title")
    check_text(title, "title")
    if len(title) > MAX_TITLE_CHARS:
        raise PayloadTooLarge(
            f"title is longer than the limit of {MAX_TITLE_CHARS} characters", field="title"
        )
    return title


def check_thread_metadata(metadata: object) -> dict[str, Any]:
    """Thread metadata: a JSON object within the metadata limits whose keys are identifiers.

    Raises:
        InvalidInput: bad shape or key. PayloadTooLarge: over ``MAX_METADATA_BYTES``.
    """
    checked = check_metadata(metadata, "metadata")
    for key in checked:
        if key in _FORBIDDEN_KEYS or not _METADATA_KEY.match(key):
            raise InvalidInput(
                "metadata keys start with a letter or _, use letters, digits and _, at most 128 characters",
                field=f"metadata.{key}",
            )
    return checked


def check_metadata_filter(metadata: dict[str, Any]) -> None:
    """A ``list_threads`` metadata filter: thread-metadata keys with scalar values (64-bit integers).

    Raises:
        InvalidInput: naming the offending key.
    """
    check_thread_metadata(metadata)
    for key, value in metadata.items():
        if isinstance(value, dict | list):
            raise InvalidInput("metadata filter values must be scalars", field=f"metadata.{key}")
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            raise InvalidInput("metadata filter integers must fit in 64 bits", field=f"metadata.{key}")


def as_texts(value: str | Sequence[str] | None, field: str) -> list[str]:
    """Caller instructions as a list of non-blank texts.

    Raises:
        InvalidInput: not a string or list of strings. PayloadTooLarge: over ``MAX_INSTRUCTIONS_CHARS``.
    """
    if value is None:
        return []
    if not isinstance(value, str | list | tuple):
        raise InvalidInput(f"{field} must be a string or a list of strings", field=field)
    items = [value] if isinstance(value, str) else list(value)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidInput(f"{field} must be strings", field=f"{field}[{i}]")
        check_text(item, f"{field}[{i}]")
    if sum(len(i) for i in items) > MAX_INSTRUCTIONS_CHARS:
        raise PayloadTooLarge(
            f"{field} exceeds the limit of {MAX_INSTRUCTIONS_CHARS} characters", field=field
        )
    return [i for i in items if i.strip()]
