"""OpenSearch ``SearchIndex``: k-NN + BM25 on a managed domain (``es``), a Serverless vector collection
(``aoss``) or a self-run cluster (``none``). See docs/opensearch.md.

Importing this package loads opensearch-py's modules lazily (on first client or request); building a
client never connects.
"""

from __future__ import annotations

from memstack.adapters.opensearch.client import make_client
from memstack.adapters.opensearch.index import OpenSearchIndex
from memstack.adapters.opensearch.schema import index_body, index_name

__all__ = ["OpenSearchIndex", "index_body", "index_name", "make_client"]
