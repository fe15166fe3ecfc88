"""``MemoryStore`` on DynamoDB (PynamoDB), one table per deployment, large bodies in S3.

The key design, every access pattern and its requests, seq assignment under concurrency, pagination,
large messages, TTL and deletion are described in ``docs/dynamodb.md``. In short: a thread and its
messages share one partition (``T#{n}#{resource_id}#{thread_id}``, ``n`` the resource id's length; the meta
sorts after the messages), message ids are found through pointer items (``MID#{n}#{resource_id}#{message_id}``)
— thread and message ids are scoped to their resource — and resources are one item each
(``R#{resource_id}``).

No operation scans: every read is a GetItem, a Query of one partition or index key
(``list_observation_work`` and ``list_unindexed``: one per shard of the sparse ``by_pending`` and
``by_unindexed`` indexes), or a BatchGetItem of exact keys; writes are conditional
PutItem/UpdateItem/DeleteItem, TransactWriteItems, and BatchWriteItem for bulk deletes. Every write of a thread carries a condition on the thread's owner.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import random
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pynamodb.exceptions import PutError, TransactWriteError, UpdateError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.transactions import TransactWrite

from memstack.adapters.dynamodb.bodies import BodyRef, BodyStore
from memstack.adapters.dynamodb.clients import pynamodb_client
from memstack.adapters.dynamodb.codec import (
    message_body,
    message_from,
    metadata_matches,
    resource_from,
    thread_from,
    thread_item,
)
from memstack.adapters.dynamodb.errors import (
    cancellation_codes,
    error_code,
    lost_race,
    translate,
    translated,
)
from memstack.adapters.dynamodb.items import (
    MAX_SEQ,
    MESSAGE_PREFIX,
    OBSERVATION_SK,
    PENDING_SHARDS,
    POINTER_PREFIX,
    THREAD_SK,
    UNINDEXED_SHARDS,
    Item,
    Key,
    item_model,
    listing_key,
    message_key,
    message_sk,
    observation_key,
    observation_owner,
    parse_scoped_pk,
    pending_bound,
    pending_pk,
    pending_shards,
    pending_sk,
    pointer_key,
    resource_key,
    thread_id_of,
    thread_key,
    thread_pk,
    unindexed_pk,
    unindexed_shards,
)
from memstack.adapters.dynamodb.transfer import DynamoDBTransfer
from memstack.adapters.stored import check_last_seq, check_messages_kept, check_thread_update, dt, dumps, ts
from memstack.cursors import decode_cursor, encode_cursor
from memstack.errors import Conflict, InvalidInput, MemstackError, NotFound, PayloadTooLarge, Unavailable
from memstack.model import (
    Message,
    ObservationRecord,
    Resource,
    Thread,
    ThreadPage,
    check_observation_work_limit,
    utcnow,
)
from memstack.ports import Direction, IndexState, MessageWindow, ThreadErasure, ThreadOrder

log = logging.getLogger(__name__)

DEFAULT_INLINE_MAX_BYTES = 100 * 1024
"""With a bucket, message bodies larger than this (UTF-8 bytes of their JSON) are stored in S3."""

MAX_INLINE_BODY_BYTES = 380 * 1024
"""The largest body kept inside a DynamoDB item: the 400 KB item limit less room for keys and attributes.
Without a bucket, larger messages are refused with ``PayloadTooLarge``."""

TRANSACTION_MAX_ITEMS = 100
"""DynamoDB's cap on the items of one TransactWriteItems request."""

TRANSACTION_MAX_BYTES = 4 * 1024 * 1024
"""DynamoDB's cap on the total size of one TransactWriteItems request (4 MB)."""

_TRANSACTION_BUDGET = TRANSACTION_MAX_BYTES - 200 * 1024  # the thread meta (metadata ≤ 64 KB) and margin
_ITEM_OVERHEAD = 512  # attribute names, keys, numbers of a message or pointer item (beyond ids and body)
_BATCH_GET_KEYS = 100  # BatchGetItem's cap on keys per request
_BATCH_WRITE_ITEMS = 25  # BatchWriteItem's cap on requests per call
_LOCK_STRIPES = 64


@dataclass(slots=True)
class _Prepared:
    """A message to save, serialised once: its body and, when it goes to S3, the body's reference."""

    message: Message
    body: str
    data: bytes
    ref: BodyRef | None


@dataclass(slots=True)
class _Mark:
    """One index mark to write: the pointer's update, its condition and its size in a transaction."""

    message_id: str
    item: Item
    actions: list[Action]
    condition: Condition
    size: int


@dataclass(slots=True)
class _Plan:
    """What one transaction of ``save_messages`` writes, and what it returns."""

    creating: bool
    resource_id: str
    thread_id: str
    meta: Item
    read_last_seq: int
    last_seq: int
    updated_at: str
    reserved: bool
    saved_at: str
    writes: list[tuple[Item, Item, list[Action], Condition]] = field(default_factory=list)
    saved: list[Message] = field(default_factory=list)
    uploads: list[tuple[BodyRef, bytes]] = field(default_factory=list)
    stale_keys: list[str] = field(default_factory=list)


class DynamoDBMemoryStore(DynamoDBTransfer):
    """The AWS backend's ``MemoryStore`` (see ``memstack.ports.MemoryStore`` for the contract).

    Args:
        table_name: the single table (created by CDK in production, by ``create_table`` in dev and tests).
        region: AWS region; ``None`` lets botocore resolve it (``AWS_REGION``/``AWS_DEFAULT_REGION``).
        endpoint_url: a local DynamoDB endpoint (moto server, DynamoDB Local); ``None`` for AWS.
        bucket: S3 bucket for message bodies over ``inline_max_bytes``; ``None``: bodies stay inline up to
            ``MAX_INLINE_BODY_BYTES`` and larger messages raise ``PayloadTooLarge``.
        s3_endpoint_url: a local S3 endpoint; ``None`` for AWS.
        message_ttl_seconds: when set, messages (and their id pointers) carry ``expires_at`` (epoch
            seconds, save time + this) for DynamoDB's TTL; threads and resources never expire.
        inline_max_bytes: with a bucket, the largest body (UTF-8 bytes of its JSON) kept in the item;
            1 … ``MAX_INLINE_BODY_BYTES``.
        max_attempts: how often a write that lost a race to a concurrent writer is re-read and retried
            (jittered exponential backoff) before ``Conflict``.

    Raises:
        InvalidInput: an argument is out of range.
        Unavailable: the AWS clients cannot be built (no region, no credentials provider).

    Thread-safe: the core calls it from a thread pool. Nothing connects before the first call.
    """

    def __init__(
        self,
        *,
        table_name: str,
        region: str | None = None,
        endpoint_url: str | None = None,
        bucket: str | None = None,
        s3_endpoint_url: str | None = None,
        message_ttl_seconds: int | None = None,
        inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES,
        max_attempts: int = 10,
    ) -> None:
        if not table_name:
            raise InvalidInput("table_name must be a non-empty string", field="table_name")
        if not 1 <= inline_max_bytes <= MAX_INLINE_BODY_BYTES:
            raise InvalidInput(
                f"inline_max_bytes must be between 1 and {MAX_INLINE_BODY_BYTES}", field="inline_max_bytes"
            )
        if message_ttl_seconds is not None and message_ttl_seconds <= 0:
            raise InvalidInput("message_ttl_seconds must be positive", field="message_ttl_seconds")
        if max_attempts < 1:
            raise InvalidInput("max_attempts must be at least 1", field="max_attempts")
        self.table_name = table_name
        self._model = item_model(table_name, region=region, host=endpoint_url)
        with translated("connect to DynamoDB"):
            self._table = self._model._get_connection()
            pynamodb_client(self._table.connection)  # built here: PynamoDB's lazy creation is not thread-safe
        self._bodies = BodyStore(bucket, region=region, endpoint_url=s3_endpoint_url) if bucket else None
        self._ttl = message_ttl_seconds
        self._inline_max = inline_max_bytes if bucket else MAX_INLINE_BODY_BYTES
        self._max_attempts = max_attempts
        # Writers of one thread in this process take turns (fewer lost races); across processes the
        # condition expressions decide.
        self._locks = [threading.Lock() for _ in range(_LOCK_STRIPES)]

    # threads -------------------------------------------------------------------------------------

    def create_thread(self, thread: Thread) -> Thread:
        """Store a new thread (PutItem, condition: the key is free). Raises ``Conflict`` if the resource
        already has a thread with this id (the key holds the resource: another resource's id is no
        concern of this one)."""
        stamp = ts(thread.updated_at)
        item = thread_item(self._model, thread, updated_at=stamp, last_seq=0)
        try:
            with translated("create thread"):
                item.save(condition=self._model.pk.does_not_exist())
        except Conflict:
            raise Conflict(f"thread {thread.id!r} already exists", field="thread_id") from None
        return thread

    def get_thread(self, resource_id: str, thread_id: str) -> Thread | None:
        """One GetItem (strongly consistent); another resource's thread is ``None``."""
        item = self._get(thread_key(resource_id, thread_id))
        if item is None or item.resource_id != resource_id:
            return None
        return thread_from(item)

    def list_threads(
        self,
        resource_id: str,
        *,
        order_by: ThreadOrder = "created_at",
        direction: Direction = "desc",
        limit: int = 100,
        cursor: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> ThreadPage:
        """A Query of the ``by_created`` or ``by_updated`` index (eventually consistent), paged on until
        ``limit`` threads match ``metadata`` (filtered here) or the index ends.

        Raises:
            InvalidInput: a malformed cursor.
        """
        index = self._model.by_created if order_by == "created_at" else self._model.by_updated
        sort_attr = self._model.created_key if order_by == "created_at" else self._model.updated_key
        forward = direction == "asc"
        condition: Condition | None = None
        if cursor:
            key, last_id = decode_cursor(cursor, 2)
            bound = listing_key(key, last_id)
            condition = sort_attr > bound if forward else sort_attr < bound
        if limit <= 0:
            return ThreadPage(threads=())
        page_size = min(limit + 1, 500) if not metadata else 200
        matched: list[Item] = []
        with translated("list threads"):
            for item in index.query(
                f"R#{resource_id}", condition, scan_index_forward=forward, page_size=page_size
            ):
                if item.resource_id != resource_id or item.sk != THREAD_SK:
                    continue
                if metadata and not metadata_matches(_loads_object(item.metadata), metadata):
                    continue
                matched.append(item)
                if len(matched) > limit:
                    break
        threads = tuple(thread_from(i) for i in matched[:limit])
        next_cursor = None
        if len(matched) > limit:
            last = matched[limit - 1]
            stamp = last.created_at if order_by == "created_at" else last.updated_at
            next_cursor = encode_cursor([stamp, thread_id_of(last.pk)])
        return ThreadPage(threads=threads, next_cursor=next_cursor)

    def update_thread(
        self,
        resource_id: str,
        thread_id: str,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        updated_at: datetime,
        expected_version: int | None = None,
        expected_title: str | None = None,
        expected_created_at: datetime | None = None,
        expected_messages: Mapping[str, int] | None = None,
    ) -> Thread:
        """GetItem, then UpdateItem with the condition ``resource_id`` and ``version`` unchanged (the
        metadata merge is computed from what was read; a lost race is re-read and retried unless
        ``expected_version`` is given; the other conditions are checked again on every re-read). With
        ``expected_messages`` the update is one TransactWriteItems with a ConditionCheck per message item
        (its ``id`` at its seq), so a message deleted before the write cancels it.

        Raises:
            NotFound: the thread is missing or another resource's.
            Conflict: a condition of ``MemoryStore.update_thread`` does not hold (nothing is written).
        """
        for attempt in range(self._max_attempts):
            item = self._get(thread_key(resource_id, thread_id))
            if item is None or item.resource_id != resource_id:
                raise NotFound(f"thread {thread_id!r} not found", field="thread_id")
            current = thread_from(item)
            check_thread_update(
                current,
                expected_version=expected_version,
                expected_title=expected_title,
                expected_created_at=expected_created_at,
            )
            merged = {**current.metadata, **metadata} if metadata is not None else current.metadata
            new_title = current.title if title is None else title
            stamp = ts(updated_at)
            m = self._model
            actions: list[Action] = [
                m.title.set(new_title),
                m.metadata.set(dumps(merged)),
                m.updated_at.set(stamp),
                m.updated_key.set(listing_key(stamp, thread_id)),
                m.version.set(current.version + 1),
            ]
            condition = (m.resource_id == resource_id) & (m.version == current.version)
            try:
                self._update_thread_item(item, actions, condition, expected_messages)
            except (UpdateError, TransactWriteError) as exc:
                if not lost_race(exc):
                    raise translate(exc, "update thread") from exc
                if expected_messages:
                    kept = self._seqs(resource_id, thread_id, expected_messages)
                    check_messages_kept(thread_id, expected_messages, kept)
                if expected_version is not None:
                    if self.get_thread(resource_id, thread_id) is None:
                        raise NotFound(f"thread {thread_id!r} not found", field="thread_id") from None
                    raise Conflict(f"thread {thread_id!r} changed concurrently", field="version") from None
                self._pause(attempt)
                continue
            return current.model_copy(
                update={
                    "title": new_title,
                    "metadata": merged,
                    "updated_at": updated_at,
                    "version": current.version + 1,
                }
            )
        raise Conflict(f"thread {thread_id!r} kept changing; gave up after {self._max_attempts} attempts")

    def _update_thread_item(
        self, item: Item, actions: list[Action], condition: Any, expected_messages: Mapping[str, int] | None
    ) -> None:
        """The thread item's conditional update: UpdateItem, or with ``expected_messages`` one
        TransactWriteItems that also checks each message item holds its id (at most 99 messages)."""
        if not expected_messages:
            item.update(actions, condition=condition)
            return
        if len(expected_messages) >= TRANSACTION_MAX_ITEMS:
            raise InvalidInput(
                f"expected_messages holds more than {TRANSACTION_MAX_ITEMS - 1} messages",
                field="expected_messages",
            )
        m = self._model
        resource_id, thread_id = item.resource_id, thread_id_of(item.pk)
        with TransactWrite(connection=self._table.connection) as tx:
            for message_id, seq in expected_messages.items():
                tx.condition_check(m, *message_key(resource_id, thread_id, seq), condition=m.id == message_id)
            tx.update(item, actions, condition=condition)

    def _seqs(self, resource_id: str, thread_id: str, expected: Mapping[str, int]) -> dict[str, int]:
        """Message id → seq of the expected messages still stored at their seq (consistent reads)."""
        got = self._batch_get([message_key(resource_id, thread_id, seq) for seq in expected.values()])
        by_seq = {seq: mid for mid, seq in expected.items()}
        return {
            i.id: seq
            for (_, sk), i in got.items()
            if (seq := int(sk[len(MESSAGE_PREFIX) :])) in by_seq and i.id == by_seq[seq]
        }

    def delete_thread(self, resource_id: str, thread_id: str) -> bool:
        """``erase_thread``; ``False`` if the thread is missing or another resource's."""
        return self.erase_thread(resource_id, thread_id) is not None

    def erase_thread(self, resource_id: str, thread_id: str) -> ThreadErasure | None:
        """Query the thread's partition (keys only, every page); delete the messages' id pointers, then
        the messages (BatchWriteItem), then every S3 object under the thread's key prefix; last, in one
        TransactWriteItems, the meta (condition: no message arrived meanwhile, else loop) and the
        thread-scope observation record (``#OBS``, which leaves ``by_pending`` with it).

        The order makes a failed deletion resumable: while the meta exists the thread is listed and the
        next call finds whatever is left (a pointer goes before its message, so none is stranded), and
        the meta and ``#OBS`` go together (a record written meanwhile needs the meta, so none outlives the
        thread). ``None`` if the thread is missing or another resource's."""
        meta = self._get(thread_key(resource_id, thread_id))
        if meta is None or meta.resource_id != resource_id:
            return None
        m = self._model
        deleted = 0
        for attempt in range(self._max_attempts):
            with translated("delete thread"):
                items = list(
                    m.query(
                        thread_pk(resource_id, thread_id),
                        consistent_read=True,
                        attributes_to_get=["pk", "sk", "id", "body_s3", "last_seq", "resource_id"],
                        page_size=1_000,
                    )
                )
            metas = [i for i in items if i.sk == THREAD_SK]
            if not metas:
                return ThreadErasure(deleted)  # deleted concurrently
            if metas[0].resource_id != resource_id:
                return None
            messages = [i for i in items if i.sk.startswith(MESSAGE_PREFIX)]
            self._batch_delete([pointer_key(resource_id, i.id) for i in messages if i.id])
            self._batch_delete([(i.pk, i.sk) for i in messages])
            deleted += len(messages)
            if self._bodies is not None:
                self._bodies.delete_prefix(BodyStore.thread_prefix(resource_id, thread_id))
            try:
                with TransactWrite(connection=self._table.connection) as tx:
                    tx.delete(
                        metas[0],
                        condition=(m.last_seq == int(metas[0].last_seq or 0))
                        & (m.resource_id == resource_id),
                    )
                    tx.delete(m(*observation_key(resource_id, thread_id)))
            except TransactWriteError as exc:
                if not lost_race(exc):
                    raise translate(exc, "delete thread") from exc
                self._pause(attempt)
                continue
            log.debug("thread deleted", extra={"thread_id": thread_id, "messages": deleted})
            # The record, if the query saw it, went in the transaction (one written since needs the meta,
            # which the transaction's condition held).
            return ThreadErasure(deleted, sum(1 for i in items if i.sk == OBSERVATION_SK))
        raise Conflict(f"thread {thread_id!r} kept receiving messages; gave up deleting it")

    # messages ------------------------------------------------------------------------------------

    def save_messages(
        self,
        resource_id: str,
        thread_id: str,
        messages: Sequence[Message],
        *,
        create: Thread | None = None,
        expected_last_seq: int | None = None,
    ) -> list[Message]:
        """One BatchGetItem (thread meta + id pointers, consistent) and one TransactWriteItems (meta
        update conditioned on ``last_seq`` and owner, each message, each id pointer) per batch of up to
        49 messages / ~4 MB; a lost race is re-read and retried with jittered backoff.

        A batch over one transaction first reserves its ``seq`` range: one conditional UpdateItem moves
        the meta's ``last_seq`` past every new message of the batch (or the PutItem that creates the
        thread sets it there), so no other writer's message can land inside the range. The batch is
        then written as consecutive transactions in order, each atomic, into the reserved seqs. What a
        reader may see meanwhile is a prefix of the batch, in order, never another writer's message
        between two of its messages; a later writer's messages may already show after the range. A seq
        reserved for a message that is never written (the save failed, or the id was saved meanwhile by
        another writer and so kept its seq) stays a gap, as a deleted message's does. Saving the same
        batch again is safe (saves upsert by id) and completes a failed one, in new seqs for what was
        missing. Validation of the whole batch happens before anything is written.

        Raises:
            NotFound: the thread is missing (and ``create`` is ``None``) or another resource's.
            Conflict: an id belongs to a message of another thread, the thread kept changing, or the
                thread's last seq is not ``expected_last_seq``.
            PayloadTooLarge: a body is over ``MAX_INLINE_BODY_BYTES`` and no bucket is configured.
            InvalidInput: ``create`` is a thread with another id.
            MemstackError: a multi-transaction save that failed part way raises the error of the failed
                transaction with ``saved_ids`` and ``unsaved_ids`` set on it, and its message naming them.
        """
        if create is not None and create.id != thread_id:
            raise InvalidInput("create must be the thread being saved into", field="create")
        prepared = [self._prepare(resource_id, thread_id, i, m) for i, m in enumerate(messages)]
        chunks = _chunks(resource_id, thread_id, prepared)
        with self._locks[hash((resource_id, thread_id)) % _LOCK_STRIPES]:
            if len(chunks) == 1:
                saved = self._save_chunk(resource_id, thread_id, chunks[0], create, expected_last_seq)
            else:
                reserved = self._reserve(resource_id, thread_id, prepared, create, expected_last_seq)
                saved = self._save_reserved(resource_id, thread_id, chunks, reserved)
        log.debug(
            "messages saved",
            extra={"thread_id": thread_id, "messages": len(saved), "transactions": len(chunks)},
        )
        return saved

    def _reserve(
        self,
        resource_id: str,
        thread_id: str,
        prepared: list[_Prepared],
        create: Thread | None,
        expected_last_seq: int | None,
    ) -> dict[str, int]:
        """Check a multi-transaction batch and reserve the seqs of its new messages: message id → seq.

        Raises:
            NotFound, Conflict: as ``save_messages`` (nothing is written).
        """
        ids = list(dict.fromkeys(p.message.id for p in prepared))
        m = self._model
        for attempt in range(self._max_attempts):
            meta, pointers = self._read_for_save(resource_id, thread_id, ids)
            owner = meta.resource_id if meta is not None else (create.resource_id if create else None)
            if owner != resource_id:
                raise NotFound(f"thread {thread_id!r} not found", field="thread_id")
            for mid, pointer in pointers.items():
                if pointer.thread_id != thread_id:
                    raise Conflict(f"message {mid!r} belongs to another thread", field="messages.id")
            read_last = int(meta.last_seq or 0) if meta is not None else 0
            check_last_seq(thread_id, read_last, expected_last_seq)
            new = [i for i in ids if i not in pointers]
            last = read_last + len(new)
            # activity time: when the messages were saved, as a single-transaction save sets it
            updated = max(meta.updated_at or "" if meta is not None else "", ts(utcnow()))
            try:
                with translated("reserve message seqs"):
                    if meta is None:
                        assert create is not None
                        item = thread_item(m, create, updated_at=updated, last_seq=last)
                        item.save(condition=m.pk.does_not_exist())
                    else:
                        meta.update(
                            [
                                m.last_seq.set(last),
                                m.updated_at.set(updated),
                                m.updated_key.set(listing_key(updated, thread_id)),
                            ],
                            condition=(m.last_seq == read_last) & (m.resource_id == resource_id),
                        )
            except Conflict:
                log.debug(
                    "seq reservation lost a race", extra={"thread_id": thread_id, "attempt": attempt + 1}
                )
                self._pause(attempt)
                continue
            return {mid: read_last + 1 + n for n, mid in enumerate(new)}
        raise Conflict(
            f"thread {thread_id!r} kept changing; gave up saving after {self._max_attempts} attempts",
            field="thread_id",
        )

    def _save_reserved(
        self, resource_id: str, thread_id: str, chunks: list[list[_Prepared]], reserved: dict[str, int]
    ) -> list[Message]:
        """Write the chunks in order into their reserved seqs; a failure names what was and was not saved."""
        saved: list[Message] = []
        for number, chunk in enumerate(chunks):
            try:
                saved += self._save_chunk(resource_id, thread_id, chunk, None, None, reserved)
            except MemstackError as exc:
                raise _partial(exc, saved, [p.message.id for c in chunks[number:] for p in c]) from exc
        return saved

    def _write_reserved(
        self, resource_id: str, thread_id: str, messages: Sequence[Message], seqs: dict[str, int]
    ) -> list[Message]:
        """Write ``messages`` into the seqs given for new ids (``seqs``; stored ids keep theirs) without
        moving the meta's ``last_seq``: ``restore_messages`` into a thread whose ``last_seq`` was restored."""
        if not messages:
            return []
        prepared = [self._prepare(resource_id, thread_id, i, m) for i, m in enumerate(messages)]
        with self._locks[hash((resource_id, thread_id)) % _LOCK_STRIPES]:
            return self._save_reserved(
                resource_id, thread_id, _chunks(resource_id, thread_id, prepared), seqs
            )

    def _prepare(self, resource_id: str, thread_id: str, index: int, message: Message) -> _Prepared:
        body = message_body(message)
        data = body.encode()
        if len(data) <= self._inline_max:
            return _Prepared(message, body, data, None)
        if self._bodies is None:
            raise PayloadTooLarge(
                f"messages[{index}] is {len(data)} bytes as JSON, over the limit of {MAX_INLINE_BODY_BYTES} "
                "bytes that fits in a DynamoDB item (400 KB); configure a bucket for large messages",
                field=f"messages[{index}]",
            )
        return _Prepared(message, body, data, BodyStore.ref_for(resource_id, thread_id, message.id, data))

    def _read_for_save(
        self, resource_id: str, thread_id: str, ids: list[str]
    ) -> tuple[Item | None, dict[str, Item]]:
        """The thread meta and the id pointers (by message id) that exist among ``ids``: one BatchGetItem."""
        meta_key = thread_key(resource_id, thread_id)
        wanted = {pointer_key(resource_id, i): i for i in ids}
        got = self._batch_get([meta_key, *wanted])
        pointers = {mid: item for key, mid in wanted.items() if (item := got.get(key)) is not None}
        return got.get(meta_key), pointers

    def _save_chunk(
        self,
        resource_id: str,
        thread_id: str,
        chunk: list[_Prepared],
        create: Thread | None,
        expected_last_seq: int | None,
        reserved: dict[str, int] | None = None,
    ) -> list[Message]:
        # A body uploaded for a save that then fails stays in S3 unreferenced (harmless, content-addressed):
        # deleting it could race with a concurrent save of the same content that did commit.
        ids = list(dict.fromkeys(p.message.id for p in chunk))
        uploaded: set[str] = set()
        for attempt in range(self._max_attempts):
            meta, pointers = self._read_for_save(resource_id, thread_id, ids)
            plan = self._plan(resource_id, thread_id, chunk, meta, pointers, create, reserved)
            check_last_seq(thread_id, plan.read_last_seq, expected_last_seq)
            self._upload(plan, uploaded)
            try:
                self._commit(plan)
            except TransactWriteError as exc:
                if not lost_race(exc):
                    raise translate(exc, "save messages") from exc
                log.debug("save lost a race", extra={"thread_id": thread_id, "attempt": attempt + 1})
                self._pause(attempt)
                continue
            if self._bodies is not None and plan.stale_keys:
                self._bodies.delete_quietly(plan.stale_keys)
            return plan.saved
        raise Conflict(
            f"thread {thread_id!r} kept changing; gave up saving after {self._max_attempts} attempts",
            field="thread_id",
        )

    def _plan(
        self,
        resource_id: str,
        thread_id: str,
        chunk: list[_Prepared],
        meta: Item | None,
        pointers: dict[str, Item],
        create: Thread | None,
        reserved: dict[str, int] | None = None,
    ) -> _Plan:
        """The writes of one transaction. New ids take the next seqs after the meta's ``last_seq``, or,
        with ``reserved``, the seqs reserved for them (the meta's ``last_seq`` is then left alone)."""
        m = self._model
        if meta is None:
            if create is None or create.resource_id != resource_id:
                raise NotFound(f"thread {thread_id!r} not found", field="thread_id")
            read_last, current_updated = 0, ts(create.updated_at)
        else:
            if meta.resource_id != resource_id:
                raise NotFound(f"thread {thread_id!r} not found", field="thread_id")
            read_last, current_updated = int(meta.last_seq or 0), meta.updated_at or ""
        state: dict[str, tuple[int, str]] = {}
        for mid, pointer in pointers.items():
            if pointer.thread_id != thread_id:
                raise Conflict(f"message {mid!r} belongs to another thread", field="messages.id")
            state[mid] = (int(pointer.seq or 0), pointer.created_at or "")
        existed = set(state)
        # activity time: when the messages were saved (their created_at may lie in the past or future)
        updated = max(current_updated, ts(utcnow()))
        last = read_last
        saved: list[Message] = []
        final: dict[str, _Prepared] = {}
        for p in chunk:
            message = p.message
            if message.id in state:
                seq, created = state[message.id]
                saved.append(message.model_copy(update={"seq": seq, "created_at": dt(created)}))
            else:
                if reserved is not None:
                    if message.id not in reserved:  # it existed when the range was reserved
                        raise Conflict(
                            f"message {message.id!r} was deleted while the batch was being saved",
                            field="messages.id",
                        )
                    seq = reserved[message.id]
                else:
                    last += 1
                    seq = last
                state[message.id] = (seq, ts(message.created_at))
                saved.append(message.model_copy(update={"seq": seq}))
            final[message.id] = p
        if creating := meta is None:
            assert create is not None
            meta_item = thread_item(m, create, updated_at=updated, last_seq=last)
        else:
            meta_item = m(*thread_key(resource_id, thread_id))
        plan = _Plan(
            creating,
            resource_id,
            thread_id,
            meta_item,
            read_last,
            last,
            updated,
            reserved is not None,
            ts(utcnow()),
            saved=saved,
        )
        expires = int(time.time()) + self._ttl if self._ttl else None
        for mid, p in final.items():
            seq, created = state[mid]
            self._add_write(plan, p, seq, created, pointers.get(mid) if mid in existed else None, expires)
        return plan

    def _add_write(
        self,
        plan: _Plan,
        p: _Prepared,
        seq: int,
        created: str,
        pointer: Item | None,
        expires: int | None,
    ) -> None:
        """Add the message item, its pointer's update and the update's condition to ``plan`` (and the body
        upload).

        ``pointer`` is the message's pointer as read before the write, ``None`` for a new message: a new
        id must still be free, an existing one still this thread's with the body it had when read.

        The pointer is updated, not put: a save clears the index mark (and enters ``by_unindexed``) but
        never writes ``index_docs``, which only the indexer's mark sets. Copying the ids read here would
        lose the ones an indexer marks between this read and the commit, leaving their documents in the
        search index with nothing naming them."""
        m = self._model
        mid, thread_id, resource_id, ref = p.message.id, plan.thread_id, plan.resource_id, p.ref
        message_item = m(
            *message_key(resource_id, thread_id, seq),
            id=mid,
            resource_id=resource_id,
            role=p.message.role,
            created_at=created,
            seq=seq,
            body=p.body if ref is None else None,
            body_s3=ref.key if ref else None,
            body_size=ref.size if ref else None,
            body_sha256=ref.sha256 if ref else None,
            expires_at=expires,
        )
        key = pointer_key(resource_id, mid)
        pointer_item = m(*key)
        pointer_actions: list[Action] = [
            m.thread_id.set(thread_id),
            m.resource_id.set(resource_id),
            m.seq.set(seq),
            m.created_at.set(created),
            m.body_s3.set(ref.key) if ref else m.body_s3.remove(),
            m.expires_at.set(expires) if expires is not None else m.expires_at.remove(),
            m.indexed.remove(),
            m.unindexed_pk.set(unindexed_pk(key[0])),
            m.unindexed_sk.set(listing_key(plan.saved_at, key[0])),
        ]
        if pointer is not None:
            # still there, still ours (not deleted meanwhile), body unchanged since it was read
            old = pointer.body_s3
            same_body = m.body_s3 == old if old else m.body_s3.does_not_exist()
            condition = (m.thread_id == thread_id) & same_body
            if old and old != (ref.key if ref else None):
                plan.stale_keys.append(old)
        else:
            condition = m.pk.does_not_exist()  # nobody took the id meanwhile
        plan.writes.append((message_item, pointer_item, pointer_actions, condition))
        if ref is not None:
            plan.uploads.append((ref, p.data))

    def _upload(self, plan: _Plan, uploaded: set[str]) -> None:
        assert self._bodies is not None or not plan.uploads
        for ref, data in plan.uploads:
            if ref.key not in uploaded and self._bodies is not None:
                self._bodies.put(ref, data)
                uploaded.add(ref.key)

    def _commit(self, plan: _Plan) -> None:
        m = self._model
        with TransactWrite(connection=self._table.connection) as tx:
            for message_item, pointer_item, pointer_actions, condition in plan.writes:
                tx.save(message_item)
                tx.update(pointer_item, pointer_actions, condition=condition)
            if plan.creating:
                tx.save(plan.meta, condition=m.pk.does_not_exist())
            elif plan.reserved:
                # the reservation moved last_seq and updated_at already; the meta is only checked (still
                # there, still the resource's), so writers of later turns never fail these transactions
                tx.condition_check(
                    m,
                    *thread_key(plan.resource_id, plan.thread_id),
                    condition=m.resource_id == plan.resource_id,
                )
            else:
                tx.update(
                    plan.meta,
                    [
                        m.last_seq.set(plan.last_seq),
                        m.updated_at.set(plan.updated_at),
                        m.updated_key.set(listing_key(plan.updated_at, plan.thread_id)),
                    ],
                    condition=(m.last_seq == plan.read_last_seq)
                    & (m.resource_id == plan.resource_id)
                    & (m.updated_at <= plan.updated_at),
                )

    def list_messages(
        self,
        resource_id: str,
        thread_id: str,
        *,
        limit: int,
        after_seq: int | None = None,
        before_seq: int | None = None,
        newest_first: bool = False,
    ) -> list[Message]:
        """One Query of the thread's partition over the ``M#`` seq range (consistent), following
        ``LastEvaluatedKey`` until ``limit`` messages; another resource's thread yields ``[]``."""
        if limit <= 0:
            return []
        low = 1 if after_seq is None else max(after_seq + 1, 1)
        high = MAX_SEQ if before_seq is None else min(before_seq - 1, MAX_SEQ)
        if low > high:
            return []
        m = self._model
        items: list[Item] = []
        with translated("list messages"):
            for item in m.query(
                thread_pk(resource_id, thread_id),
                m.sk.between(message_sk(low), message_sk(high)),
                scan_index_forward=not newest_first,
                consistent_read=True,
                limit=limit,
                page_size=min(limit, 1_000),
            ):
                if item.resource_id != resource_id:
                    return []  # a thread's messages all share its owner
                items.append(item)
        return self._messages(items)

    def get_thread_with_history(
        self, resource_id: str, thread_id: str, *, last: int
    ) -> tuple[Thread | None, list[Message]]:
        """One Query of the thread's partition, descending, ``Limit = last + 1``, sort key between
        ``M#`` and ``THREAD``: the meta (it sorts after the messages) and the newest ``last`` messages,
        never the observation record (``#OBS`` sorts before them). ``last <= 0``: one GetItem."""
        if last <= 0:
            return self.get_thread(resource_id, thread_id), []
        m = self._model
        with translated("read thread history"):
            items = list(
                m.query(
                    thread_pk(resource_id, thread_id),
                    m.sk.between(MESSAGE_PREFIX, THREAD_SK),
                    scan_index_forward=False,
                    consistent_read=True,
                    limit=last + 1,
                    page_size=min(last + 1, 1_000),
                )
            )
        if not items or items[0].sk != THREAD_SK or items[0].resource_id != resource_id:
            return None, []
        return thread_from(items[0]), self._messages(items[:0:-1])

    def get_messages(self, resource_id: str, message_ids: Sequence[str]) -> list[Message]:
        """BatchGetItem of the id pointers, then BatchGetItem of the messages (100 keys a request)."""
        return self._messages(self._lookup(resource_id, message_ids)[1])

    def _lookup(self, resource_id: str, message_ids: Sequence[str]) -> tuple[list[Item], list[Item]]:
        """The id pointers and message items of this resource among ``message_ids``, in id order."""
        ids = list(dict.fromkeys(message_ids))
        got = self._batch_get([pointer_key(resource_id, i) for i in ids])
        found_pointers = [
            (i, p)
            for i in ids
            if (p := got.get(pointer_key(resource_id, i))) is not None and p.resource_id == resource_id
        ]
        pointers = [p for _, p in found_pointers]
        keys = {
            mid: message_key(resource_id, pointer.thread_id or "", int(pointer.seq or 0))
            for mid, pointer in found_pointers
        }
        found = self._batch_get(list(keys.values()))
        items = [
            item
            for mid, key in keys.items()
            if (item := found.get(key)) is not None and item.resource_id == resource_id and item.id == mid
        ]
        return pointers, items

    def message_windows(self, resource_id: str, windows: Sequence[MessageWindow]) -> list[Message]:
        """One BatchGetItem of the exact keys of every window (plus the metas of their threads, for the
        owner and last seq); only windows that come back short (gaps from deletions) are re-read exactly
        with a Query per side."""
        return self._windows(resource_id, windows, [])[1]

    def get_resource_and_windows(
        self, resource_id: str, windows: Sequence[MessageWindow]
    ) -> tuple[Resource | None, list[Message]]:
        """``message_windows`` with the resource's key in the same BatchGetItem (one request when the
        windows need at most 99 keys and have no gaps)."""
        key = resource_key(resource_id)
        got, messages = self._windows(resource_id, windows, [key])
        item = got.get(key)
        return (resource_from(item) if item is not None else None), messages

    def _windows(
        self, resource_id: str, windows: Sequence[MessageWindow], extra: list[Key]
    ) -> tuple[dict[Key, Item], list[Message]]:
        thread_ids = list(dict.fromkeys(w.thread_id for w in windows))
        keys: list[Key] = [*extra, *(thread_key(resource_id, t) for t in thread_ids)]
        for w in windows:
            low, high = _window_range(w)
            keys += [message_key(resource_id, w.thread_id, s) for s in range(low, high + 1)]
        if not keys:
            return {}, []
        got = self._batch_get(list(dict.fromkeys(keys)))
        last_seq = {
            t: int(meta.last_seq or 0)
            for t in thread_ids
            if (meta := got.get(thread_key(resource_id, t))) is not None and meta.resource_id == resource_id
        }
        found: dict[str, Item] = {}
        seqs: dict[str, set[int]] = {}
        for item in got.values():
            if not item.sk.startswith(MESSAGE_PREFIX):
                continue
            tid = thread_id_of(item.pk)
            if tid in last_seq and item.resource_id == resource_id:
                found.setdefault(item.id or "", item)
                seqs.setdefault(tid, set()).add(int(item.seq or 0))
        for w in windows:
            if w.thread_id not in last_seq:
                continue
            low, high = _window_range(w)
            wanted = set(range(low, min(high, last_seq[w.thread_id]) + 1))
            if wanted <= seqs.get(w.thread_id, set()):
                continue
            for item in self._exact_window(resource_id, w):
                found.setdefault(item.id or "", item)
        ordered = sorted(found.values(), key=lambda i: (thread_id_of(i.pk), int(i.seq or 0)))
        return got, self._messages(ordered)

    def _exact_window(self, resource_id: str, w: MessageWindow) -> list[Item]:
        """Up to ``before`` messages below the seq, and the seq itself plus up to ``after`` above it,
        skipping gaps (the SQLite adapter's exact read)."""
        m = self._model
        pk = thread_pk(resource_id, w.thread_id)
        items: list[Item] = []
        before, after = max(0, w.before), max(0, w.after)
        with translated("read message windows"):
            if before and w.seq > 1:
                items += m.query(
                    pk,
                    m.sk.between(message_sk(1), message_sk(min(w.seq - 1, MAX_SEQ))),
                    scan_index_forward=False,
                    consistent_read=True,
                    limit=before,
                )
            if w.seq <= MAX_SEQ:
                items += m.query(
                    pk,
                    m.sk.between(message_sk(max(w.seq, 1)), message_sk(MAX_SEQ)),
                    consistent_read=True,
                    limit=after + 1,
                )
        return [i for i in items if i.resource_id == resource_id]

    def delete_messages(self, resource_id: str, message_ids: Sequence[str]) -> list[Message]:
        """Look up as ``get_messages`` does, delete the messages and their id pointers (BatchWriteItem,
        unprocessed items retried), their S3 bodies, and move each thread's ``updated_at`` to now."""
        pointers, items = self._lookup(resource_id, message_ids)
        if not pointers:
            return []
        found = self._messages(items)
        keys: list[Key] = [(i.pk, i.sk) for i in items] + [(p.pk, p.sk) for p in pointers]
        self._batch_delete(keys)
        if self._bodies is not None:
            self._bodies.delete_quietly(i.body_s3 for i in items if i.body_s3)
        stamp = ts(utcnow())
        m = self._model
        for thread_id in dict.fromkeys(thread_id_of(i.pk) for i in items):
            try:
                m(*thread_key(resource_id, thread_id)).update(
                    [m.updated_at.set(stamp), m.updated_key.set(listing_key(stamp, thread_id))],
                    condition=(m.resource_id == resource_id) & (m.updated_at < stamp),
                )
            except UpdateError as exc:
                if not lost_race(exc):  # a later updated_at, or the thread is gone: nothing to do
                    raise translate(exc, "delete messages") from exc
        log.debug("messages deleted", extra={"resource_id": resource_id, "messages": len(found)})
        return found

    # resources -----------------------------------------------------------------------------------

    def get_index_marks(self, resource_id: str, message_ids: Sequence[str]) -> dict[str, str]:
        """The fingerprints of ``get_index_state``."""
        return {
            mid: state.fingerprint
            for mid, state in self.get_index_state(resource_id, message_ids).items()
            if state.fingerprint is not None
        }

    def get_index_state(self, resource_id: str, message_ids: Sequence[str]) -> dict[str, IndexState]:
        """BatchGetItem of the id pointers; the mark lives on the pointer (every save updates the pointer,
        removing the fingerprint and leaving ``index_docs`` as the indexer wrote it; a delete removes it)."""
        ids = list(dict.fromkeys(message_ids))
        got = self._batch_get([pointer_key(resource_id, i) for i in ids])
        return {
            mid: IndexState(p.indexed or None, tuple(json.loads(p.index_docs)) if p.index_docs else ())
            for mid in ids
            if (p := got.get(pointer_key(resource_id, mid))) is not None and p.resource_id == resource_id
        }

    def set_index_marks(
        self,
        resource_id: str,
        marks: dict[str, str],
        *,
        documents: Mapping[str, Sequence[str]] | None = None,
        expected: Mapping[str, str | None] | None = None,
    ) -> list[str]:
        """One TransactWriteItems of conditional updates of the id pointers per 100 marks (and ~4 MB of
        document ids), a lone mark one UpdateItem: each pointer must exist, be this resource's and, with
        ``expected``, still carry the expected mark. A mark also takes its pointer out of
        ``by_unindexed``.

        A transaction is all or nothing, so one cancelled for failed conditions is sent again without
        those pointers (they are the messages not marked); one cancelled by a concurrent save of the same
        pointers is retried with backoff.

        Raises:
            Conflict: the pointers kept changing under concurrent saves (``max_attempts`` tries).
        """
        m = self._model
        writes: list[_Mark] = []
        for mid, fingerprint in marks.items():
            actions: list[Action] = [
                m.indexed.set(fingerprint),
                m.unindexed_pk.remove(),
                m.unindexed_sk.remove(),
            ]
            size = len(mid.encode()) + len(fingerprint) + _ITEM_OVERHEAD
            if documents is not None and mid in documents:
                docs = json.dumps(list(documents[mid]))
                actions.append(m.index_docs.set(docs))
                size += len(docs.encode())
            condition = m.pk.exists() & (m.resource_id == resource_id)
            if expected is not None:
                was = expected.get(mid)
                condition &= m.indexed.does_not_exist() if was is None else (m.indexed == was)
            writes.append(_Mark(mid, m(*pointer_key(resource_id, mid)), actions, condition, size))
        missed: list[str] = []
        for batch in _mark_batches(writes):
            missed += self._mark(batch)
        return missed

    def _mark(self, batch: list[_Mark]) -> list[str]:
        """Write one batch of marks; returns the ids whose condition failed."""
        missed: list[str] = []
        for attempt in range(self._max_attempts):
            if not batch:
                return missed
            try:
                if len(batch) == 1:
                    batch[0].item.update(batch[0].actions, condition=batch[0].condition)
                else:
                    with TransactWrite(connection=self._table.connection) as tx:
                        for mark in batch:
                            tx.update(mark.item, mark.actions, condition=mark.condition)
                return missed
            except (UpdateError, TransactWriteError) as exc:
                if not lost_race(exc):
                    raise translate(exc, "mark indexed") from exc
                codes = cancellation_codes(exc) or [
                    "TransactionConflict"
                    if error_code(exc) == "TransactionConflictException"
                    else "ConditionalCheckFailed"
                ]
                failed = {n for n, code in enumerate(codes) if code == "ConditionalCheckFailed"}
                missed += [mark.message_id for n, mark in enumerate(batch) if n in failed]
                batch = [mark for n, mark in enumerate(batch) if n not in failed]
                if not failed:  # only a concurrent transaction on these pointers: wait, then again
                    self._pause(attempt)
        if not batch:
            return missed
        raise Conflict(f"index marks kept colliding with saves; gave up after {self._max_attempts} attempts")

    def list_unindexed(self, *, limit: int) -> list[tuple[str, str, str]]:
        """``UnindexedMessages``: a Query of each ``by_unindexed`` shard (ascending, eventually
        consistent), merged oldest save first and cut at ``limit``; resource and message ids are parsed
        from the pointer's ``pk``, the thread id is projected. Shards are read lazily in pages of
        ``⌈limit / UNINDEXED_SHARDS⌉``. Never a Scan; crosses resources on purpose (the reconciler's sweep)."""
        if limit <= 0:
            return []
        m = self._model
        page = -(-limit // UNINDEXED_SHARDS)
        with translated("list unindexed messages"):
            shards = [
                m.by_unindexed.query(shard, limit=limit, page_size=page) for shard in unindexed_shards()
            ]
            items = list(itertools.islice(heapq.merge(*shards, key=lambda i: i.unindexed_sk or ""), limit))
        return [
            (owner[0], i.thread_id, owner[1])
            for i in items
            if (owner := parse_scoped_pk(POINTER_PREFIX, i.pk)) is not None and i.thread_id
        ]

    def get_resource(self, resource_id: str) -> Resource | None:
        """One GetItem (strongly consistent)."""
        item = self._get(resource_key(resource_id))
        return resource_from(item) if item is not None else None

    def put_resource(self, resource: Resource, *, expected_version: int) -> Resource:
        """UpdateItem with the condition ``version = expected_version`` (the key is free for version 0);
        ``created_at`` is kept from the first write.

        Raises:
            Conflict: the stored version differs (someone else wrote first).
        """
        now = utcnow()
        stamp = ts(now)
        m = self._model
        item = m(*resource_key(resource.id))
        actions: list[Action] = [
            m.metadata.set(dumps(resource.metadata)),
            m.version.set(expected_version + 1),
            m.updated_at.set(stamp),
            m.created_at.set(m.created_at | stamp),
            m.working_memory.remove()
            if resource.working_memory is None
            else m.working_memory.set(resource.working_memory),
        ]
        condition = m.pk.does_not_exist() if expected_version == 0 else (m.version == expected_version)
        try:
            item.update(actions, condition=condition)
        except UpdateError as exc:
            if lost_race(exc):
                raise Conflict(
                    f"resource {resource.id!r} changed (expected version {expected_version})", field="version"
                ) from None
            raise translate(exc, "put resource") from exc
        return resource.model_copy(
            update={
                "version": expected_version + 1,
                "created_at": dt(item.created_at or stamp),
                "updated_at": now,
            }
        )

    def delete_resource(self, resource_id: str) -> bool:
        """One DeleteItem of ``R#rid / RESOURCE`` asking for the old item (``ALL_OLD``): ``False`` when
        there was none."""
        return self._delete_item(resource_key(resource_id), "delete resource")

    # observational memory ----------------------------------------------------------------------

    def delete_observation_record(self, resource_id: str, thread_id: str | None) -> bool:
        """One DeleteItem of ``#OBS`` in the thread's or the resource's partition (``ALL_OLD``); deleting
        the item takes its ``by_pending`` keys out of the index."""
        return self._delete_item(observation_key(resource_id, thread_id), "delete observation record")

    def get_observation_record(self, resource_id: str, thread_id: str | None) -> ObservationRecord | None:
        """One GetItem (strongly consistent) of ``#OBS`` in the thread's or the resource's partition."""
        item = self._get(observation_key(resource_id, thread_id))
        if item is None or item.resource_id != resource_id or not item.record:
            return None
        return ObservationRecord.model_validate_json(item.record).model_copy(
            update={
                "version": int(item.version or 0),
                "created_at": dt(item.created_at) if item.created_at else None,
                "updated_at": dt(item.updated_at) if item.updated_at else None,
            }
        )

    def put_observation_record(
        self, record: ObservationRecord, *, expected_version: int
    ) -> ObservationRecord:
        """GetItem of the record (its version and ``created_at``), then a conditional write of the whole
        item (``attribute_not_exists(pk)`` for version 0, else ``version = :expected``). In thread scope
        the write is a TransactWriteItems with a ConditionCheck that the thread meta exists and is this
        resource's, so no record outlives its thread. 2 requests.

        Raises:
            Conflict: the stored version differs from ``expected_version`` (nothing is written).
            NotFound: thread scope and the thread is missing or another resource's.
            PayloadTooLarge: the record is over ``MAX_OBSERVATION_RECORD_BYTES`` (360 KiB, under the
                400 KB item limit with room for keys).
        """
        content = record.check_size()
        rid, tid = record.resource_id, record.thread_id
        key = observation_key(rid, tid)
        m = self._model
        current = self._get(key)
        stored = int(current.version or 0) if current is not None else 0
        if stored != expected_version:
            raise Conflict(
                f"observation record changed (version {stored}, expected {expected_version})", field="version"
            )
        now = utcnow()
        stamp = ts(now)
        created = (current.created_at if current is not None else None) or stamp
        # the whole item is put: without pending_since the index keys are absent and it leaves by_pending
        pending = record.pending_since
        item = m(
            *key,
            resource_id=rid,
            record=content,
            version=expected_version + 1,
            created_at=created,
            updated_at=stamp,
            pending_pk=pending_pk(key[0]) if pending is not None else None,
            pending_sk=pending_sk(_utc_ts(pending), key[0]) if pending is not None else None,
        )
        condition = m.pk.does_not_exist() if expected_version == 0 else (m.version == expected_version)
        try:
            if tid is None:
                item.save(condition=condition)
            else:
                with TransactWrite(connection=self._table.connection) as tx:
                    tx.condition_check(m, *thread_key(rid, tid), condition=m.resource_id == rid)
                    tx.save(item, condition=condition)
        except (PutError, TransactWriteError) as exc:
            if not lost_race(exc):
                raise translate(exc, "put observation record") from exc
            if tid is not None and self.get_thread(rid, tid) is None:
                raise NotFound(f"thread {tid!r} not found", field="thread_id") from None
            raise Conflict(
                f"observation record changed (expected version {expected_version})", field="version"
            ) from None
        return record.model_copy(
            update={"version": expected_version + 1, "created_at": dt(created), "updated_at": dt(stamp)}
        )

    def list_observation_work(self, *, due_before: datetime, limit: int) -> list[tuple[str, str | None]]:
        """A Query of each ``by_pending`` shard (``pending_sk < {due_before}$``, ascending, keys only,
        eventually consistent), merged oldest first and cut at ``limit``; the owner is parsed from each
        item's ``pk``. Shards are read lazily in pages of ``⌈limit / PENDING_SHARDS⌉`` following
        ``LastEvaluatedKey``, so about ``limit`` index entries are read in all, whichever shards hold them.
        Never a Scan. Crosses resources on purpose (see ``MemoryStore.list_observation_work``).

        Raises:
            InvalidInput: ``limit`` is not within 1..``MAX_OBSERVATION_WORK``.
        """
        check_observation_work_limit(limit)
        m = self._model
        bound = pending_bound(_utc_ts(due_before))
        page = -(-limit // PENDING_SHARDS)  # ceil: an even spread fills the limit in one page a shard
        with translated("list observation work"):
            shards = [
                m.by_pending.query(shard, m.pending_sk < bound, limit=limit, page_size=page)
                for shard in pending_shards()
            ]
            items = list(itertools.islice(heapq.merge(*shards, key=lambda i: i.pending_sk or ""), limit))
        return [owner for i in items if (owner := observation_owner(i.pk)) is not None]

    def close(self) -> None:
        """Close the DynamoDB and S3 clients' connections."""
        self._table.connection.client.close()
        if self._bodies is not None:
            self._bodies.close()

    # requests ------------------------------------------------------------------------------------

    def _get(self, key: Key) -> Item | None:
        with translated("read"):
            try:
                return self._model.get(*key, consistent_read=True)
            except self._model.DoesNotExist:
                return None

    def _delete_item(self, key: Key, action: str) -> bool:
        """DeleteItem of one key; ``True`` if an item was there (``ReturnValues=ALL_OLD``)."""
        with translated(action):
            answer = self._table.delete_item(*key, return_values="ALL_OLD")
        return bool(answer.get("Attributes"))

    def _batch_get(self, keys: list[Key]) -> dict[Key, Item]:
        """BatchGetItem of exact keys (consistent), 100 a request, UnprocessedKeys retried with backoff."""
        out: dict[Key, Item] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _BATCH_GET_KEYS):
            pending: list[Any] = [{"pk": pk, "sk": sk} for pk, sk in unique[start : start + _BATCH_GET_KEYS]]
            for attempt in range(self._max_attempts + 1):
                with translated("read"):
                    answer = self._table.batch_get_item(pending, consistent_read=True)
                for raw in answer.get("Responses", {}).get(self.table_name, []):
                    item = self._model.from_raw_data(raw)
                    out[(item.pk, item.sk)] = item
                left = answer.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", [])
                pending = [{"pk": k["pk"]["S"], "sk": k["sk"]["S"]} for k in left]
                if not pending:
                    break
                if attempt == self._max_attempts:
                    raise Unavailable("DynamoDB kept leaving keys unprocessed (throttled); retry later")
                self._pause(attempt)
        return out

    def _batch_delete(self, keys: Iterable[Key]) -> None:
        """BatchWriteItem deletes, 25 a request, UnprocessedItems retried with backoff."""
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _BATCH_WRITE_ITEMS):
            pending: list[dict[str, str]] = [
                {"pk": pk, "sk": sk} for pk, sk in unique[start : start + _BATCH_WRITE_ITEMS]
            ]
            for attempt in range(self._max_attempts + 1):
                try:
                    answer = self._table.batch_write_item(delete_items=pending)
                except PutError as exc:
                    raise translate(exc, "delete items") from exc
                left = answer.get("UnprocessedItems", {}).get(self.table_name, [])
                pending = [
                    {"pk": r["DeleteRequest"]["Key"]["pk"]["S"], "sk": r["DeleteRequest"]["Key"]["sk"]["S"]}
                    for r in left
                ]
                if not pending:
                    break
                if attempt == self._max_attempts:
                    raise Unavailable("DynamoDB kept leaving deletes unprocessed (throttled); retry later")
                self._pause(attempt)

    def _messages(self, items: Iterable[Item]) -> list[Message]:
        """The messages of message items, bodies fetched from S3 where they live there."""
        out: list[Message] = []
        for item in items:
            if item.body_s3:
                if self._bodies is None:
                    raise Unavailable(f"message {item.id!r} has its body in S3 but no bucket is configured")
                ref = BodyRef(item.body_s3, int(item.body_size or 0), item.body_sha256 or "")
                body = self._bodies.get(ref).decode()
            else:
                body = item.body or "{}"
            out.append(message_from(item, body))
        return out

    @staticmethod
    def _pause(attempt: int) -> None:
        """Full-jitter exponential backoff: up to 10 ms · 2^attempt, at most 1 s."""
        time.sleep(random.uniform(0, min(1.0, 0.01 * 2**attempt)))


def _chunks(resource_id: str, thread_id: str, prepared: list[_Prepared]) -> list[list[_Prepared]]:
    """Split a batch into transactions of at most 100 items (meta + 2 per distinct id) and ~4 MB."""
    chunks: list[list[_Prepared]] = [[]]
    ids: set[str] = set()
    size = 0
    # the message and its pointer each hold the resource id twice (key and attribute), the thread id and
    # the message id once
    scope_bytes = 2 * (2 * len(resource_id.encode()) + len(thread_id.encode()) + 300)
    for p in prepared:
        ids_bytes = scope_bytes + 2 * len(p.message.id.encode())
        cost = (len(p.data) if p.ref is None else 400) + ids_bytes + 2 * _ITEM_OVERHEAD
        new_id = p.message.id not in ids
        too_many = new_id and 1 + 2 * (len(ids) + 1) > TRANSACTION_MAX_ITEMS
        if chunks[-1] and (too_many or size + cost > _TRANSACTION_BUDGET):
            chunks.append([])
            ids, size = set(), 0
        chunks[-1].append(p)
        ids.add(p.message.id)
        size += cost
    return chunks


def _mark_batches(writes: list[_Mark]) -> Iterator[list[_Mark]]:
    """``writes`` in transactions of at most 100 items and ~4 MB (``index_docs`` lists can be long)."""
    batch: list[_Mark] = []
    size = 0
    for mark in writes:
        if batch and (len(batch) == TRANSACTION_MAX_ITEMS or size + mark.size > _TRANSACTION_BUDGET):
            yield batch
            batch, size = [], 0
        batch.append(mark)
        size += mark.size
    if batch:
        yield batch


def _partial(exc: MemstackError, saved: list[Message], unsaved: list[str]) -> MemstackError:
    """``exc`` of a multi-transaction save that failed part way, naming what was and was not saved (the
    saved ids are a prefix of the batch: its transactions are written in order)."""
    saved_ids = list(dict.fromkeys(m.id for m in saved))
    unsaved_ids = [i for i in dict.fromkeys(unsaved) if i not in set(saved_ids)]
    named = exc.restated(
        f"{exc.message}; saved {len(saved_ids)} messages ({_id_span(saved_ids)}), not saved "
        f"{len(unsaved_ids)} ({_id_span(unsaved_ids)}); saving the same batch again completes it"
    )
    named.saved_ids, named.unsaved_ids = saved_ids, unsaved_ids
    return named


def _id_span(ids: list[str]) -> str:
    if not ids:
        return "none"
    return ", ".join(ids) if len(ids) <= 3 else f"{ids[0]} … {ids[-1]}"


def _utc_ts(value: datetime) -> str:
    """``ts`` of a time, a naive one read as UTC (``ts`` alone would read it as local time)."""
    return ts(value if value.tzinfo is not None else value.replace(tzinfo=UTC))


def _window_range(w: MessageWindow) -> tuple[int, int]:
    """The seqs a window covers when there are no gaps (clamped to valid seqs)."""
    return max(1, w.seq - max(0, w.before)), min(MAX_SEQ, w.seq + max(0, w.after))


def _loads_object(text: str | None) -> dict[str, Any]:
    value = json.loads(text or "{}")
    return value if isinstance(value, dict) else {}
