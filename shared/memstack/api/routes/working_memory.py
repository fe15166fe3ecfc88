"""Working-memory routes: get/put without a thread (``/v1/working-memory``) and with one
(``/v1/threads/{thread_id}/working-memory``), and applying the model's ``updateWorkingMemory`` call.

Every route answers as ``Memory`` does with the server's configured options merged with the call's: they
decide whether working memory is on (off: a get reads ``null``, a put is refused with ``invalid_input``,
as ``Memory.update_working_memory`` is) and its scope, so a document lives where the turn reads it. The
path only says whether the call names a thread: in resource scope the thread route reads and writes the
resource's document (as ``Memory`` does given a thread), in thread scope the route without a thread is
refused (``thread_id`` is required there). Routes that forced their own scope let a client that did not
know the server's scope write a record no turn would show.
"""

from typing import TYPE_CHECKING, Annotated, Literal

from aws_lambda_powertools.event_handler.api_gateway import Response

from memstack.api.deps import API_PREFIX, current_memory, new_router
from memstack.api.params import Query
from memstack.api.schemas import (
    OptionsQuery,
    ResourceQuery,
    ToolCallBody,
    ToolCallOut,
    WorkingMemoryBody,
    WorkingMemoryOut,
)
from memstack.context import tool_messages
from memstack.observability import TOOL_CALLS, WORKING_MEMORY_UPDATES, add_metric

if TYPE_CHECKING:  # the handler's cold import stays free of the core (tests/integration/test_cold_imports.py)
    from memstack.memory import Memory

TAGS = ["working memory"]

router = new_router()
"""The working-memory routes."""


def _scope(memory: "Memory", query: OptionsQuery) -> Literal["resource", "thread"]:
    """The scope the call acts in: the configured options merged with the call's."""
    return memory.options.merged(query.options).working_memory.scope


@router.get(
    f"{API_PREFIX}/working-memory",
    tags=TAGS,
    summary="The working memory, no thread named: the resource's (400 in thread scope)",
)
def get_resource_working_memory(query: Annotated[OptionsQuery, Query()]) -> WorkingMemoryOut:
    memory = current_memory()
    value = memory.get_working_memory(resource_id=query.resource_id, options=query.options)
    return WorkingMemoryOut(working_memory=value, scope=_scope(memory, query))


@router.put(
    f"{API_PREFIX}/working-memory",
    tags=TAGS,
    summary="Replace (markdown) or merge (schema) the working memory, no thread named (204)",
    status_code=204,
)
def put_resource_working_memory(
    body: WorkingMemoryBody, query: Annotated[ResourceQuery, Query()]
) -> Response[None]:
    current_memory().update_working_memory(
        resource_id=query.resource_id, working_memory=body.working_memory, options=body.options
    )
    add_metric(WORKING_MEMORY_UPDATES)
    return Response(204, None, None)


@router.get(
    f"{API_PREFIX}/threads/<thread_id>/working-memory",
    tags=TAGS,
    summary="The working memory as the thread sees it: its own in thread scope (404 for a missing or "
    "another resource's thread), the resource's in resource scope",
)
def get_thread_working_memory(thread_id: str, query: Annotated[OptionsQuery, Query()]) -> WorkingMemoryOut:
    memory = current_memory()
    scope = _scope(memory, query)
    if scope == "thread":
        memory.get_thread(thread_id=thread_id, resource_id=query.resource_id)  # 404 unless the owner's
    value = memory.get_working_memory(
        thread_id=thread_id, resource_id=query.resource_id, options=query.options
    )
    return WorkingMemoryOut(working_memory=value, scope=scope)


@router.put(
    f"{API_PREFIX}/threads/<thread_id>/working-memory",
    tags=TAGS,
    summary="Replace (markdown) or merge (schema) the working memory the thread sees (204)",
    status_code=204,
)
def put_thread_working_memory(
    thread_id: str, body: WorkingMemoryBody, query: Annotated[ResourceQuery, Query()]
) -> Response[None]:
    current_memory().update_working_memory(
        thread_id=thread_id,
        resource_id=query.resource_id,
        working_memory=body.working_memory,
        options=body.options,
    )
    add_metric(WORKING_MEMORY_UPDATES)
    return Response(204, None, None)


@router.post(
    f"{API_PREFIX}/threads/<thread_id>/working-memory/tool-calls",
    tags=TAGS,
    summary="Apply the model's updateWorkingMemory tool call; returns the tool result to send back",
)
def apply_tool_call(
    thread_id: str, body: ToolCallBody, query: Annotated[ResourceQuery, Query()]
) -> ToolCallOut:
    message = current_memory().apply_tool_call(
        thread_id=thread_id,
        resource_id=query.resource_id,
        tool_call=body.tool_call.model_dump(),
        options=body.options,
        working_memory_version=body.working_memory_version,
    )
    add_metric(TOOL_CALLS)
    version = message.metadata.get("working_memory_version")
    return ToolCallOut(
        message=message,
        messages=tool_messages(message),
        working_memory_version=version if isinstance(version, str) else None,
    )
