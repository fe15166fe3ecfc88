"""``MemstackSession``: a Memstack thread as an OpenAI Agents SDK session (``memstack[agents]``).

    from agents import Agent, RunConfig, Runner
    from memstack.integrations.openai_agents import MemstackSession

    session = MemstackSession("trip-1", memory=Memory.local(), resource_id="user-42")
    result = await Runner.run(agent, "Any snack ideas?", session=session,
                              run_config=RunConfig(session_input_callback=session.input_callback))

It implements the SDK's ``Session`` protocol (``get_items``, ``add_items``, ``pop_item``,
``clear_session``; ``agents.memory.session.Session``) over ``Memory`` or ``MemstackClient``: each Responses
input item is one Memstack message, so the conversation is also Memstack's message history — indexed for
semantic recall, observed by observational memory, visible to every other client of the thread.

=============================================  ================================================
Agents SDK item                                Memstack message
=============================================  ================================================
``{"role": "user", "content": ...}``           ``user`` with text (and image URL) parts
assistant ``message`` (``output_text``)        ``assistant`` with text parts
``function_call``                              ``assistant`` with a ``tool_call`` part
``function_call_output``                       ``tool`` with a ``tool_result`` part
``reasoning`` and any other item type          ``assistant`` with a ``reasoning`` part (its summary);
                                               the item itself kept in ``metadata.openai_agents_item``
``system`` / ``developer`` messages            not stored (Memstack never stores system messages,
                                               spec §2.4; instructions belong to the agent)
=============================================  ================================================

``input_callback`` (the SDK's ``RunConfig.session_input_callback``) feeds working memory and semantic
recall from the user's other threads into the run as one system item, placed before the history; it is
not saved back (system items never are).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from memstack.context import cross_thread_block
from memstack.errors import NotFound
from memstack.integrations import MemoryApi
from memstack.model import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart

__all__ = ["ITEM_KEY", "MemstackSession", "items_to_messages", "messages_to_items"]

logger = logging.getLogger(__name__)

ITEM_KEY = "openai_agents_item"
"""Message metadata key holding an Agents SDK item Memstack has no part for (kept as it was sent)."""

_PAGE = 1000
_READ_WORKING_MEMORY = {"working_memory": {"enabled": True}}
"""Reading is allowed whatever the memory's options (the HTTP route does the same); writing is not."""
T = TypeVar("T")


def _text_of(content: Any) -> tuple[list[dict[str, Any]], bool]:
    """Message content (a string or input/output parts) as Memstack parts; ``True`` if something was left
    out (a file, audio)."""
    if isinstance(content, str):
        return ([{"type": "text", "text": content}] if content else []), False
    parts: list[dict[str, Any]] = []
    lossy = False
    for part in content or ():
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text") and part.get("text"):
            parts.append({"type": "text", "text": str(part["text"])})
        elif kind == "refusal" and part.get("refusal"):
            parts.append({"type": "text", "text": str(part["refusal"])})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append({"type": "image", "url": part["image_url"]})
        else:
            lossy = True
    return parts, lossy


def _item_to_message(item: dict[str, Any]) -> dict[str, Any] | None:
    kind = item.get("type")
    role = item.get("role")
    if kind in (None, "message") and role in ("system", "developer"):
        return None
    if kind in (None, "message") and role in ("user", "assistant"):
        parts, lossy = _text_of(item.get("content"))
        if parts and not lossy:
            return {"role": role, "parts": parts}
    elif kind == "function_call":
        try:
            args = json.loads(item.get("arguments") or "{}")
        except ValueError:
            args = None
        if isinstance(args, dict):
            call = {"type": "tool_call", "id": str(item["call_id"]), "name": str(item["name"]), "args": args}
            return {"role": "assistant", "parts": [call]}
    elif kind == "function_call_output":
        output = item.get("output")
        if isinstance(output, str):
            result = {"type": "tool_result", "tool_call_id": str(item["call_id"]), "result": output}
            return {"role": "tool", "parts": [result]}
    summary = " ".join(str(s.get("text", "")) for s in item.get("summary") or () if isinstance(s, dict))
    return {
        "role": "assistant",
        "parts": [{"type": "reasoning", "text": summary or f"[{kind or role}]"}],
        "metadata": {ITEM_KEY: item},
    }


def items_to_messages(items: Sequence[Any]) -> list[dict[str, Any]]:
    """Agents SDK input items as ``save_messages`` input dicts (see the module table), in order."""
    out = []
    for item in items:
        data = item if isinstance(item, dict) else item.model_dump(exclude_unset=True)
        message = _item_to_message(data)
        if message is not None:
            out.append(message)
    return out


def _message_items(message: Message) -> list[dict[str, Any]]:
    kept = message.metadata.get(ITEM_KEY)
    if isinstance(kept, dict):
        return [kept]
    texts = [p.text for p in message.parts if isinstance(p, TextPart)]
    images = [p.url for p in message.parts if isinstance(p, ImagePart)]
    items: list[dict[str, Any]] = []
    if message.role == "user" and images:
        content: list[dict[str, Any]] = [{"type": "input_text", "text": t} for t in texts]
        content += [{"type": "input_image", "image_url": url, "detail": "auto"} for url in images]
        items.append({"role": "user", "content": content})
    elif texts and message.role in ("user", "assistant"):
        items.append({"role": message.role, "content": "\n".join(texts)})
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            arguments = json.dumps(part.args, ensure_ascii=False)
            items.append(
                {"type": "function_call", "call_id": part.id, "name": part.name, "arguments": arguments}
            )
        elif isinstance(part, ToolResultPart):
            output = (
                part.result if isinstance(part.result, str) else json.dumps(part.result, ensure_ascii=False)
            )
            items.append({"type": "function_call_output", "call_id": part.tool_call_id, "output": output})
    return items


def messages_to_items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Memstack messages as Agents SDK input items, in order (the inverse of ``items_to_messages``; a
    message saved by another client becomes the items it would have been)."""
    return [item for m in messages for item in _message_items(m)]


class MemstackSession:
    """One Memstack thread as an Agents SDK ``Session``.

    Args:
        session_id: the thread id.
        memory: a ``Memory`` or a ``MemstackClient``.
        resource_id: the thread's owner (a user, org or project); never chosen by the model.
        recall_top_k: how many recalled messages ``input_callback`` shows (0: recall off).
        session_settings: the SDK's ``SessionSettings`` (``limit``: how many items a run reads).

    Attributes:
        session_id, resource_id, memory, session_settings.
    """

    def __init__(
        self,
        session_id: str,
        *,
        memory: MemoryApi,
        resource_id: str,
        recall_top_k: int = 4,
        session_settings: Any = None,
    ) -> None:
        self.session_id = session_id
        self.resource_id = resource_id
        self.memory = memory
        self.recall_top_k = recall_top_k
        self.session_settings = session_settings

    async def _run(self, call: Callable[[], T]) -> T:
        return await asyncio.to_thread(call)

    def _messages(self, limit: int | None) -> list[Message]:
        tid, rid = self.session_id, self.resource_id
        try:
            if limit is not None:
                return list(
                    self.memory.list_messages(thread_id=tid, resource_id=rid, last=min(limit, _PAGE)).messages
                )
            out: list[Message] = []
            cursor = None
            while True:
                page = self.memory.list_messages(thread_id=tid, resource_id=rid, limit=_PAGE, cursor=cursor)
                out += page.messages
                cursor = page.next_cursor
                if cursor is None:
                    return out
        except NotFound:
            return []

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The thread's history as input items, oldest first; the latest ``limit`` messages' items when
        ``limit`` is given (a message with a call and text gives several items)."""
        messages = await self._run(lambda: self._messages(limit))
        return messages_to_items(messages)

    async def add_items(self, items: list[Any]) -> None:
        """Save the items as messages of the thread, in order (system and developer items are skipped).

        Raises:
            memstack.errors.InvalidInput, PayloadTooLarge, Unavailable: as ``save_messages``.
        """
        messages = items_to_messages(items)
        if messages:
            await self._run(
                lambda: self.memory.save_messages(
                    thread_id=self.session_id, resource_id=self.resource_id, messages=messages
                )
            )

    async def pop_item(self) -> Any | None:
        """Delete the thread's newest message and return its (last) item, or ``None`` when empty."""
        messages = await self._run(lambda: self._messages(1))
        if not messages:
            return None
        last = messages[-1]
        await self._run(
            lambda: self.memory.delete_messages(resource_id=self.resource_id, message_ids=[last.id])
        )
        items = _message_items(last)
        return items[-1] if items else None

    async def clear_session(self) -> None:
        """Delete the thread and all its messages (nothing to do when it does not exist)."""
        with contextlib.suppress(NotFound):
            await self._run(
                lambda: self.memory.delete_thread(thread_id=self.session_id, resource_id=self.resource_id)
            )

    def _memory_text(self, query: str) -> str:
        blocks = []
        working = self.memory.get_working_memory(
            thread_id=self.session_id, resource_id=self.resource_id, options=_READ_WORKING_MEMORY
        )
        if working:
            blocks.append(f"What you know about the user (working memory):\n{working}")
        if self.recall_top_k and query:
            options = {"semantic_recall": {"top_k": self.recall_top_k, "scope": "resource"}}
            found = self.memory.recall(
                thread_id=self.session_id, resource_id=self.resource_id, query=query, options=options
            )
            others = [m for m in found.messages if m.thread_id != self.session_id]
            if others:
                blocks.append(cross_thread_block(others))
        return "\n\n".join(blocks)

    async def input_callback(self, history: list[Any], new_input: list[Any]) -> list[Any]:
        """``RunConfig.session_input_callback``: history and new input, with one system item before them
        holding working memory and what recall finds in the user's other threads for the new input's
        text (none when there is nothing to show). A recall failure leaves the run without it."""
        query = " ".join(
            p["text"]
            for m in items_to_messages(new_input)
            if m["role"] == "user"
            for p in m["parts"]
            if p["type"] == "text"
        )
        try:
            text = await self._run(lambda: self._memory_text(query))
        except Exception as exc:  # memory must never fail the agent's turn
            logger.warning(
                "memory for the run skipped: %s", type(exc).__name__, extra={"thread_id": self.session_id}
            )
            text = ""
        lead = [{"role": "system", "content": text}] if text else []
        return lead + history + new_input
