"""The HTTP side of issue 13: bodies the JSON parser cannot hold and bytes that are not UTF-8 answer 400
(items 14, 16); optimistic concurrency over HTTP (``last_seq`` → ``expected_last_seq`` / ``If-Match``,
item 2); the working-memory version travelling through the context and tool-call answers (item 1); the
configured working-memory limit binds API callers (item 4)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from memstack import InvalidInput, Memory
from memstack.api import AuthConfig, HttpResponse, MemstackResolver, create_app, handle_http
from tests.working_memory_support import update_call

JSON = {"Content-Type": "application/json"}


@pytest.fixture
def memory() -> Iterator[Memory]:
    with Memory.local(
        ":memory:", embedder="hash", semantic_recall=False, working_memory={"enabled": True}
    ) as m:
        yield m


@pytest.fixture
def app(memory: Memory) -> MemstackResolver:
    return create_app(memory, auth=AuthConfig())


def send(
    app: MemstackResolver,
    method: str,
    path: str,
    raw: bytes | None = None,
    query: str = "resource_id=u1",
    headers: dict[str, str] | None = None,
) -> tuple[HttpResponse, Any]:
    answer = handle_http(app, method, path, query, {**JSON, **(headers or {})}, raw)
    return answer, json.loads(answer.body) if answer.body else None


def post(app: MemstackResolver, path: str, body: Any, **kwargs: Any) -> tuple[HttpResponse, Any]:
    return send(app, "POST", path, json.dumps(body).encode(), **kwargs)


def error(answer: HttpResponse, data: Any, status: int = 400, code: str = "invalid_input") -> dict[str, Any]:
    assert answer.status == status, data
    assert data["error"]["code"] == code, data
    found: dict[str, Any] = data["error"]
    return found


# --- item 14: bodies the parser cannot hold ---------------------------------------------------------


def test_given_a_body_nested_1000_levels_when_posted_then_400_invalid_input_on_body(
    app: MemstackResolver,
) -> None:
    raw = b'{"messages": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    answer, data = send(app, "POST", "/v1/threads/t/messages", raw)
    assert error(answer, data)["field"] == "body"


def test_given_an_integer_of_4301_digits_when_posted_then_400_invalid_input_on_body(
    app: MemstackResolver,
) -> None:
    raw = b'{"messages": ["hi"], "expected_last_seq": ' + b"9" * 4301 + b"}"
    answer, data = send(app, "POST", "/v1/threads/t/messages", raw)
    assert error(answer, data)["field"] == "body"


# --- item 16: text that is not text ------------------------------------------------------------------


@pytest.mark.parametrize("encoded", ["%FF", "%C0", "u%80x"])
def test_given_a_query_value_that_is_not_utf8_when_called_then_400_naming_it(
    app: MemstackResolver, encoded: str
) -> None:
    answer, data = send(app, "GET", "/v1/threads", query=f"resource_id={encoded}")
    assert error(answer, data)["field"] == "resource_id"


def test_given_replacement_character_and_invalid_bytes_when_called_then_they_do_not_alias(
    app: MemstackResolver, memory: Memory
) -> None:
    # U+FFFD is no id at all (not a letter or digit: an id must fit a path, memstack.model.check_routable_id),
    # so invalid bytes decoded to it can never reach a resource
    with pytest.raises(InvalidInput):
        memory.create_thread(resource_id="\ufffd", thread_id="t")
    memory.create_thread(resource_id="r", thread_id="t")
    for query in ("resource_id=%EF%BF%BD", "resource_id=%FF"):
        answer, data = send(app, "GET", "/v1/threads", query=query)
        assert answer.status == 400 and data["error"]["field"] == "resource_id"


def test_given_a_lone_surrogate_in_tool_call_id_when_applied_then_400(app: MemstackResolver) -> None:
    raw = (
        b'{"tool_call": {"id": "\\ud800", "type": "function", "function": {"name": "updateWorkingMemory", '
        b'"arguments": "{\\"memory\\": \\"# x\\"}"}}}'
    )
    answer, data = send(app, "POST", "/v1/threads/t/working-memory/tool-calls", raw)
    assert error(answer, data)["field"] == "tool_call.id"


# --- item 2: optimistic concurrency over HTTP ---------------------------------------------------------


def test_given_the_context_last_seq_when_the_thread_moved_then_the_save_answers_409(
    app: MemstackResolver,
) -> None:
    answer, ctx = post(app, "/v1/threads/t/context", {"message": "hi"})
    assert answer.status == 200 and ctx["last_seq"] == 0
    answer, _ = post(app, "/v1/threads/t/messages", {"messages": ["one"], "expected_last_seq": 0})
    assert answer.status == 200
    answer, data = post(app, "/v1/threads/t/messages", {"messages": ["two"], "expected_last_seq": 0})
    assert error(answer, data, 409, "conflict")["field"] == "expected_last_seq"
    answer, ctx = post(app, "/v1/threads/t/context", {"message": "hi"})
    assert ctx["last_seq"] == 1


def test_given_if_match_when_saving_then_it_is_the_expected_last_seq(app: MemstackResolver) -> None:
    answer, _ = post(app, "/v1/threads/t/messages", {"messages": ["one"]}, headers={"If-Match": '"0"'})
    assert answer.status == 200
    answer, data = post(app, "/v1/threads/t/messages", {"messages": ["two"]}, headers={"If-Match": '"0"'})
    assert error(answer, data, 409, "conflict")["field"] == "expected_last_seq"
    answer, data = post(app, "/v1/threads/t/messages", {"messages": ["two"]}, headers={"If-Match": "nope"})
    assert error(answer, data)["field"] == "If-Match"
    answer, _ = post(app, "/v1/threads/t/messages", {"messages": ["two"]}, headers={"If-Match": 'W/"1"'})
    assert answer.status == 200


# --- item 1 over HTTP ---------------------------------------------------------------------------------


def test_given_two_tool_calls_from_one_context_when_applied_then_the_second_is_told(
    app: MemstackResolver,
) -> None:
    _, ctx = post(app, "/v1/threads/t/context", {"message": "hi"})
    version = ctx["working_memory_version"]
    path = "/v1/threads/t/working-memory/tool-calls"
    _, first = post(app, path, {"tool_call": update_call("a", "- tea"), "working_memory_version": version})
    answer, second = post(
        app, path, {"tool_call": update_call("b", "- Oslo"), "working_memory_version": version}
    )
    assert first["message"]["parts"][0]["result"]["success"] is True
    result = second["message"]["parts"][0]["result"]
    assert answer.status == 200 and result["success"] is False and result["current_memory"] == "- tea"
    answer, third = post(
        app,
        path,
        {
            "tool_call": update_call("c", "- tea\n- Oslo"),
            "working_memory_version": second["working_memory_version"],
        },
    )
    assert third["message"]["parts"][0]["result"]["success"] is True


# --- item 4: the configured limit binds API callers -----------------------------------------------------


def test_given_a_per_call_max_tokens_over_the_configured_when_called_then_400_naming_the_limit(
    app: MemstackResolver,
) -> None:
    options = {"working_memory": {"enabled": True, "max_tokens": 50_000}}
    answer, data = send(
        app,
        "PUT",
        "/v1/working-memory",
        json.dumps({"working_memory": "x " * 3_000, "options": options}).encode(),
    )
    found = error(answer, data)
    assert "2000" in found["message"] and found["field"] == "options.working_memory.max_tokens"
