"""Memstack as a Model Context Protocol server (``memstack[mcp]``; ``memstack mcp`` on the command line).

Tools, all acting for ONE resource fixed when the server is built — from a flag, or from the
authenticated caller through ``resource_for`` — so the model never chooses whose memory it reads:

==========================  ==============================================================================
``remember``                save a message to a thread (``save_messages``)
``recall``                  semantic recall: the best matching messages, with ``scope``, ``top_k``, ``filter``
``get_working_memory``      the working memory (``resource`` or ``thread`` scope)
``update_working_memory``   replace (Markdown) or merge (schema mode) the working memory
``list_threads``            the resource's threads, newest first, with a cursor
``get_context``             what a model would be shown for a thread (system messages and conversation)
==========================  ==============================================================================

Transports: stdio (a desktop client starts ``memstack mcp``) and streamable HTTP
(``memstack mcp --transport http``). A Memstack error becomes a tool error result (``isError``) whose
text names the error's stable code, e.g. ``invalid_input (field query): ...``; nothing else leaks.
Tool calls run the (synchronous) memory on a worker thread, never on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from memstack.errors import InvalidInput, MemstackError
from memstack.integrations import MemoryApi
from memstack.model import TextPart, ToolCallPart, ToolResultPart

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["build_server", "message_text"]

WmScope = Annotated[
    Literal["resource", "thread"],
    Field(description="resource: shared by all threads (default); thread: this thread only."),
]

INSTRUCTIONS = (
    "Long-term memory for this user. Call recall before answering questions about earlier conversations; "
    "call remember to keep what the user says that may matter later; keep stable facts and preferences in "
    "working memory with update_working_memory."
)


def message_text(message: Any) -> str:
    """A stored message as one line of text for a tool answer: its text parts, tool calls and results."""
    bits = []
    for part in message.parts:
        if isinstance(part, TextPart):
            bits.append(part.text)
        elif isinstance(part, ToolCallPart):
            bits.append(f"[called {part.name}]")
        elif isinstance(part, ToolResultPart):
            bits.append(f"[{part.name or 'tool'} answered]")
    return " ".join(b for b in bits if b)


def _message(message: Any) -> dict[str, Any]:
    return {
        "id": message.id,
        "thread_id": message.thread_id,
        "role": message.role,
        "created_at": message.created_at.isoformat(),
        "text": message_text(message),
    }


TopK = Annotated[int, Field(ge=1, le=100, description="How many matches, before neighbours.")]
RecallScope = Annotated[
    Literal["resource", "thread"], Field(description="resource: every thread; thread: this one only.")
]
RecallFilter = Annotated[
    dict[str, Any] | None,
    Field(description="Metadata filter ($eq $ne $gt $gte $lt $lte $in $nin $and $or $not $exists)."),
]
OptionalThreadId = Annotated[
    str | None, Field(description="The conversation (thread) id; the server's default thread if left out.")
]


class _MemoryTools:
    """The tools' bodies, for one memory and one way of telling the resource. Each runs the (synchronous)
    memory on a worker thread and turns a Memstack error into a tool error naming its code."""

    def __init__(self, memory: MemoryApi, resource: Callable[[], str], default_thread_id: str) -> None:
        self.memory = memory
        self.resource = resource
        self.default_thread_id = default_thread_id

    def _thread(self, thread_id: str | None) -> str:
        return thread_id or self.default_thread_id

    async def _run(self, call: Callable[[str], Any]) -> Any:
        import anyio.to_thread
        from mcp.server.mcpserver.exceptions import ToolError

        rid = self.resource()
        if not rid:
            raise ToolError("forbidden: no resource for this caller")
        try:
            return await anyio.to_thread.run_sync(call, rid)
        except MemstackError as exc:
            where = f" (field {exc.field})" if exc.field else ""
            raise ToolError(f"{exc.code}{where}: {exc.message}") from None

    async def remember(
        self,
        content: Annotated[str, Field(description="The message text.", min_length=1)],
        role: Literal["user", "assistant"] = "user",
        thread_id: OptionalThreadId = None,
    ) -> dict[str, Any]:
        tid, message = self._thread(thread_id), {"role": role, "content": content}
        saved = await self._run(
            lambda rid: self.memory.save_messages(thread_id=tid, resource_id=rid, messages=[message])
        )
        return {"saved": [{"id": m.id, "seq": m.seq} for m in saved]}

    async def recall(
        self,
        query: Annotated[str, Field(description="What to look for.", min_length=1)],
        thread_id: OptionalThreadId = None,
        scope: RecallScope = "resource",
        top_k: TopK = 4,
        filter: RecallFilter = None,
    ) -> dict[str, Any]:
        recall: dict[str, Any] = {"scope": scope, "top_k": top_k}
        if filter is not None:
            recall["filter"] = filter
        tid = self._thread(thread_id)
        result = await self._run(
            lambda rid: self.memory.recall(
                thread_id=tid, resource_id=rid, query=query, options={"semantic_recall": recall}
            )
        )
        hit_ids = {h.message_id for h in result.hits}
        return {"matches": [_message(m) | {"hit": m.id in hit_ids} for m in result.messages]}

    async def get_working_memory(
        self, thread_id: OptionalThreadId = None, scope: WmScope = "resource"
    ) -> dict[str, Any]:
        tid = self._thread(thread_id)
        text = await self._run(
            lambda rid: self.memory.get_working_memory(
                thread_id=tid, resource_id=rid, options=_wm_options(scope)
            )
        )
        return {"working_memory": text}

    async def update_working_memory(
        self,
        working_memory: Annotated[str, Field(description="The complete working memory.")],
        thread_id: OptionalThreadId = None,
        scope: WmScope = "resource",
    ) -> dict[str, Any]:
        tid = self._thread(thread_id)
        await self._run(
            lambda rid: self.memory.update_working_memory(
                thread_id=tid, resource_id=rid, working_memory=working_memory, options=_wm_options(scope)
            )
        )
        return {"updated": True}

    async def list_threads(
        self, limit: Annotated[int, Field(ge=1, le=100)] = 20, cursor: str | None = None
    ) -> dict[str, Any]:
        page = await self._run(
            lambda rid: self.memory.list_threads(resource_id=rid, limit=limit, cursor=cursor)
        )
        threads = [
            {"id": t.id, "title": t.title, "updated_at": t.updated_at.isoformat()} for t in page.threads
        ]
        return {"threads": threads, "next_cursor": page.next_cursor}

    async def get_context(
        self,
        thread_id: OptionalThreadId = None,
        message: Annotated[str | None, Field(description="The new user message, if any.")] = None,
    ) -> dict[str, Any]:
        tid = self._thread(thread_id)
        ctx = await self._run(
            lambda rid: self.memory.context(thread_id=tid, resource_id=rid, message=message)
        )
        return {
            "system": [s.text for s in ctx.system],
            "messages": [_message(m) for m in ctx.messages if message_text(m)],
        }


def _wm_options(scope: str) -> dict[str, Any]:
    return {"working_memory": {"enabled": True, "scope": scope}}


_DESCRIPTIONS = {
    "remember": "Save a message to a thread of this user's memory.",
    "recall": "Search this user's past messages by meaning and keywords.",
    "get_working_memory": "Read the working memory: what is known about the user.",
    "update_working_memory": "Replace the working memory with an updated Markdown document (anything left out is lost).",
    "list_threads": "List this user's conversations (threads), newest first.",
    "get_context": "What a model would be shown for a thread: memory, recall and recent history.",
}


def build_server(
    memory: MemoryApi,
    *,
    resource_id: str | None = None,
    resource_for: Callable[[], str] | None = None,
    default_thread_id: str = "mcp",
    name: str = "memstack",
) -> MCPServer:
    """An MCP server whose tools act on ``memory`` for one resource.

    Args:
        memory: a ``Memory`` or a ``MemstackClient``.
        resource_id: the resource every tool acts for (a flag of ``memstack mcp``).
        resource_for: instead, a function giving the resource of the current request, e.g. from the
            authenticated identity (``mcp.server.auth.middleware.auth_context.get_access_token()``); it
            runs on each call and must raise (or return an empty string) when there is none.
        default_thread_id: the thread of the tools when the model names none.
        name: the server's name shown to clients.

    Returns:
        The ``MCPServer``; ``.run("stdio")``, ``.run("streamable-http", host=..., port=...)``, or
        ``mcp.client.Client(server)`` in-process.

    Raises:
        InvalidInput: neither or both of ``resource_id`` and ``resource_for``.
        ImportError: the ``mcp`` extra is not installed (``pip install 'memstack[mcp]'``).
    """
    from mcp.server.mcpserver import MCPServer

    if (resource_id is None) == (resource_for is None):
        raise InvalidInput("give exactly one of resource_id and resource_for", field="resource_id")
    resource = resource_for if resource_for is not None else (lambda: resource_id or "")
    tools = _MemoryTools(memory, resource, default_thread_id)
    server: MCPServer = MCPServer(name, instructions=INSTRUCTIONS)
    for tool_name, description in _DESCRIPTIONS.items():
        server.add_tool(getattr(tools, tool_name), name=tool_name, description=description)
    return server
