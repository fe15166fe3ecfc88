"""The DynamoDB store's transfer methods (``MemoryStore.list_resource_ids`` and ``restore_*``): what
``memstack export``, ``memstack import`` and ``memstack reindex`` read and write. A mixin of
``DynamoDBMemoryStore``, kept apart from the request path.

``list_resource_ids`` is the store's one Scan (keys and ``resource_id`` projected; thread metas, resource
records and resource-scope observation records filtered in): an export of everything has to read every
resource, and no index lists resources. It serves operators' bulk jobs only, never a request.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pynamodb.exceptions import PutError, TransactWriteError
from pynamodb.transactions import TransactWrite

from memstack.adapters.dynamodb.codec import message_body, thread_item
from memstack.adapters.dynamodb.errors import lost_race, translate, translated
from memstack.adapters.dynamodb.items import (
    OBSERVATION_SK,
    RESOURCE_PREFIX,
    RESOURCE_SK,
    THREAD_SK,
    Item,
    message_key,
    observation_key,
    pending_pk,
    pending_sk,
    pointer_key,
    resource_id_of,
    resource_key,
    thread_key,
)
from memstack.adapters.stored import (
    check_resource_id_limit,
    check_restore_batch,
    dumps,
    ts,
)
from memstack.cursors import decode_cursor, encode_cursor
from memstack.errors import Conflict, NotFound
from memstack.model import Message, ObservationRecord, Resource, Thread, same_record, utcnow
from memstack.ports import ResourceIdPage

if TYPE_CHECKING:
    from pynamodb.connection.table import TableConnection


class DynamoDBTransfer:
    """``list_resource_ids`` and the ``restore_*`` methods over the store's table."""

    _model: type[Item]
    _table: TableConnection

    if TYPE_CHECKING:  # the store's own reads and its batched, reserved-seq message writes

        def get_thread(self, resource_id: str, thread_id: str) -> Thread | None: ...

        def get_resource(self, resource_id: str) -> Resource | None: ...

        def get_observation_record(
            self, resource_id: str, thread_id: str | None
        ) -> ObservationRecord | None: ...

        def _batch_get(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], Item]: ...

        def _write_reserved(
            self, resource_id: str, thread_id: str, messages: Sequence[Message], seqs: dict[str, int]
        ) -> list[Message]: ...

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """No snapshot: DynamoDB reads each item as it is when read (``TransactGetItems`` reads at most 100
        items together), so the block changes nothing and the reader orders its reads instead."""
        yield

    def list_resource_ids(self, *, limit: int, cursor: str | None = None) -> ResourceIdPage:
        """Scan requests of ``limit`` items (keys and ``resource_id`` projected) from the cursor's key
        until one finds a resource or the table ends; ids are de-duplicated within the page."""
        check_resource_id_limit(limit)
        m = self._model
        start: dict[str, Any] | None = None
        if cursor is not None:
            pk, sk = decode_cursor(cursor, 2)
            start = {"pk": {"S": pk}, "sk": {"S": sk}}
        wanted = m.sk.is_in(THREAD_SK, RESOURCE_SK) | (
            (m.sk == OBSERVATION_SK) & m.pk.startswith(RESOURCE_PREFIX)
        )
        ids: dict[str, None] = {}
        while True:
            with translated("list resources"):
                answer = self._table.scan(
                    filter_condition=wanted,
                    attributes_to_get=["pk", "sk", "resource_id"],
                    limit=limit,
                    exclusive_start_key=start,  # type: ignore[arg-type]  # a raw key map is accepted
                    consistent_read=True,
                )
            for raw in answer.get("Items", []):
                item = m.from_raw_data(raw)
                ids[item.resource_id if item.sk == THREAD_SK and item.resource_id else _owner(item)] = None
            start = answer.get("LastEvaluatedKey")
            if ids or start is None:
                break
        next_cursor = encode_cursor([start["pk"]["S"], start["sk"]["S"]]) if start is not None else None
        return ResourceIdPage(ids=tuple(ids), next_cursor=next_cursor)

    def restore_thread(self, thread: Thread) -> Thread:
        """PutItem of the meta as given (``attribute_not_exists(pk)``); a lost condition reads the stored
        thread and accepts it when equal."""
        item = thread_item(self._model, thread, updated_at=ts(thread.updated_at), last_seq=thread.last_seq)
        try:
            with translated("restore thread"):
                item.save(condition=self._model.pk.does_not_exist())
        except Conflict:
            stored = self.get_thread(thread.resource_id, thread.id)
            if stored is not None and same_record(stored, thread):
                return stored
            raise Conflict(
                f"thread {thread.id!r} of resource {thread.resource_id!r} exists with other content",
                field="thread_id",
            ) from None
        return thread

    def restore_messages(self, resource_id: str, thread_id: str, messages: Sequence[Message]) -> int:
        """One BatchGetItem (meta, id pointers, the items at the given seqs) to check, then the save path's
        transactions of up to 49 messages into the given seqs (the meta only condition-checked)."""
        meta_key = thread_key(resource_id, thread_id)
        pointers = {pointer_key(resource_id, m.id): m for m in messages}
        slots = {message_key(resource_id, thread_id, m.seq): m for m in messages}
        got = self._batch_get([meta_key, *pointers, *slots])
        meta = got.get(meta_key)
        if meta is None or meta.resource_id != resource_id:
            raise NotFound(f"thread {thread_id!r} not found", field="thread_id")
        check_restore_batch(resource_id, thread_id, messages, int(meta.last_seq or 0))
        for key, m in pointers.items():
            if (p := got.get(key)) is not None and (p.thread_id, int(p.seq or 0)) != (thread_id, m.seq):
                raise Conflict(
                    f"message {m.id!r} is stored in another thread or at another seq", field="messages.id"
                )
        for key, m in slots.items():
            if (held := got.get(key)) is not None and held.id != m.id:
                raise Conflict(
                    f"seq {m.seq} of thread {thread_id!r} holds another message", field="messages.seq"
                )
        fresh = [m for m in messages if pointer_key(resource_id, m.id) not in got]
        # a message stored exactly so is left as it is, index mark included (an import run again embeds
        # nothing); one stored otherwise keeps its seq and created_at in the save path
        again = [
            m
            for m in messages
            if pointer_key(resource_id, m.id) in got
            and not _same_item(got.get(message_key(resource_id, thread_id, m.seq)), m)
        ]
        self._write_reserved(resource_id, thread_id, fresh, {m.id: m.seq for m in fresh})
        if again:
            self._write_reserved(resource_id, thread_id, again, {})
        return len(fresh) + len(again)

    def restore_resource(self, resource: Resource) -> Resource:
        """PutItem of ``R#rid / RESOURCE`` as given (``attribute_not_exists(pk)``); an equal stored record
        is accepted."""
        now = ts(utcnow())
        item = self._model(
            *resource_key(resource.id),
            metadata=dumps(resource.metadata),
            version=resource.version,
            created_at=ts(resource.created_at) if resource.created_at else now,
            updated_at=ts(resource.updated_at) if resource.updated_at else now,
            working_memory=resource.working_memory,
        )
        try:
            with translated("restore resource"):
                item.save(condition=self._model.pk.does_not_exist())
        except Conflict:
            stored = self.get_resource(resource.id)
            if stored is not None and same_record(stored, resource):
                return stored
            raise Conflict(
                f"resource {resource.id!r} exists with other content", field="resource_id"
            ) from None
        got = self.get_resource(resource.id)
        assert got is not None
        return got

    def restore_observation_record(self, record: ObservationRecord) -> ObservationRecord:
        """PutItem of ``#OBS`` as given (with the ``by_pending`` keys while ``pending_since`` is set); in
        thread scope a TransactWriteItems with a ConditionCheck that the thread is this resource's."""
        content = record.check_size()
        rid, tid = record.resource_id, record.thread_id
        key = observation_key(rid, tid)
        m = self._model
        now = ts(utcnow())
        pending = record.pending_since
        item = m(
            *key,
            resource_id=rid,
            record=content,
            version=record.version,
            created_at=ts(record.created_at) if record.created_at else now,
            updated_at=ts(record.updated_at) if record.updated_at else now,
            pending_pk=pending_pk(key[0]) if pending is not None else None,
            pending_sk=pending_sk(ts(pending), key[0]) if pending is not None else None,
        )
        try:
            if tid is None:
                item.save(condition=m.pk.does_not_exist())
            else:
                with TransactWrite(connection=self._table.connection) as tx:
                    tx.condition_check(m, *thread_key(rid, tid), condition=m.resource_id == rid)
                    tx.save(item, condition=m.pk.does_not_exist())
        except (PutError, TransactWriteError) as exc:
            if not lost_race(exc):
                raise translate(exc, "restore observation record") from exc
            if tid is not None and self.get_thread(rid, tid) is None:
                raise NotFound(f"thread {tid!r} not found", field="thread_id") from None
            stored = self.get_observation_record(rid, tid)
            if stored is not None and same_record(stored, record):
                return stored
            raise Conflict(
                "the observation record exists with other content", field="observation_record"
            ) from None
        got = self.get_observation_record(rid, tid)
        assert got is not None
        return got


def _owner(item: Item) -> str:
    """The resource of a resource record or resource-scope observation record (``R#{resource_id}``)."""
    return item.resource_id or resource_id_of(item.pk)


def _same_item(item: Any, message: Message) -> bool:
    """Whether the message item ``item`` holds exactly ``message``: role, ``created_at`` and body (the JSON
    compared when inline, its SHA-256 when in S3)."""
    if item is None or item.id != message.id or item.role != message.role:
        return False
    if item.created_at != ts(message.created_at):
        return False
    body = message_body(message)
    if item.body is not None:
        return bool(json.loads(item.body) == json.loads(body))
    return bool(item.body_sha256 == hashlib.sha256(body.encode()).hexdigest())
