"""Metadata filters for semantic recall: validation and a reference evaluator.

The language is Mastra's vector filter language (spec §2.8 and §4.3, "Filter translation"), with MongoDB
semantics. A filter is applied **inside** a search, so a filtered query still returns up to ``top_k`` hits
(DESIGN.md "The layers"). Every adapter compiles the same validated filter into its own query language and
must agree with :func:`matches`, the pure-Python evaluator that the conformance suite uses as the reference.

Shape::

    {"role": "user"}                                  field equality shorthand (same as $eq)
    {"age": {"$gte": 18, "$lt": 65}}                  several operators on one field: all must hold
    {"tier": "gold", "age": {"$gt": 30}}              several keys: implicit AND
    {"profile.city": "Paris"}                         a dotted key addresses nested metadata
    {"$and": [f1, f2]}  {"$or": [f1, f2]}  {"$not": f}
    {"age": {"$not": {"$gt": 30}}}                    field-level $not over an operator object

Operators: ``$eq $ne $gt $gte $lt $lte $in $nin $exists`` on a field, ``$and $or $not`` on filters, and
``$not`` on a field's operator object.

Semantics (MongoDB's, which OpenSearch's term/range/exists queries also give):

* **Missing keys.** A key is missing when any segment of its dotted path is absent or crosses a value
  that is not an object. ``$eq``, ``$in``, ``$gt``, ``$gte``, ``$lt`` and ``$lte`` are false on a missing
  key. ``$ne`` and ``$nin`` are the negations of ``$eq`` and ``$in``, so they **match** a missing key, as
  does a field-level ``$not``. ``$exists: true`` matches a present key (an explicit ``null`` is present);
  ``$exists: false`` matches a missing one.
* **Null.** ``{"k": None}`` / ``{"k": {"$eq": None}}`` match only an explicit ``null`` (as Mastra's storage
  filter does, spec §2.3), never a missing key; use ``{"$exists": False}`` for that.
* **Types never mix.** Values compare only within one kind: numbers (int and float; ``1 == 1.0``),
  strings (by Unicode code point, which is UTF-8 byte order), booleans (``false < true``) and null.
  A boolean is never equal to a number (``True`` does not match ``1``), and a string never matches a
  number (``"30"`` does not match ``30``), for equality and for ranges alike.
* **Arrays.** When the stored value is an array, ``$eq``, ``$in`` and the range operators match if
  **any element** matches (so ``{"tags": "a"}`` matches ``{"tags": ["a", "b"]}``); ``$ne`` and ``$nin``
  match if no element does. Only one level is looked into: elements that are arrays or objects never
  match a scalar. Dotted paths do not descend into arrays (``a.b`` does not reach ``{"a": [{"b": 1}]}``).
* **Objects.** A stored object never equals a scalar; filters cannot compare whole objects or arrays
  (``{"a": {"b": 1}}`` is rejected: write ``{"a.b": 1}``; ``{"k": [1, 2]}`` is rejected: write ``$in``).
* **Keys with dots.** A dot always separates path segments, so a stored key that itself contains a dot
  cannot be addressed.

Limits (to keep compiled queries small): nesting at most ``MAX_DEPTH`` levels (each ``$and``/``$or``/
``$not`` adds one), at most ``MAX_CONDITIONS`` conditions (one per operator applied to a field), at most
``MAX_LIST_VALUES`` values per ``$in``/``$nin`` list, integers within the signed 64-bit range.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from memstack.errors import InvalidInput, PayloadTooLarge

MAX_DEPTH = 8
"""Deepest accepted nesting: the top-level filter is level 1, each ``$and``/``$or``/``$not`` adds one."""

MAX_CONDITIONS = 100
"""Most conditions (operators applied to a field, equality shorthand included) in one filter."""

MAX_LIST_VALUES = 1000
"""Most values in one ``$in`` or ``$nin`` list."""

COMPARISON_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
"""Operators whose operand is one scalar (``None`` allowed only for ``$eq`` and ``$ne``)."""

FIELD_OPERATORS = COMPARISON_OPERATORS | {"$in", "$nin", "$exists", "$not"}
"""Operators that apply to a field's value."""

LOGICAL_OPERATORS = frozenset({"$and", "$or", "$not"})
"""Operators that combine filters."""

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


class _Missing:
    """The value of a key that is not in the metadata (distinct from an explicit ``null``)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""Sentinel returned by :func:`lookup` for a missing key."""


# --------------------------------------------------------------------------------------------- validation


def validate_filter(filter: object, field: str = "filter") -> dict[str, Any] | None:
    """Check that ``filter`` is a well-formed metadata filter (see the module docstring).

    Args:
        filter: the filter as decoded from JSON: ``None`` (no filter) or an object. ``{}`` matches
            everything.
        field: the name of the input field holding the filter; error paths start with it.

    Returns:
        The filter itself (unchanged), or ``None`` when ``filter`` is ``None``.

    Raises:
        InvalidInput: anything malformed, with ``field`` set to the path of the fault, for example
            ``filter.$and[1].age.$in[2]``: a non-object filter; an unknown ``$`` operator; a field
            operator at filter position or a logical one at field position; an empty or ``$``-prefixed
            key, or a dotted key with an empty segment; an operand of the wrong type (``$in``/``$nin``
            need a non-empty list of scalars, ``$and``/``$or`` a non-empty list of non-empty filters,
            ``$not`` a non-empty filter or operator object, ``$exists`` a boolean, comparisons a string,
            finite number or boolean, or ``None`` for ``$eq``/``$ne``); an object or list used as a
            value; nesting deeper than ``MAX_DEPTH``.
        PayloadTooLarge: more than ``MAX_CONDITIONS`` conditions, or more than ``MAX_LIST_VALUES``
            values in one ``$in``/``$nin`` (size limits answer 413, docs/api.md "Errors").
    """
    if filter is None:
        return None
    if not isinstance(filter, dict):
        raise InvalidInput(f"{field} must be an object", field=field)
    _Validator(field).filter(filter, field, 1, allow_empty=True)
    return filter


class _Validator:
    """Walks a filter once, counting conditions; raises at the first fault."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.conditions = 0

    def count(self) -> None:
        self.conditions += 1
        if self.conditions > MAX_CONDITIONS:
            raise PayloadTooLarge(
                f"{self.root} has more than the limit of {MAX_CONDITIONS} conditions", field=self.root
            )

    def filter(self, value: object, path: str, depth: int, *, allow_empty: bool = False) -> None:
        if depth > MAX_DEPTH:
            raise InvalidInput(f"{path} nests deeper than the limit of {MAX_DEPTH} levels", field=path)
        if not isinstance(value, dict):
            raise InvalidInput(f"{path} must be a filter object", field=path)
        if not value and not allow_empty:
            raise InvalidInput(f"{path} must not be an empty filter", field=path)
        for key, operand in value.items():
            key_path = f"{path}.{key}"
            if not isinstance(key, str):
                raise InvalidInput(f"{path} keys must be strings", field=path)
            if key in ("$and", "$or"):
                if not isinstance(operand, list) or not operand:
                    raise InvalidInput(f"{key_path} must be a non-empty list of filters", field=key_path)
                for i, item in enumerate(operand):
                    self.filter(item, f"{key_path}[{i}]", depth + 1)
            elif key == "$not":
                self.filter(operand, key_path, depth + 1)
            elif key.startswith("$"):
                if key in FIELD_OPERATORS:
                    raise InvalidInput(
                        f'{key_path}: operator {key} applies to a field, as in {{"age": {{"{key}": …}}}}',
                        field=key_path,
                    )
                raise InvalidInput(f"{key_path}: unknown operator {key}", field=key_path)
            else:
                check_key(key, key_path)
                self.condition(operand, key_path, depth)

    def condition(self, value: object, path: str, depth: int) -> None:
        if isinstance(value, dict):
            if not value:
                raise InvalidInput(f"{path} must not be an empty object", field=path)
            if any(not isinstance(k, str) or not k.startswith("$") for k in value):
                raise InvalidInput(
                    f"{path}: objects are not compared as values; address a nested key with a dotted key "
                    "(such as 'a.b') or use operators",
                    field=path,
                )
            for op, operand in value.items():
                self.operator(op, operand, f"{path}.{op}", depth)
        elif isinstance(value, list):
            raise InvalidInput(f"{path}: lists are not compared as values; use $in", field=path)
        else:
            check_scalar(value, path, allow_none=True)
            self.count()

    def operator(self, op: str, operand: object, path: str, depth: int) -> None:
        if op == "$not":
            if depth + 1 > MAX_DEPTH:
                raise InvalidInput(f"{path} nests deeper than the limit of {MAX_DEPTH} levels", field=path)
            if not isinstance(operand, dict) or not operand:
                raise InvalidInput(
                    f'{path} must be a non-empty operator object such as {{"$gt": 1}}', field=path
                )
            self.condition(operand, path, depth + 1)
            return
        if op in COMPARISON_OPERATORS:
            check_scalar(operand, path, allow_none=op in ("$eq", "$ne"))
        elif op in ("$in", "$nin"):
            if not isinstance(operand, list) or not operand:
                raise InvalidInput(f"{path} must be a non-empty list of values", field=path)
            if len(operand) > MAX_LIST_VALUES:
                raise PayloadTooLarge(
                    f"{path} has more than the limit of {MAX_LIST_VALUES} values", field=path
                )
            for i, item in enumerate(operand):
                check_scalar(item, f"{path}[{i}]", allow_none=True)
        elif op == "$exists":
            if not isinstance(operand, bool):
                raise InvalidInput(f"{path} must be true or false", field=path)
        elif op in LOGICAL_OPERATORS:
            raise InvalidInput(f"{path}: {op} combines filters and cannot apply to a field", field=path)
        else:
            raise InvalidInput(f"{path}: unknown operator {op}", field=path)
        self.count()


def check_key(key: str, path: str) -> list[str]:
    """Validate a field key and split it into its dotted path segments.

    Raises:
        InvalidInput: the key is empty, starts with ``$`` or has an empty segment (``"a..b"``, ``".a"``).
    """
    if not key:
        raise InvalidInput(f"{path}: keys must not be empty", field=path)
    if "\x00" in key or not _utf8(key):
        raise InvalidInput(f"{path}: keys must be valid text without NUL characters", field=path)
    if key.startswith("$"):
        raise InvalidInput(f"{path}: field keys must not start with $", field=path)
    segments = key.split(".")
    if any(not s for s in segments):
        raise InvalidInput(f"{path}: a dotted key must not have an empty segment", field=path)
    return segments


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_scalar(value: object, path: str, *, allow_none: bool) -> None:
    """Validate an operand: a string, a finite number, a boolean, or (where allowed) ``None``.

    Raises:
        InvalidInput: any other type, a NaN or infinite float, or an integer outside the signed 64-bit
            range (SQLite's integer range).
    """
    if value is None:
        if not allow_none:
            raise InvalidInput(f"{path} must be a string, number or boolean, not null", field=path)
        return
    if isinstance(value, str):
        if not _utf8(value):
            raise InvalidInput(f"{path} must be valid text (no lone surrogates)", field=path)
        return
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise InvalidInput(f"{path} is outside the signed 64-bit integer range", field=path)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{path} must be a finite number", field=path)
        return
    expected = "a string, number, boolean or null" if allow_none else "a string, number or boolean"
    raise InvalidInput(f"{path} must be {expected}", field=path)


# ---------------------------------------------------------------------------------------------- evaluator


def matches(filter: dict[str, Any] | None, metadata: dict[str, Any]) -> bool:
    """Whether ``metadata`` satisfies ``filter``, with the semantics of the module docstring.

    This is the reference every adapter must agree with (the conformance suite compares them).

    Args:
        filter: a filter (validated here), ``None`` or ``{}`` (both match everything).
        metadata: a JSON object as stored with an index entry.

    Raises:
        InvalidInput: the filter is malformed (see :func:`validate_filter`).
    """
    checked = validate_filter(filter)
    return True if checked is None else _match_filter(checked, metadata)


def lookup(metadata: dict[str, Any], key: str) -> Any:
    """The value at a dotted ``key`` in ``metadata``, or :data:`MISSING` (arrays are not descended)."""
    value: Any = metadata
    for segment in key.split("."):
        if not isinstance(value, dict) or segment not in value:
            return MISSING
        value = value[segment]
    return value


def kind(value: object) -> str | None:
    """The comparison kind of a scalar: ``"null"``, ``"bool"``, ``"number"`` or ``"string"``.

    ``None`` for arrays, objects, the missing sentinel and NaN (which never compares).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "number"
    if isinstance(value, float):
        return None if math.isnan(value) else "number"
    if isinstance(value, str):
        return "string"
    return None


def _match_filter(filter: dict[str, Any], metadata: dict[str, Any]) -> bool:
    for key, operand in filter.items():
        if key == "$and":
            ok = all(_match_filter(f, metadata) for f in operand)
        elif key == "$or":
            ok = any(_match_filter(f, metadata) for f in operand)
        elif key == "$not":
            ok = not _match_filter(operand, metadata)
        else:
            ok = _match_condition(operand, lookup(metadata, key))
        if not ok:
            return False
    return True


def _match_condition(condition: Any, value: Any) -> bool:
    if not isinstance(condition, dict):
        return _eq(value, condition)
    return all(_apply(op, operand, value) for op, operand in condition.items())


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": lambda a, b: bool(a > b),
    "$gte": lambda a, b: bool(a >= b),
    "$lt": lambda a, b: bool(a < b),
    "$lte": lambda a, b: bool(a <= b),
}


def _apply(op: str, operand: Any, value: Any) -> bool:
    if op == "$eq":
        return _eq(value, operand)
    if op == "$ne":
        return not _eq(value, operand)
    if op == "$in":
        return any(_eq(value, v) for v in operand)
    if op == "$nin":
        return not any(_eq(value, v) for v in operand)
    if op == "$exists":
        return bool((value is not MISSING) == operand)
    if op == "$not":
        return not _match_condition(operand, value)
    compare = _COMPARE[op]
    want = kind(operand)
    return any(kind(c) == want and compare(c, operand) for c in _candidates(value))


def _eq(value: Any, operand: Any) -> bool:
    want = kind(operand)
    return any(kind(c) == want and c == operand for c in _candidates(value))


def _candidates(value: Any) -> list[Any]:
    """The values a scalar condition is tried on: the elements of an array, else the value itself."""
    if value is MISSING:
        return []
    if isinstance(value, list):
        return value
    return [value]
