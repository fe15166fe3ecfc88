"""Keys of the DynamoDB store: thread and message ids are scoped to their resource, so every key of a thread,
a message or an id pointer encodes (resource id, id) unambiguously — ids may hold ``#``, ``/`` or digits —
and so do the S3 keys of large bodies and the stream records the indexer reads.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest

from memstack.adapters.dynamodb import DynamoDBMemoryStore
from memstack.adapters.dynamodb.bodies import BodyStore
from memstack.adapters.dynamodb.items import (
    PENDING_SHARDS,
    POINTER_PREFIX,
    THREAD_PREFIX,
    message_key,
    observation_key,
    observation_owner,
    parse_scoped_pk,
    pending_bound,
    pending_pk,
    pending_shards,
    pending_sk,
    pointer_key,
    thread_id_of,
    thread_key,
)
from memstack.adapters.dynamodb.stream import message_change
from memstack.errors import InvalidInput
from memstack.model import Message, TextPart, Thread
from tests.contract.dynamodb_support import dynamodb_moto_store

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

# Ids that splice into the same strings if joined with "#" or "/": ("a#1", "2#t") and ("a", "1#2#t"),
# ("a/1", "2/t") and ("a", "1/2/t"), and ids that look like length prefixes.
TRICKY = ["a", "a#1", "1#2#t", "2#t", "#", "##", "1#a", "a/1", "1/2/t", "2/t", "/", "1", "12", "3#a#b", "x"]


def thread(tid: str, rid: str) -> Thread:
    return Thread(id=tid, resource_id=rid, created_at=T0, updated_at=T0)


def msg(mid: str, tid: str, rid: str, text: str) -> Message:
    return Message(
        id=mid, thread_id=tid, resource_id=rid, role="user", parts=(TextPart(text=text),), created_at=T0
    )


def test_given_ids_with_separators_when_keyed_then_every_pair_has_its_own_key_and_parses_back() -> None:
    pairs = list(itertools.product(TRICKY, repeat=2))
    threads = {thread_key(rid, tid) for rid, tid in pairs}
    pointers = {pointer_key(rid, mid) for rid, mid in pairs}
    bodies = {BodyStore.ref_for(rid, tid, "m", b"{}").key for rid, tid in pairs}
    bodies |= {BodyStore.ref_for("r", rid, mid, b"{}").key for rid, mid in pairs}
    assert len(threads) == len(pointers) == len(pairs) and len(bodies) == 2 * len(pairs)
    assert threads.isdisjoint(pointers)
    for rid, tid in pairs:
        pk, sk = thread_key(rid, tid)
        assert parse_scoped_pk(THREAD_PREFIX, pk) == (rid, tid) and thread_id_of(pk) == tid
        assert message_key(rid, tid, 7) == (pk, "M#000000000007") and sk == "THREAD"
        assert parse_scoped_pk(POINTER_PREFIX, pointer_key(rid, tid)[0]) == (rid, tid)
    assert thread_key("a#1", "2#t") == ("T#3#a#1#2#t", "THREAD")
    assert thread_key("a", "1#2#t") == ("T#1#a#1#2#t", "THREAD")
    assert pointer_key("a/1", "m") == ("MID#3#a/1#m", "MID")


@pytest.mark.parametrize("pk", ["T#", "T#x#a#b", "T#5#ab#c", "T#2#abc", "R#2#ab#c", "T#-1#a#b", "T#١#a#b"])
def test_given_keys_that_are_not_scoped_keys_when_parsed_then_none(pk: str) -> None:
    assert parse_scoped_pk(THREAD_PREFIX, pk) is None


def test_given_ids_too_long_together_for_a_dynamodb_key_then_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="2048 bytes"):
        pointer_key("🎉" * 256, "🎉" * 256)  # 2,048 bytes of ids alone
    assert len(pointer_key("🎉" * 256, "🎉" * 250)[0].encode()) <= 2048


def stream_record(
    store: DynamoDBMemoryStore, key: tuple[str, str], event: str, number: int
) -> dict[str, Any]:
    """The stream record DynamoDB would send for the stored item at ``key`` (its raw image)."""
    client = store._table.connection.client
    image = client.get_item(TableName=store.table_name, Key={"pk": {"S": key[0]}, "sk": {"S": key[1]}})[
        "Item"
    ]
    side = "OldImage" if event == "REMOVE" else "NewImage"
    keys = {"pk": {"S": key[0]}, "sk": {"S": key[1]}}
    return {"eventName": event, "dynamodb": {"Keys": keys, side: image, "SequenceNumber": str(number)}}


def test_given_two_resources_with_splicing_ids_when_used_then_items_bodies_and_stream_never_mix() -> None:
    # A = ("a#1", thread "2#t"), B = ("a", thread "1#2#t"): "a#1" + "#" + "2#t" == "a" + "#" + "1#2#t"
    a, b = ("a#1", "2#t"), ("a", "1#2#t")
    big_a, big_b = "A's secret. " * 200, "B's note. " * 200
    with dynamodb_moto_store(inline_max_bytes=1_000) as store:
        assert isinstance(store, DynamoDBMemoryStore)
        for (rid, tid), text in ((a, big_a), (b, big_b)):
            store.create_thread(thread(tid, rid))
            store.save_messages(rid, tid, [msg("m/1#", tid, rid, text), msg("#2", tid, rid, f"small {rid}")])
        # items: two thread partitions, four pointers
        for rid, tid in (a, b):
            assert [m.id for m in store.list_messages(rid, tid, limit=5)] == ["m/1#", "#2"]
            assert store._model.get(*thread_key(rid, tid)).resource_id == rid
            for mid in ("m/1#", "#2"):
                pointer = store._model.get(*pointer_key(rid, mid), consistent_read=True)
                assert (pointer.resource_id, pointer.thread_id) == (rid, tid)
        assert [m.text for m in store.get_messages(a[0], ["m/1#"])] == [big_a]
        assert [m.text for m in store.get_messages(b[0], ["m/1#"])] == [big_b]
        assert [t.id for t in store.list_threads(a[0]).threads] == [a[1]]
        assert [t.id for t in store.list_threads(b[0]).threads] == [b[1]]
        # S3: one object each
        assert store._bodies is not None
        listed = store._bodies._client.list_objects_v2(Bucket=store._bodies.bucket)
        objects = [o["Key"] for o in listed["Contents"]]
        assert len(objects) == 2 and all("#" not in k and k.count("/") == 4 for k in objects)
        # stream: each record names its own resource and thread
        records = [
            stream_record(store, message_key(rid, tid, seq), "INSERT", n)
            for n, (rid, tid, seq) in enumerate([(*a, 1), (*b, 1), (*b, 2)])
        ]
        changes = [message_change(r) for r in records]
        assert [(c.resource_id, c.thread_id, c.message_id) for c in changes if c] == [
            (*a, "m/1#"),
            (*b, "m/1#"),
            (*b, "#2"),
        ]
        removal = stream_record(store, message_key(*a, 2), "REMOVE", 9)
        removed = message_change(removal)
        assert removed is not None and (removed.kind, removed.resource_id, removed.thread_id) == (
            "removed",
            *a,
        )
        # deleting B's thread leaves A's items and body
        assert store.delete_thread(*b) is True
        assert [m.text for m in store.list_messages(*a, limit=5)] == [big_a, "small a#1"]
        listed = store._bodies._client.list_objects_v2(Bucket=store._bodies.bucket)
        assert [o["Key"] for o in listed["Contents"]] == [store._model.get(*message_key(*a, 1)).body_s3]
        assert store.get_messages(b[0], ["m/1#", "#2"]) == []
        store.close()


def test_given_a_record_whose_image_names_another_resource_than_its_key_then_it_is_ignored() -> None:
    pk, sk = message_key("r1", "t1", 1)
    image = {"id": {"S": "m1"}, "resource_id": {"S": "r2"}}
    record = {
        "eventName": "INSERT",
        "dynamodb": {"Keys": {"pk": {"S": pk}, "sk": {"S": sk}}, "NewImage": image},
    }
    assert message_change({**record, "dynamodb": {**record["dynamodb"], "SequenceNumber": "1"}}) is None


def test_given_long_four_byte_thread_ids_when_created_and_listed_then_each_lists_once() -> None:
    with dynamodb_moto_store() as store:
        at = datetime(2024, 5, 1, tzinfo=UTC)
        ids = ["😀" * 256, "😀" * 255 + "😁", "short"]
        for tid in ids:
            store.create_thread(Thread(id=tid, resource_id="r1", created_at=at, updated_at=at))
        seen: list[str] = []
        cursor = None
        while True:
            page = store.list_threads("r1", limit=1, cursor=cursor)
            seen += [t.id for t in page.threads]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert sorted(seen) == sorted(ids)


def test_given_observation_keys_of_tricky_ids_when_parsed_then_the_owner_comes_back() -> None:
    for rid, tid in itertools.product(TRICKY, [*TRICKY, None]):
        pk, _ = observation_key(rid, tid)
        assert observation_owner(pk) == (rid, tid)
    assert observation_owner("MID#1#a#b") is None


def test_given_record_keys_when_sharded_then_each_lands_in_one_fixed_shard_and_all_shards_are_used() -> None:
    keys = [observation_key(f"r{i}", None)[0] for i in range(200)]
    shards = [pending_pk(k) for k in keys]
    assert shards == [pending_pk(k) for k in keys]  # stable (not Python's salted hash)
    assert set(shards) == set(pending_shards()) and len(pending_shards()) == PENDING_SHARDS


def test_given_pending_sort_keys_when_bounded_then_the_bound_time_is_included_and_later_ones_are_not() -> (
    None
):
    at, later = "2024-05-01T12:00:00.000000Z", "2024-05-01T12:00:00.000001Z"
    pk = observation_key("r" * 300, "t" * 256)[0]
    assert pending_sk(at, "T#1#a#b") < pending_bound(at) < pending_sk(later, "T#1#a#b")
    assert pending_sk(at, pk) < pending_bound(at)
    assert len(pending_sk(at, "\U0001f600" * 500).encode()) <= 1024  # DynamoDB's sort-key limit
