"""Query bodies: the metadata filter compiled to the query DSL, and the vector and keyword searches.

Filter compilation (a validated ``memstack.filters`` filter → bool/term/terms/range/exists), over the typed
fields of ``memstack.adapters.opensearch.documents`` (``S(p)``/``N(p)``/``B(p)`` are the string, number
and boolean fields of path ``p``):

=====================  =========================================================================
filter                 query
=====================  =========================================================================
``{"p": "x"}``         ``term S(p)`` (numbers: ``term N(p)``; booleans: ``term B(p)``)
``{"p": None}``        ``term meta_null: p``
``$ne`` / ``$nin``     ``bool.must_not`` of the ``$eq`` / ``$in`` query (so a missing key matches)
``$in``                ``terms`` per kind (+ ``term meta_null`` for ``None``), OR-ed
``$gt`` … ``$lte``     ``range`` on ``S(p)`` (strings, byte order = code point order) or ``N(p)``;
                       booleans become terms (``$lt: true`` → ``term B(p): false``, …)
``$exists``            ``term meta_paths: p`` (``false``: under ``must_not``)
field ``$not``         ``bool.must_not`` of the operator object's query
``$and`` / several     ``bool.filter``
``$or``                ``bool.should`` with ``minimum_should_match: 1``
``$not``               ``bool.must_not``
=====================  =========================================================================

Operators on one field are separate clauses, each matching when any element of an array does, exactly as
``memstack.filters.matches`` evaluates them (``{"$gte": 20, "$lt": 41}`` on ``[10, 50]`` matches).
"""

from __future__ import annotations

from typing import Any

from memstack.adapters.opensearch.documents import (
    BOOL_FIELDS,
    NULL_PATHS,
    NUMBER_FIELDS,
    PRESENT_PATHS,
    STRING_FIELDS,
    field_name,
)
from memstack.adapters.opensearch.schema import TEXT_FIELD, VECTOR_FIELD
from memstack.filters import kind

Query = dict[str, Any]

MATCH_NONE: Query = {"match_none": {}}

SOURCE_FIELDS = ["message_id", "thread_id", "seq"]
"""The ``_source`` fields a search returns (never the text or the vector)."""

_RANGE = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}


def compile_filter(filter: dict[str, Any]) -> list[Query]:
    """The clauses (to AND in a ``bool.filter``) of a validated, non-empty filter."""
    clauses: list[Query] = []
    for key, operand in filter.items():
        if key == "$and":
            clauses.append(_and([_all(compile_filter(f)) for f in operand]))
        elif key == "$or":
            clauses.append(_or([_all(compile_filter(f)) for f in operand]))
        elif key == "$not":
            clauses.append(_not(_all(compile_filter(operand))))
        else:
            clauses.append(_condition(key, operand))
    return clauses


def scope_filter(resource_id: str, thread_id: str | None, filter: dict[str, Any] | None) -> list[Query]:
    """The resource (and thread) terms plus the compiled metadata filter: every search's filter."""
    clauses: list[Query] = [{"term": {"resource_id": resource_id}}]
    if thread_id is not None:
        clauses.append({"term": {"thread_id": thread_id}})
    if filter:
        clauses.extend(compile_filter(filter))
    return clauses


def vector_body(vector: list[float], k: int, scope: list[Query]) -> Query:
    """A k-NN search for ``k`` chunks with the scope and filter **inside** the ``knn`` clause, so the
    engine returns the ``k`` nearest chunks that match (not the ``k`` nearest, then filtered)."""
    return {
        "size": k,
        "_source": SOURCE_FIELDS,
        "query": {"knn": {VECTOR_FIELD: {"vector": vector, "k": k, "filter": {"bool": {"filter": scope}}}}},
    }


def keyword_body(terms: list[str], size: int, scope: list[Query]) -> Query:
    """A BM25 ``match`` (terms OR-ed, never query syntax) on ``text``, filtered by the scope."""
    return {
        "size": size,
        "_source": SOURCE_FIELDS,
        "query": {"bool": {"must": [{"match": {TEXT_FIELD: {"query": " ".join(terms)}}}], "filter": scope}},
    }


# ------------------------------------------------------------------------------------------------ helpers


def _all(clauses: list[Query]) -> Query:
    return clauses[0] if len(clauses) == 1 else _and(clauses)


def _and(clauses: list[Query]) -> Query:
    return clauses[0] if len(clauses) == 1 else {"bool": {"filter": clauses}}


def _or(clauses: list[Query]) -> Query:
    if len(clauses) == 1:
        return clauses[0]
    return {"bool": {"should": clauses, "minimum_should_match": 1}}


def _not(clause: Query) -> Query:
    return {"bool": {"must_not": [clause]}}


def _condition(path: str, condition: Any) -> Query:
    if not isinstance(condition, dict):
        return _in(path, [condition])
    return _and([_operator(path, op, operand) for op, operand in condition.items()])


def _operator(path: str, op: str, operand: Any) -> Query:
    if op == "$eq":
        return _in(path, [operand])
    if op == "$ne":
        return _not(_in(path, [operand]))
    if op == "$in":
        return _in(path, operand)
    if op == "$nin":
        return _not(_in(path, operand))
    if op == "$exists":
        present: Query = {"term": {PRESENT_PATHS: path}}
        return present if operand else _not(present)
    if op == "$not":
        return _not(_condition(path, operand))
    return _range(path, op, operand)


def _in(path: str, values: list[Any]) -> Query:
    """Any element (or the value) equals one of ``values``, kinds never mixing."""
    name = field_name(path)
    clauses: list[Query] = []
    for group, want in ((STRING_FIELDS, "string"), (NUMBER_FIELDS, "number"), (BOOL_FIELDS, "bool")):
        same = list(dict.fromkeys(v for v in values if kind(v) == want))
        if len(same) == 1:
            clauses.append({"term": {f"{group}.{name}": same[0]}})
        elif same:
            clauses.append({"terms": {f"{group}.{name}": same}})
    if any(v is None for v in values):
        clauses.append({"term": {NULL_PATHS: path}})
    return _or(clauses) if clauses else MATCH_NONE


def _range(path: str, op: str, operand: Any) -> Query:
    k = kind(operand)
    name = field_name(path)
    if k == "bool":
        # false < true: a range over booleans is "some element is false / true / either".
        field = f"{BOOL_FIELDS}.{name}"
        either: Query = {"exists": {"field": field}}
        table: dict[tuple[str, bool], Query] = {
            ("$lt", True): {"term": {field: False}},
            ("$lt", False): MATCH_NONE,
            ("$lte", True): either,
            ("$lte", False): {"term": {field: False}},
            ("$gt", True): MATCH_NONE,
            ("$gt", False): {"term": {field: True}},
            ("$gte", True): {"term": {field: True}},
            ("$gte", False): either,
        }
        return table[(op, bool(operand))]
    group = STRING_FIELDS if k == "string" else NUMBER_FIELDS
    return {"range": {f"{group}.{name}": {_RANGE[op]: operand}}}
