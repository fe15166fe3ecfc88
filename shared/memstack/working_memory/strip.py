"""What a saved batch loses to working memory (spec §2.4): the ``updateWorkingMemory`` tool calls, their
results, and the ``<working_memory>`` tags a model writes into its answers."""

from __future__ import annotations

from memstack.model import Message, TextPart, ToolCallPart, ToolResultPart
from memstack.working_memory.tools import TOOL_NAME


def strip_batch(messages: list[Message]) -> list[Message]:
    """The batch without working-memory tool calls, their results and tags; messages left empty are
    dropped. A result is matched to its call by id within the batch, or by its own tool name."""
    calls = {p.id for m in messages for p in m.parts if isinstance(p, ToolCallPart) and p.name == TOOL_NAME}
    return [c for c in (strip_message(m, calls) for m in messages) if c is not None]


def strip_message(message: Message, wm_calls: set[str]) -> Message | None:
    """The message without working-memory tool calls, their results (``wm_calls``: call ids of the batch)
    and ``<working_memory>`` tags; ``None`` when nothing is left."""
    parts = []
    for p in message.parts:
        if isinstance(p, ToolCallPart) and p.name == TOOL_NAME:
            continue
        if isinstance(p, ToolResultPart) and (p.tool_call_id in wm_calls or p.name == TOOL_NAME):
            continue
        # only the model writes these tags (spec §2.7): a user's text is kept whole
        if message.role == "assistant" and isinstance(p, TextPart) and "<working_memory>" in p.text:
            text = strip_tags(p.text, "working_memory")
            if not text.strip():
                continue
            p = TextPart(text=text)
        parts.append(p)
    if not parts:
        return None
    if len(parts) == len(message.parts) and parts == list(message.parts):
        return message
    return message.model_copy(update={"parts": tuple(parts)})


def strip_tags(text: str, tag: str) -> str:
    """``text`` without ``<tag>…</tag>`` spans, in one left-to-right pass (no regex, no backtracking; each
    search for the next tag starts where the last one ended, so the cost stays linear).

    An opening tag without a closing one is removed with everything after it; nested opening tags are
    covered by the outermost span; a stray closing tag is removed.
    """
    open_t, close_t = f"<{tag}>", f"</{tag}>"
    out: list[str] = []
    depth, pos = 0, 0
    next_open, next_close = text.find(open_t), text.find(close_t)
    while next_open >= 0 or next_close >= 0:
        opening = next_close < 0 or 0 <= next_open < next_close
        at = next_open if opening else next_close
        if depth == 0:
            out.append(text[pos:at])
        if opening:
            depth += 1
            pos = at + len(open_t)
            next_open = text.find(open_t, pos)
        else:
            depth = max(0, depth - 1)
            pos = at + len(close_t)
            next_close = text.find(close_t, pos)
            if 0 <= next_open < pos:
                next_open = text.find(open_t, pos)
    if depth == 0:
        out.append(text[pos:])
    return "".join(out)
