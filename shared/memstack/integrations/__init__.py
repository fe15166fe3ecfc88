"""Memstack inside agent frameworks, each an optional extra never installed in the Lambda functions:

* ``memstack.integrations.mcp`` — a Model Context Protocol server (``memstack[mcp]``, ``memstack mcp``);
* ``memstack.integrations.openai_agents`` — an OpenAI Agents SDK ``Session`` (``memstack[agents]``);
* ``memstack.integrations.strands`` — a Strands Agents hook provider and tools (``memstack[strands]``).

Each works over a ``Memory`` (in-process) or a ``MemstackClient`` (the deployed API): both have the
methods of ``MemoryApi``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class MemoryApi(Protocol):
    """What the integrations call: the methods ``Memory`` and ``MemstackClient`` share (their answers are
    the library's types, except ``context``: a ``ModelContext`` or a ``RemoteContext``, both with
    ``to_openai()``, ``to_bedrock()`` and ``to_anthropic()``)."""

    def save_messages(self, *, thread_id: str, resource_id: str, messages: Any) -> Any: ...

    def list_messages(
        self,
        *,
        thread_id: str,
        resource_id: str,
        last: int | None = None,
        limit: int = 40,
        cursor: str | None = None,
    ) -> Any: ...

    def delete_messages(self, *, resource_id: str, message_ids: Sequence[str]) -> int: ...

    def delete_thread(self, *, thread_id: str, resource_id: str) -> None: ...

    def list_threads(self, *, resource_id: str, limit: int = 100, cursor: str | None = None) -> Any: ...

    def get_working_memory(
        self, *, thread_id: str, resource_id: str, options: dict[str, Any] | None = None
    ) -> str | None: ...

    def update_working_memory(
        self,
        *,
        thread_id: str,
        resource_id: str,
        working_memory: Any,
        options: dict[str, Any] | None = None,
    ) -> None: ...

    def apply_tool_call(
        self, *, thread_id: str, resource_id: str, tool_call: Any, options: dict[str, Any] | None = None
    ) -> Any: ...

    def recall(
        self, *, thread_id: str, resource_id: str, query: str, options: dict[str, Any] | None = None
    ) -> Any: ...

    def context(
        self,
        *,
        thread_id: str,
        resource_id: str,
        message: Any = None,
        instructions: str | Sequence[str] | None = None,
        context: Any = None,
        options: dict[str, Any] | None = None,
    ) -> Any: ...
