"""The ``indexer`` function with real DynamoDB stream records (moto) against the OpenSearch double in
Serverless mode: saves index, replays are free, deletes propagate, failures are reported per record."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstack import bootstrap
from memstack.memory import Memory
from tests.opensearch_double import OpenSearchDouble

ROOT = Path(__file__).resolve().parents[2]


def load_handler(name: str = "handler") -> Any:
    """A handler of functions/indexer/app.py: ``handler`` (the stream) or ``reconcile`` (the schedule)."""
    spec = importlib.util.spec_from_file_location("indexer_app", ROOT / "functions" / "indexer" / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Memory, OpenSearchDouble, Any]]:
    import boto3
    import moto

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",  # moto's DynamoDB Streams
        "MEMSTACK_BACKEND": "aws",
        "MEMSTACK_TABLE": "memstack-indexer",
        "MEMSTACK_BUCKET": "memstack-indexer-bodies",
        "MEMSTACK_OPENSEARCH_SERVICE": "aoss",
        "MEMSTACK_CREATE_RESOURCES": "true",
        "MEMSTACK_EMBEDDER": "hash",
        "MEMSTACK_INDEXING": "stream",
    }.items():
        monkeypatch.setenv(name, value)
    with OpenSearchDouble("serverless") as double, moto.mock_aws():
        monkeypatch.setenv("MEMSTACK_OPENSEARCH_ENDPOINT", double.url)
        monkeypatch.setattr(bootstrap, "_memory", None)
        memory = bootstrap.memory_from_env()
        streams = StreamReader(boto3.client("dynamodb"), boto3.client("dynamodbstreams"), "memstack-indexer")
        yield memory, double, streams
        memory.close()
        monkeypatch.setattr(bootstrap, "_memory", None)


class StreamReader:
    """Reads the table's stream from where it last stopped, as Lambda would deliver it."""

    def __init__(self, dynamodb: Any, streams: Any, table: str) -> None:
        self.streams = streams
        self.arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        shard = streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"][0]["ShardId"]
        self.iterator = streams.get_shard_iterator(
            StreamArn=self.arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]

    def next_event(self) -> dict[str, Any]:
        answer = self.streams.get_records(ShardIterator=self.iterator)
        self.iterator = answer["NextShardIterator"]
        records = [
            {**r, "eventSource": "aws:dynamodb", "awsRegion": "us-east-1", "eventSourceARN": self.arn}
            for r in answer["Records"]
        ]
        return {"Records": records}


def docs(double: OpenSearchDouble, memory: Memory) -> list[str]:
    return sorted(d["message_id"] for d in double.documents(memory.index.name).values())  # type: ignore[attr-defined]


def test_given_saved_turns_when_the_stream_batch_is_handled_then_they_are_indexed_once(
    aws: tuple[Memory, OpenSearchDouble, Any],
) -> None:
    memory, double, stream = aws
    handler = load_handler()
    memory.save_messages(
        thread_id="t1",
        resource_id="r1",
        messages=[
            {"id": "u1", "role": "user", "content": "My dog Biscuit loves the beach"},
            {"id": "a1", "role": "assistant", "content": "Biscuit sounds like a happy dog"},
        ],
    )
    assert docs(double, memory) == []  # the save did not index (MEMSTACK_INDEXING=stream)
    event = stream.next_event()
    assert len(event["Records"]) >= 3  # two message items, their id pointers and the thread meta
    assert handler(event, None) == {"batchItemFailures": []}
    assert docs(double, memory) == ["a1", "u1"]
    found = memory.recall(thread_id="t9", resource_id="r1", query="what is the dog called")
    assert {h.message_id for h in found.hits} == {"a1", "u1"}

    double.clear_requests()
    assert handler(event, None) == {"batchItemFailures": []}  # Lambda delivers the batch again
    assert docs(double, memory) == ["a1", "u1"]
    assert not [r for r in double.requests if r.path.endswith("_bulk")], "a replay writes nothing"


def test_given_a_deleted_thread_when_its_remove_records_are_handled_then_the_index_forgets_it(
    aws: tuple[Memory, OpenSearchDouble, Any],
) -> None:
    memory, double, stream = aws
    handler = load_handler()
    memory.save_messages(thread_id="t1", resource_id="r1", messages=["first note", "second note"])
    memory.save_messages(thread_id="t2", resource_id="r1", messages=["other thread note"])
    handler(stream.next_event(), None)
    assert len(docs(double, memory)) == 3
    memory.store.delete_thread("r1", "t1")  # the store only: the stream carries the deletes
    event = stream.next_event()  # also the index marks written by the first batch (MODIFY of id pointers)
    removed = [r for r in event["Records"] if r["eventName"] == "REMOVE"]
    assert sum(r["dynamodb"]["Keys"]["sk"]["S"].startswith("M#") for r in removed) == 2
    assert handler(event, None) == {"batchItemFailures": []}
    remaining = docs(double, memory)
    assert len(remaining) == 1


def test_given_a_message_expired_by_ttl_when_its_remove_record_is_handled_then_its_words_find_nothing(
    aws: tuple[Memory, OpenSearchDouble, Any],
) -> None:
    """DynamoDB's TTL deletes the item and nothing else: the REMOVE record is all the indexer hears. The
    message after it carried the expired text in its keyword text (ADR 0015) and is indexed again."""
    memory, double, stream = aws
    handler = load_handler()
    saved = memory.save_messages(
        thread_id="t1", resource_id="r1", messages=["the walrus story", "a trumpet reply", "a glacier note"]
    )
    assert handler(stream.next_event(), None) == {"batchItemFailures": []}
    keyword = {"semantic_recall": {"mode": "keyword", "top_k": 5, "message_range": 0, "scope": "resource"}}

    def hits(query: str) -> list[str]:
        return [
            h.message_id
            for h in memory.recall(thread_id="t1", resource_id="r1", query=query, options=keyword).hits
        ]

    assert hits("walrus") == [saved[0].id, saved[1].id]  # the reply is found by the turn it answers
    memory.store.delete_messages("r1", [saved[0].id])  # what the TTL sweep does: the item, nothing more

    event = stream.next_event()
    assert [
        r["eventName"] for r in event["Records"] if r["dynamodb"]["Keys"]["sk"]["S"].startswith("M#")
    ] == ["REMOVE"]
    assert handler(event, None) == {"batchItemFailures": []}

    assert hits("walrus") == [], "the expired message's words do not stay in its successor's keyword text"
    assert hits("trumpet")[0] == saved[1].id
    assert sorted(docs(double, memory)) == sorted([saved[1].id, saved[2].id])


def test_given_opensearch_failing_when_handled_then_only_that_threads_records_are_reported(
    aws: tuple[Memory, OpenSearchDouble, Any],
) -> None:
    memory, double, stream = aws
    handler = load_handler()
    memory.save_messages(thread_id="t1", resource_id="r1", messages=["alpha note"])
    memory.save_messages(thread_id="t2", resource_id="r1", messages=["beta note"])
    event = stream.next_event()
    t1_records = [
        r["dynamodb"]["SequenceNumber"]
        for r in event["Records"]
        if r["dynamodb"]["Keys"]["pk"]["S"] == "T#2#r1#t1"
        and r["dynamodb"]["Keys"]["sk"]["S"].startswith("M#")
    ]
    from memstack.adapters.opensearch.client import DEFAULT_MAX_RETRIES

    # the first thread's first request fails through every transport retry
    double.fail_next_requests(503, count=DEFAULT_MAX_RETRIES + 1)
    result = handler(event, None)
    assert [f["itemIdentifier"] for f in result["batchItemFailures"]] == t1_records
    assert docs(double, memory) != []  # the other thread was indexed
    assert handler(event, None) == {"batchItemFailures": []}  # the retry completes it
    assert len(docs(double, memory)) == 2


def test_given_stream_records_given_up_on_when_the_schedule_reconciles_then_they_are_indexed_once(
    aws: tuple[Memory, OpenSearchDouble, Any],
) -> None:
    memory, double, stream = aws
    reconcile = load_handler("reconcile")
    memory.save_messages(thread_id="t1", resource_id="r1", messages=["alpha note", "beta note"])
    memory.save_messages(thread_id="t2", resource_id="r2", messages=["gamma note"])
    event = stream.next_event()  # the indexer failed on these until Lambda sent them to the dead letters
    assert docs(double, memory) == []

    assert reconcile({"limit": 100}, None) == {"chunks": 3}  # EventBridge's scheduled event input

    assert len(docs(double, memory)) == 3
    assert reconcile({"limit": 100}, None) == {"chunks": 0}  # healed: nothing left unindexed
    double.clear_requests()
    assert load_handler()(event, None) == {"batchItemFailures": []}  # a late replay of the records
    assert not [r for r in double.requests if r.path.endswith("_bulk")], "reconciled messages are marked"


def test_given_a_bad_limit_when_the_schedule_reconciles_then_invalid_input_naming_it(
    aws: tuple[Memory, OpenSearchDouble, Any],
) -> None:
    from memstack.errors import InvalidInput

    reconcile = load_handler("reconcile")
    for event in ({"limit": "many"}, {"limit": 0}, {"limit": 10_001}, {"limit": True}):
        with pytest.raises(InvalidInput, match="limit must be an integer from 1 to 10000"):
            reconcile(event, None)


def test_given_records_of_other_items_or_malformed_when_handled_then_they_are_ignored(
    aws: tuple[Memory, OpenSearchDouble, Any],
) -> None:
    _, _, _ = aws
    handler = load_handler()
    event = {
        "Records": [
            {"eventName": "INSERT", "dynamodb": {"Keys": {"pk": {"S": "R#r1"}, "sk": {"S": "RESOURCE"}}}},
            {
                "eventName": "INSERT",
                "dynamodb": {"Keys": {"pk": {"S": "T#2#r1#t1"}, "sk": {"S": "M#000000000001"}}},
            },
            {"eventName": "MODIFY"},
        ]
    }
    assert handler(event, None) == {"batchItemFailures": []}


# background observation (spec §2.9): the indexer schedules it per thread after indexing -------------

OM_ON = {"observational_memory": {"observation": {"message_tokens": 20, "buffer_tokens": False}}}


class Recorder:
    """Stands in for ``Memory.schedule_observation``; fails for the threads in ``failing``."""

    def __init__(self, failing: frozenset[str] = frozenset()) -> None:
        self.calls: list[tuple[str, str]] = []
        self.failing = failing

    def __call__(self, *, resource_id: str, thread_id: str) -> None:
        from memstack.errors import Unavailable

        self.calls.append((resource_id, thread_id))
        if thread_id in self.failing:
            raise Unavailable("Step Functions throttled StartExecution (ThrottlingException); retry later")


def with_options(memory: Memory, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]) -> Recorder:
    monkeypatch.setattr(memory, "options", memory.options.merged(options))
    recorder = Recorder()
    monkeypatch.setattr(memory, "schedule_observation", recorder)
    return recorder


def test_given_observational_memory_on_when_a_batch_is_indexed_then_each_thread_is_scheduled_once(
    aws: tuple[Memory, OpenSearchDouble, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, double, stream = aws
    recorder = with_options(memory, monkeypatch, OM_ON)
    memory.save_messages(thread_id="t1", resource_id="r1", messages=["alpha note", "alpha again"])
    memory.save_messages(thread_id="t2", resource_id="r1", messages=["beta note"])
    assert load_handler()(stream.next_event(), None) == {"batchItemFailures": []}
    assert sorted(recorder.calls) == [("r1", "t1"), ("r1", "t2")]
    assert len(docs(double, memory)) == 3


def test_given_observational_memory_off_when_a_batch_is_indexed_then_nothing_is_scheduled(
    aws: tuple[Memory, OpenSearchDouble, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, _, stream = aws
    recorder = with_options(memory, monkeypatch, {})
    memory.save_messages(thread_id="t1", resource_id="r1", messages=["alpha note"])
    assert load_handler()(stream.next_event(), None) == {"batchItemFailures": []}
    assert recorder.calls == []


def test_given_titles_on_and_semantic_recall_off_when_handled_then_it_still_schedules(
    aws: tuple[Memory, OpenSearchDouble, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, double, stream = aws
    recorder = with_options(memory, monkeypatch, {"semantic_recall": False, "generate_title": True})
    memory.save_messages(thread_id="t1", resource_id="r1", messages=["alpha note"])
    assert load_handler()(stream.next_event(), None) == {"batchItemFailures": []}
    assert recorder.calls == [("r1", "t1")]
    assert docs(double, memory) == []  # nothing indexed


def test_given_scheduling_failing_for_one_thread_then_only_its_records_are_reported(
    aws: tuple[Memory, OpenSearchDouble, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, _, stream = aws
    recorder = with_options(memory, monkeypatch, OM_ON)
    recorder.failing = frozenset({"t1"})
    memory.save_messages(thread_id="t1", resource_id="r1", messages=["alpha note", "alpha again"])
    memory.save_messages(thread_id="t2", resource_id="r1", messages=["beta note"])
    event = stream.next_event()
    t1_records = [
        r["dynamodb"]["SequenceNumber"]
        for r in event["Records"]
        if r["dynamodb"]["Keys"]["pk"]["S"] == "T#2#r1#t1"
        and r["dynamodb"]["Keys"]["sk"]["S"].startswith("M#")
    ]
    result = load_handler()(event, None)
    assert sorted(f["itemIdentifier"] for f in result["batchItemFailures"]) == sorted(t1_records)
    recorder.failing = frozenset()
    assert load_handler()(event, None) == {"batchItemFailures": []}  # Lambda's retry schedules it


def test_given_a_state_machine_when_turns_cross_the_threshold_then_one_execution_starts_per_state(
    aws: tuple[Memory, OpenSearchDouble, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real path: settings → StepFunctionsScheduler → StartExecution (moto), named by the job's key;
    a replayed batch starts nothing new."""
    import json

    import boto3

    _, _, stream = aws
    sfn = boto3.client("stepfunctions")
    arn = sfn.create_state_machine(
        name="observation",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
        roleArn="arn:aws:iam::123456789012:role/observation",
    )["stateMachineArn"]
    monkeypatch.setenv("MEMSTACK_OBSERVATION_STATE_MACHINE_ARN", arn)
    monkeypatch.setenv("MEMSTACK_OPTIONS", json.dumps(OM_ON))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-used")  # the chat model connects on first use only
    monkeypatch.setattr(bootstrap, "_memory", None)
    memory = bootstrap.memory_from_env()
    try:
        assert memory.options.observational_memory.enabled
        memory.save_messages(
            thread_id="t1",
            resource_id="r1",
            messages=["a long enough note about the beach and the dog " * 4, "and another one " * 6],
        )
        event = stream.next_event()
        assert load_handler()(event, None) == {"batchItemFailures": []}
        executions = sfn.list_executions(stateMachineArn=arn)["executions"]
        assert len(executions) == 1
        started = json.loads(sfn.describe_execution(executionArn=executions[0]["executionArn"])["input"])
        assert (started["resource_id"], started["thread_id"]) == ("r1", "t1")
        assert started["key"] == executions[0]["name"] and started["reason"] == "threshold"
        assert load_handler()(event, None) == {"batchItemFailures": []}  # a replay
        assert len(sfn.list_executions(stateMachineArn=arn)["executions"]) == 1
    finally:
        memory.close()
