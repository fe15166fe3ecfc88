"""Working-memory routes: get/put at resource scope (``/v1/working-memory``) and at thread scope
(``/v1/threads/{thread_id}/working-memory``), and applying the model's ``updateWorkingMemory`` call.

The get/put routes name their scope, so they force ``working_memory.enabled`` and ``scope`` over the
options; template, schema, ``max_tokens`` and ``read_only`` still come from the configured and per-call
options. The tool-call route uses the options as given (the scope the context route offered the tool in).
"""

from typing import Annotated, Any, Literal

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

TAGS = ["working memory"]


def scoped(options: dict[str, Any] | None, scope: Literal["resource", "thread"]) -> dict[str, Any]:
    """``options`` with working memory enabled in ``scope`` (other working-memory options kept)."""
    out = dict(options or {})
    wm = out.get("working_memory")
    out["working_memory"] = {**(wm if isinstance(wm, dict) else {}), "enabled": True, "scope": scope}
    return out


router = new_router()
"""The working-memory routes."""


@router.get(f"{API_PREFIX}/working-memory", tags=TAGS, summary="The resource's working memory")
def get_resource_working_memory(query: Annotated[OptionsQuery, Query()]) -> WorkingMemoryOut:
    value = current_memory().get_working_memory(
        resource_id=query.resource_id,
        options=scoped(query.options, "resource"),
    )
    return WorkingMemoryOut(working_memory=value, scope="resource")


@router.put(
    f"{API_PREFIX}/working-memory",
    tags=TAGS,
    summary="Replace (markdown) or merge (schema) the resource's working memory (204)",
    status_code=204,
)
def put_resource_working_memory(
    body: WorkingMemoryBody, query: Annotated[ResourceQuery, Query()]
) -> Response[None]:
    current_memory().update_working_memory(
        resource_id=query.resource_id,
        working_memory=body.working_memory,
        options=scoped(body.options, "resource"),
    )
    add_metric(WORKING_MEMORY_UPDATES)
    return Response(204, None, None)


@router.get(
    f"{API_PREFIX}/threads/<thread_id>/working-memory",
    tags=TAGS,
    summary="The thread's working memory (404 for a missing or another resource's thread)",
)
def get_thread_working_memory(thread_id: str, query: Annotated[OptionsQuery, Query()]) -> WorkingMemoryOut:
    memory = current_memory()
    memory.get_thread(thread_id=thread_id, resource_id=query.resource_id)  # 404 unless the owner's
    value = memory.get_working_memory(
        thread_id=thread_id, resource_id=query.resource_id, options=scoped(query.options, "thread")
    )
    return WorkingMemoryOut(working_memory=value, scope="thread")


@router.put(
    f"{API_PREFIX}/threads/<thread_id>/working-memory",
    tags=TAGS,
    summary="Replace (markdown) or merge (schema) the thread's working memory (204)",
    status_code=204,
)
def put_thread_working_memory(
    thread_id: str, body: WorkingMemoryBody, query: Annotated[ResourceQuery, Query()]
) -> Response[None]:
    current_memory().update_working_memory(
        thread_id=thread_id,
        resource_id=query.resource_id,
        working_memory=body.working_memory,
        options=scoped(body.options, "thread"),
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
