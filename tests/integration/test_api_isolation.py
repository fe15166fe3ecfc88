"""Tenant isolation through the REST API, route by route: resource A can never read, list, recall, search or
write resource B's data — threads, messages (by id, by ``include``), context, recall and working memory.
Another owner's thread answers 404, exactly as a missing one does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.events import Api, reset_process_state, use_sqlite

SECRET = "BRAVO-SECRET-ZEBRA"
WM = {"working_memory": {"enabled": True}}
THREAD_WM = {"working_memory": {"enabled": True, "scope": "thread"}}


@dataclass
class World:
    a: Api
    b: Api
    b_message_ids: list[str]

    def b_state(self) -> Any:
        """Everything B can see of its own data (to prove A's attempts changed nothing)."""
        return (
            self.b.get("/v1/threads/b-thread").body,
            [(m["id"], m["parts"]) for m in self.b.get("/v1/threads/b-thread/messages").body["messages"]],
            self.b.get("/v1/working-memory", query={"options": json.dumps(WM)}).body,
            self.b.get("/v1/threads/b-thread/working-memory", query={"options": json.dumps(THREAD_WM)}).body,
        )


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    use_sqlite(monkeypatch, tmp_path / "memory.db")
    from functions.api.app import handler

    a, b = Api(handler, "user-a"), Api(handler, "user-b")
    assert (
        b.post("/v1/threads", {"id": "b-thread", "title": f"B {SECRET}", "metadata": {"kind": "x"}}).status
        == 201
    )
    saved = b.post(
        "/v1/threads/b-thread/messages",
        {"messages": [f"B one {SECRET}", f"B two {SECRET}", f"B three {SECRET}"]},
    ).body["messages"]
    assert b.put("/v1/working-memory", {"working_memory": f"# B {SECRET}", "options": WM}).status == 204
    thread_doc = {"working_memory": f"# B thread {SECRET}", "options": THREAD_WM}
    assert b.put("/v1/threads/b-thread/working-memory", thread_doc).status == 204
    assert a.post("/v1/threads/a-thread/messages", {"messages": ["A's own message"]}).status == 200
    yield World(a, b, [m["id"] for m in saved])
    reset_process_state()


def tool_call(memory: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "type": "function",
        "function": {"name": "updateWorkingMemory", "arguments": json.dumps({"memory": memory})},
    }


# (name, method, path, body) — every route that names B's thread, tried by A: A is answered exactly as for
# a thread id nobody uses (404, or — for the routes that create a missing thread — A's own new thread), and
# nothing of B changes. Thread ids are scoped to their resource, so no answer can reveal B's thread.
CREATES_MISSING_THREAD = {
    "save messages",
    "apply tool call on thread scope",
    "apply tool call on resource scope",
}
ATTEMPTS_ON_B_THREAD = [
    ("get thread", "GET", "/v1/threads/b-thread", None),
    ("update thread", "PATCH", "/v1/threads/b-thread", {"title": "pwned", "metadata": {"kind": "y"}}),
    ("delete thread", "DELETE", "/v1/threads/b-thread", None),
    ("clone thread", "POST", "/v1/threads/b-thread/clone", {"new_thread_id": "stolen"}),
    ("list messages", "GET", "/v1/threads/b-thread/messages", None),
    ("save messages", "POST", "/v1/threads/b-thread/messages", {"messages": ["injected"]}),
    ("get thread working memory", "GET", "/v1/threads/b-thread/working-memory", None),
    (
        "put thread working memory",
        "PUT",
        "/v1/threads/b-thread/working-memory",
        {"working_memory": "pwned", "options": THREAD_WM},
    ),
    ("get observations", "GET", "/v1/threads/b-thread/observations", None),
    (
        "apply tool call on thread scope",
        "POST",
        "/v1/threads/b-thread/working-memory/tool-calls",
        {
            "tool_call": tool_call("pwned"),
            "options": {"working_memory": {"enabled": True, "scope": "thread"}},
        },
    ),
    (
        "apply tool call on resource scope",
        "POST",
        "/v1/threads/b-thread/working-memory/tool-calls",
        {"tool_call": tool_call("pwned"), "options": WM},
    ),
]


@pytest.mark.parametrize(
    ("name", "method", "path", "body"), ATTEMPTS_ON_B_THREAD, ids=[a[0] for a in ATTEMPTS_ON_B_THREAD]
)
def test_given_bs_thread_when_a_calls_a_route_on_it_then_it_looks_unused_and_nothing_of_b_changes(
    world: World, name: str, method: str, path: str, body: Any
) -> None:
    before = world.b_state()
    # thread-scoped working memory is where a thread route reaches a thread's own data
    query = {"options": json.dumps(THREAD_WM)} if name == "get thread working memory" else None
    reply = world.a(method, path, body=body, query=query)
    missing = world.a(method, path.replace("b-thread", "no-such-thread"), body=body, query=query)
    assert reply.status == missing.status, f"{name}: B's thread must look like any unused id: {reply.raw}"
    if name in CREATES_MISSING_THREAD:
        assert reply.status == 200, f"{name}: {reply.raw}"  # A's own, new "b-thread"
    else:
        assert (reply.status, reply.error["code"]) == (404, "not_found"), f"{name}: {reply.raw}"
    assert SECRET not in reply.raw
    assert world.b_state() == before, f"{name} changed B's data"


def test_given_bs_threads_when_a_lists_threads_then_none_of_bs_appear(world: World) -> None:
    listed = world.a.get("/v1/threads").body["threads"]
    assert [t["id"] for t in listed] == ["a-thread"]
    filtered = world.a.get("/v1/threads", query={"metadata": json.dumps({"kind": "x"})}).body["threads"]
    assert filtered == []


def test_given_bs_message_ids_when_a_includes_them_then_they_are_absent(world: World) -> None:
    include = [{"id": i, "before": 5, "after": 5} for i in world.b_message_ids]
    reply = world.a.get("/v1/threads/a-thread/messages", query={"include": json.dumps(include)})
    assert reply.status == 200
    assert [m["parts"][0]["text"] for m in reply.body["messages"]] == ["A's own message"]
    assert SECRET not in reply.raw


def test_given_bs_message_ids_when_a_deletes_them_then_none_is_deleted(world: World) -> None:
    before = world.b_state()
    reply = world.a.post("/v1/messages/delete", {"message_ids": world.b_message_ids})
    assert reply.status == 200 and reply.body == {"deleted": 0}
    assert world.b_state() == before


def test_given_a_bs_message_id_when_a_saves_a_message_with_it_then_a_gets_its_own_and_bs_is_untouched(
    world: World,
) -> None:
    before = world.b_state()
    reply = world.a.post(
        "/v1/threads/a-thread/messages",
        {"messages": [{"id": world.b_message_ids[0], "content": "overwrite"}]},
    )
    # message ids are scoped to their resource: A's message with that id is A's own
    assert reply.status == 200, reply.raw
    assert SECRET not in reply.raw
    assert world.b_state() == before


def test_given_bs_thread_id_when_a_asks_its_context_then_an_empty_new_thread_without_bs_data(
    world: World,
) -> None:
    reply = world.a.post("/v1/threads/b-thread/context", {"message": f"what about {SECRET}?", "options": WM})
    assert reply.status == 200
    assert reply.body["history_ids"] == []
    assert set(reply.body["recalled_ids"]).isdisjoint(world.b_message_ids)
    assert [m["role"] for m in reply.body["conversation"]] == ["user"]
    assert f"B one {SECRET}" not in reply.raw and f"# B {SECRET}" not in reply.raw


def test_given_bs_messages_match_when_a_asks_context_in_its_thread_then_recall_finds_only_as(
    world: World,
) -> None:
    reply = world.a.post("/v1/threads/a-thread/context", {"message": f"B one two three {SECRET}"})
    assert reply.status == 200
    assert set(reply.body["recalled_ids"]).isdisjoint(world.b_message_ids)
    assert f"B one {SECRET}" not in reply.raw and f"B two {SECRET}" not in reply.raw


def test_given_bs_messages_match_when_a_recalls_then_no_hit_is_bs(world: World) -> None:
    for thread in ("a-thread", "b-thread"):
        reply = world.a.post(f"/v1/threads/{thread}/recall", {"query": f"B one {SECRET}"})
        assert reply.status == 200
        hit_ids = {h["message_id"] for h in reply.body["hits"]} | {m["id"] for m in reply.body["messages"]}
        assert hit_ids.isdisjoint(world.b_message_ids)
        assert SECRET not in reply.raw


def test_given_bs_resource_working_memory_when_a_reads_and_writes_its_own_then_bs_is_apart(
    world: World,
) -> None:
    before = world.b_state()
    on = {"options": json.dumps(WM)}
    assert world.a.get("/v1/working-memory", query=on).body["working_memory"] is None
    assert world.a.put("/v1/working-memory", {"working_memory": "# A", "options": WM}).status == 204
    applied = world.a.post(
        "/v1/threads/a-thread/working-memory/tool-calls", {"tool_call": tool_call("# A2"), "options": WM}
    )
    assert applied.status == 200
    assert world.a.get("/v1/working-memory", query=on).body["working_memory"] == "# A2"
    ctx = world.a.post("/v1/threads/a-thread/context", {"message": "hi", "options": WM})
    assert SECRET not in ctx.raw
    assert world.b_state() == before


def test_given_bs_thread_id_when_a_creates_a_thread_with_it_then_a_gets_its_own_and_learns_nothing(
    world: World,
) -> None:
    before = world.b_state()
    reply = world.a.post("/v1/threads", {"id": "b-thread"})
    # thread ids are scoped to their resource: the answer is the same whether B has "b-thread" or not
    assert reply.status == 201, reply.raw
    assert SECRET not in reply.raw and "user-b" not in reply.raw
    assert world.b_state() == before
