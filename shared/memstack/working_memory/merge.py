"""JSON-mode merge semantics (spec §2.7 "Deep-merge"), as pure functions on JSON values.

The contract, also in docs/working-memory.md:
* a key absent from the update stays as it is;
* ``null`` deletes the key — also on the first write and inside objects the update creates, so a stored
  document never holds ``null``;
* an array replaces the stored value whole (``[]`` stores an empty array);
* an object merges into a stored object key by key, recursively (into anything else it replaces it,
  nulls removed);
* any other value overwrites.

Before merging, ``strip_padding_nulls`` drops the ``null``s a model pads into optional fields (providers
with strict tool schemas make every field required and nullable, so the model sends ``null`` for every
field it leaves alone): a ``null`` for a property the schema describes but does not require means "not
provided", not "delete" — nullable or not (spec §2.7 "Strict-provider null padding"). ``null`` deletes
required fields (then validation says what is missing) and keys the schema does not name (free-form maps).
"""

from __future__ import annotations

import copy
from typing import Any

from memstack.working_memory.schema import branch_for, resolve


def deep_merge(existing: dict[str, Any] | None, update: dict[str, Any]) -> dict[str, Any]:
    """A new object: ``update`` merged over ``existing`` (neither is modified).

    Args:
        existing: the stored document, or ``None`` when nothing is stored.
        update: the model's update.
    """
    result = dict(existing or {})
    for key, value in update.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            stored = result.get(key)
            result[key] = deep_merge(stored if isinstance(stored, dict) else None, value)
        elif isinstance(value, list):
            result[key] = _without_nulls(value)
        else:
            result[key] = value
    return result


def _without_nulls(value: list[Any]) -> list[Any]:
    """An array as given, except that objects inside it lose their ``null`` keys (nulls are never stored
    as object values; ``null`` items of the array itself are kept, an array has no keys to delete)."""
    return [
        deep_merge(None, v) if isinstance(v, dict) else _without_nulls(v) if isinstance(v, list) else v
        for v in value
    ]


def strip_padding_nulls(value: Any, schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """``value`` without the ``null``s of optional (not required) described properties, recursively.

    Args:
        value: the update (any JSON value).
        schema: the JSON Schema node describing ``value``.
        root: the whole schema, for local ``$ref``s (defaults to ``schema``).
    """
    root = schema if root is None else root
    node = branch_for(value, schema, root)
    if isinstance(value, list):
        items = resolve(node.get("items", {}), root)
        return [strip_padding_nulls(v, items, root) for v in value]
    if not isinstance(value, dict):
        return value
    found = node.get("properties")
    properties: dict[str, Any] = found if isinstance(found, dict) else {}
    required = set(node.get("required") or ())
    out: dict[str, Any] = {}
    for key, item in value.items():
        described = key in properties
        if item is None and described and key not in required:
            continue
        out[key] = strip_padding_nulls(item, properties.get(key, {}), root) if described else item
    return out


def skeleton(schema: dict[str, Any], root: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """An empty document of the schema's shape, shown to the model: a node's ``default`` (or ``const``)
    where it has a non-null one, else objects with every described property (nested objects in full), ``""`` for
    strings, ``[]`` for arrays, ``false`` for booleans and ``null`` for numbers (no number is a safe
    "unknown")."""
    root = schema if root is None else root
    node = resolve(schema, root)
    if (given := _given(node)) is not None:
        return given
    branches = node.get("anyOf") or node.get("oneOf")
    if isinstance(branches, list):
        non_null = [b for b in (resolve(b, root) for b in branches) if b.get("type") != "null"]
        node = non_null[0] if non_null else node
        if (given := _given(node)) is not None:
            return given
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    properties = node.get("properties")
    if (kind == "object" or isinstance(properties, dict)) and depth < 8:
        props = properties if isinstance(properties, dict) else {}
        return {key: skeleton(sub, root, depth + 1) for key, sub in props.items() if isinstance(sub, dict)}
    return copy.deepcopy(_EMPTY.get(kind)) if isinstance(kind, str) else None


def _given(node: dict[str, Any]) -> Any:
    """A node's ``const`` or ``default`` (a copy); ``None`` when it has neither or it is ``null`` — a null
    default says nothing of the shape, so an optional nested object is still shown in full."""
    for key in ("const", "default"):
        if node.get(key) is not None:
            return copy.deepcopy(node[key])
    return None


_EMPTY: dict[str, Any] = {"object": {}, "array": [], "string": "", "boolean": False}
