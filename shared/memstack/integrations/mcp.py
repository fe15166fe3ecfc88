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

ThreadId = Annotated[str, Field(description="The conversation (thread) id.", min_length=1, max_length=256)]
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
        default_thread_id: the thread of ``remember`` and ``get_context`` when the model names none.
        name: the server's name shown to clients.

    Returns:
        The ``MCPServer``; ``.run("stdio")``, ``.run("streamable-http", host=..., port=...)``, or
        ``mcp.client.Client(server)`` in-process.

    Raises:
        InvalidInput: neither or both of ``resource_id`` and ``resource_for``.
        ImportError: the ``mcp`` extra is not installed (``pip install 'memstack[mcp]'``).
    """
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    if (resource_id is None) == (resource_for is None):
        raise InvalidInput("give exactly one of resource_id and resource_for", field="resource_id")
    server: MCPServer = MCPServer(name, instructions=INSTRUCTIONS)

    def resource() -> str:
        rid = resource_id if resource_id is not None else resource_for() if resource_for else ""
        if not rid:
            raise ToolError("forbidden: no resource for this caller")
        return rid

    async def run(call: Callable[[str], Any]) -> Any:
        import anyio.to_thread

        rid = resource()
        try:
            return await anyio.to_thread.run_sync(call, rid)
        except MemstackError as exc:
            where = f" (field {exc.field})" if exc.field else ""
            raise ToolError(f"{exc.code}{where}: {exc.message}") from None

    @server.tool(description="Save a message to a thread of this user's memory.")
    async def remember(
        content: Annotated[str, Field(description="The message text.", min_length=1)],
        role: Literal["user", "assistant"] = "user",
        thread_id: ThreadId = default_thread_id,
    ) -> dict[str, Any]:
        saved = await run(
            lambda rid: memory.save_messages(
                thread_id=thread_id, resource_id=rid, messages=[{"role": role, "content": content}]
            )
        )
        return {"saved": [{"id": m.id, "seq": m.seq} for m in saved]}

    @server.tool(description="Search this user's past messages by meaning and keywords.")
    async def recall(
        query: Annotated[str, Field(description="What to look for.", min_length=1)],
        thread_id: ThreadId = default_thread_id,
        scope: Annotated[
            Literal["resource", "thread"], Field(description="resource: every thread; thread: this one only.")
        ] = "resource",
        top_k: Annotated[int, Field(ge=1, le=100, description="How many matches, before neighbours.")] = 4,
        filter: Annotated[
            dict[str, Any] | None,
            Field(description="Metadata filter ($eq $ne $gt $gte $lt $lte $in $nin $and $or $not $exists)."),
        ] = None,
    ) -> dict[str, Any]:
        options: dict[str, Any] = {"semantic_recall": {"scope": scope, "top_k": top_k}}
        if filter is not None:
            options["semantic_recall"]["filter"] = filter
        result = await run(
            lambda rid: memory.recall(thread_id=thread_id, resource_id=rid, query=query, options=options)
        )
        hit_ids = {h.message_id for h in result.hits}
        return {
            "matches": [_message(m) | {"hit": m.id in hit_ids} for m in result.messages],
        }

    def wm_options(scope: str) -> dict[str, Any]:
        return {"working_memory": {"enabled": True, "scope": scope}}

    @server.tool(description="Read the working memory: what is known about the user.")
    async def get_working_memory(
        thread_id: ThreadId = default_thread_id, scope: WmScope = "resource"
    ) -> dict[str, Any]:
        text = await run(
            lambda rid: memory.get_working_memory(
                thread_id=thread_id, resource_id=rid, options=wm_options(scope)
            )
        )
        return {"working_memory": text}

    @server.tool(
        description="Replace the working memory with an updated Markdown document (anything left out is lost)."
    )
    async def update_working_memory(
        working_memory: Annotated[str, Field(description="The complete working memory.")],
        thread_id: ThreadId = default_thread_id,
        scope: WmScope = "resource",
    ) -> dict[str, Any]:
        await run(
            lambda rid: memory.update_working_memory(
                thread_id=thread_id, resource_id=rid, working_memory=working_memory, options=wm_options(scope)
            )
        )
        return {"updated": True}

    @server.tool(description="List this user's conversations (threads), newest first.")
    async def list_threads(
        limit: Annotated[int, Field(ge=1, le=100)] = 20, cursor: str | None = None
    ) -> dict[str, Any]:
        page = await run(lambda rid: memory.list_threads(resource_id=rid, limit=limit, cursor=cursor))
        return {
            "threads": [
                {"id": t.id, "title": t.title, "updated_at": t.updated_at.isoformat()} for t in page.threads
            ],
            "next_cursor": page.next_cursor,
        }

    @server.tool(description="What a model would be shown for a thread: memory, recall and recent history.")
    async def get_context(
        thread_id: ThreadId = default_thread_id,
        message: Annotated[str | None, Field(description="The new user message, if any.")] = None,
    ) -> dict[str, Any]:
        ctx = await run(lambda rid: memory.context(thread_id=thread_id, resource_id=rid, message=message))
        return {
            "system": [s.text for s in ctx.system],
            "messages": [_message(m) for m in ctx.messages if message_text(m)],
            "token_count": ctx.token_count,
        }

    return server
