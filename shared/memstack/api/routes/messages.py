"""Message routes: save a batch, list (last N, cursor pages, ``include`` neighbours), delete by ids."""

import logging
from typing import Annotated

from memstack.api.deps import API_PREFIX, current_memory, new_router
from memstack.api.params import Header, Query
from memstack.api.schemas import (
    Deleted,
    DeleteMessagesBody,
    ListMessagesQuery,
    MessageList,
    ResourceQuery,
    SavedMessages,
    SaveMessagesBody,
)
from memstack.errors import InvalidInput
from memstack.observability import MESSAGES_DELETED, SAVES, add_metric

logger = logging.getLogger(__name__)

TAGS = ["messages"]


router = new_router()
"""The message routes."""


def expected_last_seq(in_body: int | None, if_match: str | None) -> int | None:
    """The expected last seq of a save: the body's ``expected_last_seq`` or the ``If-Match`` header (an
    entity tag holding the seq: ``"12"``, ``12`` or ``W/"12"``).

    Raises:
        InvalidInput: the header is not a seq, or names another seq than the body (field ``If-Match``).
    """
    if if_match is None:
        return in_body
    tag = if_match.strip().removeprefix("W/").strip('"')
    if not (tag.isascii() and tag.isdigit()) or len(tag) > 19:
        raise InvalidInput('If-Match must be the thread\'s last seq, e.g. "12"', field="If-Match")
    seq = int(tag)
    if in_body is not None and in_body != seq:
        raise InvalidInput("If-Match and expected_last_seq name different seqs", field="If-Match")
    return seq


@router.post(
    f"{API_PREFIX}/threads/<thread_id>/messages",
    tags=TAGS,
    summary="Save a batch of messages in order (upsert by id; creates the thread if missing)",
)
def save_messages(
    thread_id: str,
    body: SaveMessagesBody,
    query: Annotated[ResourceQuery, Query()],
    if_match: Annotated[
        str | None,
        Header(
            alias="If-Match",
            description='The thread\'s expected last seq (e.g. "12"), as expected_last_seq.',
        ),
    ] = None,
) -> SavedMessages:
    saved = current_memory().save_messages(
        thread_id=thread_id,
        resource_id=query.resource_id,
        messages=[m.to_input() for m in body.messages],
        expected_last_seq=expected_last_seq(body.expected_last_seq, if_match),
    )
    unindexed = list(getattr(saved, "unindexed", ()))
    logger.info(
        "saved messages", extra={"thread_id": thread_id, "count": len(saved), "unindexed": len(unindexed)}
    )
    add_metric(SAVES, len(saved))
    return SavedMessages(messages=saved, unindexed=unindexed)


@router.get(
    f"{API_PREFIX}/threads/<thread_id>/messages",
    tags=TAGS,
    summary="List a thread's messages in order: the last N, or cursor pages; include neighbours",
)
def list_messages(thread_id: str, query: Annotated[ListMessagesQuery, Query()]) -> MessageList:
    page = current_memory().list_messages(
        thread_id=thread_id,
        resource_id=query.resource_id,
        last=query.last,
        limit=query.limit,
        cursor=query.cursor,
        include=[i.model_dump() for i in query.include] if query.include is not None else None,
    )
    return MessageList(messages=list(page.messages), next_cursor=page.next_cursor)


@router.post(
    f"{API_PREFIX}/messages/delete",
    tags=TAGS,
    summary="Delete messages by id (ids of other resources count as missing)",
)
def delete_messages(body: DeleteMessagesBody, query: Annotated[ResourceQuery, Query()]) -> Deleted:
    deleted = current_memory().delete_messages(resource_id=query.resource_id, message_ids=body.message_ids)
    add_metric(MESSAGES_DELETED, deleted)
    return Deleted(deleted=deleted)
