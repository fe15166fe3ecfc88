"""OpenAI chat-completions messages read as alternating turns of neutral blocks, the common step of the
Converse and Anthropic renderers.

Both APIs differ from chat completions in the same ways: the system prompt is a separate field; a tool
call is a block of the assistant's message and its result a block of the next *user* message; and a role
may not follow itself (Converse refuses it, Anthropic merges it), so consecutive messages of one role
become one turn with several blocks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Block", "Conversation", "Turn", "read_openai"]


@dataclass(frozen=True, slots=True)
class Block:
    """One content block.

    Attributes:
        kind: ``text`` (``text``), ``image`` (``url``: http(s) or ``data:`` URL), ``tool_use`` (``id``,
            ``name``, ``input``) or ``tool_result`` (``id``, ``text``: the result as JSON text, ``input``:
            the decoded result when it is a JSON object, else ``None``).
    """

    kind: Literal["text", "image", "tool_use", "tool_result"]
    text: str = ""
    url: str = ""
    id: str = ""
    name: str = ""
    input: dict[str, Any] | None = None


@dataclass(slots=True)
class Turn:
    """Consecutive messages of one role: ``user`` or ``assistant``."""

    role: Literal["user", "assistant"]
    blocks: list[Block] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Conversation:
    """The system prompt (leading system messages, in order) and the turns after it."""

    system: list[str]
    turns: list[Turn]

    @property
    def has_tool_blocks(self) -> bool:
        """Whether any turn holds a tool call or result."""
        return any(b.kind in ("tool_use", "tool_result") for t in self.turns for b in t.blocks)


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _content_blocks(content: Any) -> list[Block]:
    if isinstance(content, str):
        return [Block("text", text=content)] if content else []
    blocks: list[Block] = []
    for part in content or ():
        if part.get("type") == "text" and part.get("text"):
            blocks.append(Block("text", text=str(part["text"])))
        elif part.get("type") == "image_url":
            blocks.append(Block("image", url=str(part["image_url"]["url"])))
    return blocks


def read_openai(messages: Sequence[dict[str, Any]]) -> Conversation:
    """Read chat-completions messages (as ``render_openai`` or an Observer prompt gives them).

    System messages before the first other message form the system prompt; a system message later in the
    conversation keeps its place as user text ``System: ...`` (neither API has a system turn). A tool
    message becomes a ``tool_result`` block of a user turn.

    Raises:
        KeyError, TypeError: a message without a role or with a malformed tool call (the callers map it).
    """
    system: list[str] = []
    turns: list[Turn] = []

    def add(role: Literal["user", "assistant"], blocks: list[Block]) -> None:
        if not blocks:
            return
        if turns and turns[-1].role == role:
            turns[-1].blocks.extend(blocks)
        else:
            turns.append(Turn(role, list(blocks)))

    for message in messages:
        role = message["role"]
        content = message.get("content")
        if role == "system":
            text = content if isinstance(content, str) else " ".join(b.text for b in _content_blocks(content))
            if not turns:
                system.append(text)
            else:
                add("user", [Block("text", text=f"System: {text}")])
        elif role == "tool":
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
            add(
                "user",
                [Block("tool_result", id=str(message["tool_call_id"]), text=text, input=_object(text))],
            )
        elif role == "assistant":
            blocks = _content_blocks(content)
            for call in message.get("tool_calls") or ():
                function = call["function"]
                arguments = function.get("arguments") or "{}"
                args = arguments if isinstance(arguments, dict) else _object(arguments)
                blocks.append(
                    Block("tool_use", id=str(call["id"]), name=str(function["name"]), input=args or {})
                )
            add("assistant", blocks)
        else:
            add("user", _content_blocks(content))
    return Conversation(system, turns)


def as_text(block: Block) -> str:
    """A tool block written out as text, for a request that cannot carry tool blocks."""
    if block.kind == "tool_use":
        return f"[called {block.name}({json.dumps(block.input or {}, ensure_ascii=False)})]"
    if block.kind == "tool_result":
        return f"[tool {block.id} returned: {block.text}]"
    if block.kind == "image":
        return f"[image: {block.url}]"
    return block.text


def data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a ``data:<type>;base64,<data>`` URL, else ``None``."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return head, data
