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
    collector = _FieldCollector()
    collector.walk(metadata, "")
    return collector.fields()


class _FieldCollector:
    """Gathers the typed fields of ``flatten`` while walking a metadata object."""

    def __init__(self) -> None:
        self.strings: dict[str, list[str]] = {}
        self.numbers: dict[str, list[float | int]] = {}
        self.bools: dict[str, list[bool]] = {}
        self.nulls: list[str] = []
        self.paths: list[str] = []

    def walk(self, obj: dict[str, Any], prefix: str) -> None:
        """Record every usable key of ``obj`` (a non-empty string without a dot) under ``prefix``."""
        for key, value in obj.items():
            if not isinstance(key, str) or not key or "." in key:
                continue
            path = f"{prefix}{key}"
            self.paths.append(path)
            if isinstance(value, dict):
                self.walk(value, f"{path}.")
            elif isinstance(value, list):
                for element in value:
                    if not isinstance(element, dict | list):
                        self.scalar(path, element)
            else:
                self.scalar(path, value)

    def scalar(self, path: str, value: Any) -> None:
        """Record one scalar value at ``path`` in the group of its type (non-finite numbers are left out)."""
        if value is None:
            if path not in self.nulls:
                self.nulls.append(path)
        elif isinstance(value, bool):
            self.bools.setdefault(field_name(path), []).append(value)
        elif isinstance(value, int | float):
            if not (isinstance(value, float) and not math.isfinite(value)):
                self.numbers.setdefault(field_name(path), []).append(value)
        elif isinstance(value, str):
            self.strings.setdefault(field_name(path), []).append(value)

    def fields(self) -> dict[str, Any]:
        """The non-empty groups, under their field names."""
        groups: list[tuple[str, Any]] = [
            (STRING_FIELDS, self.strings),
            (NUMBER_FIELDS, self.numbers),
            (BOOL_FIELDS, self.bools),
            (NULL_PATHS, self.nulls),
            (PRESENT_PATHS, self.paths),
        ]
        return {name: group for name, group in groups if group}
