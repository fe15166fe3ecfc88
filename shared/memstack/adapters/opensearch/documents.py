"""Metadata as typed OpenSearch fields, so that a compiled filter keeps the filter language's rules.

A metadata object is flattened into dotted paths, the keys a filter addresses (``{"profile": {"city":
"Paris"}}`` → ``profile.city``). Paths stop at arrays (``a.b`` never reaches ``{"a": [{"b": 1}]}``); a
key that is empty or contains a dot is not addressable (``memstack.filters``) and is left out with
everything below it. For each path:

* ``meta_s.<field>`` (keyword) holds its string values, ``meta_n.<field>`` (double) its numbers and
  ``meta_b.<field>`` (boolean) its booleans — the value itself, or the scalar elements of an array (nested
  arrays and objects inside an array are skipped, since they never equal a scalar). Kinds never share a
  field, so ``"30"`` never equals ``30`` and ``true`` never equals ``1``.
* ``meta_null`` (keyword list) holds the path when the value, or an element of an array, is ``null``.
* ``meta_paths`` (keyword list) holds every present path, whatever its value (object, array, ``null``),
  for ``$exists``.

``<field>`` is the path with each segment percent-encoded and the segments joined by ``/``
(:func:`field_name`): one flat field under ``meta_s``/``meta_n``/``meta_b`` per path, never an object
tree, so ``profile`` holding a string in one document and an object in another never conflicts in the
mapping.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote

STRING_FIELDS = "meta_s"
NUMBER_FIELDS = "meta_n"
BOOL_FIELDS = "meta_b"
NULL_PATHS = "meta_null"
PRESENT_PATHS = "meta_paths"


def field_name(path: str) -> str:
    """The field suffix of a dotted path: ``"profile.city"`` → ``"profile/city"``, ``"a b"`` → ``"a%20b"``.

    Every character except ASCII letters, digits and ``_.-~`` is percent-encoded, so the name has no dot
    (which OpenSearch would read as an object path) and no ``*`` or other pattern character.
    """
    return "/".join(quote(segment, safe="") for segment in path.split("."))


def flatten(metadata: dict[str, Any]) -> dict[str, Any]:
    """The typed metadata fields of one document (see the module docstring).

    Returns:
        ``{"meta_s": {field: [str…]}, "meta_n": {field: [float…]}, "meta_b": {field: [bool…]},
        "meta_null": [path…], "meta_paths": [path…]}``; empty groups are left out.
    """
    strings: dict[str, list[str]] = {}
    numbers: dict[str, list[float | int]] = {}
    bools: dict[str, list[bool]] = {}
    nulls: list[str] = []
    paths: list[str] = []

    def scalar(path: str, value: Any) -> None:
        if value is None:
            if path not in nulls:
                nulls.append(path)
        elif isinstance(value, bool):
            bools.setdefault(field_name(path), []).append(value)
        elif isinstance(value, int | float):
            if not (isinstance(value, float) and not math.isfinite(value)):
                numbers.setdefault(field_name(path), []).append(value)
        elif isinstance(value, str):
            strings.setdefault(field_name(path), []).append(value)

    def walk(obj: dict[str, Any], prefix: str) -> None:
        for key, value in obj.items():
            if not isinstance(key, str) or not key or "." in key:
                continue
            path = f"{prefix}{key}"
            paths.append(path)
            if isinstance(value, dict):
                walk(value, f"{path}.")
            elif isinstance(value, list):
                for element in value:
                    if not isinstance(element, dict | list):
                        scalar(path, element)
            else:
                scalar(path, value)

    walk(metadata, "")
    fields: dict[str, Any] = {}
    for name, group in ((STRING_FIELDS, strings), (NUMBER_FIELDS, numbers), (BOOL_FIELDS, bools)):
        if group:
            fields[name] = group
    if nulls:
        fields[NULL_PATHS] = nulls
    if paths:
        fields[PRESENT_PATHS] = paths
    return fields
