"""DynamoDB-specific behaviour of ``DynamoDBMemoryStore`` under moto: requests per access pattern, no Scan,
concurrency, paging past 1 MB, large bodies in S3, TTL, error mapping, batches over one transaction.

The behaviour every store shares is in tests/contract/test_memory_store.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from memstack.adapters.dynamodb import DynamoDBMemoryStore
from memstack.errors import Conflict, PayloadTooLarge, Unavailable
from memstack.model import Message, ObservationRecord, Resource, TextPart, Thread
from memstack.ports import MessageWindow
from tests.contract.dynamodb_support import dynamodb_moto_store

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


class Calls:
    """Every botocore API call (any client, any thread) as ``(service, operation)``; a Scan fails the test."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def reset(self) -> None:
        with self.lock:
            self.log = []

    def dynamodb(self) -> list[str]:
        return [op for service, op in self.log if service == "dynamodb"]

    def s3(self) -> list[str]:
        return [op for service, op in self.log if service == "s3"]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    recorded = Calls()
    original = BaseClient._make_api_call

    def record(client: Any, operation: str, params: dict[str, Any]) -> Any:
        service = client.meta.service_model.service_name
        with recorded.lock:
            recorded.log.append((service, operation))
        if service == "dynamodb" and operation == "Scan":
            raise AssertionError("the DynamoDB store issued a Scan")
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", record)
    return recorded


@pytest.fixture
def store(calls: Calls) -> Iterator[DynamoDBMemoryStore]:
    with dynamodb_moto_store() as s:
        assert isinstance(s, DynamoDBMemoryStore)
        yield s
        s.close()


def thread(tid: str = "t1", rid: str = "r1", **kw: Any) -> Thread:
    return Thread(id=tid, resource_id=rid, created_at=T0, updated_at=T0, **kw)


def msg(mid: str, tid: str = "t1", rid: str = "r1", text: str = "hello", role: str = "user") -> Message:
    return Message(
        id=mid,
        thread_id=tid,
        resource_id=rid,
        role=role,  # type: ignore[arg-type]
        parts=(TextPart(text=text),),
        created_at=T0,
    )


def twin(store: DynamoDBMemoryStore) -> DynamoDBMemoryStore:
    """Another store on the same table and bucket (as another Lambda instance would be)."""
    bodies = store._bodies
    return DynamoDBMemoryStore(
        table_name=store.table_name, region="us-east-1", bucket=bodies.bucket if bodies else None
    )


def s3_keys(store: DynamoDBMemoryStore) -> list[str]:
    assert store._bodies is not None
    answer = store._bodies._client.list_objects_v2(Bucket=store._bodies.bucket)
    return [o["Key"] for o in answer.get("Contents", [])]


# requests per access pattern ------------------------------------------------------------------------


def test_given_a_full_workload_when_run_then_no_scan_is_ever_issued(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    store.create_thread(thread(metadata={"kind": "support"}))
    store.create_thread(thread("t2", metadata={"kind": "sales"}))
    store.save_messages("r1", "t1", [msg(f"m{i}") for i in range(6)])
    store.save_messages("r1", "t3", [msg("n1", "t3")], create=thread("t3"))
    store.list_threads("r1", metadata={"kind": "support"}, limit=1)
    store.list_threads("r1", order_by="updated_at", direction="asc")
    store.list_messages("r1", "t1", limit=3, after_seq=1)
    store.get_thread_with_history("r1", "t1", last=4)
    store.get_messages("r1", ["m1", "n1", "nope"])
    store.delete_messages("r1", ["m2"])
    store.message_windows("r1", [MessageWindow("t1", 3, 1, 1)])
    store.put_resource(Resource(id="r1", working_memory="# A"), expected_version=0)
    store.get_resource_and_windows("r1", [MessageWindow("t1", 5, 1, 0)])
    store.update_thread("r1", "t1", title="x", updated_at=T0, expected_version=0)
    store.put_observation_record(
        ObservationRecord(scope="resource", resource_id="r1", pending_since=T0), expected_version=0
    )
    store.list_observation_work(due_before=T0, limit=10)
    store.delete_thread("r1", "t1")
    assert "Scan" not in calls.dynamodb()
    assert len(calls.dynamodb()) > 20


def test_given_a_thread_when_its_head_is_read_then_exactly_one_query(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    store.create_thread(thread(title="Head"))
    store.save_messages("r1", "t1", [msg(f"m{i}") for i in range(10)])
    calls.reset()
    got, history = store.get_thread_with_history("r1", "t1", last=4)
    assert calls.dynamodb() == ["Query"]
    assert got is not None and got.title == "Head"
    assert [m.id for m in history] == ["m6", "m7", "m8", "m9"]


def test_given_an_existing_thread_when_a_turn_is_saved_then_one_batch_get_and_one_transaction(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    store.create_thread(thread())
    calls.reset()
    saved = store.save_messages("r1", "t1", [msg("u"), msg("a", role="assistant")])
    assert calls.dynamodb() == ["BatchGetItem", "TransactWriteItems"]
    assert [m.seq for m in saved] == [1, 2]


def test_given_windows_without_gaps_when_loaded_then_one_batch_get(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    store.create_thread(thread())
    store.create_thread(thread("t2"))
    store.save_messages("r1", "t1", [msg(f"a{i}") for i in range(8)])
    store.save_messages("r1", "t2", [msg(f"b{i}", "t2") for i in range(3)])
    store.put_resource(Resource(id="r1", working_memory="# A"), expected_version=0)
    windows = [MessageWindow("t1", 4, 2, 2), MessageWindow("t2", 3, 1, 3), MessageWindow("t1", 8, 0, 5)]
    calls.reset()
    found = store.message_windows("r1", windows)
    assert calls.dynamodb() == ["BatchGetItem"]
    assert [m.id for m in found] == ["a1", "a2", "a3", "a4", "a5", "a7", "b1", "b2"]
    calls.reset()
    resource, again = store.get_resource_and_windows("r1", windows)
    assert calls.dynamodb() == ["BatchGetItem"]
    assert resource is not None and resource.working_memory == "# A" and again == found


def test_given_a_gap_when_windows_loaded_then_only_the_short_window_is_queried(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg(f"m{i}") for i in range(9)])
    store.delete_messages("r1", ["m2"])
    calls.reset()
    found = store.message_windows("r1", [MessageWindow("t1", 4, 2, 0), MessageWindow("t1", 8, 1, 1)])
    assert calls.dynamodb() == ["BatchGetItem", "Query", "Query"]
    assert [m.id for m in found] == ["m0", "m1", "m3", "m6", "m7", "m8"]


# concurrency -----------------------------------------------------------------------------------------


def test_given_four_writers_when_each_saves_25_messages_then_seqs_are_exactly_1_to_100(
    store: DynamoDBMemoryStore,
) -> None:
    store.create_thread(thread())

    def writer(w: int) -> None:
        for i in range(25):
            store.save_messages("r1", "t1", [msg(f"w{w}-{i}")])

    workers = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert [m.seq for m in store.list_messages("r1", "t1", limit=1000)] == list(range(1, 101))


def test_given_two_processes_when_writing_one_thread_concurrently_then_seqs_stay_gap_free(
    store: DynamoDBMemoryStore,
) -> None:
    other = twin(store)  # its own local locks: only the condition expressions keep the seqs right
    store.create_thread(thread())

    def writer(s: DynamoDBMemoryStore, w: int) -> None:
        for i in range(12):
            s.save_messages("r1", "t1", [msg(f"w{w}-{i}")])

    workers = [threading.Thread(target=writer, args=(s, w)) for w, s in enumerate([store, other] * 2)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    listed = store.list_messages("r1", "t1", limit=1000)
    assert [m.seq for m in listed] == list(range(1, 49))
    assert len({m.id for m in listed}) == 48


def test_given_a_rival_write_between_read_and_commit_when_saving_then_it_rereads_and_retries(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    other = twin(store)
    store.create_thread(thread())
    commit = store._commit
    rivals: list[str] = []

    def commit_after_a_rival(plan: Any) -> None:
        if not rivals:
            rivals.append("rival")
            other.save_messages("r1", "t1", [msg("rival")])
        commit(plan)

    store._commit = commit_after_a_rival  # type: ignore[method-assign]
    calls.reset()
    saved = store.save_messages("r1", "t1", [msg("mine")])
    assert saved[0].seq == 2
    assert [(m.id, m.seq) for m in store.list_messages("r1", "t1", limit=5)] == [("rival", 1), ("mine", 2)]
    assert calls.dynamodb().count("TransactWriteItems") == 3  # the rival's, the lost one, the retry


# pagination and batches ------------------------------------------------------------------------------


def test_given_more_than_1_mb_of_messages_when_listed_then_every_page_is_followed(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    store.create_thread(thread())
    body = "x" * 5_000
    store.save_messages("r1", "t1", [msg(f"m{i:03d}", text=f"{i}{body}") for i in range(300)])
    calls.reset()
    listed = store.list_messages("r1", "t1", limit=1_000)
    assert [m.id for m in listed] == [f"m{i:03d}" for i in range(300)]
    assert calls.dynamodb().count("Query") >= 2  # DynamoDB pages stop at 1 MB
    _, history = store.get_thread_with_history("r1", "t1", last=300)
    assert [m.seq for m in history] == list(range(1, 301))


def test_given_a_batch_over_100_items_when_saved_then_consecutive_transactions_keep_seq_order(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    store.create_thread(thread())
    calls.reset()
    saved = store.save_messages("r1", "t1", [msg(f"m{i:03d}") for i in range(120)])
    assert calls.dynamodb().count("TransactWriteItems") == 3  # 49 + 49 + 22 messages (2 items each + meta)
    assert [m.seq for m in saved] == list(range(1, 121))
    assert [m.id for m in store.list_messages("r1", "t1", limit=500)] == [f"m{i:03d}" for i in range(120)]
    again = store.save_messages("r1", "t1", [msg(f"m{i:03d}", text="again") for i in range(120)])
    assert [m.seq for m in again] == list(range(1, 121))  # re-saving the batch upserts in place


def test_given_a_long_batch_with_a_foreign_id_at_its_end_when_saved_then_conflict_and_nothing_written(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    store.create_thread(thread())
    store.create_thread(thread("t2"))
    store.save_messages("r1", "t2", [msg("theirs", "t2")])
    calls.reset()
    with pytest.raises(Conflict):
        store.save_messages("r1", "t1", [msg(f"m{i:03d}") for i in range(80)] + [msg("theirs")])
    assert "TransactWriteItems" not in calls.dynamodb()
    assert store.list_messages("r1", "t1", limit=10) == []


# large messages --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["x" * 1_000_000, "🎉" * 1_000_000], ids=["ascii", "emoji"])
def test_given_a_million_character_message_when_saved_then_it_round_trips_byte_identical_via_s3(
    store: DynamoDBMemoryStore, calls: Calls, text: str
) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg("big", text=text), msg("small", text="hi")])
    (key,) = s3_keys(store)
    assert key.startswith("messages/") and "t1" not in key and "big" not in key  # ids are hashed
    listed = store.list_messages("r1", "t1", limit=5)
    assert listed[0].text.encode() == text.encode() and listed[1].text == "hi"
    assert store.get_messages("r1", ["big"])[0].text == text
    assert store.delete_thread("r1", "t1") is True
    assert s3_keys(store) == []


def test_given_a_large_message_when_upserted_or_deleted_then_its_old_body_objects_go(
    calls: Calls,
) -> None:
    with dynamodb_moto_store(inline_max_bytes=1_000) as store:
        assert isinstance(store, DynamoDBMemoryStore)
        store.create_thread(thread())
        store.save_messages("r1", "t1", [msg("big", text="a" * 2_000)])
        first = s3_keys(store)
        store.save_messages("r1", "t1", [msg("big", text="b" * 2_000)])
        second = s3_keys(store)
        assert len(first) == len(second) == 1 and first != second
        assert store.list_messages("r1", "t1", limit=5)[0].text == "b" * 2_000
        store.save_messages("r1", "t1", [msg("big", text="small now")])
        assert s3_keys(store) == []
        store.save_messages("r1", "t1", [msg("big", text="c" * 2_000)])
        assert [m.id for m in store.delete_messages("r1", ["big"])] == ["big"]
        assert s3_keys(store) == []


def test_given_ids_that_would_splice_into_one_key_when_one_owner_deletes_then_the_other_keeps_its_body(
    calls: Calls,
) -> None:
    # (thread "xU", message "y/zU") and (thread "xU/y", message "zU") read the same if ids were spliced
    with dynamodb_moto_store(inline_max_bytes=1_000) as store:
        assert isinstance(store, DynamoDBMemoryStore)
        body = "Secret A document. " * 200
        store.create_thread(thread("xU", "A"))
        store.save_messages("A", "xU", [msg("y/zU", "xU", "A", text=body)])
        store.create_thread(thread("xU/y", "B"))
        store.save_messages("B", "xU/y", [msg("zU", "xU/y", "B", text=body)])
        assert len(s3_keys(store)) == 2
        assert store.delete_thread("B", "xU/y") is True
        assert [m.text for m in store.list_messages("A", "xU", limit=5)] == [body]
        assert len(s3_keys(store)) == 1


def test_given_no_bucket_when_a_message_exceeds_the_item_limit_then_payload_too_large_and_nothing_written(
    calls: Calls,
) -> None:
    with dynamodb_moto_store(bucket=None) as store:
        store.create_thread(thread())
        with pytest.raises(PayloadTooLarge, match="limit"):
            store.save_messages("r1", "t1", [msg("ok"), msg("big", text="x" * 1_000_000)])
        assert store.list_messages("r1", "t1", limit=5) == []
        store.save_messages("r1", "t1", [msg("fits", text="y" * 300_000)])  # inline up to the item limit
        assert store.list_messages("r1", "t1", limit=5)[0].text == "y" * 300_000


# deletion that resumes -------------------------------------------------------------------------------


def _fail_nth(monkeypatch: pytest.MonkeyPatch, operation: str, nth: int) -> None:
    """Make the ``nth`` DynamoDB ``operation`` request of the test fail once with a 500."""
    recording = BaseClient._make_api_call
    seen = [0]

    def failing(client: Any, op: str, params: dict[str, Any]) -> Any:
        if client.meta.service_model.service_name == "dynamodb" and op == operation:
            seen[0] += 1
            if seen[0] == nth:
                error = {
                    "Error": {"Code": "InternalServerError"},
                    "ResponseMetadata": {"HTTPStatusCode": 500},
                }
                raise ClientError(error, op)  # type: ignore[arg-type]
        return recording(client, op, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", failing)


@pytest.fixture
def scannable_store() -> Iterator[DynamoDBMemoryStore]:
    """A store without the Scan trap: the remnants enumerator scans the table (test-side only)."""
    with dynamodb_moto_store() as s:
        assert isinstance(s, DynamoDBMemoryStore)
        yield s


@pytest.mark.parametrize(("operation", "nth"), [("BatchWriteItem", 2), ("TransactWriteItems", 1)])
def test_given_a_thread_deletion_that_fails_midway_when_deleted_again_then_nothing_of_it_remains(
    scannable_store: DynamoDBMemoryStore, monkeypatch: pytest.MonkeyPatch, operation: str, nth: int
) -> None:
    from tests.erase_support import remnants

    store = scannable_store
    store.create_thread(thread("t1", "erase-r1"))
    store.save_messages("erase-r1", "t1", [msg(f"m{i}", "t1", "erase-r1") for i in range(20)])
    store.put_observation_record(
        ObservationRecord(scope="thread", resource_id="erase-r1", thread_id="t1", pending_since=T0),
        expected_version=0,
    )
    _fail_nth(monkeypatch, operation, nth)
    with pytest.raises(Unavailable):
        store.delete_thread("erase-r1", "t1")
    assert store.get_thread("erase-r1", "t1") is not None  # still listed: the next call can find the rest

    assert store.delete_thread("erase-r1", "t1") is True

    assert remnants("erase-r1", store=store) == []
    assert store.list_observation_work(due_before=T0, limit=10) == []


def test_given_a_body_object_no_item_points_at_when_its_thread_is_deleted_then_the_object_goes_too(
    store: DynamoDBMemoryStore,
) -> None:
    from memstack.adapters.dynamodb.bodies import BodyStore

    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg("m1")])
    orphan = BodyStore.ref_for("r1", "t1", "lost", b"{}")  # a save that failed after its upload
    assert store._bodies is not None
    store._bodies.put(orphan, b"{}")
    store.create_thread(thread("t2"))
    kept = BodyStore.ref_for("r1", "t2", "other", b"{}")
    store._bodies.put(kept, b"{}")

    assert store.delete_thread("r1", "t1") is True

    assert s3_keys(store) == [kept.key]


# TTL and errors --------------------------------------------------------------------------------------


def test_given_a_message_ttl_when_saving_then_messages_and_pointers_carry_expires_at(calls: Calls) -> None:
    with dynamodb_moto_store(message_ttl_seconds=3_600) as store:
        assert isinstance(store, DynamoDBMemoryStore)
        store.create_thread(thread())
        store.save_messages("r1", "t1", [msg("m1")])
        model = store._model
        now = time.time()
        for key in (("T#2#r1#t1", "M#000000000001"), ("MID#2#r1#m1", "MID")):
            expires = model.get(*key, consistent_read=True).expires_at
            assert expires is not None and now + 3_500 < expires <= now + 3_601
        assert model.get("T#2#r1#t1", "THREAD").expires_at is None
        client = store._table.connection.client
        ttl = client.describe_time_to_live(TableName=store.table_name)["TimeToLiveDescription"]
        assert ttl["AttributeName"] == "expires_at" and ttl["TimeToLiveStatus"] == "ENABLED"


def test_given_no_ttl_when_saving_then_no_expires_at(store: DynamoDBMemoryStore) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg("m1")])
    assert store._model.get("T#2#r1#t1", "M#000000000001").expires_at is None


@pytest.mark.parametrize(
    "code", ["ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded"]
)
def test_given_dynamodb_throttles_when_reading_or_writing_then_unavailable(
    store: DynamoDBMemoryStore, monkeypatch: pytest.MonkeyPatch, code: str
) -> None:
    store.create_thread(thread())
    recording = BaseClient._make_api_call

    def throttled(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if client.meta.service_model.service_name == "dynamodb":
            error = {
                "Error": {"Code": code, "Message": "slow down"},
                "ResponseMetadata": {"HTTPStatusCode": 400},
            }
            raise ClientError(error, operation)  # type: ignore[arg-type]
        return recording(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", throttled)
    with pytest.raises(Unavailable):
        store.get_thread_with_history("r1", "t1", last=5)
    with pytest.raises(Unavailable):
        store.save_messages("r1", "t1", [msg("m1")])
    with pytest.raises(Unavailable):
        store.get_thread("r1", "t1")
    with pytest.raises(Unavailable):
        store.put_resource(Resource(id="r1"), expected_version=0)


def test_given_dynamodb_fails_with_a_5xx_when_listing_threads_then_unavailable(
    store: DynamoDBMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(client: Any, operation: str, params: dict[str, Any]) -> Any:
        error = {
            "Error": {"Code": "InternalServerError", "Message": "x"},
            "ResponseMetadata": {"HTTPStatusCode": 500},
        }
        raise ClientError(error, operation)  # type: ignore[arg-type]

    monkeypatch.setattr(BaseClient, "_make_api_call", broken)
    with pytest.raises(Unavailable):
        store.list_threads("r1")
    with pytest.raises(Unavailable):
        store.delete_messages("r1", ["m1"])


# observation work (the sweep's sparse index by_pending) -----------------------------------------------


def test_given_pending_records_when_work_is_listed_then_one_keys_only_query_per_shard(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    from memstack.adapters.dynamodb.items import PENDING_SHARDS

    for i in range(3):
        store.put_observation_record(
            ObservationRecord(scope="resource", resource_id=f"r{i}", pending_since=T0), expected_version=0
        )
    calls.reset()
    assert len(store.list_observation_work(due_before=T0, limit=100)) == 3
    assert calls.dynamodb() == ["Query"] * PENDING_SHARDS


def test_given_a_record_when_its_pending_since_is_set_then_cleared_then_it_enters_and_leaves_the_index(
    store: DynamoDBMemoryStore,
) -> None:
    from memstack.adapters.dynamodb.items import PENDING_PREFIX, observation_key

    record = ObservationRecord(scope="resource", resource_id="r1", pending_since=T0)
    stored = store.put_observation_record(record, expected_version=0)
    item = store._get(observation_key("r1", None))
    assert item is not None and (item.pending_pk or "").startswith(PENDING_PREFIX)
    assert item.pending_sk == "2024-05-01T12:00:00.000000Z#R#r1"
    store.put_observation_record(stored.model_copy(update={"pending_since": None}), expected_version=1)
    item = store._get(observation_key("r1", None))
    assert item is not None and (item.pending_pk, item.pending_sk) == (None, None)
    assert store.list_observation_work(due_before=T0, limit=10) == []


def test_given_a_store_with_a_bucket_when_only_small_messages_pass_then_no_s3_client_is_made() -> None:
    with dynamodb_moto_store() as s:
        assert isinstance(s, DynamoDBMemoryStore) and s._bodies is not None
        s.create_thread(thread())
        s.save_messages("r1", "t1", [msg("m1", text="hi")])
        assert [m.text for m in s.list_messages("r1", "t1", limit=5)] == ["hi"]
        assert s._bodies._made is None, "the S3 client was created though no body went to S3"
        s.save_messages("r1", "t1", [msg("m2", text="x" * 500_000)])
        assert s._bodies._made is not None
        s.close()


# index marks and the unindexed messages (the sparse index by_unindexed) -------------------------------


def test_given_a_saved_turn_when_its_messages_are_marked_then_one_transaction_writes_every_mark(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    store.save_messages("r1", "t1", [msg("u"), msg("a", role="assistant")], create=thread())
    calls.reset()
    missed = store.set_index_marks("r1", {"u": "fp-u", "a": "fp-a"}, documents={"u": ["d1"], "a": ["d2"]})
    assert missed == []
    assert calls.dynamodb() == ["TransactWriteItems"]


def test_given_250_marks_when_set_then_three_transactions_of_at_most_100(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    ids = [f"m{n}" for n in range(250)]
    for start in range(0, len(ids), 45):
        store.save_messages("r1", "t1", [msg(i) for i in ids[start : start + 45]], create=thread())
    calls.reset()
    assert store.set_index_marks("r1", {i: "fp" for i in ids}) == []
    assert calls.dynamodb() == ["TransactWriteItems"] * 3


def test_given_a_mark_whose_condition_fails_when_batched_then_the_rest_are_written_in_a_second_transaction(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    store.save_messages("r1", "t1", [msg("m1"), msg("m2"), msg("m3")], create=thread())
    calls.reset()
    missed = store.set_index_marks("r1", {"m1": "fp", "gone": "fp", "m3": "fp"})
    assert missed == ["gone"]
    assert calls.dynamodb() == ["TransactWriteItems", "TransactWriteItems"]
    assert store.get_index_marks("r1", ["m1", "m2", "m3"]) == {"m1": "fp", "m3": "fp"}


def test_given_unindexed_messages_when_listed_then_one_query_per_shard_and_the_oldest_save_first(
    store: DynamoDBMemoryStore, calls: Calls
) -> None:
    from memstack.adapters.dynamodb.items import UNINDEXED_SHARDS

    store.save_messages("r1", "t1", [msg("m1")], create=thread())
    store.save_messages("r2", "t9", [msg("m1", tid="t9", rid="r2")], create=thread("t9", rid="r2"))
    store.save_messages("r1", "t1", [msg("m0")])
    calls.reset()
    # limit 64: pages of 4 a shard, so three items need no second page in any shard
    assert store.list_unindexed(limit=64) == [("r1", "t1", "m1"), ("r2", "t9", "m1"), ("r1", "t1", "m0")]
    assert calls.dynamodb() == ["Query"] * UNINDEXED_SHARDS
    assert store.list_unindexed(limit=2) == [("r1", "t1", "m1"), ("r2", "t9", "m1")]


def test_given_a_message_when_saved_then_marked_then_its_pointer_enters_and_leaves_by_unindexed(
    store: DynamoDBMemoryStore,
) -> None:
    from memstack.adapters.dynamodb.items import UNINDEXED_PREFIX, pointer_key

    store.save_messages("r1", "t1", [msg("m1")], create=thread())
    item = store._get(pointer_key("r1", "m1"))
    assert item is not None and (item.unindexed_pk or "").startswith(UNINDEXED_PREFIX)
    assert (item.unindexed_sk or "").endswith(f"#{item.pk}")
    store.set_index_marks("r1", {"m1": "fp"}, documents={"m1": ["d1"]})
    item = store._get(pointer_key("r1", "m1"))
    assert item is not None and (item.unindexed_pk, item.unindexed_sk) == (None, None)


def test_given_an_indexer_marks_between_a_saves_read_and_commit_then_the_new_document_ids_are_kept(
    store: DynamoDBMemoryStore,
) -> None:
    # The save reads the pointer (documents d-old), then an indexer of the previous content marks it with
    # d-new (and deletes d-old from the search index), then the save commits. Only d-new is in the index
    # now, so the pointer must still name it for the next indexer to delete it.
    store.save_messages("r1", "t1", [msg("m1", text="first")], create=thread())
    store.set_index_marks("r1", {"m1": "fp-1"}, documents={"m1": ["d-old"]})
    real_commit = store._commit
    interleaved: list[bool] = []

    def commit_after_an_indexer(plan: Any) -> None:
        if not interleaved:
            interleaved.append(True)
            assert store.set_index_marks("r1", {"m1": "fp-2"}, documents={"m1": ["d-new"]}) == []
        real_commit(plan)

    store._commit = commit_after_an_indexer  # type: ignore[method-assign]
    store.save_messages("r1", "t1", [msg("m1", text="third")])

    assert interleaved
    state = store.get_index_state("r1", ["m1"])["m1"]
    assert state.documents == ("d-new",)
    assert state.fingerprint is None  # the save still clears the mark: its content is not indexed yet
    assert store.list_unindexed(limit=10) == [("r1", "t1", "m1")]
