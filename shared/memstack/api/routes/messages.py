"""Message routes: save a batch, list (last N, cursor pages, ``include`` neighbours), delete by ids."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from memstack.api.app import API_PREFIX, MemstackResolver
from memstack.api.log import api_logger
from memstack.api.schemas import (
    Deleted,
    DeleteMessagesBody,
    ListMessagesQuery,
    MessageList,
    ResourceQuery,
    SavedMessages,
    SaveMessagesBody,
)

TAGS = ["messages"]


def register(app: MemstackResolver) -> None:
    """Add the message routes."""

    @app.post(
        f"{API_PREFIX}/threads/<thread_id>/messages",
        tags=TAGS,
        summary="Save a batch of messages in order (upsert by id; creates the thread if missing)",
    )
    def save_messages(
        thread_id: str, body: SaveMessagesBody, query: Annotated[ResourceQuery, Query()]
    ) -> SavedMessages:
        saved = app.memory().save_messages(
            thread_id=thread_id,
            resource_id=query.resource_id,
            messages=[m.to_input() for m in body.messages],
        )
        api_logger().info("saved messages", extra={"thread_id": thread_id, "count": len(saved)})
        return SavedMessages(messages=saved)

    @app.get(
        f"{API_PREFIX}/threads/<thread_id>/messages",
        tags=TAGS,
        summary="List a thread's messages in order: the last N, or cursor pages; include neighbours",
    )
    def list_messages(thread_id: str, query: Annotated[ListMessagesQuery, Query()]) -> MessageList:
        page = app.memory().list_messages(
            thread_id=thread_id,
            resource_id=query.resource_id,
            last=query.last,
            limit=query.limit,
            cursor=query.cursor,
            include=[i.model_dump() for i in query.include] if query.include is not None else None,
        )
        return MessageList(messages=list(page.messages), next_cursor=page.next_cursor)

    @app.post(
        f"{API_PREFIX}/messages/delete",
        tags=TAGS,
        summary="Delete messages by id (ids of other resources count as missing)",
    )
    def delete_messages(body: DeleteMessagesBody, query: Annotated[ResourceQuery, Query()]) -> Deleted:
        deleted = app.memory().delete_messages(resource_id=query.resource_id, message_ids=body.message_ids)
        return Deleted(deleted=deleted)
