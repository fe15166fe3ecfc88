"""Accounting of the model calls made for an observation record (``ModelUsage`` on the record).

Calls are metered as they are made — chat calls by ``MeteredChat``, embedding calls by semantic recall
through ``UsageMeter.add_embedding`` — into a per-process ``UsageMeter`` keyed by ``(resource, thread)``,
and the pending totals are added to the record by its next compare-and-set write (the write that commits
an answer, or the one that records its failure), so counting costs no extra store request. A thread-scope
record takes its thread's totals, a resource-scope record every thread's of its resource. Totals that
no such write comes for are written on their own, as the record's only change, once they reach
``FLUSH_CALLS`` calls, after a title when observational memory is off, and when ``Memory`` closes
(``ObservationEngine.flush_usage``). A lost write puts the totals back for the next one. Deleting a thread
or erasing a resource drops its pending totals (``discard``). Totals of a
process that stops before any write of the record (a Lambda reclaimed mid-way) are lost: the figures are
a floor.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Literal

from memstack.model import ModelUsage
from memstack.ports import ChatModel, ChatResult, Tokenizer
from memstack.text import valid_json, valid_text

__all__ = ["FLUSH_CALLS", "Agent", "MeteredChat", "RecordKey", "UsageMeter"]

Agent = Literal["observer", "reflector", "title"]
RecordKey = tuple[str, str | None]
"""``(resource_id, thread_id)``: the thread a call is made for (``thread_id`` ``None``: for the resource
as a whole, counted into its resource-scope record)."""

FLUSH_CALLS = 32
"""Pending calls of one thread at which they are written on their own (``flush_usage``) rather than wait
for the record's next write: one small write per this many calls at most."""

MAX_PENDING_RECORDS = 10_000
"""Records with unwritten totals one process keeps; the oldest are dropped past it."""

MAX_UNCOUNTED_CHARS = 256 * 1024
"""Characters of embedded text one key keeps uncounted; past it they are counted at once."""


class UsageMeter:
    """Pending usage per record, thread-safe.

    Args:
        tokenizer: counts the tokens of embedded texts. They are counted when the totals are taken for a
            write, not when the embedding is made, so metering adds no token counting to a turn (a key
            holding more than ``MAX_UNCOUNTED_CHARS`` counts at once). ``None``: embedding tokens stay 0.
    """

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        self.tokenizer = tokenizer
        self._pending: OrderedDict[RecordKey, ModelUsage] = OrderedDict()
        self._uncounted: dict[RecordKey, list[str]] = {}
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

    def add_embedding(self, key: RecordKey, texts: Sequence[str]) -> None:
        """Count one embedder request sending ``texts`` for the thread ``key`` (their tokens are counted
        when the totals are taken)."""
        self.restore(key, ModelUsage(embedding_calls=1, embedding_texts=len(texts)))
        if self.tokenizer is None or not texts:
            return
        with self._lock:
            held = self._uncounted.setdefault(key, [])
            held.extend(texts)
            over = sum(len(t) for t in held) > MAX_UNCOUNTED_CHARS
            if over:
                del self._uncounted[key]
        if over:
            self.restore(key, ModelUsage(embedding_tokens=self._count(held)))

    def take(self, key: RecordKey) -> ModelUsage | None:
        """The pending totals of the record ``key``, removed (``None`` when there are none): the thread's
        for a thread-scope record, every thread's of the resource (and the resource's own) for a
        resource-scope one (``thread_id`` ``None``). Embedded texts not yet counted are counted here."""
        resource_id, thread_id = key
        with self._lock:
            keys = [key] if thread_id is not None else [k for k in self._pending if k[0] == resource_id]
            total: ModelUsage | None = None
            texts: list[str] = []
            for k in keys:
                usage = self._pending.pop(k, None)
                texts += self._uncounted.pop(k, [])
                if usage is not None:
                    total = usage if total is None else total.plus(usage)
        if total is not None and texts:
            total = total.plus(ModelUsage(embedding_tokens=self._count(texts)))
        return total

    def pending_calls(self, key: RecordKey) -> int:
        """Calls pending for the record ``key`` (what ``take`` would take), 0 when none."""
        resource_id, thread_id = key
        with self._lock:
            if thread_id is not None:
                usage = self._pending.get(key)
                return 0 if usage is None else usage.calls
            return sum(u.calls for k, u in self._pending.items() if k[0] == resource_id)

    def pending_keys(self) -> list[RecordKey]:
        """Every key with pending totals, oldest first."""
        with self._lock:
            return list(self._pending)

    def discard(self, resource_id: str, thread_id: str | None = None) -> None:
        """Drop the pending totals of a thread (``thread_id``) or of every thread of the resource (``None``)
        without writing them: what a deleted thread or an erased resource cost goes with it, and must not be
        written onto a record made later under the same id (a new thread of that id, the resource's next
        resource-scope record)."""
        with self._lock:
            keys = [k for k in self._pending if k[0] == resource_id and thread_id in (None, k[1])]
            keys += [k for k in self._uncounted if k[0] == resource_id and thread_id in (None, k[1])]
            for k in keys:
                self._pending.pop(k, None)
                self._uncounted.pop(k, None)

    def restore(self, key: RecordKey, usage: ModelUsage) -> None:
        """Add ``usage`` to the pending totals of ``key`` (a write that lost puts its totals back)."""
        with self._lock:
            current = self._pending.get(key)
            self._pending[key] = usage if current is None else current.plus(usage)
            self._pending.move_to_end(key)
            while len(self._pending) > MAX_PENDING_RECORDS:
                dropped, _ = self._pending.popitem(last=False)
                self._uncounted.pop(dropped, None)

    def _count(self, texts: Sequence[str]) -> int:
        tokenizer = self.tokenizer
        return 0 if tokenizer is None else sum(tokenizer.count(t) for t in texts)


class MeteredChat:
    """A ``ChatModel`` that counts every answered call into a ``UsageMeter`` (a call that raises has no
    reported usage and counts nothing), and hands back only valid text.

    Every Observer, Reflector and title call goes through it, so it is where any chat model's answer — an
    adapter's or a caller's own ``ChatModel`` — is made storable: a lone UTF-16 surrogate (half of a pair
    a JSON answer escaped) would otherwise fail every write of the record with ``UnicodeEncodeError``."""

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
        """``inner.complete``, counted; lone surrogates in its text and tool calls replaced by U+FFFD
        (``memstack.text.valid_text``). Raises what ``inner.complete`` raises."""
        result = self.inner.complete(
            messages, tools=tools, max_output_tokens=max_output_tokens, temperature=temperature
        )
        self.meter.add(self.key, self.agent, result)
        return dataclasses.replace(
            result, text=valid_text(result.text or ""), tool_calls=valid_json(list(result.tool_calls))
        )
