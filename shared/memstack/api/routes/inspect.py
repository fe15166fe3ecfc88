"""Looking into memory without changing it (Memstack Studio, the CLI): what the model sees for a turn,
layer by layer with the provider requests (``POST /v1/threads/{thread_id}/inspect``), and how the search
index matches the stored messages (``GET /v1/index-health``)."""

import logging
from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from memstack.api.deps import API_PREFIX, current_memory, new_router
from memstack.api.schemas import (
    IndexHealthOut,
    IndexHealthQuery,
    InspectBody,
    InspectOut,
    LayerOut,
    ResourceQuery,
    SystemOut,
)
from memstack.usecases.inspect import context_layers

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
    ctx = current_memory().context(thread_id=thread_id, resource_id=query.resource_id, **body.turn())
    layers = context_layers(ctx, context_count=len(body.context or []), has_message=body.message is not None)
    logger.info(
        "inspect",
        extra={"thread_id": thread_id, "layers": len(layers), "token_count": ctx.token_count},
    )
    return InspectOut(
        layers=[
            LayerOut(layer=x.layer, role=x.role, messages=x.messages, tools=x.tools, tokens=x.tokens)
            for x in layers
        ],
        token_count=ctx.token_count,
        system=[SystemOut(kind=s.kind, text=s.text) for s in ctx.system],
        conversation=ctx.messages,
        history_ids=ctx.history_ids,
        recalled_ids=[m.id for m in ctx.recalled],
        openai=ctx.to_openai(),
        bedrock=ctx.to_bedrock(),
        anthropic=ctx.to_anthropic(),
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
