"""The hot path: ``POST /v1/threads/{thread_id}/context`` (what the model sees for a turn) and
``POST /v1/threads/{thread_id}/recall`` (semantic recall alone)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from memstack.api.app import API_PREFIX, MemstackResolver
from memstack.api.log import api_logger
from memstack.api.schemas import (
    ContextBody,
    ContextOut,
    RecallBody,
    RecallHit,
    RecallOut,
    ResourceQuery,
    SystemOut,
)

TAGS = ["context"]


def register(app: MemstackResolver) -> None:
    """Add the context and recall routes."""

    @app.post(
        f"{API_PREFIX}/threads/<thread_id>/context",
        tags=TAGS,
        summary="Assemble the context of a turn: system messages, conversation, tools, token count and "
        "the OpenAI messages",
        description="Nothing is saved. Another resource's thread id reads as a new, empty thread.",
    )
    def context(thread_id: str, body: ContextBody, query: Annotated[ResourceQuery, Query()]) -> ContextOut:
        ctx = app.memory().context(
            thread_id=thread_id,
            resource_id=query.resource_id,
            message=body.message.to_input() if body.message is not None else None,
            instructions=body.instructions,
            context=[m.to_input() for m in body.context] if body.context is not None else None,
            options=body.options,
        )
        rendered = ctx.to_openai()
        out = ContextOut(
            messages=rendered["messages"],
            tools=rendered.get("tools", []),
            token_count=ctx.token_count,
            system=[SystemOut(kind=s.kind, text=s.text) for s in ctx.system],
            conversation=ctx.messages,
            history_ids=ctx.history_ids,
            recalled_ids=[m.id for m in ctx.recalled],
        )
        api_logger().info(
            "context",
            extra={
                "thread_id": thread_id,
                "system": len(ctx.system),
                "messages": len(ctx.messages),
                "recalled": len(ctx.recalled),
                "token_count": out.token_count,
            },
        )
        return out

    @app.post(
        f"{API_PREFIX}/threads/<thread_id>/recall",
        tags=TAGS,
        summary="Semantic recall: the best hits for a query and their neighbours (the resource's data only)",
    )
    def recall(thread_id: str, body: RecallBody, query: Annotated[ResourceQuery, Query()]) -> RecallOut:
        result = app.memory().recall(
            thread_id=thread_id, resource_id=query.resource_id, query=body.query, options=body.options
        )
        return RecallOut(
            hits=[
                RecallHit(
                    message_id=h.message_id,
                    thread_id=h.thread_id,
                    seq=h.seq,
                    score=h.score,
                    vector_rank=h.vector_rank,
                    keyword_rank=h.keyword_rank,
                )
                for h in result.hits
            ],
            messages=result.messages,
        )
