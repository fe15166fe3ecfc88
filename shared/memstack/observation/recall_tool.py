"""The ``recall`` tool: the raw messages behind an observation group (spec §2.9.8, §3.4 retrieval).

With ``observational_memory.retrieval`` on, every observed piece of the log is wrapped as
``<observation-group id="…" range="<first message id>:<last message id>">``, and the model gets this tool
to read the source messages of a range when the observations are not detailed enough.

Modes:

* ``messages`` (default): a page of messages of one thread starting at ``cursor`` (a message id, usually
  one end of a range; a whole ``first:last`` range is read from its first id) or at either end of
  ``thread_id`` (``current`` or, in resource scope, any of the resource's threads). ``page`` 1, 2, …
  reads forward (inclusive of the cursor); −1, −2, … backward. ``limit`` 1..20 (20). ``detail`` ``low``
  shows each message's text cut to 300 characters; ``high`` every part (tool calls and results too) up to
  the output budget. A first message longer than the budget is cut where it no longer fits, and
  ``next_char_offset`` says where to continue (pass it back as ``char_offset``).
* ``threads``: the resource's threads, newest first (resource scope), or the current one (thread scope).

Ownership: the cursor must be a message of the caller's resource — and, when the tool's ``scope`` is
``thread``, of the current thread. Anything else reads as "not found", never as another tenant's data.
The answer is kept under about ``OUTPUT_TOKENS`` tokens (``truncated`` says when it was cut).
"""

from __future__ import annotations

import html
from typing import Any, Literal

from memstack.errors import InvalidInput
from memstack.model import Message, Thread
from memstack.ports import MemoryStore, Tokenizer

__all__ = ["MAX_LIMIT", "OUTPUT_TOKENS", "TOOL_NAME", "run_recall", "split_range", "tool_definition"]

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


def split_range(value: str) -> tuple[str, str]:
    """``"<first id>:<last id>"`` (an ``observation-group`` range, attribute-unescaped) as its two ids.

    Ids may themselves hold ``:`` (LoCoMo's ``conv-26:D1:3``); both ends of a range are ids of one
    thread, which usually share their shape, so with an odd number of colons the middle one separates
    them; otherwise the first does."""
    value = html.unescape(value)
    colons = [i for i, ch in enumerate(value) if ch == ":"]
    if not colons:
        return value, value
    cut = colons[len(colons) // 2] if len(colons) % 2 == 1 else colons[0]
    return value[:cut], value[cut + 1 :]


def tool_definition(scope: Literal["thread", "resource"]) -> dict[str, Any]:
    """The OpenAI function definition of the tool for this retrieval ``scope``."""
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": (
                "Read the original messages behind your observations. Pass a message id from an "
                "observation-group range as cursor (page 1 reads forward from it, page -1 backward), or a "
                "thread_id to read a conversation from its start (page 1) or end (page -1). Mode threads "
                + (
                    "lists this user's conversations."
                    if scope == "resource"
                    else "describes this conversation."
                )
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "mode": {"type": "string", "enum": ["messages", "threads"], "default": "messages"},
                    "cursor": {"type": "string", "description": "a message id (one end of a range)"},
                    "thread_id": {"type": "string", "description": "a conversation id, or 'current'"},
                    "page": {
                        "type": "integer",
                        "default": 1,
                        "description": "1, 2, … forward; -1, -2, … backward",
                    },
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": MAX_LIMIT},
                    "detail": {"type": "string", "enum": ["low", "high"], "default": "low"},
                    "char_offset": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "continue a truncated first message from this character",
                    },
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


def _render(message: Message, tokenizer: Tokenizer, detail: str) -> str:
    """A message as the tool shows it: its text at ``low`` detail; at ``high``, every part (tool calls and
    results too) in the Observer's transcript lines."""
    if detail == "low" and message.text:
        return message.text
    from memstack.observation.transcript import format_transcript

    lines = format_transcript([message], tokenizer=tokenizer).splitlines()
    return "\n".join(lines[1:]) if len(lines) > 1 else message.text  # without the date header


_ARGUMENTS = frozenset({"mode", "cursor", "thread_id", "page", "limit", "detail", "char_offset"})


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
        args: the model's arguments (``mode``, ``cursor``, ``thread_id``, ``page``, ``limit``, ``detail``,
            ``char_offset``).

    Returns:
        ``{"mode": "messages", "thread_id", "messages": [{"id", "role", "created_at", "text"}], "page",
        "has_more", "truncated", "next_char_offset"?}``; ``{"mode": "threads", "threads": [{"id", "title",
        "updated_at"}], "truncated"}``; or ``{"error": "..."}`` for a cursor or thread that is not found
        (the model reads errors).

    Raises:
        InvalidInput: malformed arguments (unknown mode or keys, out-of-range numbers, neither cursor nor
            thread).
    """
    if not isinstance(args, dict):
        raise InvalidInput("recall arguments must be an object", field="recall")
    unknown = set(args) - _ARGUMENTS
    if unknown:
        raise InvalidInput(f"recall got unknown arguments: {', '.join(sorted(unknown))}", field="recall")
    mode = args.get("mode", "messages")
    limit = _int(args, "limit", MAX_LIMIT, 1, MAX_LIMIT)
    if mode == "threads":
        return _threads(store, resource_id, thread_id, scope, limit)
    if mode != "messages":
        raise InvalidInput("recall.mode must be 'messages' or 'threads'", field="recall.mode")
    page = _int(args, "page", 1, 1, MAX_PAGE)
    offset, detail = _offset_and_detail(args)
    start = _start(store, resource_id, thread_id, scope, args, page)
    if isinstance(start, dict):
        return start
    source, seq = start
    rows, has_more = _page_rows(store, resource_id, source, seq, page, limit)
    out, truncated, next_offset = _render_page(rows, tokenizer, detail, offset)
    result: dict[str, Any] = {
        "mode": "messages",
        "thread_id": source,
        "messages": out,
        "page": page,
        "has_more": has_more or len(out) < len(rows) or next_offset is not None,
        "truncated": truncated,
    }
    if next_offset is not None:
        result["next_char_offset"] = next_offset
    return result


def _threads(
    store: MemoryStore, resource_id: str, thread_id: str, scope: Literal["thread", "resource"], limit: int
) -> dict[str, Any]:
    """Mode ``threads``: the resource's threads, newest first (resource scope), or the current one."""
    if scope != "resource":
        own = store.get_thread(resource_id, thread_id)
        items = [] if own is None else [_thread_item(own)]
        return {"mode": "threads", "threads": items, "truncated": False}
    page_threads = store.list_threads(resource_id, order_by="updated_at", direction="desc", limit=limit)
    items = [_thread_item(t) for t in page_threads.threads]
    return {"mode": "threads", "threads": items, "truncated": page_threads.next_cursor is not None}


def _offset_and_detail(args: dict[str, Any]) -> tuple[int, str]:
    """``char_offset`` (0..10,000,000) and ``detail`` (``low``/``high``). Raises ``InvalidInput``."""
    offset = args.get("char_offset", 0)
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= 10_000_000:
        raise InvalidInput(
            "recall.char_offset must be an integer from 0 to 10000000", field="recall.char_offset"
        )
    detail = args.get("detail", "low")
    if detail not in ("low", "high"):
        raise InvalidInput("recall.detail must be 'low' or 'high'", field="recall.detail")
    return offset, str(detail)


def _start(
    store: MemoryStore,
    resource_id: str,
    thread_id: str,
    scope: Literal["thread", "resource"],
    args: dict[str, Any],
    page: int,
) -> tuple[str, int | None] | dict[str, Any]:
    """Where the page starts: ``(thread id, seq)`` — ``seq`` ``None`` for the end of the thread — or an
    ``{"error"}`` answer when the cursor or thread is not the caller's to read.

    Raises:
        InvalidInput: a malformed cursor or thread id, or neither given.
    """
    cursor, wanted = args.get("cursor"), args.get("thread_id")
    nowhere = "this conversation" if scope == "thread" else "your memory"
    if cursor is not None:
        if not isinstance(cursor, str) or not cursor or len(cursor) > 600:
            raise InvalidInput("recall.cursor must be a message id", field="recall.cursor")
        found = store.get_messages(resource_id, [cursor])
        if not found and ":" in cursor:  # the model passed a whole range: start from its first message
            found = store.get_messages(resource_id, [split_range(cursor)[0]])
        anchor = found[0] if found else None
        if anchor is None or (scope == "thread" and anchor.thread_id != thread_id):
            return {"error": f"no message {cursor[:100]!r} in {nowhere}"}
        return anchor.thread_id, anchor.seq
    if wanted is not None:
        if not isinstance(wanted, str) or not wanted or len(wanted) > 256:
            raise InvalidInput("recall.thread_id must be a thread id or 'current'", field="recall.thread_id")
        source = thread_id if wanted == "current" else wanted
        if (scope == "thread" and source != thread_id) or store.get_thread(resource_id, source) is None:
            return {"error": f"no conversation {wanted[:100]!r} in {nowhere}"}
        return source, 1 if page > 0 else None  # from the start, or from the end
    raise InvalidInput("recall needs a cursor (a message id) or a thread_id", field="recall.cursor")


def _page_rows(
    store: MemoryStore, resource_id: str, source: str, seq: int | None, page: int, limit: int
) -> tuple[list[Message], bool]:
    """The page's messages in ``seq`` order and whether more follow in the page's direction."""
    if page > 0:
        rows = store.list_messages(
            resource_id, source, limit=limit + 1, after_seq=(seq or 1) - 1 + (page - 1) * limit
        )
        return rows[:limit], len(rows) > limit
    before = None if seq is None else seq + 1 - (-page - 1) * limit
    if seq is None and page < -1:
        # from the end: skip the later pages
        newest = store.list_messages(resource_id, source, limit=(-page - 1) * limit, newest_first=True)
        before = newest[-1].seq if newest else None
    rows = store.list_messages(resource_id, source, limit=limit + 1, before_seq=before, newest_first=True)
    rows.reverse()
    return rows[-limit:], len(rows) > limit


def _render_page(
    rows: list[Message], tokenizer: Tokenizer, detail: str, offset: int
) -> tuple[list[dict[str, Any]], bool, int | None]:
    """The page's items within ``OUTPUT_TOKENS``: the items, whether anything was cut, and where a first
    message too long for the budget continues (``None`` when it fitted)."""
    out: list[dict[str, Any]] = []
    used = 0
    truncated = False
    for i, m in enumerate(rows):
        text = _render(m, tokenizer, detail)
        if i == 0 and offset:
            text = text[offset:]
        if detail == "low" and len(text) > LOW_DETAIL_CHARS:
            text, truncated = text[:LOW_DETAIL_CHARS] + " …", True
        tokens = tokenizer.count(text) + 8
        if used + tokens > OUTPUT_TOKENS:
            if i == 0:  # one long message: show what fits and say where to continue
                cut = _fit(text, OUTPUT_TOKENS - 8, tokenizer)
                return [_message_item(m, cut)], True, offset + len(cut)
            return out, True, None
        used += tokens
        out.append(_message_item(m, text))
    return out, truncated, None


def _fit(text: str, budget: int, tokenizer: Tokenizer) -> str:
    """The longest prefix of ``text`` within ``budget`` tokens (binary search over characters)."""
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if tokenizer.count(text[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    return text[:low]


def _message_item(m: Message, text: str) -> dict[str, Any]:
    return {"id": m.id, "role": m.role, "created_at": m.created_at.isoformat(), "text": text}


def _thread_item(t: Thread) -> dict[str, Any]:
    return {"id": t.id, "title": t.title, "updated_at": t.updated_at.isoformat()}
