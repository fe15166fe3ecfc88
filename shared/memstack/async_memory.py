"""``AsyncMemory``: the library's ``Memory`` for asyncio code (agent frameworks, async web servers).

    from memstack.async_memory import AsyncMemory

    memory = AsyncMemory(Memory.local())
    await memory.save_messages(thread_id="t1", resource_id="user-1", messages=["Hi"])
    ctx = await memory.context(thread_id="t1", resource_id="user-1", message="What did I say?")

The core stays synchronous (docs STYLE "Synchronous core": no second, async copy of every use case).
Each method runs the ``Memory`` method of the same name, with the same arguments, answers and errors, on a
worker thread (``asyncio.to_thread``), so a SQLite write or an embedding call never blocks the event loop.
``Memory`` is safe to call from several threads at once (the SQLite adapter serialises its connection;
the AWS clients are thread-safe).

Cancellation: a call cancelled while it awaits (``asyncio.wait_for`` timing out) cannot stop its worker
thread, so a ``Memory`` call that had started still finishes in the background (a ``save_messages`` is
stored whole after the caller's ``TimeoutError``); one cancelled while queued for a thread never runs. Retry with the same message ids: a saved id is updated in place, never stored
twice (README "A cancelled async call").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from memstack.memory import Memory

__all__ = ["AsyncMemory"]

P = ParamSpec("P")
R = TypeVar("R")


class _OffLoop(Generic[P, R]):
    """A ``Memory`` method as a coroutine method of ``AsyncMemory``, with the same typed signature."""

    def __init__(self, method: Callable[Concatenate[Memory, P], R]) -> None:
        self.method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> _OffLoop[P, R]: ...

    @overload
    def __get__(self, obj: AsyncMemory, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(
        self, obj: AsyncMemory | None, owner: type[Any]
    ) -> _OffLoop[P, R] | Callable[P, Coroutine[Any, Any, R]]:
        if obj is None:
            return self
        memory, method = obj.memory, self.method

        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return await asyncio.to_thread(method, memory, *args, **kwargs)

        call.__doc__ = method.__doc__
        call.__name__ = getattr(method, "__name__", "call")
        return call


class AsyncMemory:
    """``Memory``'s methods as coroutines (see the module docstring).

    Args:
        memory: the ``Memory`` to run (``Memory.local()``, ``memstack.bootstrap.build()``, ...).

    Attributes:
        memory: that ``Memory``, for what has no async form (``options``, ``settled``).
    """

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    create_thread = _OffLoop(Memory.create_thread)
    get_thread = _OffLoop(Memory.get_thread)
    list_threads = _OffLoop(Memory.list_threads)
    update_thread = _OffLoop(Memory.update_thread)
    delete_thread = _OffLoop(Memory.delete_thread)
    clone_thread = _OffLoop(Memory.clone_thread)
    erase_resource = _OffLoop(Memory.erase_resource)
    save_messages = _OffLoop(Memory.save_messages)
    list_messages = _OffLoop(Memory.list_messages)
    delete_messages = _OffLoop(Memory.delete_messages)
    get_working_memory = _OffLoop(Memory.get_working_memory)
    update_working_memory = _OffLoop(Memory.update_working_memory)
    apply_tool_call = _OffLoop(Memory.apply_tool_call)
    apply_recall_tool = _OffLoop(Memory.apply_recall_tool)
    get_observation_record = _OffLoop(Memory.get_observation_record)
    recall = _OffLoop(Memory.recall)
    context = _OffLoop(Memory.context)
    inspect_context = _OffLoop(Memory.inspect_context)
    index_health = _OffLoop(Memory.index_health)

    async def aclose(self) -> None:
        """Close the memory's store and index."""
        await asyncio.to_thread(self.memory.close)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
