"""End to end: ``memstack serve`` (a real subprocess on loopback, SQLite in a temporary folder, hash
embedder) driven over real HTTP by ``MemstackClient`` — an agent's whole turn loop, the error mapping, the
access log and a graceful shutdown."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memstack import Conflict, InvalidInput, NotFound, PayloadTooLarge
from memstack.client import MemstackClient
from tests.e2e.serve_support import Served, running_serve

SECRET = "my locker code is 4711"
WM_OPTIONS = {"working_memory": {"enabled": True}}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("serve")
    with running_serve(
        "--backend", "sqlite", "--db", str(folder / "memory.db"), "--embedder", "hash", cwd=folder
    ) as s:
        yield s


@pytest.fixture
def client(served: Served) -> Iterator[MemstackClient]:
    with MemstackClient(served.url, resource_id="user-42", timeout=30) as c:
        yield c


def model_calls_update_working_memory(memory: str) -> dict[str, object]:
    """What the OpenAI SDK hands back for a tool call (``message.tool_calls[0].model_dump()``)."""
    return {
        "id": "call_wm_1",
        "type": "function",
        "function": {"name": "updateWorkingMemory", "arguments": json.dumps({"memory": memory})},
    }


def test_given_a_served_api_when_an_agent_runs_turns_then_history_working_memory_and_recall_come_back(
    client: MemstackClient,
) -> None:
    assert client.health()["status"] == "ok"
    thread = client.create_thread(thread_id="trip-1", title="Trip")
    assert (thread.id, thread.resource_id) == ("trip-1", "user-42")

    # turn 1: context (nothing yet) → the model answers and updates working memory → save the turn
    first = client.context(
        thread_id="trip-1", message=SECRET, instructions="You are a travel assistant.", options=WM_OPTIONS
    )
    assert [m.text for m in first.messages] == [SECRET]
    assert [t["function"]["name"] for t in first.to_openai()["tools"]] == ["updateWorkingMemory"]
    tool_result = client.apply_tool_call(
        thread_id="trip-1",
        tool_call=model_calls_update_working_memory("# User\n- allergy: peanuts"),
        options=WM_OPTIONS,
    )
    assert tool_result.role == "tool"
    saved = client.save_messages(
        thread_id="trip-1",
        messages=[
            {"role": "user", "content": SECRET},
            {"role": "assistant", "content": "Noted, and no peanuts."},
        ],
    )
    assert [m.seq for m in saved] == [1, 2]

    # turn 2: the context shows the saved turn and the working memory
    second = client.context(
        thread_id="trip-1", message="Where is my locker?", options=WM_OPTIONS, count_tokens=True
    )
    assert [m.text for m in second.messages] == [SECRET, "Noted, and no peanuts.", "Where is my locker?"]
    assert set(second.history_ids) == {m.id for m in saved}
    assert any(s.kind == "working_memory" and "allergy: peanuts" in s.text for s in second.system)
    assert second.token_count > 0
    assert second.to_openai()["messages"][-1] == {"role": "user", "content": "Where is my locker?"}
    assert client.get_working_memory(thread_id="trip-1", options=WM_OPTIONS) == "# User\n- allergy: peanuts"

    # a new thread of the same user: recall brings the other thread's turn (indexed inline on save)
    found = client.recall(thread_id="trip-2", query="locker code")
    assert saved[0].id in {h.message_id for h in found.hits}
    fresh = client.context(thread_id="trip-2", message="What is my locker code?")
    assert saved[0].id in fresh.recalled_ids

    # list and delete
    listed = client.list_threads()
    assert [t.id for t in listed.threads] == ["trip-1"]
    assert [m.text for m in client.list_messages(thread_id="trip-1", last=1).messages] == [
        "Noted, and no peanuts."
    ]
    assert client.delete_messages(message_ids=[saved[1].id]) == 1
    client.delete_thread(thread_id="trip-1")
    with pytest.raises(NotFound):
        client.get_thread(thread_id="trip-1")
    assert client.recall(thread_id="trip-2", query="locker code").hits == []

    # erase the user: the working memory goes too, and a second erasure finds nothing
    client.save_messages(thread_id="trip-2", messages=["My seat is 14C."])
    receipt = client.erase_resource()
    assert (receipt.counts["threads"], receipt.counts["messages"], receipt.counts["working_memory"]) == (
        1,
        1,
        1,
    )
    assert client.list_threads().threads == ()
    assert client.get_working_memory(thread_id="trip-1", options=WM_OPTIONS) is None
    assert set(client.erase_resource().counts.values()) == {0}


def test_given_bad_requests_when_sent_over_http_then_the_library_exceptions_carry_code_and_field(
    client: MemstackClient,
) -> None:
    with pytest.raises(NotFound) as missing:
        client.get_thread(thread_id="no-such-thread")
    assert (missing.value.code, missing.value.field, missing.value.status) == ("not_found", "thread_id", 404)

    with pytest.raises(InvalidInput) as bad:
        client.list_threads(limit=0)
    assert (bad.value.code, bad.value.field, bad.value.status) == ("invalid_input", "limit", 400)

    with pytest.raises(InvalidInput) as system:
        client.save_messages(thread_id="t-bad", messages=[{"role": "system", "content": "x"}])
    assert system.value.field == "messages[0].role"

    client.create_thread(thread_id="dup")
    with pytest.raises(Conflict) as conflict:
        client.create_thread(thread_id="dup")
    assert conflict.value.status == 409

    with pytest.raises(PayloadTooLarge) as batch:
        client.save_messages(thread_id="t-big", messages=["x"] * 1001)
    assert (batch.value.code, batch.value.status) == ("payload_too_large", 413)

    with pytest.raises(PayloadTooLarge) as body:
        client.save_messages(thread_id="t-big", messages=["y" * (4 * 1024 * 1024 + 1)])
    assert (body.value.field, body.value.status) == ("body", 413)
    assert client.health()["status"] == "ok", "the server keeps serving after refusing a large body"


def test_given_raw_http_when_the_route_or_media_type_is_wrong_then_the_api_error_shape_answers(
    served: Served,
) -> None:
    with httpx.Client(base_url=served.url) as http:
        no_route = http.get("/v1/nothing-here", params={"resource_id": "u"})
        media = http.post(
            "/v1/threads",
            params={"resource_id": "u"},
            content=b"id=1",
            headers={"Content-Type": "text/plain"},
        )
        no_resource = http.get("/v1/threads")

    assert (no_route.status_code, no_route.json()["error"]["code"]) == (404, "not_found")
    assert (media.status_code, media.json()["error"]["code"]) == (415, "unsupported_media_type")
    assert (no_resource.status_code, no_resource.json()["error"]["field"]) == (400, "resource_id")


def test_given_requests_when_served_then_one_access_line_each_and_never_a_body(
    client: MemstackClient, served: Served
) -> None:
    client.context(thread_id="log-1", message=SECRET)

    deadline = time.monotonic() + 5  # the line follows the response; the reader thread follows the pipe
    while True:
        lines = [line for line in served.stderr if line.startswith("POST /v1/threads/log-1/context ")]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert len(lines) == 1, served.stderr[-5:]
    method, path, status, ms = lines[0].split(" ")
    assert (status, ms.endswith("ms")) == ("200", True)
    assert float(ms[:-2]) >= 0
    assert not any(SECRET in line or "user-42" in line for line in served.stderr + served.stdout)


def test_given_a_resource_erased_when_served_then_its_access_line_does_not_name_it(
    served: Served,
) -> None:
    with MemstackClient(served.url, resource_id="user-77", timeout=30) as other:
        other.erase_resource()

    deadline = time.monotonic() + 5
    while not any(line.startswith("DELETE /v1/resources/") for line in served.stderr):
        assert time.monotonic() < deadline, served.stderr[-5:]
        time.sleep(0.02)
    assert any(line.startswith("DELETE /v1/resources/{resource_id} 200 ") for line in served.stderr)
    assert not any("user-77" in line for line in served.stderr + served.stdout)


def test_given_a_running_server_when_sigterm_arrives_then_it_stops_cleanly_and_the_data_stays(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "memory.db")
    args = ("--db", db, "--embedder", "hash")
    with running_serve(*args, cwd=tmp_path) as first:
        with MemstackClient(first.url, resource_id="u1") as c:
            c.save_messages(thread_id="kept", messages=["still here"])
        assert first.stop() == 0
        assert first.stdout[-1] == "memstack serve: stopped"

    with running_serve(*args, cwd=tmp_path) as second, MemstackClient(second.url, resource_id="u1") as c:
        assert [m.text for m in c.list_messages(thread_id="kept").messages] == ["still here"]
        assert c.recall(thread_id="other", query="still here").hits != []
