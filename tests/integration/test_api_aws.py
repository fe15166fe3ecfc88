"""The REST API on the AWS backend: ``functions/api`` and ``functions/context`` handlers over DynamoDB + S3
(moto, in-process) and the OpenSearch test double (Serverless mode), configured only through settings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.events import Api, reset_process_state
from tests.opensearch_double import OpenSearchDouble

WM = {"working_memory": {"enabled": True}}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenSearchDouble]:
    from moto import mock_aws

    reset_process_state()
    for name in (
        "MEMSTACK_DYNAMODB_ENDPOINT_URL",
        "MEMSTACK_S3_ENDPOINT_URL",
        "MEMSTACK_AUTH",
        "MEMSTACK_INDEXING",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_REGION": "us-east-1",
        "MEMSTACK_BACKEND": "aws",
        "MEMSTACK_EMBEDDER": "hash",
        "MEMSTACK_TABLE": "memstack-api",
        "MEMSTACK_BUCKET": "memstack-api-bodies",
        "MEMSTACK_OPENSEARCH_SERVICE": "aoss",
        "MEMSTACK_CREATE_RESOURCES": "true",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws(), OpenSearchDouble("serverless") as double:
        monkeypatch.setenv("MEMSTACK_OPENSEARCH_ENDPOINT", double.url)
        yield double
        reset_process_state()


@pytest.fixture
def api(aws: OpenSearchDouble) -> Api:
    from functions.api.app import handler

    return Api(handler, "user-a")


def texts(messages: list[dict[str, Any]]) -> list[Any]:
    return [(m["role"], m["content"]) for m in messages]


def test_given_the_aws_backend_when_a_turn_loop_runs_then_the_next_context_sees_the_saved_turn(
    api: Api, aws: OpenSearchDouble
) -> None:
    from functions.context.app import handler as context_handler

    context = Api(context_handler, "user-a")
    first = context.post(
        "/v1/threads/trip/context", {"message": "I'm allergic to peanuts.", "instructions": "Be brief."}
    )
    assert first.status == 200, first.raw
    saved = api.post(
        "/v1/threads/trip/messages",
        {"messages": ["I'm allergic to peanuts.", {"role": "assistant", "content": "Noted."}]},
    )
    assert saved.status == 200, saved.raw
    second = context.post("/v1/threads/trip/context", {"message": "Any snack ideas?"})
    assert texts(second.body["messages"]) == [
        ("user", "I'm allergic to peanuts."),
        ("assistant", "Noted."),
        ("user", "Any snack ideas?"),
    ]
    other = context.post("/v1/threads/flight/context", {"message": "Remember my peanuts allergy?"})
    assert other.status == 200
    assert saved.body["messages"][0]["id"] in other.body["recalled_ids"], (
        "cross-thread recall through OpenSearch"
    )
    assert any(r.path.split("?")[0].endswith("/_msearch") for r in aws.requests)


def test_given_the_aws_backend_when_threads_are_paged_and_messages_deleted_then_as_on_sqlite(
    api: Api,
) -> None:
    for i in range(3):
        assert api.post("/v1/threads", {"id": f"t{i}"}).status == 201
    first = api.get("/v1/threads", query={"limit": "2"})
    second = api.get("/v1/threads", query={"limit": "2", "cursor": first.body["next_cursor"]})
    assert len(first.body["threads"]) == 2 and len(second.body["threads"]) == 1
    assert second.body["next_cursor"] is None
    saved = api.post("/v1/threads/t0/messages", {"messages": ["a", "b"]}).body["messages"]
    assert api.post("/v1/messages/delete", {"message_ids": [saved[0]["id"]]}).body == {"deleted": 1}
    assert [m["id"] for m in api.get("/v1/threads/t0/messages").body["messages"]] == [saved[1]["id"]]


def test_given_the_aws_backend_when_the_models_tool_call_is_applied_then_working_memory_is_stored(
    api: Api,
) -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {
            "name": "updateWorkingMemory",
            "arguments": json.dumps({"memory": "# User\n- Diet: no peanuts"}),
        },
    }
    applied = api.post("/v1/threads/t1/working-memory/tool-calls", {"tool_call": call, "options": WM})
    assert applied.status == 200, applied.raw
    got = api.get("/v1/working-memory", query={"options": json.dumps(WM)})
    assert got.body["working_memory"] == "# User\n- Diet: no peanuts"
    ctx = api.post("/v1/threads/t1/context", {"message": "hi", "options": WM})
    assert "Diet: no peanuts" in ctx.body["system"][0]["text"]


def test_given_the_aws_backend_when_another_resource_reaches_for_a_thread_then_404_and_no_recall(
    api: Api,
) -> None:
    b = api.as_resource("user-b")
    saved = b.post("/v1/threads/b-thread/messages", {"messages": ["B's zebra secret"]}).body["messages"]
    assert api.get("/v1/threads/b-thread").status == 404
    assert api.get("/v1/threads/b-thread/messages").status == 404
    assert api.post("/v1/messages/delete", {"message_ids": [saved[0]["id"]]}).body == {"deleted": 0}
    include = json.dumps([{"id": saved[0]["id"], "before": 1, "after": 1}])
    api.post("/v1/threads/a-thread/messages", {"messages": ["mine"]})
    listed = api.get("/v1/threads/a-thread/messages", query={"include": include}).body["messages"]
    assert [m["parts"][0]["text"] for m in listed] == ["mine"]
    recall = api.post("/v1/threads/a-thread/recall", {"query": "zebra secret"})
    assert "zebra" not in recall.raw
    thread_wm = {"options": json.dumps({"working_memory": {"enabled": True, "scope": "thread"}})}
    assert api.get("/v1/threads/b-thread/working-memory", query=thread_wm).status == 404
    # ids are per resource: A saving into "b-thread" makes A's own thread and leaves B's alone
    mine = api.post("/v1/threads/b-thread/messages", {"messages": ["x"]})
    assert mine.status == 200 and "zebra" not in mine.raw
    assert [m["parts"][0]["text"] for m in api.get("/v1/threads/b-thread/messages").body["messages"]] == ["x"]
    theirs = b.get("/v1/threads/b-thread/messages").body["messages"]
    assert [m["id"] for m in theirs] == [saved[0]["id"]]


def test_given_the_aws_backend_when_cloning_onto_an_existing_thread_id_then_409(api: Api) -> None:
    assert api.post("/v1/threads/t/messages", {"messages": ["one"]}).status == 200
    assert api.post("/v1/threads", {"id": "t2"}).status == 201

    reply = api.post("/v1/threads/t/clone", {"new_thread_id": "t2"})

    assert (reply.status, reply.error["code"], reply.error["field"]) == (409, "conflict", "new_thread_id")
    assert api.get("/v1/threads/t2/messages").body["messages"] == []


def test_given_the_aws_backend_when_a_resource_is_erased_over_http_then_nothing_of_it_remains(
    api: Api, aws: OpenSearchDouble
) -> None:
    import memstack.bootstrap
    from memstack.model import ObservationRecord
    from tests.erase_support import remnants

    big = "a long letter about the harbour " * 4_000  # over the inline limit: the body goes to S3
    for owner in (api, api.as_resource("user-b")):
        assert owner.post("/v1/threads/trip/messages", {"messages": ["Lisbon", big]}).status == 200
        assert owner.put("/v1/working-memory", {"working_memory": "# User", "options": WM}).status == 204
    memory = memstack.bootstrap._memory
    assert memory is not None
    memory.store.put_observation_record(
        ObservationRecord(scope="thread", resource_id="user-a", thread_id="trip", pending_since=None),
        expected_version=0,
    )
    ids = [m["id"] for m in api.get("/v1/threads/trip/messages").body["messages"]]
    memory.index_saved(resource_id="user-a", thread_id="trip", message_ids=ids)  # as the stream indexer does
    before_b = sorted(remnants("user-b", store=memory.store, double=aws))
    assert remnants("user-a", store=memory.store, double=aws)

    reply = Api(api.handler, None).delete("/v1/resources/user-a")

    assert reply.status == 200, reply.raw
    counts = reply.body["counts"]
    assert (counts["threads"], counts["messages"], counts["working_memory"]) == (1, 2, 1)
    # the thread's own record, deleted with its thread; no resource-scope record existed
    assert counts["observation_records"] == 1 and counts["index_documents"] >= 2
    assert remnants("user-a", store=memory.store, double=aws) == []
    assert sorted(remnants("user-b", store=memory.store, double=aws)) == before_b
    again = Api(api.handler, None).delete("/v1/resources/user-a")
    assert set(again.body["counts"].values()) == {0}
