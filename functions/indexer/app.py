"""The ``indexer`` function: DynamoDB stream of the memory table → embeddings → the search index."""

from __future__ import annotations

from typing import Any

from memstack.bootstrap import memory_from_env
from memstack.indexer import handle_stream_event
from memstack.observability import lambda_handler


def index(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Index a batch of stream records; returns the partial-batch failures (memstack.indexer)."""
    return handle_stream_event(memory_from_env(), event)


handler = lambda_handler(index)
"""``index`` with the function's logs, trace and metrics (memstack.observability)."""
