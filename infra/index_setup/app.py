"""CloudFormation custom resource ``Custom::MemstackIndex``: creates Memstack's OpenSearch index.

Create and Update run the library's own index start-up (``memstack.adapters.opensearch.OpenSearchIndex``:
create the index if missing with the mapping of docs/opensearch.md, check its dimension if present) for the
index the functions will use — named from the same ``MEMSTACK_*`` settings (embedding model, dimensions,
index prefix) they get. Delete leaves the index alone: its documents are the memory's search data, and
they go with the collection or domain when that is deleted.

A new collection's data-access policy takes a little while to apply, so 401/403/404/5xx answers
(``Unavailable``) are retried until shortly before the function's timeout. The handler answers
CloudFormation itself (a PUT to the pre-signed ``ResponseURL``), so no provider framework is needed.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from typing import Any

logger = logging.getLogger()
logger.setLevel(logging.INFO)

RETRY_DELAY_SECONDS = 10.0
SAFETY_MARGIN_SECONDS = 30.0

# Used only for the embedder's name and dimension (no request is made at set-up): the index needs the
# model id and dimension, never the key.
_NO_KEY = "index-setup-needs-no-key"


def ensure_index(deadline: float, sleep: Any = time.sleep) -> str:
    """Create or check the index named by the environment's settings; returns its name.

    Raises:
        memstack.errors.InvalidInput: bad settings, or an existing index of another dimension.
        memstack.errors.Unavailable: OpenSearch still refuses or cannot be reached at ``deadline``
            (``time.monotonic()`` seconds).
    """
    from memstack.adapters.opensearch import OpenSearchIndex, make_client
    from memstack.bootstrap import make_embedder
    from memstack.errors import InvalidInput, Unavailable
    from memstack.settings import load_settings

    settings = load_settings()
    if settings.opensearch_endpoint is None:
        raise InvalidInput("MEMSTACK_OPENSEARCH_ENDPOINT is not set", field="MEMSTACK_OPENSEARCH_ENDPOINT")
    embedder = make_embedder(
        settings.embedder_name,
        api_key=_NO_KEY,
        base_url=settings.openai_base_url,
        model=settings.embedding_model,
        dimensions=settings.embedding_dimensions,
    )
    client = make_client(
        settings.opensearch_endpoint, service=settings.opensearch_service, region=settings.region
    )
    try:
        while True:
            try:
                index = OpenSearchIndex(
                    client,
                    dimension=embedder.dimension,
                    model_id=embedder.model_id,
                    service=settings.opensearch_service,
                    index_prefix=settings.opensearch_index_prefix,
                    engine=settings.knn_engine,
                )
                return index.name
            except Unavailable as exc:
                if time.monotonic() + RETRY_DELAY_SECONDS > deadline:
                    raise
                logger.info("OpenSearch not ready yet (%s); retrying", exc)
                sleep(RETRY_DELAY_SECONDS)
    finally:
        client.close()


def respond(event: dict[str, Any], status: str, reason: str, physical_id: str, data: dict[str, str]) -> None:
    """Send the custom resource's result to CloudFormation (PUT to the pre-signed ``ResponseURL``)."""
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:1000] or status,
            "PhysicalResourceId": physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": data,
        }
    ).encode()
    request = urllib.request.Request(
        event["ResponseURL"],
        data=body,
        method="PUT",
        headers={"Content-Type": "", "Content-Length": str(len(body))},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 (CloudFormation's https URL)
        answer.read()


def handler(event: dict[str, Any], context: Any) -> None:
    """The custom resource handler (CloudFormation event → index created → response sent)."""
    physical_id = str(event.get("PhysicalResourceId") or "memstack-index")
    status, reason, data = "SUCCESS", "", {}
    try:
        if event["RequestType"] in ("Create", "Update"):
            deadline = (
                time.monotonic() + context.get_remaining_time_in_millis() / 1000 - SAFETY_MARGIN_SECONDS
            )
            name = ensure_index(deadline)
            physical_id, data = name, {"IndexName": name}
            logger.info("index %s ready", name)
    except Exception as exc:  # every failure must reach CloudFormation, or the stack waits for an hour
        logger.exception("index set-up failed")
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}"
    respond(event, status, reason, physical_id, data)
