"""The ``recall`` tool: the raw messages behind an observation group (spec §2.9.8, §3.4 retrieval).

With ``observational_memory.retrieval`` on, every observed piece of the log is wrapped as
``<observation-group id="…" range="<first message id>:<last message id>">``, and the model gets this tool
to read the source messages of a range when the observations are not detailed enough.

Modes:

* ``messages`` (default): a page of messages of one thread starting at ``cursor`` (a message id, usually
  one end of a range). ``page`` 1, 2, … reads forward from the cursor (inclusive); −1, −2, … reads
  backward. ``limit`` 1..20 (20). ``detail`` ``low`` cuts each message to 300 characters, ``high``
  shows up to the output budget.
* ``threads``: the resource's threads, newest first (resource scope only).

Ownership: the cursor must be a message of the caller's resource — and, when the tool's ``scope`` is
``thread``, of the current thread. Anything else reads as "not found", never as another tenant's data.
The answer is kept under about ``OUTPUT_TOKENS`` tokens (``truncated`` says when it was cut).
"""

from __future__ import annotations

from typing import Any, Literal

from memstack.errors import InvalidInput
from memstack.ports import MemoryStore, Tokenizer

__all__ = ["MAX_LIMIT", "OUTPUT_TOKENS", "TOOL_NAME", "run_recall", "tool_definition"]

TOOL_NAME = "recall"
"""The tool's function name."""

MAX_LIMIT = 20
"""Most messages (or threads) one call returns."""

OUTPUT_TOKENS = 2_000
"""The answer's budget in tokens (spec §2.9.8: about 2,000)."""

LOW_DETAIL_CHARS = 300
"""Characters of each message's text at ``detail: low``."""

MAX_PAGE = 1_000
"""Largest ``|page|``."""


def tool_definition(scope: Literal["thread", "resource"]) -> dict[str, Any]:
    """The OpenAI function definition of the tool for this retrieval ``scope``."""
    modes = ["messages", "threads"] if scope == "resource" else ["messages"]
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": (
                "Read the original messages behind your observations. Pass a message id from an "
                "observation-group range as cursor; page 1 reads forward from it, page -1 backward."
                + (" Mode threads lists this user's conversations." if scope == "resource" else "")
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "mode": {"type": "string", "enum": modes, "default": "messages"},
                    "cursor": {"type": "string", "description": "a message id (one end of a range)"},
                    "page": {
                        "type": "integer",
                        "default": 1,
                        "description": "1, 2, … forward; -1, -2, … backward",
                    },
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": MAX_LIMIT},
                    "detail": {"type": "string", "enum": ["low", "high"], "default": "low"},
                },
                "additionalProperties": False,
            },
        },
    }


def _int(args: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = args.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= abs(value) <= high:
        raise InvalidInput(
            f"recall.{name} must be an integer with {low} <= |{name}| <= {high}", field=f"recall.{name}"
        )
    return value


def run_recall(
    store: MemoryStore,
    tokenizer: Tokenizer,
    *,
    resource_id: str,
    thread_id: str,
    scope: Literal["thread", "resource"],
    args: dict[str, Any],
) -> dict[str, Any]:
    """Answer one ``recall`` call.

    Args:
        args: the model's arguments (``mode``, ``cursor``, ``page``, ``limit``, ``detail``).

    Returns:
        ``{"mode": "messages", "thread_id", "messages": [{"id", "role", "created_at", "text"}], "page",
        "has_more", "truncated"}``, ``{"mode": "threads", "threads": [{"id", "title", "updated_at"}],
        "truncated"}``, or ``{"error": "..."}`` for a cursor that is not found (the model reads errors).

    Raises:
        InvalidInput: malformed arguments (unknown mode or keys, out-of-range numbers).
    """
    if not isinstance(args, dict):
        raise InvalidInput("recall arguments must be an object", field="recall")
    unknown = set(args) - {"mode", "cursor", "page", "limit", "detail"}
    if unknown:
        raise InvalidInput(f"recall got unknown arguments: {', '.join(sorted(unknown))}", field="recall")
    mode = args.get("mode", "messages")
    limit = _int(args, "limit", MAX_LIMIT, 1, MAX_LIMIT)
    if mode == "threads":
        if scope != "resource":
            raise InvalidInput("recall mode 'threads' needs retrieval scope 'resource'", field="recall.mode")
        page_threads = store.list_threads(resource_id, order_by="updated_at", direction="desc", limit=limit)
        items = [
            {"id": t.id, "title": t.title, "updated_at": t.updated_at.isoformat()}
            for t in page_threads.threads
        ]
        return {"mode": "threads", "threads": items, "truncated": page_threads.next_cursor is not None}
    if mode != "messages":
        raise InvalidInput("recall.mode must be 'messages' or 'threads'", field="recall.mode")
    cursor = args.get("cursor")
    if not isinstance(cursor, str) or not cursor or len(cursor) > 256:
        raise InvalidInput("recall.cursor must be a message id", field="recall.cursor")
    page = _int(args, "page", 1, 1, MAX_PAGE)
    detail = args.get("detail", "low")
    if detail not in ("low", "high"):
        raise InvalidInput("recall.detail must be 'low' or 'high'", field="recall.detail")
    found = store.get_messages(resource_id, [cursor])
    anchor = found[0] if found else None
    if anchor is None or (scope == "thread" and anchor.thread_id != thread_id):
        return {
            "error": f"no message {cursor!r} in {'this conversation' if scope == 'thread' else 'your memory'}"
        }
    if page > 0:
        start = anchor.seq - 1 + (page - 1) * limit
        rows = store.list_messages(resource_id, anchor.thread_id, limit=limit + 1, after_seq=start)
    else:
        end = anchor.seq + 1 - (-page - 1) * limit
        rows = store.list_messages(
            resource_id, anchor.thread_id, limit=limit + 1, before_seq=end, newest_first=True
        )
        rows.reverse()
    has_more = len(rows) > limit
    rows = rows[:limit] if page > 0 else rows[-limit:]
    out: list[dict[str, Any]] = []
    used = 0
    truncated = False
    for m in rows:
        text = m.text
        if detail == "low" and len(text) > LOW_DETAIL_CHARS:
            text, truncated = text[:LOW_DETAIL_CHARS] + " …", True
        tokens = tokenizer.count(text) + 8
        if used + tokens > OUTPUT_TOKENS:
            truncated = True
            break
        used += tokens
        out.append({"id": m.id, "role": m.role, "created_at": m.created_at.isoformat(), "text": text})
    return {
        "mode": "messages",
        "thread_id": anchor.thread_id,
        "messages": out,
        "page": page,
        "has_more": has_more or len(out) < len(rows),
        "truncated": truncated,
    }
