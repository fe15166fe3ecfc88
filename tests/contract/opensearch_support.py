"""Contract-suite factories of the OpenSearch ``SearchIndex``: against the test double (tests/opensearch_double.py)
in both modes, and against a real cluster when ``OPENSEARCH_URL`` is set.

The doubles are started once per test process, lazily, and shared; every factory call uses a fresh index
prefix, so each test starts from an empty index.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from memstack.ports import SearchIndex

if TYPE_CHECKING:
    from tests.opensearch_double import Mode, OpenSearchDouble

_doubles: dict[str, OpenSearchDouble] = {}
_lock = threading.Lock()


def shared_double(mode: Mode) -> OpenSearchDouble:
    """The process's double in ``mode``, started on first use (daemon thread; ends with the process)."""
    from tests.opensearch_double import OpenSearchDouble

    with _lock:
        double = _doubles.get(mode)
        if double is None:
            double = _doubles[mode] = OpenSearchDouble(mode).start()
        return double


def _prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@contextmanager
def opensearch_managed_index(dimension: int) -> Iterator[SearchIndex]:
    """The adapter (``service="es"``, ``refresh=True``) on the double in managed-domain mode."""
    from memstack.adapters.opensearch import OpenSearchIndex, make_client

    double = shared_double("managed")
    client = make_client(double.url, service="none", max_retries=0)
    index = OpenSearchIndex(
        client, dimension=dimension, model_id="contract", service="es", index_prefix=_prefix(), refresh=True
    )
    try:
        yield index
    finally:
        client.indices.delete(index=index.name)
        client.close()


@contextmanager
def opensearch_serverless_index(dimension: int) -> Iterator[SearchIndex]:
    """The adapter (``service="aoss"``) on the double in Serverless mode."""
    from memstack.adapters.opensearch import OpenSearchIndex, make_client

    double = shared_double("serverless")
    client = make_client(double.url, service="none", max_retries=0)
    index = OpenSearchIndex(
        client,
        dimension=dimension,
        model_id="contract",
        service="aoss",
        engine="faiss",
        index_prefix=_prefix(),
    )
    try:
        yield index
    finally:
        client.indices.delete(index=index.name)
        client.close()


@contextmanager
def opensearch_real_index(dimension: int) -> Iterator[SearchIndex]:
    """The adapter on the cluster at ``OPENSEARCH_URL`` (basic auth from ``OPENSEARCH_USERNAME`` /
    ``OPENSEARCH_PASSWORD`` when set), on a fresh index that is deleted on exit."""
    from memstack.adapters.opensearch import OpenSearchIndex, make_client

    client = make_client(
        os.environ["OPENSEARCH_URL"],
        service="none",
        username=os.environ.get("OPENSEARCH_USERNAME") or None,
        password=os.environ.get("OPENSEARCH_PASSWORD") or None,
    )
    index = OpenSearchIndex(
        client, dimension=dimension, model_id="contract", service="none", index_prefix=_prefix(), refresh=True
    )
    try:
        yield index
    finally:
        client.indices.delete(index=index.name, ignore_unavailable=True)
        client.close()
