"""The payload of the background observation tasks (Step Functions → the observe and reflect functions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memstack.errors import InvalidInput

__all__ = ["job_ids"]


def job_ids(event: Mapping[str, Any]) -> tuple[str, str]:
    """``(resource_id, thread_id)`` of a task event ``{"resource_id", "thread_id", ...}`` (ids only).

    Raises:
        InvalidInput: the event is not an object or lacks a non-empty string id (field names it).
    """
    if not isinstance(event, Mapping):
        raise InvalidInput("the event must be an object", field="event")
    resource_id, thread_id = event.get("resource_id"), event.get("thread_id")
    if not isinstance(resource_id, str) or not resource_id:
        raise InvalidInput("the event has no resource_id", field="resource_id")
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidInput("the event has no thread_id", field="thread_id")
    return resource_id, thread_id
