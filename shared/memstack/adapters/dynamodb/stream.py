"""Message changes read from the table's DynamoDB stream (the indexer's input).

Only message items (``pk = T#{n}#{resource_id}#{thread_id}``, ``sk = M#{seq}``, see docs/dynamodb.md) are
message changes; thread metas, id pointers and resources are ignored (the stack's event filter already drops
them, and this keeps replays and local runs safe without it). The resource and thread come from the key
(ids are per resource: the pair names the thread), the message id from the item's image.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from memstack.adapters.dynamodb.items import MESSAGE_PREFIX, THREAD_PREFIX, parse_scoped_pk


@dataclass(frozen=True, slots=True)
class MessageChange:
    """A message item written (``saved``: INSERT or MODIFY) or deleted (``removed``: REMOVE, also by TTL).

    ``seq`` is the message's place in its thread (the item's sort key); ``sequence_number`` is the stream
    record's, the identifier Lambda expects in ``batchItemFailures``.
    """

    kind: Literal["saved", "removed"]
    resource_id: str
    thread_id: str
    message_id: str
    sequence_number: str
    seq: int


def message_change(record: Mapping[str, Any]) -> MessageChange | None:
    """The message change of one stream record (Lambda event shape), or ``None`` for any other item or a
    record too malformed to name a message (logged by the caller, never retried forever)."""
    data = record.get("dynamodb") or {}
    keys = data.get("Keys") or {}
    pk = _string(keys.get("pk"))
    sk = _string(keys.get("sk"))
    scope = parse_scoped_pk(THREAD_PREFIX, pk)
    if scope is None or not sk.startswith(MESSAGE_PREFIX):
        return None
    resource_id, thread_id = scope
    removed = record.get("eventName") == "REMOVE"
    image = (
        data.get("OldImage" if removed else "NewImage") or data.get("NewImage") or data.get("OldImage") or {}
    )
    message_id = _string(image.get("id"))
    sequence = str(data.get("SequenceNumber") or "")
    seq = sk[len(MESSAGE_PREFIX) :]
    if not (message_id and resource_id and thread_id and sequence and seq.isdecimal()):
        return None
    if _string(image.get("resource_id")) not in ("", resource_id):
        return None  # an image that contradicts its key: not an item this store wrote
    return MessageChange(
        "removed" if removed else "saved", resource_id, thread_id, message_id, sequence, int(seq)
    )


def _string(value: Any) -> str:
    return value.get("S", "") if isinstance(value, Mapping) and isinstance(value.get("S"), str) else ""
