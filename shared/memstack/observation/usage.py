"""Accounting of the model calls made for an observation record (``ModelUsage`` on the record).

Calls are metered as they are made (``MeteredChat``) into a per-process ``UsageMeter`` keyed by the record
(resource, owner thread), and the pending totals are added to the record by its next compare-and-set
write — the write that commits the answer, or the one that records its failure — so counting costs no
extra store request. A lost write puts the totals back for the next one. Totals of a process that stops
before any write of the record (a Lambda killed mid-call) are lost: the figures are a floor.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Literal

from memstack.model import ModelUsage
from memstack.ports import ChatModel, ChatResult

__all__ = ["Agent", "MeteredChat", "RecordKey", "UsageMeter"]

Agent = Literal["observer", "reflector", "title"]
RecordKey = tuple[str, str | None]
"""``(resource_id, thread_id or None)``: the record a call is made for (``None``: resource scope)."""

MAX_PENDING_RECORDS = 10_000
"""Records with unwritten totals one process keeps; the oldest are dropped past it."""


class UsageMeter:
    """Pending usage per record, thread-safe."""

    def __init__(self) -> None:
        self._pending: OrderedDict[RecordKey, ModelUsage] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, key: RecordKey, agent: Agent, result: ChatResult) -> None:
        """Count one call of ``agent`` and its reported tokens for the record ``key``."""
        usage = ModelUsage(
            **{
                f"{agent}_calls": 1,
                f"{agent}_input_tokens": max(0, int(result.input_tokens)),
                f"{agent}_output_tokens": max(0, int(result.output_tokens)),
            }
        )
        self.restore(key, usage)

    def take(self, key: RecordKey) -> ModelUsage | None:
        """The pending totals of ``key``, removed (``None`` when there are none)."""
        with self._lock:
            return self._pending.pop(key, None)

    def restore(self, key: RecordKey, usage: ModelUsage) -> None:
        """Add ``usage`` to the pending totals of ``key`` (a write that lost puts its totals back)."""
        with self._lock:
            current = self._pending.get(key)
            self._pending[key] = usage if current is None else current.plus(usage)
            self._pending.move_to_end(key)
            while len(self._pending) > MAX_PENDING_RECORDS:
                self._pending.popitem(last=False)


class MeteredChat:
    """A ``ChatModel`` that counts every answered call into a ``UsageMeter`` (a call that raises has no
    reported usage and counts nothing)."""

    def __init__(self, inner: ChatModel, meter: UsageMeter, key: RecordKey, agent: Agent) -> None:
        self.inner = inner
        self.meter = meter
        self.key = key
        self.agent: Agent = agent
        self.model_id = inner.model_id

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        """``inner.complete``, counted."""
        result = self.inner.complete(
            messages, tools=tools, max_output_tokens=max_output_tokens, temperature=temperature
        )
        self.meter.add(self.key, self.agent, result)
        return result
