"""The text of a message, as search indexes it and as the model reads it.

Beyond Mastra (spec §7.2, which embeds only text parts): tool-call names and arguments and tool results
are indexed too, truncated, so "what did the weather tool say" can be recalled.
"""

from __future__ import annotations

import json
from typing import Any

from memstack.model import (
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def to_json_text(value: Any) -> str:
    """A compact, readable rendering of a JSON value (strings stay as they are)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def searchable_text(message: Message, tool_text_chars: int = 2_000) -> str:
    """The text indexed for a message: text parts, image captions, file names, reasoning excluded,
    tool calls as ``name(args)`` and tool results, each truncated to ``tool_text_chars`` characters.
    Parts are joined with a newline. The author's label leads when the message has an author.
    """
    pieces: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            pieces.append(part.text)
        elif isinstance(part, ImagePart) and part.caption:
            pieces.append(f"[image: {part.caption}]")
        elif isinstance(part, FilePart) and part.name:
            pieces.append(f"[file: {part.name}]")
        elif isinstance(part, ToolCallPart) and tool_text_chars:
            pieces.append(truncate(f"{part.name}({to_json_text(part.args)})", tool_text_chars))
        elif isinstance(part, ToolResultPart) and tool_text_chars:
            pieces.append(
                truncate(f"{part.name or 'tool'} result: {to_json_text(part.result)}", tool_text_chars)
            )
        elif isinstance(part, ReasoningPart):
            continue
    text = "\n".join(p for p in pieces if p.strip())
    if message.author is not None and text:
        text = f"{message.author.label}: {text}"
    return text


def chunk_text(text: str, max_chars: int) -> list[str]:
    """Split ``text`` into chunks of at most ``max_chars`` characters, on whitespace where possible.

    A word longer than ``max_chars`` is hard-split; empty chunks are never returned (spec §2.8
    ``chunkText``: 4096 tokens × 4 characters).
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    if len(text) <= max_chars:
        return [text] if text.strip() else []
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for word in text.split():
        while len(word) > max_chars:
            if current:
                chunks.append(" ".join(current))
                current, size = [], 0
            chunks.append(word[:max_chars])
            word = word[max_chars:]
        extra = len(word) + (1 if current else 0)
        if size + extra > max_chars:
            chunks.append(" ".join(current))
            current, size = [], 0
            extra = len(word)
        if word:
            current.append(word)
            size += extra
    if current:
        chunks.append(" ".join(current))
    return [c for c in chunks if c]
