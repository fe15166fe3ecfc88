"""The ``indexer`` function: DynamoDB stream of the memory table → embeddings → the search index; and
(handler ``app.reconcile``, a function of its own on an EventBridge schedule) the reconciler that indexes
messages saved but never marked as indexed (stream records the indexer gave up on, docs/dynamodb.md).

Wiring only; ``Memory`` is built from the environment on the first event (nothing connects at import).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memstack.bootstrap import memory_from_env
from memstack.errors import InvalidInput
from memstack.indexer import handle_stream_event
from memstack.observability import lambda_handler

RECONCILE_LIMIT = 1_000


def index(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Index a batch of stream records; returns the partial-batch failures (memstack.indexer)."""
    return handle_stream_event(memory_from_env(), event)


def reconcile_unindexed(event: Mapping[str, Any], context: Any) -> dict[str, int]:
    """The schedule's run: ``Memory.reconcile_index`` over at most ``limit`` (default 1,000) unindexed
    messages. Returns ``{"chunks": n}`` (chunks written).

    Raises:
        InvalidInput: ``limit`` is not an integer from 1 to 10,000.
        Unavailable: some threads could not be indexed (after trying every one; the next run retries
            them), so the function's error alarm sees it.
    """
    limit = event.get("limit", RECONCILE_LIMIT) if isinstance(event, Mapping) else None
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise InvalidInput("limit must be an integer from 1 to 10000", field="limit")
    return {"chunks": memory_from_env().reconcile_index(limit=limit)}


handler = lambda_handler(index)
"""``index`` with the function's logs, trace and metrics (memstack.observability)."""
reconcile = lambda_handler(reconcile_unindexed)
"""``reconcile_unindexed`` with the function's logs, trace and metrics (the ``reconcile`` function's handler)."""
