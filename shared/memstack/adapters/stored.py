"""How the storage adapters write values: one text form for timestamps and JSON, shared by SQLite and
DynamoDB so the same data sorts and round-trips the same way on both."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memstack.errors import Conflict

if TYPE_CHECKING:
    from memstack.model import Message, Thread


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


def check_thread_update(
    current: Thread,
    *,
    expected_version: int | None,
    expected_title: str | None,
    expected_created_at: datetime | None,
) -> None:
    """The conditions of ``MemoryStore.update_thread`` that the stored thread itself decides.

    Raises:
        Conflict: naming the first that does not hold (``version``, ``title``, ``thread_id``).
    """
    thread_id = current.id
    if expected_version is not None and current.version != expected_version:
        raise Conflict(
            f"thread {thread_id!r} changed (version {current.version}, expected {expected_version})",
            field="version",
        )
    if expected_title is not None and current.title != expected_title:
        raise Conflict(f"thread {thread_id!r} title changed", field="title")
    if expected_created_at is not None and current.created_at != expected_created_at:
        raise Conflict(f"thread {thread_id!r} was deleted and made again", field="thread_id")


def check_messages_kept(thread_id: str, expected: Mapping[str, int], stored: Mapping[str, int]) -> None:
    """``update_thread(expected_messages=...)``: every expected message is stored at its seq.

    Args:
        stored: message id → seq of the thread's messages among the expected ids, as stored now.

    Raises:
        Conflict: a message is gone (or another message holds its id), field ``messages``.
    """
    gone = [mid for mid, seq in expected.items() if stored.get(mid) != seq]
    if gone:
        raise Conflict(
            f"thread {thread_id!r} lost {len(gone)} of the messages the update was made from",
            field="messages",
        )


MAX_RESOURCE_ID_PAGE = 1_000
"""Most ids one ``MemoryStore.list_resource_ids`` page may hold."""


def check_resource_id_limit(limit: object) -> int:
    """``limit`` of ``list_resource_ids`` checked (1..``MAX_RESOURCE_ID_PAGE``).

    Raises:
        InvalidInput: out of range, naming the limit (field ``limit``).
    """
    from memstack.errors import InvalidInput

    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RESOURCE_ID_PAGE:
        raise InvalidInput(f"limit must be between 1 and {MAX_RESOURCE_ID_PAGE}", field="limit")
    return limit


def check_restore_batch(resource_id: str, thread_id: str, messages: Sequence[Message], last_seq: int) -> None:
    """The rules every adapter's ``restore_messages`` checks before writing (``MemoryStore.restore_messages``).

    Raises:
        InvalidInput: a message of another thread or resource, a ``seq`` outside ``1..last_seq``, or an id
            or ``seq`` repeated in the batch (field ``messages[i]``).
    """
    from memstack.errors import InvalidInput

    ids: set[str] = set()
    seqs: set[int] = set()
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if (m.resource_id, m.thread_id) != (resource_id, thread_id):
            raise InvalidInput(f"{where} belongs to another thread or resource", field=where)
        if not 1 <= m.seq <= last_seq:
            raise InvalidInput(
                f"{where}.seq {m.seq} is outside 1..{last_seq} (the thread's last_seq)", field=f"{where}.seq"
            )
        if m.id in ids or m.seq in seqs:
            raise InvalidInput(f"{where} repeats an id or seq of this batch", field=where)
        ids.add(m.id)
        seqs.add(m.seq)
