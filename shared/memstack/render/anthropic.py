"""Anthropic Messages API requests from OpenAI chat-completions messages and tools.

Anthropic API reference ("Messages", "Tool use"): ``system`` is separate (text blocks); a call is a
``{"type": "tool_use", "id", "name", "input"}`` block of the assistant's message and its result a
``{"type": "tool_result", "tool_use_id", "content"}`` block at the start of the next user message; tools
are ``{"name", "description", "input_schema"}``. Images go by URL or as base64 (``data:`` URLs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memstack.render.turns import Block, data_url, read_openai

__all__ = ["to_anthropic_request", "to_anthropic_tools"]


def to_anthropic_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function tools as Anthropic tools (``input_schema`` = the parameters)."""
    out = []
    for tool in tools:
        function = tool["function"]
        item: dict[str, Any] = {
            "name": function["name"],
            "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
        }
        if function.get("description"):
            item["description"] = function["description"]
        out.append(item)
    return out


def _block(block: Block) -> dict[str, Any]:
    if block.kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input or {}}
    if block.kind == "tool_result":
        return {"type": "tool_result", "tool_use_id": block.id, "content": block.text}
    if block.kind == "image":
        decoded = data_url(block.url)
        source = (
            {"type": "base64", "media_type": decoded[0], "data": decoded[1]}
            if decoded is not None
            else {"type": "url", "url": block.url}
        )
        return {"type": "image", "source": source}
    return {"type": "text", "text": block.text}


def to_anthropic_request(
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] = (),
    *,
    cache_system: bool = False,
) -> dict[str, Any]:
    """The ``system``, ``messages`` and ``tools`` arguments of ``anthropic.Anthropic().messages.create``.

    Args:
        messages: chat-completions messages (``render_openai``'s output).
        tools: OpenAI function tools; ``tools`` is left out when there are none.
        cache_system: mark the last system block ``cache_control: ephemeral`` (Anthropic prompt caching).

    Returns:
        ``{"system": [...], "messages": [...], "tools"?: [...]}``; ``system`` is left out when empty.

    Raises:
        KeyError, TypeError: malformed chat-completions messages.
    """
    conversation = read_openai(messages)
    system: list[dict[str, Any]] = [{"type": "text", "text": t} for t in conversation.system if t]
    if cache_system and system:
        system[-1]["cache_control"] = {"type": "ephemeral"}
    out: dict[str, Any] = {
        "messages": [
            {"role": turn.role, "content": [_block(b) for b in turn.blocks]} for turn in conversation.turns
        ]
    }
    if system:
        out["system"] = system
    if tools:
        out["tools"] = to_anthropic_tools(tools)
    return out
