"""Resource routes: erase everything a resource owns (``DELETE /v1/resources/{resource_id}``).

The resource comes from the path, not from a ``resource_id`` query, so the route makes the auth check
itself (``memstack.api.deps.authorize``): in ``jwt`` mode only the resource's own token may erase it.
"""

from memstack.api.deps import API_PREFIX, authorize, current_memory, new_router
from memstack.api.schemas import EraseOut
from memstack.observability import RESOURCES_ERASED, add_metric

TAGS = ["resources"]

router = new_router()
"""The resource routes under ``/v1/resources``."""


@router.delete(
    f"{API_PREFIX}/resources/<resource_id>",
    tags=TAGS,
    summary="Erase everything the resource owns; returns the counts deleted (idempotent, resumable)",
)
def erase_resource(resource_id: str) -> EraseOut:
    authorize(resource_id)
    receipt = current_memory().erase_resource(resource_id=resource_id)
    add_metric(RESOURCES_ERASED)
    return EraseOut.model_validate(receipt.to_dict())
