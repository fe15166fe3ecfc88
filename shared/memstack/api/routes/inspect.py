"""Looking into memory without changing it (Memstack Studio, the CLI): what the model sees for a turn,
layer by layer with the provider requests (``POST /v1/threads/{thread_id}/inspect``), and how the search
index matches the stored messages (``GET /v1/index-health``)."""

import logging
from typing import Annotated

from memstack.api.deps import API_PREFIX, current_memory, new_router
from memstack.api.params import Query
from memstack.api.schemas import (
    IndexHealthOut,
    IndexHealthQuery,
    InspectBody,
    InspectOut,
    LayerOut,
    ResourceQuery,
    SystemOut,
)

logger = logging.getLogger(__name__)

TAGS = ["inspection"]

router = new_router()
"""The inspection routes."""


@router.post(
    f"{API_PREFIX}/threads/<thread_id>/inspect",
    tags=TAGS,
    summary="What the model sees for a turn, explained: the layers in order with their tokens, and the "
    "exact OpenAI, Bedrock Converse and Anthropic request bodies",
    description="Assembles the context as POST …/context does (nothing is saved) and always counts tokens. "
    "Another resource's thread id reads as a new, empty thread.",
)
def inspect_context(
    thread_id: str, body: InspectBody, query: Annotated[ResourceQuery, Query()]
) -> InspectOut:
    found = current_memory().inspect_context(
        thread_id=thread_id, resource_id=query.resource_id, **body.turn()
    )
    logger.info(
        "inspect",
        extra={"thread_id": thread_id, "layers": len(found.layers), "token_count": found.token_count},
    )
    return InspectOut(
        layers=[LayerOut.model_validate(x, from_attributes=True) for x in found.layers],
        token_count=found.token_count,
        system=[SystemOut(kind=x.kind, text=x.text) for x in found.system],
        conversation=found.messages,
        history_ids=found.history_ids,
        recalled_ids=found.recalled_ids,
        **found.requests,
    )


@router.get(
    f"{API_PREFIX}/index-health",
    tags=TAGS,
    summary="How the resource's search index matches its stored messages: indexed, not indexed, stale, "
    "and the embedding model and dimension of the index",
    description="Reads up to `limit` messages (threads by creation, each by seq) and their index marks; "
    "writes nothing.",
)
def index_health(query: Annotated[IndexHealthQuery, Query()]) -> IndexHealthOut:
    found = current_memory().index_health(resource_id=query.resource_id, limit=query.limit)
    return IndexHealthOut.model_validate(found, from_attributes=True)
