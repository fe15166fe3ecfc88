"""Amazon Bedrock ``Converse`` requests from OpenAI chat-completions messages and tools.

Bedrock Converse API reference ("Message", "ContentBlock", "ToolConfiguration"): ``system`` is a list of
``{"text"}`` blocks; ``messages`` alternate ``user``/``assistant``; a call is ``{"toolUse": {"toolUseId",
"name", "input"}}`` in the assistant's message and its result ``{"toolResult": {"toolUseId", "content"}}``
in the next user message; ``toolConfig`` must be present whenever a message carries tool blocks. Images
are sent as bytes only (no URLs): a ``data:`` URL image is decoded, another is shown as text.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from memstack.render.turns import Block, as_text, data_url, read_openai

__all__ = ["to_converse_request", "to_converse_tools"]

_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}


def to_converse_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function tools as Converse ``toolSpec`` entries (``inputSchema.json`` = the parameters)."""
    out = []
    for tool in tools:
        function = tool["function"]
        spec: dict[str, Any] = {
            "name": function["name"],
            "inputSchema": {"json": function.get("parameters") or {"type": "object", "properties": {}}},
        }
        if function.get("description"):
            spec["description"] = function["description"]
        out.append({"toolSpec": spec})
    return out


def _image(url: str) -> dict[str, Any] | None:
    decoded = data_url(url)
    if decoded is None or decoded[0] not in _IMAGE_FORMATS:
        return None
    try:
        raw = base64.b64decode(decoded[1], validate=True)
    except (binascii.Error, ValueError):
        return None
    return {"image": {"format": _IMAGE_FORMATS[decoded[0]], "source": {"bytes": raw}}}


def _block(block: Block, *, tools: bool) -> dict[str, Any]:
    if block.kind == "tool_use" and tools:
        return {"toolUse": {"toolUseId": block.id, "name": block.name, "input": block.input or {}}}
    if block.kind == "tool_result" and tools:
        content = [{"json": block.input}] if block.input is not None else [{"text": block.text or "null"}]
        return {"toolResult": {"toolUseId": block.id, "content": content}}
    if block.kind == "image":
        image = _image(block.url)
        if image is not None:
            return image
    return {"text": as_text(block)}


def to_converse_request(
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] = (),
    *,
    cache_system: bool = False,
    tool_blocks: bool | None = None,
) -> dict[str, Any]:
    """The ``system``, ``messages`` and ``toolConfig`` arguments of ``bedrock-runtime`` ``converse``.

    Args:
        messages: chat-completions messages (``render_openai``'s output, or an Observer prompt).
        tools: OpenAI function tools; ``toolConfig`` is left out when there are none.
        cache_system: put a ``cachePoint`` after the system prompt (Bedrock prompt caching: everything
            before the point is cached; only for models that support it).
        tool_blocks: keep earlier tool calls and results as ``toolUse``/``toolResult`` blocks; ``None``:
            only when ``tools`` are given (a caller that sends its own ``toolConfig``, as Strands Agents does,
            passes ``True``).

    Returns:
        ``{"system", "messages", "toolConfig"?}`` — pass it with ``modelId`` to ``converse``. Without
        ``tools``, earlier tool calls and results are written as text, since Converse refuses tool blocks
        without a ``toolConfig``.

    Raises:
        KeyError, TypeError: malformed chat-completions messages.
    """
    conversation = read_openai(messages)
    system: list[dict[str, Any]] = [{"text": text} for text in conversation.system if text]
    if cache_system and system:
        system.append({"cachePoint": {"type": "default"}})
    with_tools = bool(tools) if tool_blocks is None else tool_blocks
    out: dict[str, Any] = {
        "system": system,
        "messages": [
            {"role": turn.role, "content": [_block(b, tools=with_tools) for b in turn.blocks]}
            for turn in conversation.turns
        ],
    }
    if tools:
        out["toolConfig"] = {"tools": to_converse_tools(tools)}
    return out
