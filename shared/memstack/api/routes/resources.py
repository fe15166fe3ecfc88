"""Resource routes: erase everything a resource owns (``DELETE /v1/resources/{resource_id}``).

The resource comes from the path, not from a ``resource_id`` query, so the route makes the auth check
itself (``MemstackResolver.authorize``): in ``jwt`` mode only the resource's own token may erase it.
"""

from memstack.api.app import API_PREFIX, MemstackResolver
from memstack.api.schemas import EraseOut

TAGS = ["resources"]


def register(app: MemstackResolver) -> None:
    """Add the resource routes under ``/v1/resources``."""

    @app.delete(
        f"{API_PREFIX}/resources/<resource_id>",
        tags=TAGS,
        summary="Erase everything the resource owns; returns the counts deleted (idempotent, resumable)",
    )
    def erase_resource(resource_id: str) -> EraseOut:
        app.authorize(resource_id)
        receipt = app.memory().erase_resource(resource_id=resource_id)
        return EraseOut.model_validate(receipt.to_dict())
