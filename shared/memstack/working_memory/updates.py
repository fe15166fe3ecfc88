"""What one working-memory update does to the stored document, as pure functions (spec §2.7).

Each function takes the stored document (``None`` when nothing is stored) and the model's input, and
returns an ``Outcome``: the new document to write, or no write with a message the model can read. They
touch no storage, so the compare-and-set loop (``memstack.working_memory.service``) can run them again on
a fresh read after losing a race.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from memstack.errors import InvalidInput
from memstack.working_memory.merge import deep_merge, strip_padding_nulls
from memstack.working_memory.schema import MemorySchema

UPDATE_REASONS: tuple[str, ...] = (
    "append-new-memory",
    "clarify-existing-memory",
    "replace-irrelevant-memory",
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of an update, before it is written.

    Attributes:
        success: whether the working memory now holds the update.
        message: what the model is told.
        document: the new document to store; ``None`` means nothing to write.
        is_error: the input was wrong (bad JSON, schema violation); the model should correct it.
        current: the stored document when it moved on since the model read it (``stale``): shown to the
            model so it redoes its change on it.
    """

    success: bool
    message: str
    document: str | None = None
    is_error: bool = False
    current: str | None = None

    def as_result(self) -> dict[str, Any]:
        """The tool result shown to the model: ``{"success", "message"}``, plus ``"current_memory"`` (the
        stored document) when the update was refused because the document moved on."""
        result: dict[str, Any] = {"success": self.success, "message": self.message}
        if self.current is not None:
            result["current_memory"] = self.current
        return result


def stale(current: str | None, *, garbled: bool = False) -> Outcome:
    """The refusal of a whole-document update computed from a document that has since changed: the
    model's copy lacks what another writer added, so writing it would silently drop that (issue 13).

    Args:
        current: the stored document, shown to the model so it redoes its change on it.
        garbled: the version the update carried is not a version at all (not 16 hex digits: a miscopied
            string, or a number, boolean, list or object in its place). Refused the same way, since the
            document the model wrote from is then unknown; the message says to copy the version unchanged.
    """
    why = (
        "the version you passed is not the one the system message gives (copy it unchanged, as a string)"
        if garbled
        else "the working memory changed since you read it (another conversation updated it)"
    )
    return Outcome(
        False,
        f"Not saved: {why}. current_memory holds the document as it is now: apply your change to it and "
        "call updateWorkingMemory again with the complete document and the version given here.",
        is_error=True,
        current=current or "",
    )


def _normalised(text: str) -> str:
    return " ".join(text.split())


def _holds_lines(existing: str, text: str) -> bool:
    """Whether ``text`` (stripped) already stands in ``existing`` as whole lines, not as part of a line
    ("Paris" is not a duplicate of "- City: Paris")."""
    lines = [line.strip() for line in text.strip().splitlines()]
    stored = [line.strip() for line in existing.splitlines()]
    return bool(lines) and any(
        stored[i : i + len(lines)] == lines for i in range(len(stored) - len(lines) + 1)
    )


def markdown_replace(current: str | None, memory: str, template: str) -> Outcome:
    """Replace semantics, with the template guard: a bare copy of the template (whitespace-normalised)
    never replaces a document that holds something else (spec §2.7 "Markdown guard")."""
    bare = _normalised(memory) == _normalised(template) or not memory.strip()
    if bare and current is not None and current.strip() and _normalised(current) != _normalised(template):
        return Outcome(
            False,
            "Not saved: the update is the empty template and would erase the stored working memory. "
            "Send the complete document with its information filled in.",
        )
    return Outcome(True, "Working memory saved.", document=memory)


def json_merge(current: str | None, update: Any, schema: MemorySchema) -> Outcome:
    """Merge semantics (``memstack.working_memory.merge``), then validation of the merged document.

    Args:
        current: the stored JSON text; text that is not a JSON object is treated as ``{}``.
        update: the ``memory`` value of the tool input: an object, or a string holding one; ``None``
            changes nothing.
        schema: the configured schema.

    Returns:
        A write, or an error outcome naming the problem (invalid JSON, not an object, a violation).
    """
    if update is None:
        return Outcome(True, "No memory data was given; working memory is unchanged.")
    if isinstance(update, str):
        try:
            update = json.loads(update)
        except ValueError as exc:
            return Outcome(
                False, f"Not saved: memory is not valid JSON ({exc}). Send a JSON object.", is_error=True
            )
    if not isinstance(update, dict):
        return Outcome(False, "Not saved: memory must be a JSON object.", is_error=True)
    stored = _load_object(current)
    merged = deep_merge(stored, strip_padding_nulls(update, schema.json))
    try:
        schema.validate(merged)
    except InvalidInput as exc:
        return Outcome(
            False,
            f"Not saved: the merged working memory breaks the schema at {exc.message}. Correct it and call "
            "the tool again.",
            is_error=True,
        )
    if merged == stored:
        return Outcome(True, "Working memory already holds this; nothing changed.")
    try:
        document = json.dumps(merged, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return Outcome(False, "Not saved: NaN and Infinity are not JSON numbers.", is_error=True)
    return Outcome(True, "Working memory saved.", document=document)


def _load_object(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def vnext_update(
    current: str | None,
    new_memory: str,
    *,
    search_string: str | None,
    reason: str,
    template: str,
    scope: str,
) -> Outcome:
    """The vnext variant (spec §2.7 "vNext"): append, or replace a found search string in place.

    * ``append-new-memory`` (default) ignores any search string and appends after a newline;
    * ``clarify-existing-memory`` / ``replace-irrelevant-memory`` need a search string; found, it is
      replaced in place (first occurrence); not found, the text is appended;
    * in resource scope ``replace-irrelevant-memory`` becomes an append: information that does not matter
      to this conversation may matter to another thread of the resource;
    * a text that is already stored, or a bare copy of the template, is rejected; copies of the template
      are removed from the result.
    """
    if reason not in UPDATE_REASONS:
        return Outcome(
            False, f"Not saved: updateReason must be one of {', '.join(UPDATE_REASONS)}.", is_error=True
        )
    if not new_memory.strip():
        return Outcome(False, "Not saved: newMemory is empty.", is_error=True)
    existing = current or ""
    if scope == "resource" and reason == "replace-irrelevant-memory":
        search_string = None
        reason = "append-new-memory"
    if reason == "append-new-memory":
        search_string = None
    elif not search_string:
        return Outcome(
            False,
            f"Not saved: updateReason {reason} needs a searchString naming the text to replace.",
            is_error=True,
        )
    if _normalised(new_memory) == _normalised(template):
        return Outcome(False, "Not saved: newMemory is only the empty template.")
    if _holds_lines(existing, new_memory):
        return Outcome(False, "Not saved: this information is already in working memory.")
    if search_string and search_string in existing:
        updated = existing.replace(search_string, new_memory, 1)
        message = "Working memory updated in place."
    else:
        updated = f"{existing}\n{new_memory}" if existing else new_memory
        message = "Working memory appended."
    if template.strip() and existing and template.strip() in updated and template.strip() not in existing:
        updated = updated.replace(template.strip(), "")
    return Outcome(True, message, document=updated)
