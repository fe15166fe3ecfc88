"""Messages of the Converse and Anthropic formats read back as Memstack messages, to save a turn a
framework kept in one of those shapes (Strands Agents keeps Converse messages).

Both formats carry tool results in *user* messages; Memstack keeps them in ``tool`` messages (the shape
``Memory.save_messages`` takes, which the renderers turn back into the same blocks). So one user message
with results and text becomes a ``tool`` message followed by a ``user`` message. Blocks Memstack does not
keep (images as bytes, documents, cache points, reasoning signatures) are left out; reasoning text is kept
as a ``reasoning`` part.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memstack.errors import InvalidInput

__all__ = ["from_anthropic", "from_converse"]


def _result_value(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _converse_result(block: dict[str, Any]) -> dict[str, Any]:
    values = []
    for item in block.get("content") or ():
        if "json" in item:
            values.append(item["json"])
        elif "text" in item:
            values.append(_result_value(str(item["text"])))
    result = values[0] if len(values) == 1 else values
    return {
        "type": "tool_result",
        "tool_call_id": str(block["toolUseId"]),
        "result": result,
        "is_error": block.get("status") == "error",
    }


def _anthropic_result(block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content")
    if isinstance(content, list):
        texts = [_result_value(str(c.get("text", ""))) for c in content if c.get("type") == "text"]
        result: Any = texts[0] if len(texts) == 1 else texts
    else:
        result = _result_value(content) if isinstance(content, str) else content
    return {
        "type": "tool_result",
        "tool_call_id": str(block["tool_use_id"]),
        "result": result,
        "is_error": bool(block.get("is_error")),
    }


def _split(role: str, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One message of the format as Memstack messages: results apart from the rest in a user turn."""
    if role == "assistant":
        return [{"role": "assistant", "parts": parts}] if parts else []
    results = [p for p in parts if p["type"] == "tool_result"]
    rest = [p for p in parts if p["type"] != "tool_result"]
    out = [{"role": "tool", "parts": results}] if results else []
    return out + ([{"role": "user", "parts": rest}] if rest else [])


def _role(message: Any, i: int) -> str:
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        raise InvalidInput(f"messages[{i}] must be a user or assistant message", field=f"messages[{i}].role")
    return str(message["role"])


def from_converse(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Bedrock ``Converse`` (and Strands Agents) messages as ``save_messages`` input dicts, in order.

    Blocks: ``text`` → text; ``toolUse`` → ``tool_call``; ``toolResult`` → ``tool_result`` (a single
    ``json`` or ``text`` item is the result, JSON text decoded; ``status: error`` → ``is_error``);
    ``reasoningContent`` → reasoning. Others are left out.

    Raises:
        InvalidInput: a message that is not a user or assistant message with a content list.
    """
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        role = _role(message, i)
        parts: list[dict[str, Any]] = []
        for block in message.get("content") or ():
            if "text" in block and block["text"]:
                parts.append({"type": "text", "text": str(block["text"])})
            elif "toolUse" in block:
                use = block["toolUse"]
                parts.append(
                    {
                        "type": "tool_call",
                        "id": str(use["toolUseId"]),
                        "name": str(use["name"]),
                        "args": use.get("input") or {},
                    }
                )
            elif "toolResult" in block:
                parts.append(_converse_result(block["toolResult"]))
            elif "reasoningContent" in block:
                text = (block["reasoningContent"].get("reasoningText") or {}).get("text")
                if text:
                    parts.append({"type": "reasoning", "text": str(text)})
        out += _split(role, parts)
    return out


def from_anthropic(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic Messages API messages as ``save_messages`` input dicts, in order.

    Content may be a string or blocks: ``text``; ``tool_use`` → ``tool_call``; ``tool_result`` →
    ``tool_result`` (``is_error`` kept); ``thinking`` → reasoning. Others are left out.

    Raises:
        InvalidInput: a message that is not a user or assistant message.
    """
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        role = _role(message, i)
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or ())
        parts: list[dict[str, Any]] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and block.get("text"):
                parts.append({"type": "text", "text": str(block["text"])})
            elif kind == "tool_use":
                parts.append(
                    {
                        "type": "tool_call",
                        "id": str(block["id"]),
                        "name": str(block["name"]),
                        "args": block.get("input") or {},
                    }
                )
            elif kind == "tool_result":
                parts.append(_anthropic_result(block))
            elif kind == "thinking" and block.get("thinking"):
                parts.append({"type": "reasoning", "text": str(block["thinking"])})
        out += _split(role, parts)
    return out
