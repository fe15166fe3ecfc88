"""Thread routes: create, get, list (cursor pages), update, delete, clone."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Query

from memstack.api.app import API_PREFIX, MemstackResolver
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

TAGS = ["threads"]


def register(app: MemstackResolver) -> None:
    """Add the thread routes under ``/v1/threads``."""

    @app.post(f"{API_PREFIX}/threads", tags=TAGS, summary="Create a thread (201)")
    def create_thread(body: CreateThreadBody, query: Annotated[ResourceQuery, Query()]) -> Response[Thread]:
        thread = app.memory().create_thread(
            resource_id=query.resource_id, thread_id=body.id, title=body.title, metadata=body.metadata
        )
        return Response(201, content_types.APPLICATION_JSON, thread)

    @app.get(f"{API_PREFIX}/threads", tags=TAGS, summary="List the resource's threads (cursor pages)")
    def list_threads(query: Annotated[ListThreadsQuery, Query()]) -> ThreadList:
        page = app.memory().list_threads(
            resource_id=query.resource_id,
            limit=query.limit,
            cursor=query.cursor,
            order_by=query.order_by,
            direction=query.direction,
            metadata=query.metadata,
        )
        return ThreadList(threads=list(page.threads), next_cursor=page.next_cursor)

    @app.get(f"{API_PREFIX}/threads/<thread_id>", tags=TAGS, summary="Get a thread")
    def get_thread(thread_id: str, query: Annotated[ResourceQuery, Query()]) -> Thread:
        return app.memory().get_thread(thread_id=thread_id, resource_id=query.resource_id)

    @app.patch(
        f"{API_PREFIX}/threads/<thread_id>", tags=TAGS, summary="Update title and/or metadata (merged)"
    )
    def update_thread(
        thread_id: str, body: UpdateThreadBody, query: Annotated[ResourceQuery, Query()]
    ) -> Thread:
        return app.memory().update_thread(
            thread_id=thread_id, resource_id=query.resource_id, title=body.title, metadata=body.metadata
        )

    @app.delete(
        f"{API_PREFIX}/threads/<thread_id>", tags=TAGS, summary="Delete a thread and its messages (204)"
    )
    def delete_thread(thread_id: str, query: Annotated[ResourceQuery, Query()]) -> Response[None]:
        app.memory().delete_thread(thread_id=thread_id, resource_id=query.resource_id)
        return Response(204, None, None)

    @app.post(
        f"{API_PREFIX}/threads/<thread_id>/clone",
        tags=TAGS,
        summary="Copy a thread and its messages into a new thread of the resource (201)",
    )
    def clone_thread(
        thread_id: str, body: CloneThreadBody, query: Annotated[ResourceQuery, Query()]
    ) -> Response[CloneOut]:
        result = app.memory().clone_thread(
            source_thread_id=thread_id,
            resource_id=query.resource_id,
            new_thread_id=body.new_thread_id,
            title=body.title,
            metadata=body.metadata,
            message_limit=body.message_limit,
        )
        out = CloneOut(thread=result.thread, messages=result.messages, message_id_map=result.message_id_map)
        return Response(201, content_types.APPLICATION_JSON, out)
