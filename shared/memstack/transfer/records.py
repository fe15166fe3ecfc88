"""The export file: JSON Lines, one record per line, each with a ``type`` (docs/export.md).

::

    {"type": "header", "format": "memstack-export", "version": 1, "exported_at": ..., "selection": {...}}
    {"type": "resource", ...Resource}                 the resource record (resource-scoped working memory)
    {"type": "thread", ...Thread}                     thread-scoped working memory is in its metadata
    {"type": "message", ...Message}                   with its id, seq, created_at, parts and author
    {"type": "observation_record", ...ObservationRecord}
    {"type": "end", "counts": {"resources": n, "threads": n, "messages": n, "observation_records": n}}

Records are the domain models' JSON forms (``model_dump(mode="json")``) with ``type`` added, so a file
reads back into exactly the objects that were written. A thread's messages and thread-scope observation
record follow the thread; the ``end`` record makes a truncated file detectable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from memstack.errors import InvalidInput, MemstackError
from memstack.model import (
    Message,
    ObservationRecord,
    Resource,
    Thread,
    check_metadata,
    check_routable_id,
)

FORMAT = "memstack-export"
"""The header's ``format``."""

FORMAT_VERSION = 1
"""The header's ``version``: files of a later version are refused (a reader cannot know their records)."""

COUNT_KEYS = ("resources", "threads", "messages", "observation_records")
"""The keys of the ``end`` record's ``counts``."""

KINDS: dict[str, type[BaseModel]] = {
    "resource": Resource,
    "thread": Thread,
    "message": Message,
    "observation_record": ObservationRecord,
}
"""Record ``type`` → the model its other fields are."""

COUNTED = {
    "resource": "resources",
    "thread": "threads",
    "message": "messages",
    "observation_record": "observation_records",
}


def dump(kind: str, value: BaseModel | dict[str, Any]) -> str:
    """One line (without the newline): ``value``'s JSON form with ``"type": kind`` first, compact, keys
    in the model's order, non-ASCII kept."""
    body = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    return json.dumps({"type": kind, **body}, ensure_ascii=False, separators=(",", ":"))


def header(exported_at: str, selection: dict[str, str | None]) -> str:
    """The first line of a file."""
    return dump(
        "header",
        {"format": FORMAT, "version": FORMAT_VERSION, "exported_at": exported_at, "selection": selection},
    )


@dataclass(frozen=True, slots=True)
class Record:
    """One parsed line: its number (1-based), ``type`` and value (a model, or the header's/end's dict)."""

    line: int
    kind: str
    value: Any


def parse(line_number: int, text: str) -> Record:
    """Parse and validate one line.

    Raises:
        InvalidInput: not a JSON object, no or an unknown ``type``, or fields its model refuses; the
            message starts with ``line N:`` (field ``line``).
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise bad_line(line_number, f"not JSON ({exc.args[0] if exc.args else exc})") from None
    if not isinstance(data, dict):
        raise bad_line(line_number, "a record must be a JSON object")
    kind = data.pop("type", None)
    if kind in ("header", "end"):
        return Record(line_number, kind, data)
    model = KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        known = ", ".join(["header", *KINDS, "end"])
        raise bad_line(line_number, f"unknown record type {kind!r} (known: {known})")
    try:
        value = model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or kind
        raise bad_line(line_number, f"{kind}: {where}: {first['msg']}") from None
    try:
        check_content(value)
    except MemstackError as exc:
        raise bad_line(line_number, f"{kind}: {exc.message}") from None
    return Record(line_number, kind, value)


def check_content(value: BaseModel) -> None:
    """The rules every write path applies to what a record holds, beyond its model's types: a message as
    ``save_messages`` takes it (``inputs.coerce_message``: parts, sizes, content, metadata, author; never
    the ``system`` role), a thread's ids, title and metadata as ``create_thread`` takes them, a resource's
    metadata and working memory's text and character limit (``working_memory.service``). Limits that
    depend on the target's options (``working_memory.max_tokens``) are checked by the import against it.

    Raises:
        InvalidInput, PayloadTooLarge: naming the field.
    """
    from memstack.inputs import coerce_message
    from memstack.usecases.checks import check_thread_metadata, check_title
    from memstack.working_memory.service import check_chars

    if isinstance(value, Message):
        if value.role == "system":  # never stored: context() takes them as instructions
            raise InvalidInput("role: system messages are not stored", field="message.role")
        data = value.model_dump(exclude={"seq"})
        coerce_message(data, thread_id=value.thread_id, resource_id=value.resource_id, now=value.created_at)
    elif isinstance(value, Thread):
        check_routable_id(value.id, "thread.id")  # as create_thread: the HTTP API must reach it
        check_routable_id(value.resource_id, "thread.resource_id")
        check_title(value.title)
        check_thread_metadata(value.metadata)
    elif isinstance(value, Resource):
        check_metadata(value.metadata, "metadata")
        if value.working_memory is not None:
            check_chars(value.working_memory)


def check_header(record: Record) -> None:
    """The first record must be a header of this format and a version this reader knows.

    Raises:
        InvalidInput: naming line 1 and what is wrong.
    """
    if record.kind != "header" or record.value.get("format") != FORMAT:
        raise bad_line(record.line, f"not a Memstack export: the first line must be a {FORMAT!r} header")
    version = record.value.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= FORMAT_VERSION:
        raise bad_line(
            record.line,
            f"format version {version!r} is not supported (this memstack reads versions 1 to {FORMAT_VERSION})",
        )


def bad_line(line_number: int, reason: str) -> InvalidInput:
    """The error of a file's line: ``line N: reason`` (field ``line``)."""
    return InvalidInput(f"line {line_number}: {reason}", field="line")
