"""The index: its name and its settings and mapping (the JSON is in docs/opensearch.md too).

One index per embedding model and dimension: ``<prefix>-<model slug>-<dimension>``, e.g.
``memstack-hash-256-256`` for the hash embedder (model id ``hash-256``) or
``memstack-openai-text-embedding-3-small-1536-1536``. Vectors of different models never share an index,
since their similarities mean nothing to each other.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from memstack.adapters.opensearch.documents import (
    BOOL_FIELDS,
    NULL_PATHS,
    NUMBER_FIELDS,
    PRESENT_PATHS,
    STRING_FIELDS,
)
from memstack.errors import InvalidInput

Engine = Literal["lucene", "faiss"]
"""k-NN engines this adapter creates indexes with (nmslib is deprecated upstream and never used)."""

VECTOR_FIELD = "vector"
SPACE_TYPE = "cosinesimil"
TEXT_FIELD = "text"
ANALYZER = "memstack_english"

MAX_INDEX_NAME_BYTES = 255
"""OpenSearch's limit on an index name."""

KEYWORD_IGNORE_ABOVE = 8191
"""Longest metadata string indexed (characters): Lucene refuses terms over 32,766 UTF-8 bytes, and 8,191
characters of up to 4 bytes each fit. A longer string is stored but never matches a filter."""

_PREFIX = re.compile(r"^[a-z0-9][a-z0-9_-]{0,100}$")


def slug(text: str) -> str:
    """``text`` lower-cased with every run of characters outside ``[a-z0-9]`` replaced by one ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def index_name(prefix: str, model_id: str, dimension: int) -> str:
    """The index of one embedding model and dimension: ``<prefix>-<slug(model_id)>-<dimension>``.

    Raises:
        InvalidInput: ``prefix`` is not lower-case letters, digits, ``_`` and ``-`` (starting with a letter
            or digit, at most 101 characters), ``model_id`` has no letter or digit, or the name is longer
            than OpenSearch's 255 bytes.
    """
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise InvalidInput(
            "index_prefix must be lower-case letters, digits, '_' or '-', starting with a letter or digit",
            field="index_prefix",
        )
    model = slug(model_id) if isinstance(model_id, str) else ""
    if not model:
        raise InvalidInput("model_id must contain a letter or digit", field="model_id")
    name = f"{prefix}-{model}-{dimension}"
    if len(name.encode()) > MAX_INDEX_NAME_BYTES:
        raise InvalidInput(
            f"the index name {name[:40]}… is longer than OpenSearch's {MAX_INDEX_NAME_BYTES} bytes",
            field="model_id",
        )
    return name


def index_body(dimension: int, engine: Engine) -> dict[str, Any]:
    """The create-index body: ``index.knn``, the analyzer, and a strict mapping.

    * ``vector``: ``knn_vector`` of ``dimension``, HNSW, ``cosinesimil``, on ``engine``. Absent on chunks
      whose vector is all zeros (cosine similarity is undefined; OpenSearch refuses such vectors).
    * ``text``: BM25 over the ``memstack_english`` analyzer: standard tokenizer, English possessive
      stemmer, lower case, ASCII folding (``café`` → ``cafe``), Porter stemming — the same effect as the
      SQLite adapter's ``keywords.tokens`` (which also folds ``ß``, ligatures and full-width letters as
      ``asciifolding`` does). Stop words are kept in the index and dropped
      from queries (``memstack.adapters.search_text``), as the SQLite adapter does, so a query made only
      of stop words still finds them.
    * keywords ``message_id``, ``thread_id``, ``resource_id``, ``role``, ``uid`` (a unique key per chunk,
      for paging); ``chunk`` integer; ``seq`` long; ``created_at`` date.
    * metadata as typed fields (``memstack.adapters.opensearch.documents``), through dynamic templates:
      ``meta_s.*`` keyword, ``meta_n.*`` double, ``meta_b.*`` boolean; ``meta_null``/``meta_paths`` keyword.
      Everything else is refused (``dynamic: strict``).
    """
    keyword = {"type": "keyword"}
    return {
        "settings": {
            "index": {"knn": True},
            "analysis": {
                "analyzer": {
                    ANALYZER: {
                        "type": "custom",
                        "tokenizer": "standard",
                        "filter": ["memstack_possessive", "lowercase", "asciifolding", "porter_stem"],
                    }
                },
                "filter": {"memstack_possessive": {"type": "stemmer", "language": "possessive_english"}},
            },
        },
        "mappings": {
            "dynamic": "strict",
            "dynamic_templates": [
                {
                    "meta_strings": {
                        "path_match": f"{STRING_FIELDS}.*",
                        "mapping": {"type": "keyword", "ignore_above": KEYWORD_IGNORE_ABOVE},
                    }
                },
                {"meta_numbers": {"path_match": f"{NUMBER_FIELDS}.*", "mapping": {"type": "double"}}},
                {"meta_bools": {"path_match": f"{BOOL_FIELDS}.*", "mapping": {"type": "boolean"}}},
            ],
            "properties": {
                VECTOR_FIELD: {
                    "type": "knn_vector",
                    "dimension": dimension,
                    "method": {"name": "hnsw", "space_type": SPACE_TYPE, "engine": engine},
                },
                TEXT_FIELD: {"type": "text", "analyzer": ANALYZER},
                "message_id": keyword,
                "thread_id": keyword,
                "resource_id": keyword,
                "role": keyword,
                "uid": keyword,
                "chunk": {"type": "integer"},
                "seq": {"type": "long"},
                "created_at": {"type": "date"},
                STRING_FIELDS: {"type": "object", "dynamic": True},
                NUMBER_FIELDS: {"type": "object", "dynamic": True},
                BOOL_FIELDS: {"type": "object", "dynamic": True},
                NULL_PATHS: keyword,
                PRESENT_PATHS: keyword,
            },
        },
    }


def stored_dimension(mapping_response: dict[str, Any], name: str) -> int | None:
    """The ``knn_vector`` dimension of ``vector`` in a ``GET /<index>/_mapping`` answer, if any."""
    for index in (mapping_response.get(name), *mapping_response.values()):
        if isinstance(index, dict):
            field = index.get("mappings", {}).get("properties", {}).get(VECTOR_FIELD, {})
            dimension = field.get("dimension") if isinstance(field, dict) else None
            if isinstance(dimension, int):
                return dimension
            if isinstance(dimension, str) and dimension.isdigit():
                return int(dimension)
    return None


def stored_method(mapping_response: dict[str, Any], name: str) -> dict[str, str]:
    """The ``space_type`` and ``engine`` of ``vector`` in a ``GET /<index>/_mapping`` answer, each only when
    the mapping names it (``space_type`` may sit in ``method`` or, in newer mappings, on the field)."""
    for index in (mapping_response.get(name), *mapping_response.values()):
        if isinstance(index, dict):
            field = index.get("mappings", {}).get("properties", {}).get(VECTOR_FIELD)
            if not isinstance(field, dict):
                continue
            method = field.get("method")
            if not isinstance(method, dict):
                method = {}
            found: dict[str, str] = {}
            space = method.get("space_type") or field.get("space_type")
            if isinstance(space, str):
                found["space_type"] = space
            engine = method.get("engine")
            if isinstance(engine, str):
                found["engine"] = engine
            return found
    return {}
