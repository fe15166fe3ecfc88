"""Observational-memory routes (docs/observational-memory.md, spec §2.9): a thread's observation record
(``GET /v1/threads/{thread_id}/observations``) and the model's ``recall`` tool call
(``POST /v1/threads/{thread_id}/recall-tool``).

Observation itself runs in the background (after saves); these routes only read the record and run the
retrieval tool the context route offers when ``observational_memory.retrieval`` is on.
"""

from typing import Annotated

from memstack.api.deps import API_PREFIX, current_memory, new_router
from memstack.api.params import Query
from memstack.api.schemas import (
    ObservationsOut,
    ObservationsQuery,
    ObservationSummary,
    RecallToolBody,
    ResourceQuery,
    ResourceUsageOut,
    ToolCallOut,
)
from memstack.context import tool_messages
from memstack.model import ObservationRecord
from memstack.observability import TOOL_CALLS, add_metric

TAGS = ["observational memory"]


def summary(record: ObservationRecord, thread_id: str) -> ObservationSummary:
    """The API's view of ``record`` as it serves ``thread_id`` (``observed_seq`` is that thread's cursor;
    buffered chunks are counted, not shown)."""
    return ObservationSummary(
        scope=record.scope,
        active_observations=record.active_observations,
        observation_tokens=record.observation_tokens,
        generation_count=record.generation_count,
        origin_type=record.origin_type,
        observed_seq=record.observed_seq(thread_id),
        pending_message_tokens=record.pending_message_tokens,
        buffered_chunks=len(record.buffered_chunks),
        current_task=record.current_task,
        suggested_response=record.suggested_response,
        failure_count=record.failure_count,
        last_error=record.last_error,
        updated_at=record.updated_at,
        usage=record.usage,
    )


router = new_router()
"""The observational-memory routes."""


@router.get(
    f"{API_PREFIX}/threads/<thread_id>/observations",
    tags=TAGS,
    summary="The thread's observation record ({record: null} before anything is observed or metered; "
    "404 for a missing or another resource's thread); resource_usage=true adds the resource's cost",
)
def get_observations(thread_id: str, query: Annotated[ObservationsQuery, Query()]) -> ObservationsOut:
    memory = current_memory()
    memory.get_thread(thread_id=thread_id, resource_id=query.resource_id)  # 404 unless the owner's
    record = memory.get_observation_record(resource_id=query.resource_id, thread_id=thread_id)
    total = None
    if query.resource_usage:
        found = memory.resource_usage(resource_id=query.resource_id)
        total = ResourceUsageOut(usage=found.usage, records=found.records, complete=found.complete)
    return ObservationsOut(
        record=None if record is None else summary(record, thread_id), resource_usage=total
    )


@router.post(
    f"{API_PREFIX}/threads/<thread_id>/recall-tool",
    tags=TAGS,
    summary="Run the model's recall tool call (observational-memory retrieval); returns the tool result "
    "to send back",
)
def apply_recall_tool(
    thread_id: str, body: RecallToolBody, query: Annotated[ResourceQuery, Query()]
) -> ToolCallOut:
    message = current_memory().apply_recall_tool(
        thread_id=thread_id,
        resource_id=query.resource_id,
        tool_call=body.tool_call.model_dump(),
        options=body.options,
    )
    add_metric(TOOL_CALLS)
    return ToolCallOut(message=message, messages=tool_messages(message))
