"""Messages as the Observer reads them (spec §2.9.5 "Observer transcript format"), split into batches
under a token cap, and the token count of messages as the actor's model sees them (spec §2.9.3).

Transcript shape::

    Dec 4 2025:
    User (14:30): I moved to Lisbon last week
    Assistant: Congratulations! …
    Assistant (14:31):
    Tool Call weather: {"city": "Lisbon"}
    Tool Result weather: {"temp_c": 21}

* A date line ``Mon D YYYY:`` (English short month, UTC) starts the transcript and every new UTC day.
* Each message starts ``Speaker (HH:MM):`` with the 24-hour UTC time, which is shown only when it differs
  from the previous message's (and always after a date line). Speakers are ``User``, ``Assistant``,
  ``Tool`` and ``System``, followed by the author as ``User (Ana)`` in multi-user threads.
* Text parts follow the speaker; tool calls, results, reasoning, images and files are lines of their own:
  ``Tool Call <name>: <args JSON>``, ``Tool Result <name>: <result>`` (``Tool Error`` when the result is
  an error), ``Reasoning: <text>``, ``[Image #n: <caption or URL>]``, ``[File #n: <name or URL>]``.
  A call or a result is shown once per tool-call id. Results over ``tool_result_max_tokens`` are cut,
  with a marker naming the original size.
* A temporal-gap marker message (``memstack.observation.temporal``) is shown as its text alone, and a
  ``tool`` message without text as its result lines alone (no ``Tool:`` speaker line).
* ``<system-reminder>…</system-reminder>`` spans are not conversation (Memstack's continuation reminder,
  an agent framework's reminders): they are left out of the text, so the Observer never records them as
  what the user said.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from memstack.context import MESSAGE_OVERHEAD_TOKENS, _author_prefix, _content_text, _speaker
from memstack.model import (
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from memstack.observation.temporal import is_temporal_marker
from memstack.ports import Tokenizer
from memstack.text import to_json_text

__all__ = [
    "IMAGE_TOKENS",
    "MIN_BATCH_TOKENS",
    "TranscriptBatch",
    "count_message_tokens",
    "format_transcript",
    "thread_block",
    "transcript_batches",
    "truncate_to_tokens",
]

_REMINDER = re.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.S | re.I)

IMAGE_TOKENS = 765
"""Tokens counted for an image the model is sent by URL (spec §2.10 ``TokenLimiter``: images flat)."""

MIN_BATCH_TOKENS = 100
"""Smallest ``max_tokens`` ``transcript_batches`` accepts: a batch must hold a header and some text."""

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_LABEL_RESERVE = 24
"""Tokens kept free in each part of a split message for the date line, speaker and ``(part i of n)``."""


@dataclass(frozen=True, slots=True)
class TranscriptBatch:
    """One Observer call's worth of transcript.

    Attributes:
        text: the transcript of the batch (starts with a date line).
        message_ids: ids of the messages the batch covers, in order (a message split into parts is
            named by each of its parts' batches).
        first_seq, last_seq: ``seq`` of the first and last of those messages.
        tokens: ``tokenizer.count(text)``, never over the ``max_tokens`` asked for.
    """

    text: str
    message_ids: list[str]
    first_seq: int
    last_seq: int
    tokens: int


@dataclass(frozen=True, slots=True)
class _Rendered:
    """A message rendered once: its day, clock and speaker, and its body (everything after the colon);
    a ``bare`` one is shown as its body alone (markers, tool-result messages)."""

    message: Message
    day: date
    clock: str
    speaker: str
    body: str
    bare: bool


def _day_line(day: date) -> str:
    return f"{_MONTHS[day.month - 1]} {day.day} {day.year}:"


def truncate_to_tokens(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    """The longest prefix of ``text`` (in characters) of at most ``max_tokens`` tokens.

    The ``Tokenizer`` port only counts, so the cut is found by binary search over the character length,
    within a window that starts at ``8 × max_tokens`` characters and doubles while it fits: about
    ``log2(window)`` counts of at most the window, so cutting a small piece off a huge text stays cheap.
    Returns ``text`` itself when it fits, ``""`` when ``max_tokens`` ≤ 0.
    """
    if max_tokens <= 0:
        return ""
    low = 0  # a prefix of this length fits
    high = min(len(text), 8 * max_tokens)
    while tokenizer.count(text[:high]) <= max_tokens:
        if high == len(text):
            return text
        low, high = high, min(len(text), 2 * high)
    while high - low > 1:  # ``low`` fits, ``high`` does not
        middle = (low + high) // 2
        if tokenizer.count(text[:middle]) <= max_tokens:
            low = middle
        else:
            high = middle
    return text[:low]


def _tool_result_text(result: ToolResultPart, max_tokens: int, tokenizer: Tokenizer) -> str:
    text = to_json_text(result.result)
    total = tokenizer.count(text)
    if total <= max_tokens:
        return text
    kept = truncate_to_tokens(text, max_tokens, tokenizer)
    return f"{kept} … [truncated: the result is {total} tokens, {max_tokens} shown]"


def _render_all(
    messages: Sequence[Message], tokenizer: Tokenizer, tool_result_max_tokens: int
) -> list[_Rendered]:
    """Render every message's body once, numbering images and files over the whole sequence and
    showing each tool call and result once per call id."""
    names = {p.id: p.name for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    seen_calls: set[str] = set()
    seen_results: set[str] = set()
    images = files = 0
    out: list[_Rendered] = []
    for message in messages:
        t = message.created_at
        clock = f"{t.hour:02d}:{t.minute:02d}"
        if is_temporal_marker(message):
            out.append(_Rendered(message, t.date(), clock, "", message.text.strip(), True))
            continue
        inline: list[str] = []  # text parts, shown after the speaker
        lines: list[str] = []  # everything else, one line (or block) each
        for part in message.parts:
            if isinstance(part, TextPart):
                text = _REMINDER.sub("", part.text)
                if text.strip():
                    inline.append(text.strip() if text != part.text else text)
            elif isinstance(part, ReasoningPart):
                if part.text.strip():
                    lines.append(f"Reasoning: {part.text}")
            elif isinstance(part, ToolCallPart):
                if part.id and part.id in seen_calls:
                    continue
                seen_calls.add(part.id)
                args = json.dumps(part.args, ensure_ascii=False)
                lines.append(f"Tool Call {part.name}: {args}")
            elif isinstance(part, ToolResultPart):
                if part.tool_call_id and part.tool_call_id in seen_results:
                    continue
                seen_results.add(part.tool_call_id)
                name = part.name or names.get(part.tool_call_id, "") or "tool"
                kind = "Tool Error" if part.is_error else "Tool Result"
                body = _tool_result_text(part, tool_result_max_tokens, tokenizer)
                lines.append(f"{kind} {name}: {body}")
            elif isinstance(part, ImagePart):
                images += 1
                lines.append(f"[Image #{images}: {part.caption or part.url}]")
            elif isinstance(part, FilePart):
                files += 1
                lines.append(f"[File #{files}: {part.name or part.url}]")
        # without text, the other lines start below the speaker
        body = "\n".join(["\n".join(inline), *lines]) if inline else "".join("\n" + x for x in lines)
        bare = message.role == "tool" and not inline
        out.append(_Rendered(message, t.date(), clock, _speaker(message), body, bare))
    return out


def _assemble(items: Sequence[_Rendered], label: str = "") -> str:
    """The transcript of already-rendered messages: date lines and shown-once clocks; ``label`` (e.g.
    ``" (part 2 of 3)"``) follows the speaker of every message (used for one-message parts)."""
    lines: list[str] = []
    day: date | None = None
    clock: str | None = None
    for item in items:
        if not item.body:
            continue
        if item.day != day:
            day, clock = item.day, None
            lines.append(_day_line(item.day))
        if item.bare:
            lines.append(item.body.lstrip("\n"))
            continue
        when = f" ({item.clock})" if item.clock != clock else ""
        clock = item.clock
        separator = "" if item.body.startswith("\n") else " "
        lines.append(f"{item.speaker}{when}{label}:{separator}{item.body}")
    return "\n".join(lines)


def format_transcript(
    messages: Sequence[Message], *, tokenizer: Tokenizer, tool_result_max_tokens: int = 5000
) -> str:
    """The Observer transcript of ``messages``, in the order given (the caller sorts by ``seq``).

    Args:
        messages: the messages to observe.
        tokenizer: counts tool-result tokens for truncation.
        tool_result_max_tokens: tool results longer than this many tokens are cut, with a marker
            (Mastra's ``DEFAULT_OBSERVER_TOOL_RESULT_MAX_TOKENS``).

    Returns:
        The transcript (module docstring), ``""`` when no message has anything to show.
    """
    return _assemble(_render_all(messages, tokenizer, tool_result_max_tokens))


def thread_block(thread_id: str, transcript: str) -> str:
    """A transcript wrapped for the multi-thread Observer (resource scope, spec §3.2):
    ``<thread id="…">\\n…\\n</thread>`` with the id escaped for an attribute."""
    return f'<thread id="{html.escape(thread_id, quote=True)}">\n{transcript}\n</thread>'


def _split_body(body: str, budget: int, tokenizer: Tokenizer) -> list[str]:
    """``body`` cut into consecutive pieces of at most ``budget`` tokens each, preferring to cut after a
    newline or a space in the last fifth of a piece; the pieces concatenate back to ``body``."""
    pieces: list[str] = []
    rest = body
    while rest:
        piece = truncate_to_tokens(rest, budget, tokenizer)
        if not piece:  # one character over the budget: cannot happen with budget ≥ a few tokens
            piece = rest[:1]
        if len(piece) < len(rest):
            floor = len(piece) * 4 // 5
            cut = max(piece.rfind("\n", floor), piece.rfind(" ", floor))
            if cut > 0:
                piece = piece[: cut + 1]
        pieces.append(piece)
        rest = rest[len(piece) :]
    return pieces


def _message_parts(item: _Rendered, max_tokens: int, tokenizer: Tokenizer) -> list[str]:
    """The transcripts of one message too large for a batch: ``(part i of n)`` after the speaker, each
    at most ``max_tokens`` tokens."""
    budget = max_tokens - _LABEL_RESERVE - tokenizer.count(_day_line(item.day) + item.speaker + item.clock)
    while True:
        pieces = _split_body(item.body, max(budget, 1), tokenizer)
        n = len(pieces)
        texts = [
            _assemble([_replace_body(item, piece)], f" (part {i} of {n})")
            for i, piece in enumerate(pieces, start=1)
        ]
        if all(tokenizer.count(t) <= max_tokens for t in texts) or budget <= 1:
            return texts
        budget = budget * 9 // 10  # a piece's tokens changed at its seams; try smaller pieces


def _replace_body(item: _Rendered, body: str) -> _Rendered:
    return _Rendered(item.message, item.day, item.clock, item.speaker or "System", body, False)


def transcript_batches(
    messages: Sequence[Message],
    *,
    tokenizer: Tokenizer,
    max_tokens: int,
    tool_result_max_tokens: int = 5000,
) -> list[TranscriptBatch]:
    """``messages`` as Observer transcripts of at most ``max_tokens`` tokens each.

    Batches split on message boundaries, in order; each starts with a date line and shows the first
    message's time. A message whose transcript alone is over ``max_tokens`` gets batches of its own,
    one per consecutive part, labelled ``(part i of n)`` after the speaker, so a huge message is still
    observed, in pieces. The result is deterministic. Messages with nothing to show (no
    parts the transcript renders) are still named by a batch: the next one, or the last one when they
    come last; if no message shows anything, one batch with empty ``text`` and 0 tokens names them all
    (the caller skips the model call and still marks them observed).

    Args:
        messages: the messages to observe, in ``seq`` order.
        tokenizer: counts tokens.
        max_tokens: the most tokens of one batch's ``text`` (≥ ``MIN_BATCH_TOKENS``).
        tool_result_max_tokens: as ``format_transcript``.

    Returns:
        The batches (empty for no messages).

    Raises:
        ValueError: ``max_tokens`` < ``MIN_BATCH_TOKENS``.
    """
    if max_tokens < MIN_BATCH_TOKENS:
        raise ValueError(f"max_tokens must be at least {MIN_BATCH_TOKENS}, got {max_tokens}")
    batcher = _Batcher(tokenizer, max_tokens)
    for item in _render_all(messages, tokenizer, tool_result_max_tokens):
        batcher.add(item)
    return batcher.finish()


class _Batcher:
    """The state of ``transcript_batches``: the batches made so far and the next batch's messages."""

    def __init__(self, tokenizer: Tokenizer, max_tokens: int) -> None:
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.batches: list[TranscriptBatch] = []
        self.group: list[_Rendered] = []  # the next batch's messages; may start with ones that show nothing
        self.group_tokens = 0
        self.group_day: date | None = None

    def add(self, item: _Rendered) -> None:
        """Put one message in the next batch, closing the batch first when the message would not fit, or
        give a message too big for any batch batches of its own."""
        if not item.body:
            self.group.append(item)
            return
        day_cost = self.tokenizer.count(_day_line(item.day)) + 1
        line_cost = self.tokenizer.count(_assemble([item])) - day_cost + 2  # its time shown, plus a newline
        if day_cost + line_cost > self.max_tokens:
            self.flush()
            parts = _message_parts(item, self.max_tokens, self.tokenizer)
            self.emit([*self.group, item], parts[0])
            self.group = []
            for part in parts[1:]:
                self.emit([item], part)
            return
        cost = line_cost + (day_cost if item.day != self.group_day else 0)
        if self.group_tokens and self.group_tokens + cost > self.max_tokens:
            self.flush()
            cost = line_cost + day_cost
        self.group.append(item)
        self.group_tokens += cost
        self.group_day = item.day

    def emit(self, items: Sequence[_Rendered], text: str) -> None:
        """Close one batch of ``items`` with transcript ``text``."""
        ids = [item.message.id for item in items]
        self.batches.append(
            TranscriptBatch(
                text, ids, items[0].message.seq, items[-1].message.seq, self.tokenizer.count(text)
            )
        )

    def flush(self) -> None:
        """Close the pending group as one or more batches, unless none of it shows anything yet."""
        if all(not item.body for item in self.group):
            return  # nothing to show yet: these ride along with the next batch
        pending = self.group
        self.group, self.group_tokens, self.group_day = [], 0, None
        while pending:
            # the estimate (a sum over lines) almost always bounds the whole; move the tail out if not
            keep = len(pending)
            text = _assemble(pending[:keep])
            while keep > 1 and self.tokenizer.count(text) > self.max_tokens:
                keep -= 1
                text = _assemble(pending[:keep])
            self.emit(pending[:keep], text)
            pending = pending[keep:]

    def finish(self) -> list[TranscriptBatch]:
        """Every batch, the messages that show nothing named by the last batch (or by one empty batch)."""
        self.flush()
        if self.group:  # only messages that show nothing are left
            if self.batches:
                last = self.batches[-1]
                ids = last.message_ids + [item.message.id for item in self.group]
                self.batches[-1] = TranscriptBatch(
                    last.text, ids, last.first_seq, self.group[-1].message.seq, last.tokens
                )
            else:
                self.emit(self.group, "")
        return self.batches


def count_message_tokens(messages: Sequence[Message], tokenizer: Tokenizer) -> int:
    """Tokens of ``messages`` as the actor's model sees them: the thresholds' unit (spec §2.9.3).

    Per message: ``MESSAGE_OVERHEAD_TOKENS`` (4, as ``memstack.context.count_tokens``) plus the tokens of
    the author prefix and text, file and image-caption text (``memstack.context._content_text``), each
    tool call's name and JSON arguments, each tool result as JSON text, and ``IMAGE_TOKENS`` (765) per
    image sent by URL (``http``/``data:``). Reasoning parts are not counted (the model is not sent
    them). This counts every part even where the chat rendering would drop an unpaired tool call, so
    pending work is never under-counted. No per-conversation overhead is added.
    """
    total = 0
    for message in messages:
        total += MESSAGE_OVERHEAD_TOKENS
        total += tokenizer.count(_author_prefix(message) + _content_text(message))
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                total += tokenizer.count(part.name) + tokenizer.count(
                    json.dumps(part.args, ensure_ascii=False)
                )
            elif isinstance(part, ToolResultPart):
                total += tokenizer.count(to_json_text(part.result))
            elif isinstance(part, ImagePart) and part.url.startswith(("http", "data:")):
                total += IMAGE_TOKENS
    return total
