"""The turn: ``context()`` — every layer prepares, declares its reads, one read plan fetches them, every
layer contributes, the assembler orders and budgets — and ``recall()`` alone."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from memstack import deadline
from memstack.context import ModelContext
from memstack.errors import InvalidInput, MemstackError, Unavailable
from memstack.inputs import coerce_message
from memstack.layers.base import Turn
from memstack.model import Message, check_text
from memstack.recall import RecallResult
from memstack.scope import Scope
from memstack.turn.assemble import assemble
from memstack.turn.reads import Submit, merge_needs, read_turn, run_waited
from memstack.usecases.checks import as_context_messages, as_texts
from memstack.usecases.core import Core


class Turns:
    """Context assembly and recall over the core.

    Args:
        parallel_recall: run recall on a worker thread beside the store reads (network backends);
            otherwise recall runs on a worker thread before them and is waited for until the turn's
            deadline (``run_waited``), so a slow embedder or index costs the turn its recall, not its
            answer, on both paths (the hand-off costs ~0.04–0.14 ms of CPU per turn on SQLite with an
            offline embedder, recall on the pool against recall on the turn's own thread, best of
            interleaved rounds: the price of that bound; the pool's ``Future`` is ~17 µs of it).
    """

    def __init__(self, core: Core, *, parallel_recall: bool = False) -> None:
        self.core = core
        self.parallel_recall = parallel_recall
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _submit(self) -> Submit:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memstack-recall")
            submit: Submit = self._executor.submit
        return submit if self.parallel_recall else partial(run_waited, submit)

    def close(self) -> None:
        """Stop the recall pool (if one was made)."""
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None

    def context(
        self,
        scope: Scope,
        *,
        message: Message | dict[str, Any] | str | None,
        instructions: str | Sequence[str] | None,
        context: Sequence[Message | dict[str, Any] | str] | None,
        overrides: dict[str, Any] | None,
    ) -> ModelContext:
        """See ``Memory.context``."""
        core = self.core
        opts = core.options.merged(overrides)
        if overrides:
            # a call that turns on what calls a chat model (observational memory, titles) is refused now,
            # not on the turn whose thread first crosses a threshold
            core.require_chat_model(opts)
        turn = self._turn(scope, opts, message, context)
        texts = as_texts(instructions, "instructions")
        with deadline.within(opts.context_timeout_ms / 1000):
            prepared = {layer.name: layer.prepare(turn) for layer in core.layers}
            needs = merge_needs(layer.needs(turn, prepared[layer.name]) for layer in core.layers)
            reads = read_turn(core.store, core.recall, turn, needs, prepared, self._submit())
        contributions = [layer.contribute(turn, reads) for layer in core.layers]
        last_seq = reads.thread.last_seq if reads.thread is not None else 0
        return assemble(turn, texts, contributions, core.tokenizer, last_seq=last_seq)

    def _turn(
        self,
        scope: Scope,
        opts: Any,
        message: Message | dict[str, Any] | str | None,
        context: Sequence[Message | dict[str, Any] | str] | None,
    ) -> Turn:
        now = self.core.clock.now()
        new = (
            coerce_message(message, thread_id=scope.thread, resource_id=scope.resource_id, now=now)
            if message is not None
            else None
        )
        extra = tuple(
            coerce_message(
                c, thread_id=scope.thread, resource_id=scope.resource_id, now=now, field=f"context[{i}]"
            )
            for i, c in enumerate(as_context_messages(context) or [])
        )
        return Turn(scope=scope, options=opts, now=now, new=new, extra=extra)

    def recall(self, scope: Scope, query: str, overrides: dict[str, Any] | None) -> RecallResult:
        """See ``Memory.recall``."""
        opts = self.core.options.merged(overrides)
        if not isinstance(query, str):
            raise InvalidInput("query must be a string", field="query")
        check_text(query, "query")
        if not opts.semantic_recall.enabled:
            return RecallResult([], [])
        try:
            # an agent calls recall per turn too (a tool): it never holds the turn longer than context() would
            with deadline.within(opts.context_timeout_ms / 1000):
                return self.core.recall.recall(scope.resource_id, scope.thread, query, opts.semantic_recall)
        except MemstackError as exc:
            if isinstance(exc, InvalidInput) and exc.field != "semantic_recall.filter":
                # an embedder that answered with a malformed vector is an outage, not the caller's input
                raise Unavailable(f"semantic recall failed: {exc.message}") from exc
            raise
        except Exception as exc:
            raise Unavailable(f"semantic recall failed: {type(exc).__name__}") from exc
