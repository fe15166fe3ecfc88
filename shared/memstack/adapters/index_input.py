"""Validation of what a ``SearchIndex`` is given, shared by every index adapter so they refuse the same
inputs with the same messages (the conformance suite checks both)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memstack.errors import InvalidInput
from memstack.model import check_id, check_metadata
from memstack.ports import MAX_TOP_K as MAX_TOP_K  # the port's limit, checked here for every adapter
from memstack.ports import IndexEntry


@dataclass(frozen=True, slots=True)
class CheckedEntry:
    """An ``IndexEntry``'s fields once checked: ids, ``chunk`` and ``seq`` ≥ 0, a non-empty role, text and
    context strings, ``created_at`` as aware UTC, metadata as a JSON-safe object. The vector is checked by the adapter,
    which knows its dimension and its number type."""

    resource_id: str
    thread_id: str
    message_id: str
    chunk: int
    role: str
    seq: int
    created_at: datetime
    text: str
    metadata: dict[str, Any]
    context: str = ""


def check_int(value: object, path: str, *, minimum: int) -> int:
    """An integer (not a bool) of at least ``minimum``. Raises ``InvalidInput`` naming ``path``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInput(f"{path} must be an integer >= {minimum}", field=path)
    return value


def check_entry(entry: IndexEntry, path: str) -> CheckedEntry:
    """The checked fields of ``entry`` (``path`` names it in errors, e.g. ``entries[3]``).

    Raises:
        InvalidInput: a field is missing, of the wrong type or out of range; ``field`` names it.
        PayloadTooLarge: the metadata is over its size limit.
    """
    resource_id = check_id(entry.resource_id, f"{path}.resource_id")
    message_id = check_id(entry.message_id, f"{path}.message_id")
    thread_id = check_id(entry.thread_id, f"{path}.thread_id")
    chunk = check_int(entry.chunk, f"{path}.chunk", minimum=0)
    seq = check_int(entry.seq, f"{path}.seq", minimum=0)
    if not isinstance(entry.role, str) or not entry.role:
        raise InvalidInput(f"{path}.role must be a non-empty string", field=f"{path}.role")
    if not isinstance(entry.text, str):
        raise InvalidInput(f"{path}.text must be a string", field=f"{path}.text")
    if not isinstance(entry.context, str):
        raise InvalidInput(f"{path}.context must be a string", field=f"{path}.context")
    if not isinstance(entry.created_at, datetime):
        raise InvalidInput(f"{path}.created_at must be a datetime", field=f"{path}.created_at")
    created = entry.created_at
    created = created.replace(tzinfo=UTC) if created.tzinfo is None else created.astimezone(UTC)
    metadata = check_metadata(entry.metadata, f"{path}.metadata")
    return CheckedEntry(
        resource_id,
        thread_id,
        message_id,
        chunk,
        entry.role,
        seq,
        created,
        entry.text,
        metadata,
        entry.context,
    )


def check_top_k(top_k: object) -> int:
    """``top_k`` as an integer in ``1..MAX_TOP_K``. Raises ``InvalidInput`` (field ``top_k``)."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise InvalidInput(f"top_k must be an integer from 1 to {MAX_TOP_K}", field="top_k")
    return top_k
