"""The hot path: ``POST /v1/threads/{thread_id}/context`` (what the model sees for a turn), the one route
of the ``context`` function (``memstack.api.app.ROUTE_SETS``; infra/api.py sends it there)."""

import logging
from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from memstack.api.deps import API_PREFIX, current_memory, new_router
from memstack.api.schemas import ContextBody, ContextOut, ResourceQuery, SystemOut
from memstack.observability import TURNS, add_metric

logger = logging.getLogger(__name__)

TAGS = ["context"]

router = new_router()
"""The context route."""


@router.post(
    f"{API_PREFIX}/threads/<thread_id>/context",
    tags=TAGS,
    summary="Assemble the context of a turn: system messages, conversation, tools, token count and "
    "the OpenAI messages",
    description="Nothing is saved. Another resource's thread id reads as a new, empty thread.",
)
def context(thread_id: str, body: ContextBody, query: Annotated[ResourceQuery, Query()]) -> ContextOut:
    ctx = current_memory().context(thread_id=thread_id, resource_id=query.resource_id, **body.turn())
    rendered = ctx.to_openai()
    out = ContextOut(
        messages=rendered["messages"],
        tools=rendered.get("tools", []),
        token_count=ctx.token_count if body.count_tokens else ctx.counted_tokens,
        system=[SystemOut(kind=s.kind, text=s.text) for s in ctx.system],
        conversation=ctx.messages,
        history_ids=ctx.history_ids,
        recalled_ids=[m.id for m in ctx.recalled],
        last_seq=ctx.last_seq,
        working_memory_version=ctx.working_memory_version,
    )
    logger.info(
        "context",
        extra={
            "thread_id": thread_id,
            "system": len(ctx.system),
            "messages": len(ctx.messages),
            "recalled": len(ctx.recalled),
            "token_count": out.token_count,
        },
    )
    add_metric(TURNS)
    return out
