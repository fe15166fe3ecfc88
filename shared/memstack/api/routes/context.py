"""The hot path: ``POST /v1/threads/{thread_id}/context`` (what the model sees for a turn), the one route
of the ``context`` function (``memstack.api.app.ROUTE_SETS``; infra/api.py sends it there)."""

import logging
from typing import TYPE_CHECKING, Annotated

from memstack.api.context_schemas import ContextBody, ContextOut, ResourceQuery, SystemOut
from memstack.api.deps import API_PREFIX, current_memory, new_router
from memstack.api.params import Query
from memstack.observability import TURNS, add_metric

if TYPE_CHECKING:
    from memstack.context import ModelContext

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
    out = context_out(ctx, count_tokens=body.count_tokens)
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


def context_out(ctx: "ModelContext", *, count_tokens: bool) -> ContextOut:
    """The route's answer for a turn's ``ModelContext``: its OpenAI rendering beside its parts.

    Args:
        count_tokens: count the tokens now (``ModelContext.token_count``: loads tiktoken); otherwise only a
            count the token budget already made (``counted_tokens``, ``None`` when no budget applied).
    """
    rendered = ctx.to_openai()
    return ContextOut(
        messages=rendered["messages"],
        tools=rendered.get("tools", []),
        token_count=ctx.token_count if count_tokens else ctx.counted_tokens,
        system=[SystemOut(kind=s.kind, text=s.text) for s in ctx.system],
        conversation=ctx.messages,
        history_ids=ctx.history_ids,
        recalled_ids=[m.id for m in ctx.recalled],
        last_seq=ctx.last_seq,
        working_memory_version=ctx.working_memory_version,
    )
