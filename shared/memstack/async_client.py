"""``AsyncMemstackClient``: the HTTP API (docs/api.md) with the methods of ``Memory``, for asyncio (httpx's
``AsyncClient``).

    from memstack.async_client import AsyncMemstackClient

    async with AsyncMemstackClient("http://127.0.0.1:8765", resource_id="user-42") as client:
        ctx = await client.context(thread_id="trip-1", message="Any snack ideas?")

The same methods, arguments, answers, errors and SigV4 signing as ``MemstackClient``: both send the
requests ``memstack.client.Calls`` builds and read the answers the same way, so the two cannot drift
(``tests/unit/test_memory_surfaces.py`` runs one behaviour suite over ``Memory`` and both clients).

Cancellation: a call cancelled while it awaits abandons its HTTP request; the server applies a request it
received whole (a batch is saved whole or not at all), so whether a cancelled ``save_messages`` was stored
depends on timing. Retry with the same message ids: a saved id is updated in place, never stored twice
(README "A cancelled async call").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import httpx

from memstack.client import (
    DEFAULT_TIMEOUT,
    Call,
    Calls,
    RemoteContext,
    RemoteObservations,
    _auth,
    _resource,
    _transport_errors,
    _wire_answer,
    _wire_request,
)
from memstack.memory import CloneResult, Include
from memstack.model import EraseReceipt, Message, MessagePage, SavedBatch, Thread, ThreadPage, ToolCallPart
from memstack.recall import RecallResult
from memstack.usecases.inspect import ContextInspection, IndexHealth

__all__ = ["AsyncMemstackClient"]

T = TypeVar("T")


class AsyncMemstackClient:
    """A Memstack API over HTTP with the methods of ``Memory`` as coroutines (one connection pool; use it
    from one event loop).

    Args:
        base_url: the API's root, without ``/v1`` (``memstack serve``'s URL or the stage URL).
        resource_id: the default resource of every call (each method's ``resource_id`` overrides it).
        timeout: seconds per request, or an ``httpx.Timeout``.
        sigv4: as ``MemstackClient``: ``True`` signs every request with SigV4 for ``execute-api``; a dict
            passes ``SigV4Auth``'s arguments; ``False`` does not sign.
        headers: headers sent with every request (e.g. ``Authorization: Bearer <jwt>`` in JWT mode).
        transport: an httpx async transport (tests: ``httpx.MockTransport`` or ``httpx.ASGITransport``).

    Raises:
        InvalidInput: ``sigv4`` asked for and no credentials or region found.
    """

    def __init__(
        self,
        base_url: str,
        *,
        resource_id: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        sigv4: bool | Mapping[str, Any] = False,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.resource_id = resource_id
        self._http = httpx.AsyncClient(
            timeout=timeout, headers=dict(headers or {}), transport=transport, auth=_auth(base_url, sigv4)
        )

    # plumbing ------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemstackClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _rid(self, resource_id: str | None) -> str:
        return _resource(resource_id, self.resource_id)

    async def _run(self, call: Call[T]) -> T:
        """Send ``call`` and read its answer (as ``MemstackClient._run``).

        Raises:
            MemstackError: the API's error, mapped. Unavailable: no answer, or an unreadable one.
            InvalidInput: the URL is invalid.
        """
        method, url, content, headers = _wire_request(self.base_url, call)
        with _transport_errors(method, url):
            response = await self._http.request(method, url, content=content, headers=headers)
        return _wire_answer(response, call)

    # health --------------------------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        """``{"status": "ok", "version": ...}`` (no store access on the server)."""
        return await self._run(Calls.health())

    # threads -------------------------------------------------------------------------------------

    async def create_thread(
        self,
        *,
        resource_id: str | None = None,
        thread_id: str | None = None,
        title: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> Thread:
        """Create a thread (``Memory.create_thread``).

        Raises:
            InvalidInput, Conflict: as ``Memory.create_thread``.
        """
        return await self._run(Calls.create_thread(self._rid(resource_id), thread_id, title, metadata))

    async def get_thread(self, *, thread_id: str, resource_id: str | None = None) -> Thread:
        """The thread (``Memory.get_thread``).

        Raises:
            NotFound: missing or another resource's.
        """
        return await self._run(Calls.get_thread(self._rid(resource_id), thread_id))

    async def list_threads(
        self,
        *,
        resource_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        order_by: str = "created_at",
        direction: str = "desc",
        metadata: dict[str, Any] | None = None,
    ) -> ThreadPage:
        """A page of the resource's threads (``Memory.list_threads``); pass ``next_cursor`` back.

        Raises:
            InvalidInput: bad paging or filter.
        """
        return await self._run(
            Calls.list_threads(self._rid(resource_id), limit, cursor, order_by, direction, metadata)
        )

    async def update_thread(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Thread:
        """Partial update; metadata merges (``Memory.update_thread``).

        Raises:
            NotFound, InvalidInput, PayloadTooLarge: as ``Memory.update_thread``.
        """
        return await self._run(Calls.update_thread(self._rid(resource_id), thread_id, title, metadata))

    async def delete_thread(self, *, thread_id: str, resource_id: str | None = None) -> None:
        """Delete the thread and its messages (``Memory.delete_thread``).

        Raises:
            NotFound: missing or another resource's.
        """
        await self._run(Calls.delete_thread(self._rid(resource_id), thread_id))

    async def erase_resource(self, *, resource_id: str | None = None) -> EraseReceipt:
        """Erase everything the resource owns (``Memory.erase_resource``; ``DELETE /v1/resources/{id}``).
        Idempotent: a second call returns zero counts.

        Raises:
            InvalidInput: an id the API cannot route or refuses. Forbidden: JWT mode and the token is
                another resource's. Unavailable: a backend failed midway (call again to finish).
        """
        return await self._run(Calls.erase_resource(self._rid(resource_id)))

    async def clone_thread(
        self,
        *,
        source_thread_id: str,
        resource_id: str | None = None,
        new_thread_id: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        message_limit: int | None = None,
        target_resource_id: str | None = None,
    ) -> CloneResult:
        """Copy a thread and its messages (``Memory.clone_thread``), into this resource or into
        ``target_resource_id`` (the caller must be allowed both).

        Raises:
            NotFound: the source is missing or another resource's. Conflict: ``new_thread_id`` exists.
            Forbidden: the caller may not act for ``target_resource_id``.
        """
        return await self._run(
            Calls.clone_thread(
                self._rid(resource_id),
                source_thread_id,
                new_thread_id,
                title,
                metadata,
                message_limit,
                target_resource_id,
            )
        )

    # messages ------------------------------------------------------------------------------------

    async def save_messages(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        messages: Sequence[Message | Mapping[str, Any] | str],
        expected_last_seq: int | None = None,
    ) -> SavedBatch:
        """Save a batch in order (``Memory.save_messages``); returns the saved messages with ``seq`` and the
        ids stored but not searchable yet (``SavedBatch.unindexed``).
        ``expected_last_seq`` (``RemoteContext.last_seq``) refuses it if the thread moved on since.

        Raises:
            InvalidInput, NotFound, Conflict, PayloadTooLarge, Unavailable: as ``Memory.save_messages``.
        """
        return await self._run(
            Calls.save_messages(self._rid(resource_id), thread_id, messages, expected_last_seq)
        )

    async def list_messages(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        last: int | None = None,
        limit: int = 40,
        cursor: str | None = None,
        include: Sequence[Include | Mapping[str, Any]] | None = None,
    ) -> MessagePage:
        """Messages of a thread in order (``Memory.list_messages``).

        Raises:
            NotFound: the thread is missing or another resource's. InvalidInput: bad arguments.
        """
        return await self._run(
            Calls.list_messages(self._rid(resource_id), thread_id, last, limit, cursor, include)
        )

    async def delete_messages(self, *, resource_id: str | None = None, message_ids: Sequence[str]) -> int:
        """Delete messages by id; returns how many existed for this resource (``Memory.delete_messages``).

        Raises:
            InvalidInput: an empty list or bad ids. PayloadTooLarge: over 1000 ids.
        """
        return await self._run(Calls.delete_messages(self._rid(resource_id), message_ids))

    # working memory ------------------------------------------------------------------------------

    async def get_working_memory(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> str | None:
        """The stored working memory, or ``None`` if never written or working memory is off
        (``Memory.get_working_memory``).

        The server's configured options merged with ``options`` decide whether working memory is on and
        its scope, as they do for ``Memory``: ``thread_id`` is sent in the route, and in resource scope the
        resource's document is read whatever the thread.

        Raises:
            InvalidInput: thread scope without ``thread_id``.
            NotFound: thread scope and the thread is missing or another resource's.
        """
        return await self._run(Calls.get_working_memory(self._rid(resource_id), thread_id, options))

    async def update_working_memory(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        working_memory: str | dict[str, Any],
        options: dict[str, Any] | None = None,
    ) -> None:
        """Replace (markdown) or merge (schema) working memory (``Memory.update_working_memory``); on/off and
        scope as in ``get_working_memory``.

        Raises:
            InvalidInput: working memory is off (field ``working_memory``), thread scope without
                ``thread_id``; and as ``Memory.update_working_memory``.
            Forbidden, PayloadTooLarge, NotFound, Conflict: as ``Memory.update_working_memory``.
        """
        await self._run(
            Calls.update_working_memory(self._rid(resource_id), thread_id, working_memory, options)
        )

    async def apply_tool_call(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        tool_call: Mapping[str, Any] | ToolCallPart,
        options: dict[str, Any] | None = None,
        context: RemoteContext | None = None,
        working_memory_version: str | None = None,
    ) -> Message:
        """Run the model's ``updateWorkingMemory`` call (``Memory.apply_tool_call``): pass the turn's
        ``context`` (or its ``working_memory_version``) so that an update made from a document that has
        since moved on is refused with the current one; ``context`` then records what the model has seen.

        Args:
            tool_call: an OpenAI tool call ``{"id", "type": "function", "function": {"name", "arguments"}}``
                (the SDK's object: ``call.model_dump()``), a Bedrock ``toolUse`` or Anthropic ``tool_use``
                block, or a ``ToolCallPart``.

        Returns:
            The ``tool`` message to send back (not saved); ``memstack.context.tool_messages(message)``
            renders it for chat completions.

        Raises:
            InvalidInput, NotFound, Conflict: as ``Memory.apply_tool_call``.
        """
        return await self._run(
            Calls.apply_tool_call(
                self._rid(resource_id), thread_id, tool_call, options, context, working_memory_version
            )
        )

    # observational memory ------------------------------------------------------------------------

    async def get_observations(
        self, *, thread_id: str, resource_id: str | None = None
    ) -> RemoteObservations | None:
        """The observation record that serves the thread (``Memory.get_observation_record``, summed up),
        or ``None`` when nothing has been observed or buffered for it yet.

        Raises:
            NotFound: the thread is missing or another resource's.
        """
        return await self._run(Calls.get_observations(self._rid(resource_id), thread_id))

    async def apply_recall_tool(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        tool_call: Mapping[str, Any] | ToolCallPart,
        options: dict[str, Any] | None = None,
    ) -> Message:
        """Run the model's ``recall`` call (``Memory.apply_recall_tool``: the messages behind an observation
        group, when ``observational_memory.retrieval`` is on).

        Args:
            tool_call: the call in any shape ``apply_tool_call`` takes, named ``recall``.
            options: the options the context was assembled with (they must enable retrieval).

        Returns:
            The ``tool`` message to send back (not saved); the model's own mistakes (bad arguments, an
            unknown cursor) are an error result in it, not an exception.

        Raises:
            InvalidInput: not a ``recall`` call, malformed, or retrieval not enabled.
            PayloadTooLarge: the arguments are too large.
        """
        return await self._run(Calls.apply_recall_tool(self._rid(resource_id), thread_id, tool_call, options))

    # context -------------------------------------------------------------------------------------

    async def recall(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        query: str,
        options: dict[str, Any] | None = None,
    ) -> RecallResult:
        """Semantic recall alone (``Memory.recall``): hits (best first) and their neighbour windows.

        Raises:
            InvalidInput: bad arguments. Unavailable: embedder or index failed.
        """
        return await self._run(Calls.recall(self._rid(resource_id), thread_id, query, options))

    async def context(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        message: Message | Mapping[str, Any] | str | None = None,
        instructions: str | Sequence[str] | None = None,
        context: Sequence[Message | Mapping[str, Any] | str] | None = None,
        options: dict[str, Any] | None = None,
        count_tokens: bool = False,
    ) -> RemoteContext:
        """Assemble what the model sees for a turn (``Memory.context``); nothing is saved.

        Args:
            count_tokens: have the server count ``token_count`` (it loads its tokenizer once per process).

        Returns:
            A ``RemoteContext``: ``.to_openai()`` → ``{"messages", "tools"}`` for chat completions,
            ``.to_bedrock()``, ``.to_anthropic()``; ``.messages``, ``.system``, ``.tools``, ``.token_count``
            as on ``ModelContext``.

        Raises:
            InvalidInput: bad input (another resource's thread id reads as an empty new thread).
        """
        return await self._run(
            Calls.context(
                self._rid(resource_id), thread_id, message, instructions, context, options, count_tokens
            )
        )

    async def inspect_context(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        message: Message | Mapping[str, Any] | str | None = None,
        instructions: str | Sequence[str] | None = None,
        context: Sequence[Message | Mapping[str, Any] | str] | None = None,
        options: dict[str, Any] | None = None,
    ) -> ContextInspection:
        """What the model sees for a turn, explained (``MemstackClient.inspect_context``)."""
        return await self._run(
            Calls.inspect_context(self._rid(resource_id), thread_id, message, instructions, context, options)
        )

    async def index_health(self, *, resource_id: str | None = None, limit: int = 10_000) -> IndexHealth:
        """How the resource's search index matches its messages (``MemstackClient.index_health``)."""
        return await self._run(Calls.index_health(self._rid(resource_id), limit))
