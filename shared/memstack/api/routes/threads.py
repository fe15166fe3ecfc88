"""Thread routes: create, get, list (cursor pages), update, delete, clone."""

from typing import Annotated

from aws_lambda_powertools.event_handler import content_types
from aws_lambda_powertools.event_handler.api_gateway import Response

from memstack.api.deps import API_PREFIX, authorize, current_memory, new_router
from memstack.api.params import Query
from memstack.api.schemas import (
    CloneOut,
    CloneThreadBody,
    CreateThreadBody,
    ListThreadsQuery,
    ResourceQuery,
    ThreadList,
    UpdateThreadBody,
)
from memstack.model import Thread
from memstack.observability import (
    THREADS_CLONED,
    THREADS_CREATED,
    THREADS_DELETED,
    THREADS_UPDATED,
    add_metric,
)

TAGS = ["threads"]


router = new_router()
"""The thread routes under ``/v1/threads``."""


@router.post(f"{API_PREFIX}/threads", tags=TAGS, summary="Create a thread (201)", status_code=201)
def create_thread(body: CreateThreadBody, query: Annotated[ResourceQuery, Query()]) -> Response[Thread]:
    thread = current_memory().create_thread(
        resource_id=query.resource_id, thread_id=body.id, title=body.title, metadata=body.metadata
    )
    add_metric(THREADS_CREATED)
    return Response(201, content_types.APPLICATION_JSON, thread)


@router.get(f"{API_PREFIX}/threads", tags=TAGS, summary="List the resource's threads (cursor pages)")
def list_threads(query: Annotated[ListThreadsQuery, Query()]) -> ThreadList:
    page = current_memory().list_threads(
        resource_id=query.resource_id,
        limit=query.limit,
        cursor=query.cursor,
        order_by=query.order_by,
        direction=query.direction,
        metadata=query.metadata,
    )
    return ThreadList(threads=list(page.threads), next_cursor=page.next_cursor)


@router.get(f"{API_PREFIX}/threads/<thread_id>", tags=TAGS, summary="Get a thread")
def get_thread(thread_id: str, query: Annotated[ResourceQuery, Query()]) -> Thread:
    return current_memory().get_thread(thread_id=thread_id, resource_id=query.resource_id)


@router.patch(f"{API_PREFIX}/threads/<thread_id>", tags=TAGS, summary="Update title and/or metadata (merged)")
def update_thread(thread_id: str, body: UpdateThreadBody, query: Annotated[ResourceQuery, Query()]) -> Thread:
    thread = current_memory().update_thread(
        thread_id=thread_id, resource_id=query.resource_id, title=body.title, metadata=body.metadata
    )
    add_metric(THREADS_UPDATED)
    return thread


@router.delete(
    f"{API_PREFIX}/threads/<thread_id>",
    tags=TAGS,
    summary="Delete a thread and its messages (204)",
    status_code=204,
)
def delete_thread(thread_id: str, query: Annotated[ResourceQuery, Query()]) -> Response[None]:
    current_memory().delete_thread(thread_id=thread_id, resource_id=query.resource_id)
    add_metric(THREADS_DELETED)
    return Response(204, None, None)


@router.post(
    f"{API_PREFIX}/threads/<thread_id>/clone",
    tags=TAGS,
    summary="Copy a thread and its messages into a new thread of the resource, or of another resource "
    "the caller may act for (201)",
    status_code=201,
)
def clone_thread(
    thread_id: str, body: CloneThreadBody, query: Annotated[ResourceQuery, Query()]
) -> Response[CloneOut]:
    if body.target_resource_id is not None:
        authorize(body.target_resource_id)
    result = current_memory().clone_thread(
        source_thread_id=thread_id,
        resource_id=query.resource_id,
        target_resource_id=body.target_resource_id,
        new_thread_id=body.new_thread_id,
        title=body.title,
        metadata=body.metadata,
        message_limit=body.message_limit,
    )
    out = CloneOut(thread=result.thread, messages=result.messages, message_id_map=result.message_id_map)
    add_metric(THREADS_CLONED)
    return Response(201, content_types.APPLICATION_JSON, out)
