"""The table's items as one generic PynamoDB model, built per table at run time, and their keys.

Single-table design (``docs/dynamodb.md``). Thread and message ids are scoped to their resource, so their
partition keys carry both, length-prefixed: ``{n}`` is the resource id's length in characters (code
points), so ``{n}#{resource_id}#{id}`` reads back one way only, whatever characters the ids hold.

* thread meta   ``pk = T#{n}#{resource_id}#{thread_id}``    ``sk = THREAD`` (sorts after ``M#…``: a
  descending query of the partition returns the meta first, then the newest messages)
* message       ``pk = T#{n}#{resource_id}#{thread_id}``    ``sk = M#{seq:012d}``
* id pointer    ``pk = MID#{n}#{resource_id}#{message_id}`` ``sk = MID``
* resource      ``pk = R#{resource_id}``                     ``sk = RESOURCE``
* observations  ``pk = T#{n}#{resource_id}#{thread_id}``    ``sk = #OBS`` (thread scope) or
                ``pk = R#{resource_id}``                     ``sk = #OBS`` (resource scope): the
  observational-memory record (spec §2.9.2). ``#`` sorts before ``M#``, so in a thread partition the
  record sorts before every message, never between the messages and the meta; the head Query still
  bounds its sort key to ``M# … THREAD``.

Thread metas also carry the keys of the two listing indexes: ``gsi1pk = R#{resource_id}`` with
``created_key`` (index ``by_created``) and ``updated_key`` (index ``by_updated``), each
``{timestamp}#{thread_id}``.

Observation records carry the keys of the sparse index ``by_pending`` only while their
``pending_since`` is set: ``pending_pk = PENDING#{shard}`` (``shard`` in ``0 … PENDING_SHARDS - 1``, from
a SHA-256 of the item's ``pk``) and ``pending_sk = {pending_since}#{pk}`` (``listing_key``). The
background sweep queries each shard for ``pending_sk`` at or before a time and merges them.

Id pointers carry the keys of the sparse index ``by_unindexed`` only while their message has no index
mark: every save writes ``unindexed_pk = UNINDEXED#{shard}`` (``shard`` in ``0 … UNINDEXED_SHARDS - 1``,
from a SHA-256 of the pointer's ``pk``) and ``unindexed_sk = {saved_at}#{pk}``; the indexer's mark removes
them. The index projects ``thread_id``, so the reconciler reads ``(resource, thread, message)`` from it
alone.
"""

from __future__ import annotations

import hashlib

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex, IncludeProjection, KeysOnlyProjection
from pynamodb.models import Model

from memstack.errors import InvalidInput

THREAD_SK = "THREAD"
POINTER_SK = "MID"
RESOURCE_SK = "RESOURCE"
OBSERVATION_SK = "#OBS"
MESSAGE_PREFIX = "M#"
THREAD_PREFIX = "T#"
POINTER_PREFIX = "MID#"
RESOURCE_PREFIX = "R#"
MAX_PARTITION_KEY_BYTES = 2048
"""DynamoDB's limit on a partition key value (UTF-8 bytes)."""
SEQ_WIDTH = 12
MAX_SEQ = 10**SEQ_WIDTH - 1
BY_CREATED = "by_created"
BY_UPDATED = "by_updated"
BY_PENDING = "by_pending"
PENDING_PREFIX = "PENDING#"
PENDING_SHARDS = 4
"""Partitions of ``by_pending``: records with work pending spread over this many index keys, so no one
key takes every write of the records entering and leaving the index; the sweep queries each."""

BY_UNINDEXED = "by_unindexed"
UNINDEXED_PREFIX = "UNINDEXED#"
UNINDEXED_SHARDS = 16
"""Partitions of ``by_unindexed``. Every save writes its pointers into the index, so the shards spread
those writes: DynamoDB takes about 1,000 write units a second per index partition key, and an index that
cannot keep up throttles the table's writes."""

Key = tuple[str, str]


def scoped_pk(prefix: str, resource_id: str, item_id: str) -> str:
    """``{prefix}{len(resource_id)}#{resource_id}#{item_id}``: the partition key of an id scoped to its
    resource. Injective: the length says where the resource id ends, so no two (resource, id) pairs
    share a key, whatever ``#`` or other characters the ids hold.

    Raises:
        InvalidInput: the key would exceed DynamoDB's 2,048-byte partition-key limit (only ids of about
            510 four-byte characters together reach it), so such a pair can never be stored.
    """
    key = f"{prefix}{len(resource_id)}#{resource_id}#{item_id}"
    if len(key.encode("utf-8", "surrogatepass")) > MAX_PARTITION_KEY_BYTES:
        raise InvalidInput(
            f"the resource id and id are too long together for a DynamoDB key ({MAX_PARTITION_KEY_BYTES} bytes)",
            field="id",
        )
    return key


def parse_scoped_pk(prefix: str, pk: str) -> tuple[str, str] | None:
    """``(resource_id, id)`` of a key made by ``scoped_pk`` with this prefix, or ``None`` if it is not one."""
    if not pk.startswith(prefix):
        return None
    length, sep, rest = pk[len(prefix) :].partition("#")
    if not sep or not length.isascii() or not length.isdigit():
        return None
    size = int(length)
    if len(rest) < size + 1 or rest[size] != "#":
        return None
    return rest[:size], rest[size + 1 :]


def thread_pk(resource_id: str, thread_id: str) -> str:
    return scoped_pk(THREAD_PREFIX, resource_id, thread_id)


def thread_id_of(pk: str) -> str:
    """The thread id of a thread partition key (of a meta or a message item)."""
    parsed = parse_scoped_pk(THREAD_PREFIX, pk)
    if parsed is None:
        raise ValueError(f"not a thread partition key: {pk!r}")
    return parsed[1]


def thread_key(resource_id: str, thread_id: str) -> Key:
    return thread_pk(resource_id, thread_id), THREAD_SK


def message_sk(seq: int) -> str:
    return f"{MESSAGE_PREFIX}{seq:0{SEQ_WIDTH}d}"


def message_key(resource_id: str, thread_id: str, seq: int) -> Key:
    return thread_pk(resource_id, thread_id), message_sk(seq)


def pointer_key(resource_id: str, message_id: str) -> Key:
    return scoped_pk(POINTER_PREFIX, resource_id, message_id), POINTER_SK


def resource_pk(resource_id: str) -> str:
    return f"{RESOURCE_PREFIX}{resource_id}"


def resource_id_of(pk: str) -> str:
    """The resource id of a resource item's partition key."""
    return pk[len(RESOURCE_PREFIX) :]


def resource_key(resource_id: str) -> Key:
    return resource_pk(resource_id), RESOURCE_SK


def observation_key(resource_id: str, thread_id: str | None) -> Key:
    """The observation record's key: in the thread's partition (thread scope) or the resource's
    (``thread_id`` ``None``, resource scope)."""
    pk = resource_pk(resource_id) if thread_id is None else thread_pk(resource_id, thread_id)
    return pk, OBSERVATION_SK


LISTING_ID_BYTES = 900
"""Longest id (UTF-8 bytes) written whole into a listing key; index sort keys are limited to 1,024 bytes."""


def listing_key(timestamp: str, thread_id: str) -> str:
    """The sort key of a thread in a listing index: fixed-width timestamp, ``#``, id (so string order is
    ``(timestamp, id)`` order, the SQLite adapter's row order).

    An id over ``LISTING_ID_BYTES`` (up to 256 four-byte characters fit ``check_id``) is written as its
    first 800 bytes and a SHA-256 digest: the key stays unique and under DynamoDB's 1,024-byte limit; such
    ids sort by that prefix, then by digest, among threads of the same timestamp.
    """
    raw = thread_id.encode("utf-8", "surrogatepass")
    if len(raw) <= LISTING_ID_BYTES:
        return f"{timestamp}#{thread_id}"
    prefix = raw[:800].decode("utf-8", "ignore")
    return f"{timestamp}#{prefix}#{hashlib.sha256(raw).hexdigest()}"


def pending_pk(pk: str) -> str:
    """The ``by_pending`` partition of the observation record with this ``pk``: ``PENDING#{shard}``, the
    shard a stable hash of the key (the same record always lands in the same shard)."""
    return _shard(PENDING_PREFIX, pk, PENDING_SHARDS)


def pending_shards() -> list[str]:
    """Every ``by_pending`` partition key."""
    return [f"{PENDING_PREFIX}{shard}" for shard in range(PENDING_SHARDS)]


def pending_sk(timestamp: str, pk: str) -> str:
    """The ``by_pending`` sort key: ``{timestamp}#{pk}`` (``listing_key``: under 1,024 bytes, string
    order is ``(timestamp, pk)`` order)."""
    return listing_key(timestamp, pk)


def pending_bound(timestamp: str) -> str:
    """The exclusive upper bound of ``pending_sk`` values at or before ``timestamp``: every
    ``{timestamp}#…`` sorts below ``{timestamp}$`` (``#`` is 0x23, ``$`` 0x24), every later time above."""
    return f"{timestamp}$"


def unindexed_pk(pk: str) -> str:
    """The ``by_unindexed`` partition of the id pointer with this ``pk``: ``UNINDEXED#{shard}``, a stable
    hash of the key (a pointer saved again stays in its shard)."""
    return _shard(UNINDEXED_PREFIX, pk, UNINDEXED_SHARDS)


def unindexed_shards() -> list[str]:
    """Every ``by_unindexed`` partition key."""
    return [f"{UNINDEXED_PREFIX}{shard}" for shard in range(UNINDEXED_SHARDS)]


def _shard(prefix: str, pk: str, shards: int) -> str:
    """``{prefix}{n}``, ``n`` in ``0 … shards - 1`` from a SHA-256 of ``pk`` (stable across processes)."""
    digest = hashlib.sha256(pk.encode("utf-8", "surrogatepass")).digest()
    return f"{prefix}{int.from_bytes(digest[:8], 'big') % shards}"


def observation_owner(pk: str) -> tuple[str, str | None] | None:
    """``(resource_id, thread_id)`` of an observation record's ``pk`` (``thread_id`` ``None`` for a
    resource-scoped record), or ``None`` if it is neither kind of key."""
    if pk.startswith(THREAD_PREFIX):
        return parse_scoped_pk(THREAD_PREFIX, pk)
    if pk.startswith(RESOURCE_PREFIX):
        return resource_id_of(pk), None
    return None


class ByCreated(GlobalSecondaryIndex["Item"]):  # type: ignore[no-untyped-call]
    """Threads of a resource by ``(created_at, id)``."""

    class Meta:
        index_name = BY_CREATED
        projection = AllProjection()

    gsi1pk = UnicodeAttribute(hash_key=True)
    created_key = UnicodeAttribute(range_key=True)


class ByUpdated(GlobalSecondaryIndex["Item"]):  # type: ignore[no-untyped-call]
    """Threads of a resource by ``(updated_at, id)``."""

    class Meta:
        index_name = BY_UPDATED
        projection = AllProjection()

    gsi1pk = UnicodeAttribute(hash_key=True)
    updated_key = UnicodeAttribute(range_key=True)


class ByPending(GlobalSecondaryIndex["Item"]):  # type: ignore[no-untyped-call]
    """Observation records with work pending, by ``(pending_since, pk)`` within a shard (sparse: only
    records whose ``pending_since`` is set carry the keys). Keys only: the owner is parsed from ``pk``."""

    class Meta:
        index_name = BY_PENDING
        projection = KeysOnlyProjection()

    pending_pk = UnicodeAttribute(hash_key=True)
    pending_sk = UnicodeAttribute(range_key=True)


class ByUnindexed(GlobalSecondaryIndex["Item"]):  # type: ignore[no-untyped-call]
    """Id pointers of messages saved and not marked as indexed, by ``(saved_at, pk)`` within a shard
    (sparse: a save writes the keys, the index mark removes them). Projects ``thread_id`` besides the keys:
    the resource and message ids are parsed from ``pk``."""

    class Meta:
        index_name = BY_UNINDEXED
        projection = IncludeProjection(["thread_id"])

    unindexed_pk = UnicodeAttribute(hash_key=True)
    unindexed_sk = UnicodeAttribute(range_key=True)


class Item(Model):
    """Any item of the table; which attributes are set depends on the kind (told by ``sk``)."""

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    resource_id = UnicodeAttribute(null=True)
    # thread meta
    title = UnicodeAttribute(null=True)
    metadata = UnicodeAttribute(null=True)
    created_at = UnicodeAttribute(null=True)
    updated_at = UnicodeAttribute(null=True)
    version = NumberAttribute(null=True)
    last_seq = NumberAttribute(null=True)
    gsi1pk = UnicodeAttribute(null=True)
    created_key = UnicodeAttribute(null=True)
    updated_key = UnicodeAttribute(null=True)
    # message (and, for upserts and deletes, mirrored on its id pointer)
    id = UnicodeAttribute(null=True)
    role = UnicodeAttribute(null=True)
    body = UnicodeAttribute(null=True)
    body_s3 = UnicodeAttribute(null=True)
    body_size = NumberAttribute(null=True)
    body_sha256 = UnicodeAttribute(null=True)
    seq = NumberAttribute(null=True)
    expires_at = NumberAttribute(null=True)
    indexed = UnicodeAttribute(null=True)  # id pointers: fingerprint of the content last indexed
    index_docs = UnicodeAttribute(null=True)  # id pointers: JSON list of the chunks' search-index ids
    unindexed_pk = UnicodeAttribute(null=True)  # id pointers: keys of by_unindexed while unmarked
    unindexed_sk = UnicodeAttribute(null=True)
    # id pointer
    thread_id = UnicodeAttribute(null=True)
    # resource
    working_memory = UnicodeAttribute(null=True)
    # observation record: its content as compact JSON (``ObservationRecord.content_json``), and the keys
    # of ``by_pending`` while its ``pending_since`` is set
    record = UnicodeAttribute(null=True)
    pending_pk = UnicodeAttribute(null=True)
    pending_sk = UnicodeAttribute(null=True)

    # PynamoDB gives every model class its own copy of these (bound to that class)
    by_created = ByCreated()
    by_updated = ByUpdated()
    by_pending = ByPending()
    by_unindexed = ByUnindexed()


def item_model(table_name: str, *, region: str | None, host: str | None) -> type[Item]:
    """A model class bound to one table (PynamoDB keeps table, region and endpoint on the class)."""
    name, where, endpoint = table_name, region, host

    class TableItem(Item):
        class Meta:
            table_name = name
            region = where
            host = endpoint
            billing_mode = "PAY_PER_REQUEST"
            stream_view_type = "NEW_AND_OLD_IMAGES"  # the indexer reads message items from the stream
            # A turn must fail within API Gateway's 29 s, not hang: DynamoDB answers in milliseconds, so
            # 2 s to connect and 5 s to answer are generous; 3 attempts in all (botocore's standard
            # retries of throttling and 5xx) bound a dead endpoint at about 20 s.
            connect_timeout_seconds = 2
            read_timeout_seconds = 5
            max_retry_attempts = 2
            max_pool_connections = 32

    return TableItem
