"""The REST API through ``functions/api/app.handler`` with API Gateway REST proxy events, on the embedded
default (SQLite file, hash embedder): every route, and the agent's turn loop."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.events import Api, reset_process_state, use_sqlite

WM = {"working_memory": {"enabled": True}}


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    use_sqlite(monkeypatch, tmp_path / "memory.db")
    from functions.api.app import handler

    yield Api(handler, "user-a")
    reset_process_state()


def save(api: Api, thread_id: str, *messages: Any) -> list[dict[str, Any]]:
    reply = api.post(f"/v1/threads/{thread_id}/messages", {"messages": list(messages)})
    assert reply.status == 200, reply.raw
    saved: list[dict[str, Any]] = reply.body["messages"]
    return saved


# --- health --------------------------------------------------------------------------------------


def test_given_no_resource_when_health_is_asked_then_ok_without_building_the_memory(api: Api) -> None:
    import memstack.bootstrap

    reply = api.get("/v1/health", resource_id="")
    assert reply.status == 200
    assert reply.body["status"] == "ok"
    assert memstack.bootstrap._memory is None, "health must not connect to the store"


# --- threads -------------------------------------------------------------------------------------


def test_given_a_new_thread_when_created_then_201_and_it_reads_back(api: Api) -> None:
    created = api.post("/v1/threads", {"id": "t1", "title": "Trip", "metadata": {"topic": "travel"}})
    assert created.status == 201
    assert created.body["id"] == "t1" and created.body["resource_id"] == "user-a"
    got = api.get("/v1/threads/t1")
    assert got.status == 200
    assert got.body["title"] == "Trip" and got.body["metadata"] == {"topic": "travel"}


def test_given_no_id_when_creating_a_thread_then_one_is_generated_and_untitled_is_empty(api: Api) -> None:
    created = api.post("/v1/threads", {})
    assert created.status == 201
    assert created.body["id"] and created.body["title"] == ""


def test_given_many_threads_when_listed_then_cursor_pages_cover_them_once(api: Api) -> None:
    for i in range(5):
        assert api.post("/v1/threads", {"id": f"t{i}"}).status == 201
    seen: list[str] = []
    cursor: str | None = None
    while True:
        query = {"limit": "2", "order_by": "created_at", "direction": "asc"}
        if cursor:
            query["cursor"] = cursor
        page = api.get("/v1/threads", query=query)
        assert page.status == 200
        seen += [t["id"] for t in page.body["threads"]]
        cursor = page.body["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"t{i}" for i in range(5)]


def test_given_thread_metadata_when_listing_with_a_metadata_filter_then_only_matches(api: Api) -> None:
    api.post("/v1/threads", {"id": "work", "metadata": {"kind": "work"}})
    api.post("/v1/threads", {"id": "home", "metadata": {"kind": "home"}})
    page = api.get("/v1/threads", query={"metadata": json.dumps({"kind": "work"})})
    assert [t["id"] for t in page.body["threads"]] == ["work"]


def test_given_a_thread_when_patched_then_title_changes_and_metadata_merges(api: Api) -> None:
    api.post("/v1/threads", {"id": "t1", "title": "a", "metadata": {"x": 1}})
    reply = api.patch("/v1/threads/t1", {"title": "b", "metadata": {"y": 2}})
    assert reply.status == 200
    assert reply.body["title"] == "b" and reply.body["metadata"] == {"x": 1, "y": 2}


def test_given_a_thread_when_deleted_then_204_and_it_is_gone_with_its_messages(api: Api) -> None:
    save(api, "t1", "hello")
    assert api.delete("/v1/threads/t1").status == 204
    assert api.get("/v1/threads/t1").status == 404
    assert api.get("/v1/threads/t1/messages").status == 404


def test_given_a_thread_when_cloned_then_201_with_copied_messages_and_the_id_map(api: Api) -> None:
    saved = save(api, "t1", "one", "two", "three")
    reply = api.post("/v1/threads/t1/clone", {"new_thread_id": "t2", "message_limit": 2})
    assert reply.status == 201
    assert reply.body["thread"]["id"] == "t2"
    assert [m["parts"][0]["text"] for m in reply.body["messages"]] == ["two", "three"]
    assert set(reply.body["message_id_map"]) == {saved[1]["id"], saved[2]["id"]}


# --- messages ------------------------------------------------------------------------------------


def test_given_a_batch_when_saved_then_order_and_seq_follow_the_batch(api: Api) -> None:
    saved = save(
        api,
        "t1",
        "plain text is a user message",
        {"id": "a1", "role": "assistant", "content": "answer"},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "search", "args": {}}]},
        {"role": "tool", "parts": [{"type": "tool_result", "tool_call_id": "c1", "result": {"ok": True}}]},
    )
    assert [m["seq"] for m in saved] == [1, 2, 3, 4]
    assert saved[0]["role"] == "user" and saved[1]["id"] == "a1"
    assert saved[3]["parts"][0]["name"] == "search", "a tool result is named after its call"


def test_given_an_existing_id_when_saved_again_then_updated_in_place(api: Api) -> None:
    save(api, "t1", {"id": "m1", "content": "draft"}, "next")
    again = save(api, "t1", {"id": "m1", "content": "final"})
    assert again[0]["seq"] == 1
    listed = api.get("/v1/threads/t1/messages").body["messages"]
    assert [m["parts"][0]["text"] for m in listed] == ["final", "next"]


def test_given_many_messages_when_listed_then_last_n_and_cursor_pages(api: Api) -> None:
    save(api, "t1", *[f"message {i}" for i in range(7)])
    last = api.get("/v1/threads/t1/messages", query={"last": "3"})
    assert [m["seq"] for m in last.body["messages"]] == [5, 6, 7]
    assert last.body["next_cursor"] is None
    seqs: list[int] = []
    cursor = None
    while True:
        query = {"limit": "3", **({"cursor": cursor} if cursor else {})}
        page = api.get("/v1/threads/t1/messages", query=query)
        seqs += [m["seq"] for m in page.body["messages"]]
        cursor = page.body["next_cursor"]
        if cursor is None:
            break
    assert seqs == list(range(1, 8))


def test_given_include_when_listing_then_the_message_and_its_neighbours_come_too(api: Api) -> None:
    other = save(api, "t-other", "o1", "o2", "o3", "o4")
    save(api, "t1", "mine")
    include = [{"id": other[1]["id"], "before": 1, "after": 1}]
    reply = api.get("/v1/threads/t1/messages", query={"last": "1", "include": json.dumps(include)})
    assert reply.status == 200
    texts = [m["parts"][0]["text"] for m in reply.body["messages"]]
    assert texts == ["o1", "o2", "o3", "mine"]


def test_given_messages_when_deleted_by_ids_then_the_count_and_they_are_gone(api: Api) -> None:
    saved = save(api, "t1", "a", "b", "c")
    reply = api.post("/v1/messages/delete", {"message_ids": [saved[0]["id"], saved[2]["id"], "missing"]})
    assert reply.status == 200 and reply.body == {"deleted": 2}
    listed = api.get("/v1/threads/t1/messages").body["messages"]
    assert [m["parts"][0]["text"] for m in listed] == ["b"]


# --- context, recall -----------------------------------------------------------------------------


def test_given_the_turn_loop_when_context_then_save_then_the_next_context_sees_the_saved_turn(
    api: Api,
) -> None:
    first = api.post(
        "/v1/threads/trip/context",
        {"message": "I'm allergic to peanuts.", "instructions": "You are a travel assistant."},
    )
    assert first.status == 200
    assert first.body["messages"][0] == {"role": "system", "content": "You are a travel assistant."}
    assert first.body["messages"][-1] == {"role": "user", "content": "I'm allergic to peanuts."}
    assert first.body["token_count"] is None  # not asked: the tokenizer is not loaded for it
    assert first.body["tools"] == []
    save(
        api,
        "trip",
        {"role": "user", "content": "I'm allergic to peanuts."},
        {"role": "assistant", "content": "Noted, no peanuts."},
    )
    second = api.post("/v1/threads/trip/context", {"message": "What snacks are fine?"})
    assert second.status == 200
    openai = [(m["role"], m["content"]) for m in second.body["messages"]]
    assert openai == [
        ("user", "I'm allergic to peanuts."),
        ("assistant", "Noted, no peanuts."),
        ("user", "What snacks are fine?"),
    ]
    assert len(second.body["history_ids"]) == 2
    assert [m["role"] for m in second.body["conversation"]] == ["user", "assistant", "user"]


def test_given_another_thread_of_the_resource_when_context_then_cross_thread_recall_shows_it(
    api: Api,
) -> None:
    save(api, "old", "My cat is called Whiskers.", {"role": "assistant", "content": "A fine name."})
    reply = api.post("/v1/threads/new/context", {"message": "What is my cat called, Whiskers?"})
    assert reply.status == 200
    kinds = [s["kind"] for s in reply.body["system"]]
    assert "recall" in kinds
    assert reply.body["recalled_ids"]
    assert any("Whiskers" in m["content"] for m in reply.body["messages"] if m["role"] == "system")


def test_given_options_when_context_then_they_apply_per_call(api: Api) -> None:
    save(api, "t1", *[f"turn {i}" for i in range(6)])
    reply = api.post(
        "/v1/threads/t1/context",
        {"message": "hi", "options": {"last_messages": 2, "semantic_recall": False}},
    )
    assert [m["content"] for m in reply.body["messages"]] == ["turn 4", "turn 5", "hi"]


def test_given_working_memory_enabled_when_context_then_the_update_tool_is_offered(api: Api) -> None:
    reply = api.post("/v1/threads/t1/context", {"message": "hi", "options": WM})
    assert [t["function"]["name"] for t in reply.body["tools"]] == ["updateWorkingMemory"]
    assert reply.body["system"][0]["kind"] == "working_memory"


def test_given_saved_messages_when_recall_then_hits_and_messages_of_the_resource(api: Api) -> None:
    saved = save(api, "t1", "The launch code word is pineapple.", "Unrelated chatter about weather.")
    reply = api.post("/v1/threads/t2/recall", {"query": "launch code word pineapple"})
    assert reply.status == 200
    assert reply.body["hits"][0]["message_id"] == saved[0]["id"]
    assert saved[0]["id"] in {m["id"] for m in reply.body["messages"]}


@pytest.mark.parametrize("now", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59-12:00"])
@pytest.mark.parametrize("when", ["yesterday", "last year", "two weeks ago", "this year"])
def test_given_now_at_the_calendars_edge_when_a_query_names_a_time_then_recall_answers_and_context_keeps_it(
    api: Api, now: str, when: str
) -> None:
    saved = save(api, "t1", "The launch code word is pineapple.", "Unrelated chatter about weather.")
    options = {"semantic_recall": {"now": now, "time_zone": "Asia/Tokyo"}}
    query = f"what launch code word did I say {when}"
    reply = api.post("/v1/threads/t2/recall", {"query": query, "options": options})
    assert reply.status == 200, reply.raw
    assert reply.body["hits"][0]["message_id"] == saved[0]["id"]
    context = api.post("/v1/threads/t2/context", {"message": query, "options": options})
    assert context.status == 200, context.raw
    assert saved[0]["id"] in context.body["recalled_ids"], "recall is not dropped from the turn"


# --- working memory ------------------------------------------------------------------------------


def test_given_resource_working_memory_when_put_then_get_reads_it_back(api: Api) -> None:
    on = {"options": json.dumps(WM)}
    assert api.get("/v1/working-memory", query=on).body == {"working_memory": None, "scope": "resource"}
    assert (
        api.put("/v1/working-memory", {"working_memory": "# User\n- Name: Ada", "options": WM}).status == 204
    )
    assert api.get("/v1/working-memory", query=on).body["working_memory"] == "# User\n- Name: Ada"


def test_given_working_memory_off_in_the_options_when_put_then_refused_as_memory_refuses_it(api: Api) -> None:
    refused = api.put("/v1/working-memory", {"working_memory": "# User"})
    assert refused.status == 400 and refused.body["error"]["field"] == "working_memory", refused.raw
    assert api.get("/v1/working-memory").body == {"working_memory": None, "scope": "resource"}
    assert api.get("/v1/working-memory", query={"options": json.dumps(WM)}).body["working_memory"] is None


def test_given_thread_working_memory_when_put_then_get_reads_it_back_and_resource_scope_is_apart(
    api: Api,
) -> None:
    thread = {"working_memory": {"enabled": True, "scope": "thread"}}
    api.post("/v1/threads", {"id": "t1"})
    put = api.put("/v1/threads/t1/working-memory", {"working_memory": "# Thread notes", "options": thread})
    assert put.status == 204
    assert api.get("/v1/threads/t1/working-memory", query={"options": json.dumps(thread)}).body == {
        "working_memory": "# Thread notes",
        "scope": "thread",
    }
    assert api.get("/v1/working-memory", query={"options": json.dumps(WM)}).body["working_memory"] is None
    no_thread = api.get("/v1/working-memory", query={"options": json.dumps(thread)})
    assert no_thread.status == 400 and no_thread.body["error"]["field"] == "thread_id"


def test_given_a_schema_when_working_memory_is_put_as_objects_then_they_merge(api: Api) -> None:
    options = {
        "working_memory": {
            "enabled": True,
            "schema": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "city": {"type": "string"}},
            },
        }
    }
    assert (
        api.put("/v1/working-memory", {"working_memory": {"name": "Ada"}, "options": options}).status == 204
    )
    assert (
        api.put("/v1/working-memory", {"working_memory": {"city": "Paris"}, "options": options}).status == 204
    )
    got = api.get("/v1/working-memory", query={"options": json.dumps(options)})
    assert json.loads(got.body["working_memory"]) == {"name": "Ada", "city": "Paris"}


def test_given_the_models_tool_call_when_applied_through_the_api_then_the_next_context_shows_it(
    api: Api,
) -> None:
    ctx = api.post("/v1/threads/t1/context", {"message": "I live in Lisbon.", "options": WM})
    assert ctx.body["tools"][0]["function"]["name"] == "updateWorkingMemory"
    call = {
        "id": "call_1",
        "type": "function",
        "function": {
            "name": "updateWorkingMemory",
            "arguments": json.dumps({"memory": "# User\n- City: Lisbon"}),
        },
    }
    applied = api.post("/v1/threads/t1/working-memory/tool-calls", {"tool_call": call, "options": WM})
    assert applied.status == 200, applied.raw
    assert applied.body["message"]["role"] == "tool"
    tool_message = applied.body["messages"][0]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    assert json.loads(tool_message["content"])["success"] is True
    got = api.get("/v1/working-memory", query={"options": json.dumps(WM)})
    assert got.body["working_memory"] == "# User\n- City: Lisbon"
    after = api.post("/v1/threads/t1/context", {"message": "Where do I live?", "options": WM})
    assert "City: Lisbon" in after.body["system"][0]["text"]


def test_given_a_bad_tool_argument_when_applied_then_the_result_tells_the_model(api: Api) -> None:
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "updateWorkingMemory", "arguments": "{not json"},
    }
    applied = api.post("/v1/threads/t1/working-memory/tool-calls", {"tool_call": call, "options": WM})
    assert applied.status == 200
    assert applied.body["message"]["parts"][0]["is_error"] is True


def test_given_count_tokens_or_a_budget_when_context_then_token_count_is_counted_and_else_never(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memstack.tokens import TiktokenTokenizer

    counted: list[str] = []
    original = TiktokenTokenizer.count

    def spy(self: TiktokenTokenizer, text: str) -> int:
        counted.append(text)
        return original(self, text)

    monkeypatch.setattr(TiktokenTokenizer, "count", spy)
    path = "/v1/threads/trip/context"
    plain = api.post(path, {"message": "Where to next?"})
    assert plain.status == 200 and plain.body["token_count"] is None
    assert counted == [], "the context route counted tokens nobody asked for"

    asked = api.post(path, {"message": "Where to next?", "count_tokens": True})
    budget = api.post(
        path, {"message": "Where to next?", "options": {"message_history": {"max_tokens": 5000}}}
    )
    assert asked.body["token_count"] > 0 and counted
    assert budget.body["token_count"] == asked.body["token_count"]

    # a budget that trims the history reports the trimmed context's count, as count_tokens would
    save(
        api, "trip", *({"role": "user", "content": f"Day {i}: we walked along the river."} for i in range(6))
    )
    asked = api.post(path, {"message": "Where to next?", "count_tokens": True})
    tight = {"message_history": {"max_tokens": asked.body["token_count"] - 1}}
    trimmed = api.post(path, {"message": "Where to next?", "options": tight})
    recounted = api.post(path, {"message": "Where to next?", "options": tight, "count_tokens": True})
    assert len(trimmed.body["messages"]) < len(asked.body["messages"])
    assert trimmed.body["token_count"] == recounted.body["token_count"] < asked.body["token_count"]
