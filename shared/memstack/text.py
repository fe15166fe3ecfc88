"""The text of a message, as search indexes it and as the model reads it.

Beyond Mastra (spec §7.2, which embeds only text parts): tool-call names and arguments and tool results
are indexed too, truncated, so "what did the weather tool say" can be recalled.
"""

from __future__ import annotations

import json
import re
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

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

# line breaks that only some splitters honour (``str.splitlines`` does, ``split("\n")`` does not): one
# observation line must stay one line whichever is used, so they are spaces
_ODD_BREAKS = re.compile("\r\n|[\r\x0b\x0c\x85\u2028\u2029]")
# C0/C1 controls (tab and newline excepted), bidi embeddings, overrides, isolates and marks, zero-width
# space, word joiner and BOM: invisible, they can reorder or hide what a reader sees (Unicode TR #36 §2).
# ZWJ/ZWNJ (U+200C, U+200D) stay: emoji sequences and several scripts need them.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]"
)


def valid_text(text: str) -> str:
    """``text`` with every lone UTF-16 surrogate replaced by U+FFFD. A JSON answer may escape half of a
    surrogate pair (``"\\ud83d"``); decoded, it is a ``str`` no store can encode (UTF-8 refuses it).
    Decoded pairs are already single code points and are untouched."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def valid_json(value: Any) -> Any:
    """``value`` (JSON-shaped: dicts, lists, strings, numbers) with ``valid_text`` applied to every string
    in it, keys included."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_text(str(k)): valid_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid_json(v) for v in value]
    return value


def plain_text(text: str) -> str:
    """Model-written text as Memstack keeps it (observations, hints, titles): ``\r\n`` becomes ``\n``;
    the other line breaks (``\r``, VT, FF, NEL, U+2028, U+2029) become a space, so a line is the same line
    for every splitter; C0 and C1 controls other than tab and newline, bidi controls (U+061C, U+200E,
    U+200F, U+202A–U+202E, U+2066–U+2069), U+200B, U+2060 and U+FEFF are removed; lone surrogates become
    U+FFFD (``valid_text``)."""
    text = _ODD_BREAKS.sub(lambda m: "\n" if m.group(0) == "\r\n" else " ", valid_text(text))
    return _INVISIBLE.sub("", text)


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


MAX_CHUNK_BYTES = 8_000
"""Most UTF-8 bytes in one indexed chunk. A byte-level BPE tokenizer (OpenAI's, Amazon Titan's) makes at
most one token per byte, so a chunk this size fits the 8,191-token input of OpenAI's embedding models in
every script: 16,384 characters (Mastra's ``chunkText``, 4,096 tokens × 4) is about 18,000 tokens of CJK
text or 9,000 of hex, which the embedder refuses. English text still reaches about 1,800 tokens a chunk."""


def chunk_text(text: str, max_chars: int, max_bytes: int = MAX_CHUNK_BYTES) -> list[str]:
    """Split ``text`` into chunks of at most ``max_chars`` characters and ``max_bytes`` UTF-8 bytes, on
    whitespace where possible.

    A word over either bound is hard-split at a character boundary (text without spaces — Chinese,
    Japanese, hex digests — is one long word); empty chunks are never returned (spec §2.8 ``chunkText``:
    4096 tokens × 4 characters; ``MAX_CHUNK_BYTES`` for the byte bound).

    Raises:
        ValueError: ``max_chars`` is not positive or ``max_bytes`` is under 4 (one character).
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    if max_bytes < 4:
        raise ValueError("max_bytes must be at least 4")
    if len(text) <= max_chars and _size(text) <= max_bytes:
        return [text] if text.strip() else []
    chunks: list[str] = []
    current: list[str] = []
    chars = size = 0
    for whole in text.split():
        pieces = _cut(whole, max_chars, max_bytes)
        for word in pieces:
            extra_chars = len(word) + (1 if current else 0)
            extra = _size(word) + (1 if current else 0)
            if current and (chars + extra_chars > max_chars or size + extra > max_bytes):
                chunks.append(" ".join(current))
                current, chars, size = [], 0, 0
                extra_chars, extra = len(word), _size(word)
            current.append(word)
            chars += extra_chars
            size += extra
    if current:
        chunks.append(" ".join(current))
    return [c for c in chunks if c]


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _cut(word: str, max_chars: int, max_bytes: int) -> list[str]:
    """``word`` in pieces of at most ``max_chars`` characters and ``max_bytes`` UTF-8 bytes."""
    if len(word) <= max_chars and _size(word) <= max_bytes:
        return [word]
    pieces: list[str] = []
    while word:
        piece = word[:max_chars]
        data = piece.encode("utf-8", "surrogatepass")
        if len(data) > max_bytes:
            # back off to the start of a character: continuation bytes are 0b10xxxxxx
            end = max_bytes
            while data[end] & 0xC0 == 0x80:
                end -= 1
            piece = data[:end].decode("utf-8", "surrogatepass")
        pieces.append(piece)
        word = word[len(piece) :]
    return pieces
