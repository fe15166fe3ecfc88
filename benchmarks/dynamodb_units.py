"""DynamoDB on-demand request units of one request, from its JSON request and response bodies.

The rules (DynamoDB developer guide, "Read/write capacity mode" and "Item sizes and formats"; the on-demand
pricing page): a read request unit (RRU) is one strongly consistent read of up to 4 KB, or two eventually
consistent ones; a write request unit (WRU) is one write of up to 1 KB; transactional reads and writes cost
twice. ``Query`` rounds the sum of the items it reads up to 4 KB; ``GetItem``, ``BatchGetItem`` and writes round
each item. An item's size is the UTF-8 length of its attribute names plus its values (strings: UTF-8 length;
numbers: about one byte per two digits plus one; binary: its bytes; booleans and null: one byte; lists and
maps: three bytes plus one per element plus their contents).

Approximations, stated: an ``UpdateItem``/``Delete``/``ConditionCheck`` is charged by the size of the item it
touches, which the request does not show, so it counts as one item of up to 1 KB (the items Memstack updates
this way — thread heads, index marks — are that small); a key a ``BatchGetItem`` asked for but did not find
counts one unit.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

READ_UNIT_BYTES = 4096
WRITE_UNIT_BYTES = 1024


def value_bytes(value: dict[str, Any]) -> int:
    """The size of one attribute value in DynamoDB JSON (``{"S": "..."}``, ``{"N": "1"}``, ``{"M": {...}}`` …)."""
    (kind, inner), *_ = value.items()
    if kind == "S":
        return len(str(inner).encode())
    if kind == "N":
        digits = len(str(inner).lstrip("-").replace(".", "").lstrip("0")) or 1
        return math.ceil(digits / 2) + 1
    if kind == "B":
        return len(base64.b64decode(inner))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in inner)
    if kind == "NS":
        return sum(value_bytes({"N": n}) for n in inner)
    if kind == "BS":
        return sum(len(base64.b64decode(b)) for b in inner)
    if kind == "L":
        return 3 + sum(1 + value_bytes(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_bytes(v) for k, v in inner.items())
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def item_bytes(item: dict[str, Any]) -> int:
    """The size of an item in DynamoDB JSON: attribute names plus values."""
    return sum(len(name.encode()) + value_bytes(value) for name, value in item.items())


def _reads(size: int) -> int:
    return max(1, math.ceil(size / READ_UNIT_BYTES))


def _writes(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def request_units(operation: str, request: dict[str, Any], response: dict[str, Any]) -> tuple[float, float]:
    """``(read units, write units)`` of one DynamoDB request (module docstring for the rules).

    Args:
        operation: the API name, e.g. ``Query``, ``TransactWriteItems``.
        request, response: the parsed JSON bodies (``{}`` when empty).
    """
    factor = 1.0 if request.get("ConsistentRead") else 0.5
    if operation == "GetItem":
        return _reads(item_bytes(response.get("Item") or {})) * factor, 0.0
    if operation in ("Query", "Scan"):
        return _reads(sum(item_bytes(i) for i in response.get("Items") or [])) * factor, 0.0
    if operation == "BatchGetItem":
        units = 0.0
        for table, ask in (request.get("RequestItems") or {}).items():
            found = (response.get("Responses") or {}).get(table) or []
            per = 1.0 if ask.get("ConsistentRead") else 0.5
            units += per * (
                sum(_reads(item_bytes(i)) for i in found) + max(0, len(ask.get("Keys") or []) - len(found))
            )
        return units, 0.0
    if operation == "TransactGetItems":
        return 2.0 * len(request.get("TransactItems") or []), 0.0
    if operation == "PutItem":
        return 0.0, float(_writes(item_bytes(request.get("Item") or {})))
    if operation in ("UpdateItem", "DeleteItem"):
        return 0.0, 1.0
    if operation == "BatchWriteItem":
        units = 0
        for writes in (request.get("RequestItems") or {}).values():
            for w in writes:
                put = w.get("PutRequest")
                units += _writes(item_bytes(put["Item"])) if put else 1
        return 0.0, float(units)
    if operation == "TransactWriteItems":
        units = 0
        for entry in request.get("TransactItems") or []:
            put = entry.get("Put")
            units += 2 * (_writes(item_bytes(put["Item"])) if put else 1)
        return 0.0, float(units)
    return 0.0, 0.0


def units_of(
    operation: str, request_body: bytes | str | None, response_body: bytes | None
) -> tuple[float, float]:
    """``request_units`` from raw bodies (what botocore sends and receives); ``(0, 0)`` if either is not JSON."""
    try:
        request = json.loads(request_body or "{}")
        response = json.loads(response_body or b"{}")
    except ValueError:
        return 0.0, 0.0
    return request_units(operation, request, response)
