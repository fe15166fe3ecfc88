"""``POST /v1/threads/{thread_id}/recall``: semantic recall alone (the best hits for a query and their
neighbours, from the resource's data only)."""

from typing import Annotated

from memstack.api.deps import API_PREFIX, current_memory, new_router
from memstack.api.params import Query
from memstack.api.schemas import RecallBody, RecallHit, RecallOut, ResourceQuery
from memstack.observability import RECALLED, add_metric

TAGS = ["context"]

router = new_router()
"""The recall route."""


@router.post(
    f"{API_PREFIX}/threads/<thread_id>/recall",
    tags=TAGS,
    summary="Semantic recall: the best hits for a query and their neighbours (the resource's data only)",
)
def recall(thread_id: str, body: RecallBody, query: Annotated[ResourceQuery, Query()]) -> RecallOut:
    result = current_memory().recall(
        thread_id=thread_id, resource_id=query.resource_id, query=body.query, options=body.options
    )
    add_metric(RECALLED, len(result.hits))
    return RecallOut(
        hits=[
            RecallHit(
                message_id=h.message_id,
                thread_id=h.thread_id,
                seq=h.seq,
                score=h.score,
                vector_rank=h.vector_rank,
                keyword_rank=h.keyword_rank,
                vector_score=h.vector_score,
                keyword_score=h.keyword_score,
            )
            for h in result.hits
        ],
        messages=result.messages,
    )
