"""Domain types: Thread, Resource, Message and its parts, Author.

Messages are ordered by ``seq``, a per-thread sequence number the store assigns on first save, never by
timestamp: equal ``created_at`` values must not reorder a turn (DESIGN.md "Data model").

All types are immutable pydantic models; adapters convert them to and from their own records and never
leak their types.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Role = Literal["user", "assistant", "system", "tool"]
ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")

MAX_ID_LENGTH = 256
"""Longest accepted thread, resource or message id, in characters."""

MAX_JSON_DEPTH = 32
"""Deepest nesting of objects and arrays accepted in metadata, tool arguments and tool results: deeper
values serialise and validate by recursion (pydantic, json) and would fail on the way out, not in."""

MAX_METADATA_BYTES = 64 * 1024
"""Largest accepted metadata object, as compact JSON in UTF-8 bytes."""


def new_id() -> str:
    """A fresh random id (UUID4, 36 characters)."""
    return str(uuid.uuid4())


def utcnow() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


def check_id(value: object, field: str) -> str:
    """Validate an id: a non-empty string of at most 256 characters without control characters.

    Raises:
        InvalidInput: naming ``field``.
    """
    from memstack.errors import InvalidInput

    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{field} must be a non-empty string", field=field)
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInput(f"{field} is longer than the limit of {MAX_ID_LENGTH} characters", field=field)
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidInput(f"{field} must not contain control characters", field=field)
    check_text(value, field)
    return value


def check_text(value: str, field: str) -> str:
    """Validate that a string is encodable text (UTF-8, so no lone surrogates).

    Raises:
        InvalidInput: naming ``field``.
    """
    from memstack.errors import InvalidInput

    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{field} must be valid text (it has a lone surrogate)", field=field) from None
    return value


def json_depth(value: object) -> int:
    """Nesting depth of a JSON-like value: 0 for a scalar, 1 for a flat object or array (iterative)."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def check_json_depth(value: object, field: str) -> None:
    """Refuse values nested deeper than ``MAX_JSON_DEPTH``.

    Raises:
        InvalidInput: naming ``field`` and the limit.
    """
    from memstack.errors import InvalidInput

    if json_depth(value) > MAX_JSON_DEPTH:
        raise InvalidInput(f"{field} is nested deeper than the limit of {MAX_JSON_DEPTH} levels", field=field)


def check_metadata(value: object, field: str = "metadata") -> dict[str, Any]:
    """Validate metadata: a JSON object, serialisable, at most ``MAX_METADATA_BYTES`` as JSON.

    Raises:
        InvalidInput: not an object, not JSON-serialisable (sets, bytes, NaN, objects…).
        PayloadTooLarge: larger than the limit.
    """
    from memstack.errors import InvalidInput, PayloadTooLarge

    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"{field} must be a JSON object", field=field)
    check_json_depth(value, field)
    try:
        encoded = json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
        encoded.encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        reason = "it is nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InvalidInput(f"{field} is not JSON-serialisable: {reason}", field=field) from None
    if len(encoded.encode()) > MAX_METADATA_BYTES:
        raise PayloadTooLarge(
            f"{field} is larger than the limit of {MAX_METADATA_BYTES} bytes as JSON", field=field
        )
    if any(not isinstance(k, str) for k in value):
        raise InvalidInput(f"{field} keys must be strings", field=field)
    result: dict[str, Any] = json.loads(encoded)
    return result


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Author(_Frozen):
    """Who wrote a message in a thread shared by several people (Mastra's multi-user threads).

    The model is shown the author's name before the text, in history and in recall.
    """

    id: str
    name: str = Field("", max_length=256)
    role: str = Field("", max_length=256)

    @property
    def label(self) -> str:
        """The name shown to the model: ``name`` if set, else ``id``."""
        return self.name or self.id


class TextPart(_Frozen):
    """Plain text."""

    type: Literal["text"] = "text"
    text: str


class ReasoningPart(_Frozen):
    """The model's reasoning text (kept in storage, not sent back to chat-completions models)."""

    type: Literal["reasoning"] = "reasoning"
    text: str


class ToolCallPart(_Frozen):
    """A tool call made by the assistant: ``id`` pairs it with its ``ToolResultPart``."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ToolResultPart(_Frozen):
    """The result of a tool call, ``result`` being any JSON value."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    name: str = ""
    result: Any = None
    is_error: bool = False


class FilePart(_Frozen):
    """A file by reference (an URL or storage key), never inline bytes."""

    type: Literal["file"] = "file"
    url: str
    media_type: str = "application/octet-stream"
    name: str = ""


class ImagePart(_Frozen):
    """An image by reference, with an optional caption used as its text for search."""

    type: Literal["image"] = "image"
    url: str
    media_type: str = "image/*"
    caption: str = ""


Part = Annotated[
    TextPart | ReasoningPart | ToolCallPart | ToolResultPart | FilePart | ImagePart,
    Field(discriminator="type"),
]


class Message(_Frozen):
    """One stored message of a thread.

    Attributes:
        id: client-supplied or generated; saving an existing id updates the message in place.
        thread_id, resource_id: the thread and its owner.
        role: ``user | assistant | system | tool``.
        parts: at least one part.
        created_at: aware UTC datetime; informational, never used for ordering within a thread.
        seq: per-thread sequence number assigned by the store (0 until stored).
        metadata: JSON object.
        author: optional author for multi-user threads.
    """

    id: str
    thread_id: str
    resource_id: str
    role: Role
    parts: tuple[Part, ...]
    created_at: datetime
    seq: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)
    author: Author | None = None

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    @property
    def text(self) -> str:
        """The text parts joined with a space (what recall and history rendering read first)."""
        return " ".join(p.text for p in self.parts if isinstance(p, TextPart))


class Thread(_Frozen):
    """One conversation, owned by exactly one resource (immutable ``resource_id``).

    ``title`` is the empty string while untitled, never a placeholder. ``version`` counts updates of the
    title and metadata (0 at creation) and guards compare-and-set updates (thread-scoped working memory).
    """

    id: str
    resource_id: str
    title: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    version: int = 0


class Resource(_Frozen):
    """The owner of threads (a user, org or project) and its resource-scoped working memory.

    ``version`` increases on every write and guards compare-and-set updates.
    """

    id: str
    working_memory: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    version: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None


class ThreadPage(_Frozen):
    """A page of threads and the opaque cursor of the next page (``None`` on the last page)."""

    threads: tuple[Thread, ...]
    next_cursor: str | None = None


class MessagePage(_Frozen):
    """A page of messages in chronological order and the opaque cursor of the next page."""

    messages: tuple[Message, ...]
    next_cursor: str | None = None
