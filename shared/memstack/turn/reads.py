"""One read plan per turn: the only code that reads the store on ``context()``'s path.

The layers declare what they need (``Needs``); this module fetches it in as few round trips as the store
allows, concurrently where a turn can afford it (STYLE.md "Synchronous core"):

* the thread and its last messages in one read (``get_thread_with_history``: one DynamoDB Query), or
  nothing more when a layer's ``prepare`` already read the thread and its history tail (observational
  memory);
* semantic recall (embedding + index search + neighbour windows) beside it, on the pool when the backend is
  remote, with the resource record read in the same store request as the recalled windows
  (``get_resource_and_windows``: one BatchGetItem);
* the resource record alone, beside the history read, when there is nothing to recall.

A turn on AWS therefore costs 2 DynamoDB requests + 1 OpenSearch ``_msearch`` + 1 embedding
(``tests/unit/test_context_reads.py``, ``benchmarks/aws_requests.py``). Recall failures never fail the
turn: they are logged and the turn goes on without recall. Recall on the pool is waited for only until
the turn's deadline (``memstack.deadline``): a slow embedder or index then costs the turn its recall, not
its answer. Without ``parallel_recall`` recall still runs on a pool thread, but is waited for before the
history read (``run_waited``), so the reads stay one after another while the wait stops at the deadline;
a network adapter also bounds its own requests by it (the OpenAI connection, the OpenSearch client's
``request_timeout``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import suppress
from functools import partial
from typing import Any

from memstack import deadline
from memstack.errors import Forbidden, InvalidInput, PayloadTooLarge
from memstack.layers.base import Needs, Turn, TurnReads
from memstack.model import Message, Resource, Thread
from memstack.ports import MemoryStore
from memstack.recall import RecallResult, SemanticRecall

logger = logging.getLogger(__name__)

CALLER_ERRORS = (InvalidInput, PayloadTooLarge, Forbidden)
"""Errors of recall that are the caller's to fix (HTTP 400/413/403): they propagate. Anything else — a store,
index or embedder failure, the deadline — is a dependency's, and the turn goes on without recall."""

Submit = Callable[..., Future[Any]]
"""Runs ``fn(*args)`` and returns its future: the recall pool's ``submit``, or inline (``run_now``)."""


def run_now(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """``fn(*args)`` run in this thread, as a completed future (its exception kept for ``result()``)."""
    done: Future[Any] = Future()
    try:
        done.set_result(fn(*args))
    except Exception as exc:
        done.set_exception(exc)
    return done


def run_waited(submit: Submit, fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """``fn(*args)`` run through ``submit`` and waited for here, until the turn's deadline at most.

    The caller's reads stay one after another (as with ``run_now``), but work that outlives the deadline
    (a slow embedder or index) no longer holds the turn: the returned future is then still running, and the
    caller's ``result(timeout=deadline.remaining())`` times out at once. The late work finishes on its
    pool thread and its result is dropped. Without a deadline this is ``run_now``.
    """
    if deadline.remaining() is None:
        return run_now(fn, *args)
    future = submit(fn, *args)
    # an error stays in the future: the caller's result() raises it again (or times out) and logs it
    with suppress(Exception):
        future.result(timeout=deadline.remaining())
    return future


def merge_needs(needs: Iterable[Needs]) -> Needs:
    """One ``Needs`` for the whole turn: the most history asked for (a prepared tail wins), the resource if
    any layer wants it, the first recall query."""
    last, tail, resource, query, thread = 0, None, False, None, None
    for n in needs:
        last = max(last, n.last_messages)
        tail = n.tail if n.tail is not None else tail
        thread = n.thread if n.thread is not None else thread
        resource = resource or n.resource
        query = query if query is not None else n.recall_query
    return Needs(last_messages=last, tail=tail, resource=resource, recall_query=query, thread=thread)


def read_turn(
    store: MemoryStore,
    recall: SemanticRecall,
    turn: Turn,
    needs: Needs,
    prepared: Mapping[str, Any],
    submit: Submit,
) -> TurnReads:
    """Fetch what ``needs`` asks for, for ``turn``'s scope.

    Args:
        submit: where recall (or the lone resource read) runs beside the history read.

    Returns:
        The reads; ``recall`` is ``None`` when not asked for or when a dependency failed or the deadline
        passed (logged at WARNING with the error class and the thread id, never the query).

    Raises:
        What the store raises for the history read (the turn cannot go on without its thread), and recall's
        ``CALLER_ERRORS``: the caller's input is wrong, and a context silently without recall would hide it.
    """
    resource_id, thread_id = turn.scope.resource_id, turn.scope.thread
    query = needs.recall_query
    recalled: Future[RecallResult] | None = None
    resource_read: Future[Resource | None] | None = None
    if query is not None and query.strip():
        recalled = submit(
            deadline.carry(partial(recall.recall, with_resource=needs.resource)),
            resource_id,
            thread_id,
            query,
            turn.options.semantic_recall,
        )
    elif needs.resource:
        resource_read = submit(store.get_resource, resource_id)
    thread, history = _history(store, resource_id, thread_id, needs)
    result: RecallResult | None = None
    resource: Resource | None = None
    if recalled is not None:
        try:
            result = recalled.result(timeout=deadline.remaining())
            resource = result.resource
        except CALLER_ERRORS:
            raise
        except Exception as exc:
            error = "DeadlineExceeded" if isinstance(exc, FutureTimeout) else type(exc).__name__
            logger.warning(
                "semantic recall failed (%s) for thread %s; continuing with history only",
                error,
                thread_id,
                extra={"thread_id": thread_id, "error": error},
            )
            if needs.resource:
                resource = store.get_resource(resource_id)
    elif resource_read is not None:
        resource = resource_read.result()
    return TurnReads(thread=thread, history=history, resource=resource, recall=result, prepared=prepared)


def _history(
    store: MemoryStore, resource_id: str, thread_id: str, needs: Needs
) -> tuple[Thread | None, list[Message]]:
    """The thread and its history: one read for both, or the thread alone beside a prepared tail."""
    if needs.tail is not None:
        thread = needs.thread[0] if needs.thread is not None else store.get_thread(resource_id, thread_id)
        return thread, list(needs.tail) if thread is not None else []
    return store.get_thread_with_history(resource_id, thread_id, last=needs.last_messages)
