"""A TEST DOUBLE of OpenSearch: a real HTTP server speaking the subset of the REST API that
``memstack.adapters.opensearch`` uses, so the real opensearch-py client, its serializer and its error
handling run in tests. It is not OpenSearch and makes no claim to be one beyond this subset.

Endpoints: ``GET /``, ``HEAD/PUT/GET/DELETE /{index}``, ``GET /{index}/_mapping``, ``POST /_bulk`` and
``/{index}/_bulk`` (NDJSON; ``index``, ``create`` and ``delete`` actions), ``POST /{index}/_search``,
``POST /_msearch`` and ``/{index}/_msearch``, ``POST /{index}/_refresh``, ``POST /{index}/_delete_by_query``.

Query DSL evaluated generically: ``bool`` (``must``/``filter``/``should``/``must_not``/
``minimum_should_match``), ``term``, ``terms``, ``range``, ``exists``, ``ids``, ``match_all``,
``match_none``, ``match`` (BM25 as Lucene computes it: ``idf · f / (f + k1 · (1 − b + b · dl / avgdl))``,
k1 = 1.2, b = 0.75, statistics over the whole index) and ``knn`` (exact cosine over the documents passing its
``filter``, scored ``(1 + cos) / 2`` as the lucene engine reports ``cosinesimil``). Also ``size``,
``sort`` on one field with ``search_after``, and ``_source`` filtering (``false`` or a list of fields).

The text analyzer approximates the adapter's ``memstack_english`` analyzer: word tokens (letters and digits,
apostrophes inside words), possessive ``'s`` removed, lower case, ASCII folding, Porter stemming
(``snowballstemmer``'s ``porter``, the algorithm of Lucene's ``porter_stem``).

Cost: like an inverted index, each document's text is analysed once when it is written (term frequencies,
length; the index's document frequencies, postings and total length are updated on every write and
delete), and vectors are stored once as tuples with their norm. A ``match`` search evaluates only the
documents in its terms' postings; filters and ``knn`` walk the stored documents without re-parsing them.

The mapping is kept and enforced like OpenSearch: ``dynamic: strict`` refuses unknown fields
(``strict_dynamic_mapping_exception``), dynamic templates (``path_match``) type new fields under dynamic
objects and the type then sticks, values of the wrong type are refused (``mapper_parsing_exception``),
``knn_vector`` must have the mapped dimension, and a zero vector is refused for ``cosinesimil``.

Modes:

* ``managed`` — an OpenSearch Service domain: client ``_id``s, ``_refresh`` and ``_delete_by_query`` work.
  Writes are visible to search at once (as if every write asked ``refresh``).
* ``serverless`` — an OpenSearch Serverless vector collection: an ``index``/``create`` action carrying an
  ``_id`` is refused (400 ``illegal_argument_exception``), ids are assigned by the server, and the
  operations Serverless does not list (``_refresh``, ``_delete_by_query``) answer 404. Writes are visible
  at once here unless :meth:`OpenSearchDouble.delay_visibility` asks for AWS's delay.

Fault injection: :meth:`OpenSearchDouble.fail_next_requests` (the next requests answer an error status),
:meth:`OpenSearchDouble.fail_next_bulk_items` (the next ``_bulk`` requests refuse some items with 429
``es_rejected_execution_exception``), :meth:`OpenSearchDouble.delay_next_requests` (the next requests are
answered only after a delay, to exercise client timeouts). Every request is recorded (:attr:`OpenSearchDouble.requests`) with
its method, path, query parameters, headers and parsed body.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import math
import operator
import re
import sys
import threading
import time
import unicodedata
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlparse

import snowballstemmer

Mode = Literal["managed", "serverless"]

K1 = 1.2
B = 0.75


class DoubleError(Exception):
    """An error answer: HTTP status plus OpenSearch's error object."""

    def __init__(self, status: int, error_type: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.body = {
            "error": {
                "root_cause": [{"type": error_type, "reason": reason}],
                "type": error_type,
                "reason": reason,
            },
            "status": status,
        }


@dataclass
class Recorded:
    """One request as the double received it."""

    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    body: Any
    raw: bytes = b""
    """The body's bytes as received (what a SigV4 payload hash covers)."""
    target: str = ""
    """The request line's target as received: the path and query string, still encoded."""


# -------------------------------------------------------------------------------------------- analysis

_STEMMER = snowballstemmer.stemmer("porter")
_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")


def analyze(text: str) -> list[str]:
    """The tokens of ``text`` under the double's approximation of the ``memstack_english`` analyzer."""
    return [t for t in map(_token, _WORD.findall(text)) if t]


@functools.lru_cache(maxsize=100_000)
def _token(word: str) -> str:
    """One word's token (possessive dropped, lower case, ASCII folded, stemmed); cached, since stemming
    dominates the cost of analysis and natural text repeats its words."""
    word = re.sub(r"['\u2019][sS]$", "", word)
    word = unicodedata.normalize("NFKD", word.casefold())  # asciifolding: "ß" → "ss", "ﬁ" → "fi", full width
    word = "".join(c for c in word if not unicodedata.combining(c))
    return str(_STEMMER.stemWord(word))


class _FieldStats:
    """The analysed form of one ``text`` field, kept up to date on every write and delete: per document its
    term frequencies and length, and for the index the document frequencies, postings and total length.

    A document counts for the field (``docCount``, ``avgdl``) when it has a value for it, even one without
    tokens, as before."""

    def __init__(self) -> None:
        self.tf: dict[str, dict[str, int]] = {}
        self.length: dict[str, int] = {}
        self.df: dict[str, int] = {}
        self.postings: dict[str, set[str]] = {}
        self.total = 0

    def add(self, doc_id: str, tokens: list[str]) -> None:
        self.remove(doc_id)
        counts = dict(Counter(tokens))
        self.tf[doc_id] = counts
        self.length[doc_id] = len(tokens)
        self.total += len(tokens)
        for term in counts:
            self.df[term] = self.df.get(term, 0) + 1
            self.postings.setdefault(term, set()).add(doc_id)

    def remove(self, doc_id: str) -> None:
        counts = self.tf.pop(doc_id, None)
        if counts is None:
            return
        self.total -= self.length.pop(doc_id)
        for term in counts:
            left = self.df[term] - 1
            if left:
                self.df[term] = left
                self.postings[term].discard(doc_id)
            else:
                del self.df[term]
                del self.postings[term]


# ------------------------------------------------------------------------------------------------ index


class _Index:
    def __init__(self, name: str, body: dict[str, Any]) -> None:
        self.name = name
        self.settings = body.get("settings", {})
        self.mappings: dict[str, Any] = json.loads(json.dumps(body.get("mappings", {})))
        self.mappings.setdefault("properties", {})
        self.docs: dict[str, dict[str, Any]] = {}
        self.versions: dict[str, int] = {}
        self.visible_at: dict[str, float] = {}  # doc id → when search starts seeing it (monotonic clock)
        # Derived at write time, so that a search never re-analyses or re-parses stored documents:
        self.order: dict[str, int] = {}  # doc id → insertion number (ties in scores break by it)
        self._next_order = 0
        self.text: dict[str, _FieldStats] = {}  # text field path → its analysed documents
        self.vectors: dict[str, dict[str, tuple[tuple[float, ...], float]]] = {}  # path → id → (v, |v|)
        self._check_mapping()

    def _check_mapping(self) -> None:
        known = {"knn_vector", "text", "keyword", "integer", "long", "date", "object", "double", "boolean"}
        for name, spec in self.mappings["properties"].items():
            kind = spec.get("type", "object")
            if kind not in known:
                raise DoubleError(
                    400, "mapper_parsing_exception", f"No handler for type [{kind}] on [{name}]"
                )
            if kind == "knn_vector":
                method = spec.get("method", {})
                if method.get("engine") == "nmslib":
                    raise DoubleError(400, "mapper_parsing_exception", "nmslib engine is deprecated")
                if not isinstance(spec.get("dimension"), int):
                    raise DoubleError(400, "mapper_parsing_exception", "dimension missing")
            if kind == "text" and "analyzer" in spec:
                analyzers = self.settings.get("analysis", {}).get("analyzer", {})
                if spec["analyzer"] not in analyzers and spec["analyzer"] not in ("standard", "english"):
                    raise DoubleError(
                        400,
                        "mapper_parsing_exception",
                        f"analyzer [{spec['analyzer']}] has not been configured",
                    )

    # documents ----------------------------------------------------------------------------------------

    def put(self, doc_id: str, doc: dict[str, Any]) -> None:
        """Store a validated document, analysing its text fields and caching its vectors once. A replaced
        document keeps its place in the insertion order (ties in scores break by it)."""
        if doc_id not in self.order:
            self.order[doc_id] = self._next_order
            self._next_order += 1
        for stats in self.text.values():
            stats.remove(doc_id)
        for vectors in self.vectors.values():
            vectors.pop(doc_id, None)
        self.docs[doc_id] = doc
        for path in self._paths_of("text"):
            values = self.values(doc, path)
            if values:
                tokens = analyze(" ".join(str(v) for v in values))
                self.text.setdefault(path, _FieldStats()).add(doc_id, tokens)
        for path in self._paths_of("knn_vector"):
            stored = doc.get(path)
            if isinstance(stored, list):
                vector = tuple(float(x) for x in stored)
                norm = math.sqrt(math.fsum(x * x for x in vector))
                if norm:
                    self.vectors.setdefault(path, {})[doc_id] = (vector, norm)

    def remove(self, doc_id: str) -> bool:
        """Drop a document and everything derived from it; ``False`` when there was none."""
        if self.docs.pop(doc_id, None) is None:
            return False
        del self.order[doc_id]
        self.visible_at.pop(doc_id, None)
        for stats in self.text.values():
            stats.remove(doc_id)
        for vectors in self.vectors.values():
            vectors.pop(doc_id, None)
        return True

    def _paths_of(self, kind: str) -> list[str]:
        paths = []
        for name, spec in self.mappings["properties"].items():
            if spec.get("type") == kind:
                paths.append(name)
            for child, child_spec in spec.get("properties", {}).items():
                if child_spec.get("type") == kind:
                    paths.append(f"{name}.{child}")
        return paths

    # mapping ------------------------------------------------------------------------------------------

    def field_spec(self, path: str) -> dict[str, Any] | None:
        props = self.mappings["properties"]
        head, _, rest = path.partition(".")
        spec = props.get(head)
        if spec is None:
            return None
        if not rest:
            return spec
        return spec.get("properties", {}).get(rest)

    def _dynamic_type(self, path: str) -> dict[str, Any] | None:
        for template in self.mappings.get("dynamic_templates", []):
            ((_, rule),) = template.items()
            if "path_match" in rule and fnmatch.fnmatchcase(path, rule["path_match"]):
                return dict(rule["mapping"])
        return None

    def validate(self, doc: Any) -> None:
        """Check ``doc`` against the mapping, adding dynamic fields (as OpenSearch does on index)."""
        if not isinstance(doc, dict):
            raise DoubleError(400, "mapper_parsing_exception", "document must be an object")
        props = self.mappings["properties"]
        added: dict[str, tuple[str, dict[str, Any]]] = {}
        for key, value in doc.items():
            spec = props.get(key)
            if spec is None:
                if self.mappings.get("dynamic") == "strict":
                    raise DoubleError(
                        400,
                        "strict_dynamic_mapping_exception",
                        f"mapping set to strict, dynamic introduction of [{key}] within [_doc] is not allowed",
                    )
                continue
            if spec.get("type", "object") == "object":
                if not isinstance(value, dict):
                    raise DoubleError(
                        400, "mapper_parsing_exception", f"object mapping for [{key}] got a non-object"
                    )
                children = spec.setdefault("properties", {})
                for child, child_value in value.items():
                    if "." in child or not child:
                        raise DoubleError(
                            400, "mapper_parsing_exception", f"the double refuses field [{child}]"
                        )
                    path = f"{key}.{child}"
                    child_spec = children.get(child) or (added.get(path, (None, None))[1])
                    if child_spec is None:
                        if str(spec.get("dynamic", "true")).lower() != "true":
                            raise DoubleError(
                                400,
                                "strict_dynamic_mapping_exception",
                                f"dynamic introduction of [{child}] within [{key}] is not allowed",
                            )
                        child_spec = self._dynamic_type(path)
                        if child_spec is None:
                            raise DoubleError(400, "mapper_parsing_exception", f"no template for [{path}]")
                        added[path] = (child, child_spec)
                    self._check_value(path, child_spec, child_value)
            else:
                self._check_value(key, spec, value)
        for path, (child, child_spec) in added.items():
            head = path.split(".", 1)[0]
            props[head].setdefault("properties", {})[child] = child_spec

    def _check_value(self, path: str, spec: dict[str, Any], value: Any) -> None:
        kind = spec["type"]
        if kind == "knn_vector":
            ok = isinstance(value, list) and all(
                isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in value
            )
            if not ok or len(value) != spec["dimension"]:
                raise DoubleError(
                    400,
                    "mapper_parsing_exception",
                    f"Vector dimension mismatch. Expected: {spec['dimension']}, Given: "
                    f"{len(value) if isinstance(value, list) else '?'}",
                )
            if spec.get("method", {}).get("space_type") == "cosinesimil" and not any(value):
                raise DoubleError(
                    400,
                    "mapper_parsing_exception",
                    "zero vector is not supported when space type is [cosinesimil]",
                )
            return
        for item in value if isinstance(value, list) else [value]:
            if item is None:
                continue
            good = {
                "keyword": isinstance(item, str),
                "text": isinstance(item, str),
                "integer": isinstance(item, int) and not isinstance(item, bool) and -(2**31) <= item < 2**31,
                "long": isinstance(item, int) and not isinstance(item, bool),
                "double": isinstance(item, int | float) and not isinstance(item, bool),
                "boolean": isinstance(item, bool),
                "date": isinstance(item, str) and _is_date(item),
            }.get(kind, False)
            if not good:
                raise DoubleError(
                    400, "mapper_parsing_exception", f"failed to parse field [{path}] of type [{kind}]"
                )

    # values -------------------------------------------------------------------------------------------

    def values(self, doc: dict[str, Any], path: str) -> list[Any]:
        """The indexed values of ``path`` in ``doc`` (arrays flattened, nulls and ignored strings dropped)."""
        head, _, rest = path.partition(".")
        value = doc.get(head)
        if rest:
            value = value.get(rest) if isinstance(value, dict) else None
        items = value if isinstance(value, list) else [value]
        spec = self.field_spec(path) or {}
        limit = spec.get("ignore_above")
        out = [v for v in items if v is not None]
        if limit is not None:
            out = [v for v in out if not isinstance(v, str) or len(v) <= limit]
        return out

    # search -------------------------------------------------------------------------------------------

    def search(self, body: dict[str, Any]) -> dict[str, Any]:
        """Evaluate a search over the documents visible now (see ``OpenSearchDouble.delay_visibility``).

        Cost: the documents that can match (a ``match`` query's postings, an ``ids`` list; every document
        only for pure filters and ``knn``), each evaluated on its cached analysis — never re-analysed."""
        now = time.monotonic()
        self.visible_at = {d: t for d, t in self.visible_at.items() if t > now and d in self.docs}
        return self._search(body, frozenset(self.visible_at))

    def _search(self, body: dict[str, Any], hidden: frozenset[str]) -> dict[str, Any]:
        body = body or {}
        query = body.get("query", {"match_all": {}})
        stats = _TextView(self, hidden)
        scored: list[tuple[float, int, str]] = []
        if "knn" in query:
            matched = self._knn(query["knn"], stats)
        else:
            matched = {}
            candidates = self._candidates(query, stats)
            for doc_id in self.docs if candidates is None else candidates:
                if doc_id in hidden or doc_id not in self.docs:
                    continue
                hit = self._eval(query, self.docs[doc_id], doc_id, stats)
                if hit is not None:
                    matched[doc_id] = hit
        for doc_id, score in matched.items():
            scored.append((score, self.order[doc_id], doc_id))
        size = int(body.get("size", 10))
        sort = body.get("sort")
        hits: list[dict[str, Any]] = []
        if sort:
            ((sort_field, direction),) = sort[0].items() if isinstance(sort[0], dict) else [(sort[0], "asc")]
            direction = direction if isinstance(direction, str) else direction.get("order", "asc")
            keyed = [(self._sort_key(self.docs[d], sort_field), d) for _, _, d in scored]
            keyed.sort(reverse=direction == "desc")
            after = body.get("search_after")
            if after is not None:
                keyed = [(k, d) for k, d in keyed if (k > after[0] if direction == "asc" else k < after[0])]
            for key, doc_id in keyed[:size]:
                hits.append(self._hit(doc_id, None, body, sort=[key]))
        else:
            scored.sort(key=lambda t: (-t[0], t[1]))
            for score, _, doc_id in scored[:size]:
                hits.append(self._hit(doc_id, score, body))
        return {
            "took": 1,
            "timed_out": False,
            "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
            "hits": {
                "total": {"value": len(scored), "relation": "eq"},
                "max_score": max((s for s, _, _ in scored), default=None) if not sort else None,
                "hits": hits,
            },
        }

    def _sort_key(self, doc: dict[str, Any], path: str) -> Any:
        values = self.values(doc, path)
        return min(values) if values else ""

    def _hit(
        self, doc_id: str, score: float | None, body: dict[str, Any], sort: list[Any] | None = None
    ) -> Any:
        hit: dict[str, Any] = {"_index": self.name, "_id": doc_id, "_score": score}
        source_spec = body.get("_source", True)
        doc = self.docs[doc_id]
        if source_spec is True:
            hit["_source"] = doc
        elif isinstance(source_spec, list):
            hit["_source"] = {k: v for k, v in doc.items() if k in source_spec}
        if sort is not None:
            hit["sort"] = sort
        return hit

    def _candidates(self, query: Any, stats: _TextView) -> set[str] | None:
        """A superset of the documents ``query`` can match, or ``None`` (any document may)."""
        if not isinstance(query, dict) or len(query) != 1:
            return None
        ((kind, spec),) = query.items()
        if kind == "match_none":
            return set()
        if kind == "ids" and isinstance(spec, dict) and isinstance(spec.get("values"), list):
            return {v for v in spec["values"] if isinstance(v, str)}
        if kind == "match" and isinstance(spec, dict) and len(spec) == 1:
            ((path, clause),) = spec.items()
            text = clause["query"] if isinstance(clause, dict) else clause
            return stats.postings(path, str(text))
        if kind == "bool" and isinstance(spec, dict):
            found: set[str] | None = None
            for key in ("must", "filter"):
                clauses = spec.get(key, [])
                for clause in clauses if isinstance(clauses, list) else [clauses]:
                    narrowed = self._candidates(clause, stats)
                    if narrowed is not None:
                        found = narrowed if found is None else found & narrowed
            return found
        return None

    def _knn(self, spec: dict[str, Any], stats: _TextView) -> dict[str, float]:
        ((path, clause),) = spec.items()
        field_spec = self.field_spec(path) or {}
        if field_spec.get("type") != "knn_vector":
            raise DoubleError(400, "query_shard_exception", f"Field '{path}' is not knn_vector type.")
        vector = clause["vector"]
        if len(vector) != field_spec["dimension"]:
            raise DoubleError(
                400,
                "query_shard_exception",
                f"Query vector has invalid dimension: {len(vector)}. Dimension should be: {field_spec['dimension']}",
            )
        k = int(clause["k"])
        if not 1 <= k <= 10_000:
            raise DoubleError(400, "illegal_argument_exception", "[knn] requires 0 < k <= 10000")
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0:
            raise DoubleError(
                400, "illegal_argument_exception", "zero vector is not supported for cosinesimil"
            )
        flt = clause.get("filter")
        query = tuple(float(x) for x in vector)
        candidates: list[tuple[float, int, str]] = []
        for doc_id, (stored, stored_norm) in self.vectors.get(path, {}).items():
            if doc_id in stats.hidden:
                continue
            if flt is not None and self._eval(flt, self.docs[doc_id], doc_id, stats) is None:
                continue
            cos = sum(map(operator.mul, query, stored)) / (norm * stored_norm)
            candidates.append(((1.0 + cos) / 2.0, self.order[doc_id], doc_id))
        candidates.sort(key=lambda t: (-t[0], t[1]))
        return {doc_id: score for score, _, doc_id in candidates[:k]}

    def _eval(
        self, query: dict[str, Any], doc: dict[str, Any], doc_id: str, stats: _TextView
    ) -> float | None:
        """The score of ``doc`` under ``query``, or ``None`` when it does not match."""
        if not isinstance(query, dict) or len(query) != 1:
            raise DoubleError(400, "parsing_exception", f"malformed query {json.dumps(query)[:100]}")
        ((kind, spec),) = query.items()
        if kind == "match_all":
            return 1.0
        if kind == "match_none":
            return None
        if kind == "bool":
            return self._bool(spec, doc, doc_id, stats)
        if kind == "term":
            ((path, value),) = spec.items()
            value = value["value"] if isinstance(value, dict) else value
            return 1.0 if self._term(path, [value], doc) else None
        if kind == "terms":
            ((path, values),) = spec.items()
            if not isinstance(values, list):
                raise DoubleError(400, "parsing_exception", "[terms] query requires an array of values")
            return 1.0 if self._term(path, values, doc) else None
        if kind == "range":
            ((path, bounds),) = spec.items()
            return 1.0 if self._range(path, bounds, doc) else None
        if kind == "exists":
            return 1.0 if self.values(doc, spec["field"]) else None
        if kind == "ids":
            return 1.0 if doc_id in spec["values"] else None
        if kind == "match":
            ((path, clause),) = spec.items()
            text = clause["query"] if isinstance(clause, dict) else clause
            return stats.bm25(path, str(text), doc_id)
        if kind == "knn":
            raise DoubleError(
                400, "parsing_exception", "the double evaluates [knn] only as the top-level query"
            )
        raise DoubleError(400, "parsing_exception", f"unknown query [{kind}]")

    def _bool(self, spec: dict[str, Any], doc: dict[str, Any], doc_id: str, stats: _TextView) -> float | None:
        known = {"must", "filter", "should", "must_not", "minimum_should_match"}
        if set(spec) - known:
            raise DoubleError(400, "parsing_exception", f"[bool] unknown keys {sorted(set(spec) - known)}")

        def clauses(key: str) -> list[dict[str, Any]]:
            value = spec.get(key, [])
            return value if isinstance(value, list) else [value]

        score = 0.0
        for clause in clauses("must"):
            s = self._eval(clause, doc, doc_id, stats)
            if s is None:
                return None
            score += s
        for clause in clauses("filter"):
            if self._eval(clause, doc, doc_id, stats) is None:
                return None
        for clause in clauses("must_not"):
            if self._eval(clause, doc, doc_id, stats) is not None:
                return None
        should = clauses("should")
        default_min = 0 if (clauses("must") or clauses("filter")) else 1
        minimum = int(spec.get("minimum_should_match", default_min if should else 0))
        matched = 0
        for clause in should:
            s = self._eval(clause, doc, doc_id, stats)
            if s is not None:
                matched += 1
                score += s
        if matched < minimum:
            return None
        return score if (clauses("must") or should) else 0.0

    def _typed(self, path: str, value: Any) -> Any:
        spec = self.field_spec(path)
        if spec is None:
            return _UNMAPPED
        kind = spec.get("type")
        if kind in ("keyword", "text"):
            return value if isinstance(value, str) else json.dumps(value)
        if kind in ("double", "integer", "long"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise DoubleError(
                    400, "query_shard_exception", f"failed to create query: [{path}] is numeric"
                )
            return float(value)
        if kind == "boolean":
            if not isinstance(value, bool):
                raise DoubleError(
                    400, "query_shard_exception", f"failed to create query: [{path}] is boolean"
                )
            return value
        if kind == "date":
            return value
        raise DoubleError(
            400, "query_shard_exception", f"field [{path}] of type [{kind}] does not support term"
        )

    def _term(self, path: str, wanted: list[Any], doc: dict[str, Any]) -> bool:
        typed = [self._typed(path, v) for v in wanted]
        if any(t is _UNMAPPED for t in typed):
            return False
        values = self.values(doc, path)
        if (self.field_spec(path) or {}).get("type") in ("double", "integer", "long"):
            values = [float(v) for v in values]
        return any(v in typed for v in values)

    def _range(self, path: str, bounds: dict[str, Any], doc: dict[str, Any]) -> bool:
        spec = self.field_spec(path)
        if spec is None:
            return False
        tests = []
        for op, operand in bounds.items():
            typed = self._typed(path, operand)
            compare = {
                "gt": lambda a, b: a > b,
                "gte": lambda a, b: a >= b,
                "lt": lambda a, b: a < b,
                "lte": lambda a, b: a <= b,
            }.get(op)
            if compare is None:
                raise DoubleError(400, "parsing_exception", f"[range] unknown key [{op}]")
            tests.append((compare, typed))
        values = self.values(doc, path)
        if spec.get("type") in ("double", "integer", "long"):
            values = [float(v) for v in values]
        return any(all(test(v, bound) for test, bound in tests) for v in values)


_UNMAPPED = object()


class _TextView:
    """BM25 over the index's incrementally kept text statistics (:class:`_FieldStats`), as one search sees
    them: documents not yet visible (``hidden``) are left out of the statistics, as unrefreshed segments are.
    Per search, the query's terms are analysed once and the field statistics read once."""

    def __init__(self, index: _Index, hidden: frozenset[str]) -> None:
        self.index = index
        self.hidden = hidden
        self._terms: dict[str, list[str]] = {}
        self._fields: dict[str, tuple[_FieldStats, int, float]] = {}
        self._df: dict[tuple[str, str], int] = {}

    def terms(self, text: str) -> list[str]:
        if text not in self._terms:
            self._terms[text] = analyze(text)
        return self._terms[text]

    def _check(self, path: str) -> None:
        if (self.index.field_spec(path) or {}).get("type") != "text":
            raise DoubleError(400, "query_shard_exception", f"[match] on non-text field [{path}]")

    def postings(self, path: str, text: str) -> set[str]:
        """The documents holding at least one of the query's terms in ``path``."""
        self._check(path)
        stats = self.index.text.get(path)
        if stats is None:
            return set()
        found: set[str] = set()
        for term in set(self.terms(text)):
            found |= stats.postings.get(term, set())
        return found

    def _field(self, path: str) -> tuple[_FieldStats, int, float]:
        if path not in self._fields:
            stats = self.index.text.setdefault(path, _FieldStats())
            hidden = [d for d in self.hidden if d in stats.length]
            n_docs = len(stats.length) - len(hidden)
            total = stats.total - sum(stats.length[d] for d in hidden)
            self._fields[path] = (stats, n_docs, total / n_docs if n_docs else 1.0)
        return self._fields[path]

    def _doc_freq(self, path: str, stats: _FieldStats, term: str) -> int:
        key = (path, term)
        if key not in self._df:
            hidden = sum(1 for d in self.hidden if term in stats.tf.get(d, ()))
            self._df[key] = stats.df.get(term, 0) - hidden
        return self._df[key]

    def bm25(self, path: str, text: str, doc_id: str) -> float | None:
        self._check(path)
        terms = self.terms(text)
        stats, n_docs, avgdl = self._field(path)
        counts = stats.tf.get(doc_id)
        if not counts or not terms:
            return None
        dl = stats.length[doc_id]
        score = 0.0
        matched = False
        for term in terms:
            f = counts.get(term, 0)
            if not f:
                continue
            matched = True
            n = self._doc_freq(path, stats, term)
            idf = math.log(1 + (n_docs - n + 0.5) / (n + 0.5))
            score += idf * f / (f + K1 * (1 - B + B * dl / avgdl))
        return score if matched else None


def _is_date(value: str) -> bool:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------------------------ server


@dataclass
class _State:
    mode: Mode
    indices: dict[str, _Index] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    fail_requests: list[tuple[int, str]] = field(default_factory=list)
    fail_bulk: list[tuple[int, int]] = field(default_factory=list)
    delays: list[float] = field(default_factory=list)
    visibility_delay: float = 0.0
    lock: threading.RLock = field(default_factory=threading.RLock)


class OpenSearchDouble:
    """The test double's server (see the module docstring). Use as a context manager or start()/stop().

    Attributes:
        url: ``http://127.0.0.1:<port>`` once started.
        mode: ``managed`` or ``serverless``.
    """

    def __init__(self, mode: Mode = "managed", port: int = 0) -> None:
        if mode not in ("managed", "serverless"):
            raise ValueError("mode must be 'managed' or 'serverless'")
        self.mode: Mode = mode
        self.port = port
        self._state = _State(mode)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> OpenSearchDouble:
        state = self._state

        class Handler(_Handler):
            pass

        Handler.state = state
        self._server = _Server(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.01,), name="opensearch-double", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OpenSearchDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "the double is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # inspection and faults -----------------------------------------------------------------------------

    @property
    def requests(self) -> list[Recorded]:
        """Every request received so far, in order."""
        with self._state.lock:
            return list(self._state.requests)

    def clear_requests(self) -> None:
        with self._state.lock:
            self._state.requests.clear()

    def fail_next_requests(self, status: int = 503, count: int = 1, error_type: str = "unavailable") -> None:
        """Answer the next ``count`` requests (of any kind) with ``status`` and an error body."""
        with self._state.lock:
            self._state.fail_requests.extend([(status, error_type)] * count)

    def fail_next_bulk_items(self, every: int = 2, times: int = 1) -> None:
        """In each of the next ``times`` ``_bulk`` requests, refuse every ``every``-th item (the 1st, the
        ``every+1``-th, …) with 429 ``es_rejected_execution_exception``, leaving it unapplied."""
        with self._state.lock:
            self._state.fail_bulk.extend([(every, 1)] * times)

    def delay_next_requests(self, seconds: float, count: int = 1) -> None:
        """Hold each of the next ``count`` requests (of any kind) ``seconds`` before answering it, as a slow
        or overloaded cluster would. The request is recorded on arrival; the wait does not block other
        requests. A client that gave up meanwhile is not an error for the double."""
        with self._state.lock:
            self._state.delays.extend([seconds] * count)

    def delay_visibility(self, seconds: float) -> None:
        """From now on, a newly indexed document becomes visible to search only ``seconds`` later, as on
        OpenSearch Serverless (no ``_refresh``; new documents appear after a delay). 0 turns it off."""
        with self._state.lock:
            self._state.visibility_delay = seconds

    def index_names(self) -> list[str]:
        """The names of every index the double holds."""
        with self._state.lock:
            return sorted(self._state.indices)

    def documents(self, index: str) -> dict[str, dict[str, Any]]:
        """The stored documents of ``index`` by ``_id`` (a copy)."""
        with self._state.lock:
            return json.loads(json.dumps(self._state.indices[index].docs))

    def mapping(self, index: str) -> dict[str, Any]:
        with self._state.lock:
            return json.loads(json.dumps(self._state.indices[index].mappings))


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (its timeout during an injected delay) is normal; anything else is printed."""
        if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    state: _State
    protocol_version = "HTTP/1.1"
    # One buffered write per response and no Nagle: otherwise keep-alive requests stall ~40 ms on
    # delayed ACKs.
    wbufsize = -1
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        url = urlparse(self.path)
        path = unquote(url.path)
        params = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        body: Any = None
        if raw:
            text = raw.decode()
            if path.endswith(("_bulk", "_msearch")):
                body = [json.loads(line) for line in text.splitlines() if line.strip()]
            else:
                body = json.loads(text)
        state = self.state
        with state.lock:
            state.requests.append(
                Recorded(method, path, params, dict(self.headers.items()), body, raw=raw, target=self.path)
            )
            delay = state.delays.pop(0) if state.delays else 0.0
        if delay:
            time.sleep(delay)
        with state.lock:
            try:
                if state.fail_requests:
                    status, error_type = state.fail_requests.pop(0)
                    raise DoubleError(status, error_type, "injected failure")
                status, answer = self._route(method, path, params, body)
            except DoubleError as err:
                status, answer = err.status, err.body
        payload = b"" if answer is None else json.dumps(answer).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (its timeout) while the request was delayed

    # routing ------------------------------------------------------------------------------------------

    def _route(self, method: str, path: str, params: dict[str, str], body: Any) -> tuple[int, Any]:
        parts = [p for p in path.split("/") if p]
        if not parts and method in ("GET", "HEAD"):
            return 200, {
                "name": "opensearch-double",
                "cluster_name": "double",
                "version": {"distribution": "opensearch", "number": "2.17.0"},
                "tagline": "The OpenSearch Project: https://opensearch.org/ (test double)",
            }
        if parts == ["_bulk"] and method in ("POST", "PUT"):
            return 200, self._bulk(None, body or [])
        if parts == ["_msearch"] and method in ("POST", "GET"):
            return 200, self._msearch(None, body or [])
        if len(parts) == 1 and not parts[0].startswith("_"):
            return self._index_op(method, parts[0], body)
        if len(parts) == 2 and not parts[0].startswith("_"):
            name, op = parts
            if op == "_mapping" and method == "GET":
                return 200, {name: {"mappings": self._index(name).mappings}}
            if op == "_bulk" and method in ("POST", "PUT"):
                return 200, self._bulk(name, body or [])
            if op == "_search" and method in ("POST", "GET"):
                return 200, self._index(name).search(body or {})
            if op == "_msearch" and method in ("POST", "GET"):
                return 200, self._msearch(name, body or [])
            if op == "_refresh" and method in ("POST", "GET"):
                self._serverless_refuses(method, path)
                self._index(name)
                return 200, {"_shards": {"total": 1, "successful": 1, "failed": 0}}
            if op == "_delete_by_query" and method == "POST":
                self._serverless_refuses(method, path)
                return 200, self._delete_by_query(name, body or {})
        raise DoubleError(
            400, "illegal_argument_exception", f"the double has no handler for [{method} {path}]"
        )

    def _serverless_refuses(self, method: str, path: str) -> None:
        if self.state.mode == "serverless":
            # Not in the Serverless list of supported operations; the exact AWS answer is not documented.
            raise DoubleError(404, "unsupported_operation_exception", f"[{method} {path}] is not supported")

    def _index(self, name: str) -> _Index:
        index = self.state.indices.get(name)
        if index is None:
            raise DoubleError(404, "index_not_found_exception", f"no such index [{name}]")
        return index

    def _index_op(self, method: str, name: str, body: Any) -> tuple[int, Any]:
        indices = self.state.indices
        if method == "HEAD":
            return (200 if name in indices else 404), None
        if method == "PUT":
            if name in indices:
                raise DoubleError(400, "resource_already_exists_exception", f"index [{name}] already exists")
            if name != name.lower() or name.startswith(("_", "-", "+")):
                raise DoubleError(400, "invalid_index_name_exception", f"Invalid index name [{name}]")
            indices[name] = _Index(name, body or {})
            return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}
        if method == "GET":
            index = self._index(name)
            return 200, {name: {"aliases": {}, "mappings": index.mappings, "settings": index.settings}}
        if method == "DELETE":
            self._index(name)
            del indices[name]
            return 200, {"acknowledged": True}
        raise DoubleError(405, "method_not_allowed", f"{method} /{name}")

    def _bulk(self, default_index: str | None, lines: list[Any]) -> dict[str, Any]:
        state = self.state
        every = 0
        if state.fail_bulk:
            every, _ = state.fail_bulk.pop(0)
        items: list[dict[str, Any]] = []
        i = 0
        n = 0
        while i < len(lines):
            action = lines[i]
            ((op, meta),) = action.items()
            i += 1
            doc = None
            if op in ("index", "create"):
                doc = lines[i]
                i += 1
            elif op != "delete":
                raise DoubleError(400, "illegal_argument_exception", f"the double does not support [{op}]")
            name = meta.get("_index", default_index)
            result: dict[str, Any] = {"_index": name, "_id": meta.get("_id")}
            if every and n % every == 0:
                result.update(
                    status=429,
                    error={
                        "type": "es_rejected_execution_exception",
                        "reason": "rejected execution (injected by the double)",
                    },
                )
            else:
                try:
                    result.update(self._apply(op, name, meta, doc))
                except DoubleError as err:
                    result.update(status=err.status, error=err.body["error"])
            n += 1
            items.append({op: result})
        return {"took": 1, "errors": any("error" in next(iter(it.values())) for it in items), "items": items}

    def _apply(self, op: str, name: str | None, meta: dict[str, Any], doc: Any) -> dict[str, Any]:
        if name is None:
            raise DoubleError(400, "action_request_validation_exception", "index is missing")
        index = self._index(name)
        doc_id = meta.get("_id")
        if op == "delete":
            if doc_id is None:
                raise DoubleError(400, "action_request_validation_exception", "id is missing")
            if not index.remove(doc_id):
                return {"result": "not_found", "status": 404}
            return {"result": "deleted", "status": 200}
        if self.state.mode == "serverless" and doc_id is not None:
            raise DoubleError(
                400,
                "illegal_argument_exception",
                "Document ID is not supported in create/index operation request",
            )
        index.validate(doc)
        doc_id = doc_id or uuid.uuid4().hex[:20]
        if op == "create" and doc_id in index.docs:
            raise DoubleError(
                409, "version_conflict_engine_exception", f"[{doc_id}]: document already exists"
            )
        existed = doc_id in index.docs
        index.put(doc_id, doc)
        if self.state.visibility_delay:
            index.visible_at[doc_id] = time.monotonic() + self.state.visibility_delay
        index.versions[doc_id] = index.versions.get(doc_id, 0) + 1
        return {
            "_id": doc_id,
            "_version": index.versions[doc_id],
            "result": "updated" if existed else "created",
            "status": 200 if existed else 201,
        }

    def _msearch(self, default_index: str | None, lines: list[Any]) -> dict[str, Any]:
        if len(lines) % 2:
            raise DoubleError(400, "illegal_argument_exception", "msearch needs header/body pairs")
        responses = []
        for header, body in zip(lines[0::2], lines[1::2], strict=True):
            name = header.get("index", default_index)
            try:
                if name is None:
                    raise DoubleError(400, "action_request_validation_exception", "no index")
                responses.append({**self._index(name).search(body), "status": 200})
            except DoubleError as err:
                responses.append(err.body)
        return {"took": 1, "responses": responses}

    def _delete_by_query(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        index = self._index(name)
        matched = index.search(
            {"query": body.get("query", {"match_all": {}}), "size": 1_000_000, "_source": False}
        )
        ids = [h["_id"] for h in matched["hits"]["hits"]]
        for doc_id in ids:
            index.remove(doc_id)
        return {
            "took": 1,
            "timed_out": False,
            "total": len(ids),
            "deleted": len(ids),
            "batches": 1,
            "version_conflicts": 0,
            "noops": 0,
            "failures": [],
        }


def main() -> None:
    """Serve the double in the foreground: ``python -m tests.opensearch_double [--port 9200] [--mode
    serverless]`` — for trying ``memstack demo --backend aws`` on a laptop without a cluster."""
    import argparse

    parser = argparse.ArgumentParser(description="OpenSearch test double (not OpenSearch)")
    parser.add_argument("--port", type=int, default=9200)
    parser.add_argument("--mode", choices=["managed", "serverless"], default="serverless")
    args = parser.parse_args()
    double = OpenSearchDouble(args.mode, port=args.port).start()
    print(f"OpenSearch test double ({args.mode}) at {double.url}; Ctrl-C stops it", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        double.stop()


if __name__ == "__main__":
    main()
