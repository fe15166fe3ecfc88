"""Turning caller input (dicts, strings, models) into validated domain objects, with ``InvalidInput``
errors that name the offending field (``messages[2].parts[0].type``)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from memstack.errors import InvalidInput, PayloadTooLarge, from_validation
from memstack.model import (
    ROLES,
    Author,
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    check_id,
    check_json_depth,
    check_metadata,
    new_id,
)

MAX_MESSAGE_CHARS = 1_000_000
"""Largest accepted message: total characters over all its parts' text and JSON."""

MAX_PARTS = 1_000
"""Most parts one message may have."""

_PARTS = TypeAdapter(tuple[Part, ...])


def _loc(err: Any) -> str:
    out = ""
    for p in err["loc"]:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


_MESSAGE_FIELDS = frozenset(
    {"id", "role", "content", "parts", "created_at", "metadata", "author", "thread_id", "resource_id", "seq"}
)
"""The keys a message object may have (``seq`` is the store's; it is accepted and ignored)."""


def coerce_message(
    data: Message | dict[str, Any] | str,
    *,
    thread_id: str,
    resource_id: str,
    now: datetime,
    field: str = "message",
    default_role: str = "user",
) -> Message:
    """A ``Message`` from caller input.

    Accepted shapes: a ``Message``; a plain string (a user text message); or a dict with ``role``,
    either ``content`` (a string) or ``parts`` (a list of part objects), and optional ``id``,
    ``created_at``, ``metadata``, ``author``. ``thread_id``/``resource_id`` in the dict must match.

    Raises:
        InvalidInput: naming the field (unknown role, malformed parts, bad metadata, empty content…).
        PayloadTooLarge: more than ``MAX_PARTS`` parts or ``MAX_MESSAGE_CHARS`` characters.
    """
    if isinstance(data, Message):
        data = data.model_dump()
    if isinstance(data, str):
        data = {"role": default_role, "content": data}
    if not isinstance(data, dict):
        raise InvalidInput(f"{field} must be an object or a string", field=field)
    _check_envelope(data, field, thread_id=thread_id, resource_id=resource_id)
    role = data.get("role", default_role)
    if role not in ROLES:
        raise InvalidInput(f"{field}.role must be one of {', '.join(ROLES)}", field=f"{field}.role")
    message_id = check_id(data["id"], f"{field}.id") if data.get("id") is not None else new_id()
    parts = _coerce_parts(data, field)
    author = _coerce_author(data.get("author"), field)
    created = data.get("created_at") or now
    try:
        return Message(
            id=message_id,
            thread_id=thread_id,
            resource_id=resource_id,
            role=role,
            parts=parts,
            created_at=created,
            metadata=check_metadata(data.get("metadata"), f"{field}.metadata"),
            author=author,
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = f"{field}.{_loc(err)}"
        raise from_validation(err["type"], f"{loc}: {err['msg']}", loc) from None
    except (OverflowError, ValueError):  # a datetime that cannot be expressed in UTC
        raise InvalidInput(f"{field}.created_at is out of range", field=f"{field}.created_at") from None


def _check_envelope(data: dict[str, Any], field: str, *, thread_id: str, resource_id: str) -> None:
    """Refuse unknown keys and a ``thread_id``/``resource_id`` other than the call's.

    Raises:
        InvalidInput: naming the first offending key.
    """
    unknown = sorted(set(data) - _MESSAGE_FIELDS)
    if unknown:
        raise InvalidInput(f"{field} has unknown field {unknown[0]!r}", field=f"{field}.{unknown[0]}")
    for key, expected in (("thread_id", thread_id), ("resource_id", resource_id)):
        if data.get(key) not in (None, expected):
            raise InvalidInput(f"{field}.{key} does not match the call's {key}", field=f"{field}.{key}")


def _coerce_parts(data: dict[str, Any], field: str) -> tuple[Any, ...]:
    """The message's parts from ``parts`` or ``content`` (one text part), checked for size and content.

    Raises:
        InvalidInput: both or neither usable, malformed parts, or no content at all.
        PayloadTooLarge: more than ``MAX_PARTS`` parts or ``MAX_MESSAGE_CHARS`` characters.
    """
    if "parts" in data and "content" in data:
        raise InvalidInput(f"{field} takes either content or parts, not both", field=f"{field}.content")
    if "parts" in data:
        parts = _validate_parts(data["parts"], field)
    else:
        content = data.get("content")
        if not isinstance(content, str):
            raise InvalidInput(f"{field}.content must be a string", field=f"{field}.content")
        parts = (TextPart(text=content),)
    size = _parts_size(parts, f"{field}.parts")
    if size > MAX_MESSAGE_CHARS:
        raise PayloadTooLarge(
            f"{field} is larger than the limit of {MAX_MESSAGE_CHARS} characters", field=f"{field}.parts"
        )
    if not any(_has_content(p) for p in parts):
        raise InvalidInput(f"{field} has no content", field=f"{field}.parts")
    return parts


def _validate_parts(raw_parts: Any, field: str) -> tuple[Any, ...]:
    """``parts`` as typed part objects.

    Raises:
        InvalidInput: not a non-empty list, or a malformed part (the field names the part and its key).
        PayloadTooLarge: more than ``MAX_PARTS`` parts.
    """
    if not isinstance(raw_parts, list | tuple) or not raw_parts:
        raise InvalidInput(f"{field}.parts must be a non-empty list", field=f"{field}.parts")
    if len(raw_parts) > MAX_PARTS:
        raise PayloadTooLarge(f"{field}.parts exceeds the limit of {MAX_PARTS} parts", field=f"{field}.parts")
    try:
        return _PARTS.validate_python(raw_parts)
    except ValidationError as exc:
        err = exc.errors()[0]
        path = list(err["loc"])
        if len(path) > 1 and path[1] in _PART_TAGS:  # the discriminator's branch name, not a field
            del path[1]
        loc = f"{field}.parts" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
        raise InvalidInput(f"{loc}: {err['msg']}", field=loc) from None


def _coerce_author(author: Any, field: str) -> Author | None:
    """The optional ``author`` object, validated.

    Raises:
        InvalidInput: malformed (naming ``<field>.author`` or the key at fault).
        PayloadTooLarge: ``name`` or ``role`` over ``MAX_AUTHOR_CHARS`` (naming it).
    """
    if author is None:
        return None
    try:
        checked = Author.model_validate(author)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = f"{field}.author" + "".join(f".{p}" for p in err["loc"])
        raise from_validation(err["type"], f"{loc}: {err['msg']}", loc) from None
    check_id(checked.id, f"{field}.author.id")
    return checked


def _parts_size(parts: tuple[Any, ...], field: str) -> int:
    """Characters of the parts as JSON; refuses what JSON cannot hold exactly (NaN, sets, bytes, cycles,
    lone surrogates, nesting deeper than ``MAX_JSON_DEPTH``)."""
    for n, part in enumerate(parts):
        if isinstance(part, ToolCallPart):
            check_json_depth(part.args, f"{field}[{n}].args")
        elif isinstance(part, ToolResultPart):
            check_json_depth(part.result, f"{field}[{n}].result")
    try:
        encoded = json.dumps(
            [p.model_dump(mode="python") for p in parts], allow_nan=False, ensure_ascii=False, default=_refuse
        )
        encoded.encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        reason = "it is nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InvalidInput(f"{field} is not valid JSON text: {reason}", field=field) from None
    return len(encoded)


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not a JSON value")


_PART_TAGS = {"text", "reasoning", "tool_call", "tool_result", "file", "image"}


def _has_content(part: Any) -> bool:
    if isinstance(part, TextPart):
        return bool(part.text)
    return True
