"""Thread titles (spec §2.6, §3.6): the transcript a title model reads, and one title generation.

Mastra generates a title after the first turn of an untitled thread with a plain completion; Memstack
runs it in the background observation path and never overwrites a title a user set (the
caller's rule: untitled is the empty string).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from memstack.errors import Unavailable
from memstack.model import FilePart, ImagePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from memstack.observation.parsing import clean_title
from memstack.observation.prompts import TITLE_INSTRUCTIONS
from memstack.ports import ChatModel
from memstack.text import to_json_text

__all__ = ["TOOL_TEXT_CHARS", "URL_CHARS", "generate_title", "title_transcript"]

TOOL_TEXT_CHARS = 200
"""Tool arguments and results are cut to this many characters in the title transcript (spec §2.6)."""

URL_CHARS = 100
"""File and image URLs are cut to this many characters in the title transcript (spec §2.6)."""

_SPEAKERS = {"user": "User", "assistant": "Assistant", "tool": "Tool", "system": "System"}


def title_transcript(messages: Sequence[Message]) -> str:
    """The transcript a title model reads (spec §2.6 ``formatMessagesForTitle``), one line per part:

    ``User: …``, ``Assistant: …`` (text parts), ``Reasoning: …``, ``Tool Call <name>: <args JSON[:200]>``,
    ``Tool Result <name>: <result[:200]>``, and ``User added <media type> file: <url[:100]>`` for files
    and images (the speaker is the message's role). Empty text parts are skipped.
    """
    names = {p.id: p.name for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    lines: list[str] = []
    for message in messages:
        speaker = _SPEAKERS[message.role]
        for part in message.parts:
            if isinstance(part, TextPart):
                if part.text.strip():
                    lines.append(f"{speaker}: {part.text.strip()}")
            elif isinstance(part, ReasoningPart):
                if part.text.strip():
                    lines.append(f"Reasoning: {part.text.strip()}")
            elif isinstance(part, ToolCallPart):
                args = json.dumps(part.args, ensure_ascii=False)[:TOOL_TEXT_CHARS]
                lines.append(f"Tool Call {part.name}: {args}")
            elif isinstance(part, ToolResultPart):
                name = part.name or names.get(part.tool_call_id, "") or "tool"
                lines.append(f"Tool Result {name}: {to_json_text(part.result)[:TOOL_TEXT_CHARS]}")
            elif isinstance(part, FilePart | ImagePart):
                lines.append(f"{speaker} added {part.media_type} file: {part.url[:URL_CHARS]}")
    return "\n".join(lines)


def generate_title(chat: ChatModel, messages: Sequence[Message], *, instructions: str | None = None) -> str:
    """A title for the thread of ``messages``, from one completion of ``chat`` (spec §2.6).

    The system message is ``instructions`` (or ``TITLE_INSTRUCTIONS``), the user message the
    ``title_transcript``. The answer is cleaned by ``memstack.observation.parsing.clean_title``:
    reasoning, a ``Title:`` prefix, quotes and colons removed, the first line only, at most 80
    characters cut on a word boundary. No temperature or output cap is sent (the model's defaults).

    Returns:
        The title (non-empty, at most 80 characters).

    Raises:
        Unavailable: the model returned no usable title (the caller keeps the thread untitled and
            tries again later), or the model call failed (``chat`` raises it).
    """
    system = instructions if instructions is not None and instructions.strip() else TITLE_INSTRUCTIONS
    answer = chat.complete(
        [{"role": "system", "content": system}, {"role": "user", "content": title_transcript(messages)}]
    )
    title = clean_title(answer.text or "")
    if not title:
        raise Unavailable("the title model returned no title", field="title")
    return title
