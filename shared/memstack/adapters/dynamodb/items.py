"""The table's items as one generic PynamoDB model, built per table at run time, and their keys.

Single-table design (``docs/dynamodb.md``):

* thread meta   ``pk = T#{thread_id}``   ``sk = THREAD`` (sorts after ``M#…``: a descending query of the
  partition returns the meta first, then the newest messages)
* message       ``pk = T#{thread_id}``   ``sk = M#{seq:012d}``
* id pointer    ``pk = MID#{message_id}`` ``sk = MID`` (message ids are global)
* resource      ``pk = R#{resource_id}`` ``sk = RESOURCE``

Thread metas also carry the keys of the two listing indexes: ``gsi1pk = R#{resource_id}`` with
``created_key`` (index ``by_created``) and ``updated_key`` (index ``by_updated``), each
``{timestamp}#{thread_id}``.
"""

from __future__ import annotations

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

THREAD_SK = "THREAD"
POINTER_SK = "MID"
RESOURCE_SK = "RESOURCE"
MESSAGE_PREFIX = "M#"
THREAD_PREFIX = "T#"
SEQ_WIDTH = 12
MAX_SEQ = 10**SEQ_WIDTH - 1
BY_CREATED = "by_created"
BY_UPDATED = "by_updated"

Key = tuple[str, str]


def thread_pk(thread_id: str) -> str:
    return f"{THREAD_PREFIX}{thread_id}"


def thread_key(thread_id: str) -> Key:
    return thread_pk(thread_id), THREAD_SK


def message_sk(seq: int) -> str:
    return f"{MESSAGE_PREFIX}{seq:0{SEQ_WIDTH}d}"


def message_key(thread_id: str, seq: int) -> Key:
    return thread_pk(thread_id), message_sk(seq)


def pointer_key(message_id: str) -> Key:
    return f"MID#{message_id}", POINTER_SK


def resource_pk(resource_id: str) -> str:
    return f"R#{resource_id}"


def resource_key(resource_id: str) -> Key:
    return resource_pk(resource_id), RESOURCE_SK


def listing_key(timestamp: str, thread_id: str) -> str:
    """The sort key of a thread in a listing index: fixed-width timestamp, ``#``, id (so string order is
    ``(timestamp, id)`` order, the SQLite adapter's row order)."""
    return f"{timestamp}#{thread_id}"


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
    # id pointer
    thread_id = UnicodeAttribute(null=True)
    # resource
    working_memory = UnicodeAttribute(null=True)

    # PynamoDB gives every model class its own copy of these (bound to that class)
    by_created = ByCreated()
    by_updated = ByUpdated()


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
