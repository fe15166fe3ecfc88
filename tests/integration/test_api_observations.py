"""The observational-memory routes with API Gateway REST proxy events: a thread's observation record
(``GET /v1/threads/{thread_id}/observations``) and the model's ``recall`` tool
(``POST /v1/threads/{thread_id}/recall-tool``), over a local ``Memory`` whose Observer is scripted and whose
background work runs inline (so a save that crosses the threshold has observed before it answers)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from memstack.adapters.testing import ScriptedChatModel
from memstack.api import AuthConfig, create_app
from memstack.memory import Memory
from tests.integration.events import Api
from tests.observation_support import om_memory

T = "trip"
OM: dict[str, Any] = {
    "observation": {"message_tokens": 1_000, "buffer_tokens": False},
    "retrieval": {"scope": "thread"},
}
OPTIONS = {"observational_memory": OM}
GROUP = re.compile(r'<observation-group id="\w+" range="([^"]+):([^"]+)">')


def sentence(i: int) -> str:
    """About 25 tokens: 40 of them cross the 1,000-token observation threshold."""
    return f"Message {i}: I went hiking near lake number {i} with my sister and we talked about painting classes."


@pytest.fixture
def memory() -> Iterator[Memory]:
    with om_memory(ScriptedChatModel(), observational_memory=OM) as m:
        yield m


@pytest.fixture
def api(memory: Memory) -> Api:
    return Api(create_app(memory, auth=AuthConfig()).resolve, "user-a")


def save_turns(api: Api, count: int, thread_id: str = T) -> None:
    """``count`` messages, one save each (every save may schedule observation), ids ``<thread>-m<i>``."""
    for i in range(1, count + 1):
        message = {
            "id": f"{thread_id}-m{i}",
            "role": "user" if i % 2 else "assistant",
            "content": sentence(i),
        }
        reply = api.post(f"/v1/threads/{thread_id}/messages", {"messages": [message]})
        assert reply.status == 200, reply.raw


def recall_call(name: str = "recall", **args: Any) -> dict[str, Any]:
    return {"id": "call-1", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


@pytest.fixture
def observed(api: Api) -> dict[str, Any]:
    """Forty messages saved and observed; the record as the route answers it."""
    save_turns(api, 40)
    reply = api.get(f"/v1/threads/{T}/observations")
    assert reply.status == 200, reply.raw
    record: dict[str, Any] = reply.body["record"]
    return record


# --- GET /observations -------------------------------------------------------------------------------


def test_given_an_observed_thread_when_observations_are_read_then_the_record_summary_comes_back(
    observed: dict[str, Any],
) -> None:
    assert set(observed) == {
        "scope",
        "active_observations",
        "observation_tokens",
        "generation_count",
        "origin_type",
        "observed_seq",
        "pending_message_tokens",
        "buffered_chunks",
        "current_task",
        "suggested_response",
        "failure_count",
        "last_error",
        "updated_at",
        "usage",
    }
    assert observed["scope"] == "thread" and observed["origin_type"] == "initial"
    assert 0 < observed["observed_seq"] <= 40
    assert GROUP.search(observed["active_observations"]), "retrieval wraps observed ranges in groups"
    assert observed["observation_tokens"] > 0 and observed["generation_count"] == 0
    assert observed["buffered_chunks"] == 0, "buffering is off"
    assert observed["current_task"] and observed["suggested_response"]
    assert (observed["failure_count"], observed["last_error"]) == (0, None)
    assert observed["updated_at"] is not None
    assert observed["usage"]["observer_calls"] >= 1 and observed["usage"]["reflector_calls"] == 0


def test_given_a_model_that_reports_tokens_and_a_refused_answer_when_observations_are_read_then_usage_counts_every_call() -> (
    None
):
    from memstack.ports import ChatResult

    class Reporting(ScriptedChatModel):
        def complete(self, messages: Any, **kwargs: Any) -> ChatResult:
            answer = super().complete(messages, **kwargs)
            return ChatResult(text=answer.text, input_tokens=1_000, output_tokens=50)

    chat = Reporting([""])  # the first Observer answer is empty: refused, retried, still paid for
    with om_memory(chat, observational_memory=OM, generate_title=True) as memory:
        api = Api(create_app(memory, auth=AuthConfig()).resolve, "user-a")
        save_turns(api, 40)
        usage = api.get(f"/v1/threads/{T}/observations").body["record"]["usage"]
    observer_calls = chat.count("observer")
    assert observer_calls >= 2
    assert usage["observer_calls"] == observer_calls
    assert (usage["observer_input_tokens"], usage["observer_output_tokens"]) == (
        1_000 * observer_calls,
        50 * observer_calls,
    )
    assert usage["title_calls"] == chat.count("title") >= 1


def test_given_a_thread_below_the_threshold_when_observations_are_read_then_record_is_null(api: Api) -> None:
    save_turns(api, 3)
    reply = api.get(f"/v1/threads/{T}/observations")
    assert (reply.status, reply.body) == (200, {"record": None, "resource_usage": None})


def test_given_another_resources_thread_when_its_observations_are_read_then_404_like_a_missing_one(
    api: Api, observed: dict[str, Any]
) -> None:
    other = api.as_resource("user-b")
    theirs = other.get(f"/v1/threads/{T}/observations")
    missing = api.get("/v1/threads/no-such-thread/observations")
    assert (theirs.status, theirs.error["code"]) == (404, "not_found")
    assert (missing.status, missing.error["code"]) == (404, "not_found")
    assert "hiking" not in theirs.raw


def test_given_an_unknown_query_parameter_when_observations_are_read_then_400_naming_it(api: Api) -> None:
    reply = api.get(f"/v1/threads/{T}/observations", query={"options": "{}"})
    assert (reply.status, reply.error["code"], reply.error["field"]) == (400, "invalid_input", "options")


# --- POST /recall-tool -------------------------------------------------------------------------------


def test_given_an_observation_group_when_the_model_recalls_its_first_message_then_the_messages_come_back(
    api: Api, observed: dict[str, Any]
) -> None:
    first, _ = GROUP.findall(observed["active_observations"])[0]
    assert first == f"{T}-m1"
    ctx = api.post(f"/v1/threads/{T}/context", {"message": "what exactly did I say?", "options": OPTIONS})
    assert "recall" in [t["function"]["name"] for t in ctx.body["tools"]], "context offers the tool"

    reply = api.post(
        f"/v1/threads/{T}/recall-tool",
        {"tool_call": recall_call(cursor=first, limit=5), "options": OPTIONS},
    )

    assert reply.status == 200, reply.raw
    part = reply.body["message"]["parts"][0]
    assert reply.body["message"]["role"] == "tool" and part["is_error"] is False
    assert [m["id"] for m in part["result"]["messages"]] == [f"{T}-m{i}" for i in range(1, 6)]
    [tool_message] = reply.body["messages"]
    assert (tool_message["role"], tool_message["tool_call_id"]) == ("tool", "call-1")
    assert json.loads(tool_message["content"]) == part["result"]


def test_given_the_models_bad_arguments_when_recalled_then_an_error_result_the_model_can_read(
    api: Api, observed: dict[str, Any]
) -> None:
    reply = api.post(
        f"/v1/threads/{T}/recall-tool",
        {"tool_call": recall_call(cursor=f"{T}-m1", limit=99), "options": OPTIONS},
    )
    assert reply.status == 200, reply.raw
    part = reply.body["message"]["parts"][0]
    assert part["is_error"] is True and "limit" in part["result"]["error"]


def test_given_another_resource_when_it_recalls_a_cursor_of_this_thread_then_nothing_is_shown(
    api: Api, observed: dict[str, Any]
) -> None:
    reply = api.as_resource("user-b").post(
        f"/v1/threads/{T}/recall-tool", {"tool_call": recall_call(cursor=f"{T}-m1"), "options": OPTIONS}
    )
    assert reply.status == 200, reply.raw
    assert reply.body["message"]["parts"][0]["is_error"] is True
    assert "hiking" not in reply.raw


def test_given_another_tool_name_when_sent_to_the_recall_route_then_400_with_the_stable_code(
    api: Api,
) -> None:
    reply = api.post(
        f"/v1/threads/{T}/recall-tool",
        {"tool_call": recall_call("updateWorkingMemory", memory="x"), "options": OPTIONS},
    )
    assert reply.status == 400, reply.raw
    assert (reply.error["code"], reply.error["field"]) == ("invalid_input", "tool_call.function.name")


def test_given_retrieval_off_when_recall_is_called_then_400_naming_the_option(api: Api) -> None:
    reply = api.post(
        f"/v1/threads/{T}/recall-tool",
        {"tool_call": recall_call(cursor=f"{T}-m1"), "options": {"observational_memory": False}},
    )
    assert reply.status == 400, reply.raw
    assert (reply.error["code"], reply.error["field"]) == ("invalid_input", "observational_memory.retrieval")


def test_given_a_malformed_body_when_recall_is_called_then_400_naming_the_field(api: Api) -> None:
    reply = api.post(f"/v1/threads/{T}/recall-tool", {"tool_call": {"id": "c1"}, "options": OPTIONS})
    assert reply.status == 400, reply.raw
    assert reply.error["code"] == "invalid_input" and reply.error["field"] == "tool_call.function"
