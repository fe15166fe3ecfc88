"""Conversions between domain types and table items: timestamps, message bodies, threads, resources.

Timestamps are fixed-width ISO-8601 UTC strings with microseconds (``2024-05-01T12:00:00.000000Z``), the
SQLite adapter's format: string order is time order, and aware UTC datetimes round-trip exactly.
"""

from __future__ import annotations

import json
from typing import Any

from memstack.adapters.dynamodb.items import (
    Item,
    listing_key,
    resource_id_of,
    resource_pk,
    thread_id_of,
    thread_key,
)
from memstack.adapters.stored import dt, dumps, ts
from memstack.model import Author, Message, Resource, Thread


def message_body(message: Message) -> str:
    """What a message item keeps as ``body``: parts, metadata and author as compact JSON."""
    body: dict[str, Any] = {
        "parts": [p.model_dump(mode="json") for p in message.parts],
        "metadata": message.metadata,
    }
    if message.author is not None:
        body["author"] = message.author.model_dump(mode="json")
    return dumps(body)


def message_from(item: Item, body: str) -> Message:
    """The ``Message`` of a message item whose body (inline or fetched from S3) is ``body``."""
    data = json.loads(body)
    author = data.get("author")
    return Message.model_validate(
        {
            "id": item.id,
            "thread_id": thread_id_of(item.pk),
            "resource_id": item.resource_id,
            "seq": int(item.seq or 0),
            "role": item.role,
            "parts": data["parts"],
            "metadata": data.get("metadata") or {},
            "author": Author.model_validate(author) if author else None,
            "created_at": dt(item.created_at or ""),
        }
    )


def thread_item(model: type[Item], thread: Thread, *, updated_at: str, last_seq: int) -> Item:
    """The meta item of a new thread (with the keys of both listing indexes)."""
    pk, sk = thread_key(thread.resource_id, thread.id)
    created = ts(thread.created_at)
    return model(
        pk,
        sk,
        resource_id=thread.resource_id,
        title=thread.title,
        metadata=dumps(thread.metadata),
        created_at=created,
        updated_at=updated_at,
        version=thread.version,
        last_seq=last_seq,
        gsi1pk=resource_pk(thread.resource_id),
        created_key=listing_key(created, thread.id),
        updated_key=listing_key(updated_at, thread.id),
    )


def thread_from(item: Item) -> Thread:
    """The ``Thread`` of a thread meta item."""
    return Thread(
        id=thread_id_of(item.pk),
        resource_id=item.resource_id or "",
        title=item.title or "",
        metadata=json.loads(item.metadata or "{}"),
        created_at=dt(item.created_at or ""),
        updated_at=dt(item.updated_at or ""),
        version=int(item.version or 0),
        last_seq=int(item.last_seq or 0),
    )


def resource_from(item: Item) -> Resource:
    """The ``Resource`` of a resource item."""
    return Resource(
        id=resource_id_of(item.pk),
        working_memory=item.working_memory,
        metadata=json.loads(item.metadata or "{}"),
        version=int(item.version or 0),
        created_at=dt(item.created_at) if item.created_at else None,
        updated_at=dt(item.updated_at) if item.updated_at else None,
    )


def metadata_matches(metadata: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    """Typed equality over top-level keys, dotted keys reaching into nested objects, as the SQLite adapter
    filters: ``true`` never equals ``1``, ``"1"`` never equals ``1``, ``None`` matches a stored ``null``
    (not a missing key), and objects or lists never match."""
    for key, value in (wanted or {}).items():
        stored: Any = metadata
        for part in key.split("."):
            if not isinstance(stored, dict) or part not in stored:
                return False
            stored = stored[part]
        if not _same_json_scalar(stored, value):
            return False
    return True


def _same_json_scalar(stored: Any, value: Any) -> bool:
    if value is None:
        return stored is None
    if isinstance(value, bool):
        return isinstance(stored, bool) and stored == value
    if isinstance(value, int | float):
        return isinstance(stored, int | float) and not isinstance(stored, bool) and stored == value
    if isinstance(value, str):
        return isinstance(stored, str) and stored == value
    return False
