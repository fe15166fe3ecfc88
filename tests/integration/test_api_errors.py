"""Error responses of the REST API: one JSON shape ``{"error": {"code", "message", "field"?}}`` for every
status, the request body limit checked before parsing, and nothing internal or private leaked."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstack.api import MAX_BODY_BYTES
from memstack.errors import Conflict, Throttled, Unavailable
from tests.integration.events import Api, api_event, reset_process_state, use_sqlite


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    use_sqlite(monkeypatch, tmp_path / "memory.db")
    from functions.api.app import handler

    yield Api(handler, "user-a")
    reset_process_state()


def assert_error(reply: Any, status: int, code: str, field: str | None = None) -> None:
    assert reply.status == status, reply.raw
    assert reply.headers["Content-Type"] == ["application/json"]
    assert set(reply.body) == {"error"}, reply.raw
    error = reply.error
    assert error["code"] == code, reply.raw
    assert isinstance(error["message"], str) and error["message"]
    assert set(error) <= {"code", "message", "field"}
    if field is not None:
        assert error.get("field") == field, reply.raw


def break_memory(monkeypatch: pytest.MonkeyPatch, method: str, exc: BaseException) -> None:
    from memstack.bootstrap import memory_from_env

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise exc

    monkeypatch.setattr(memory_from_env(), method, fail)


# --- 400 -----------------------------------------------------------------------------------------


def test_given_no_resource_id_when_calling_a_route_then_400_naming_resource_id(api: Api) -> None:
    assert_error(api.get("/v1/threads", resource_id=""), 400, "invalid_input", "resource_id")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/v1/working-memory", {"working_memory": {"a": 1}}),
        ("POST", "/v1/threads/t1/context", {"message": "hello"}),
    ],
)
def test_given_a_schema_referencing_a_local_file_when_called_then_400_and_the_file_is_not_read(
    api: Api, tmp_path: Path, method: str, path: str, body: dict[str, Any]
) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"enum": ["SECRET-TOKEN-123"]}')
    schema = {"type": "object", "properties": {"a": {"$ref": secret.as_uri()}}}
    options = {"working_memory": {"enabled": True, "schema": schema}}
    reply = api(method, path, body={**body, "options": options})
    assert_error(reply, 400, "invalid_input")
    assert "schema" in reply.error["field"] and "SECRET" not in reply.raw


def test_given_resource_id_twice_when_calling_then_400(api: Api) -> None:
    reply = api.get("/v1/threads", query={"resource_id": ["user-a", "user-b"]})
    assert_error(reply, 400, "invalid_input", "resource_id")


def test_given_a_bad_query_value_when_listing_then_400_naming_the_parameter(api: Api) -> None:
    assert_error(api.get("/v1/threads", query={"limit": "many"}), 400, "invalid_input", "limit")
    assert_error(api.get("/v1/threads", query={"order_by": "title"}), 400, "invalid_input", "order_by")
    assert_error(api.get("/v1/threads/t/messages", query={"include": "[{"}), 400, "invalid_input", "include")


def test_given_a_wrong_type_deep_in_the_body_when_saving_then_400_with_the_field_path(api: Api) -> None:
    body = {"messages": ["ok", {"role": "assistant", "parts": [{"type": "text", "text": 5}]}]}
    reply = api.post("/v1/threads/t1/messages", body)
    assert_error(reply, 400, "invalid_input", "messages[1].parts[0].text")


def test_given_an_unknown_body_field_when_posting_then_400_naming_it(api: Api) -> None:
    reply = api.post("/v1/threads/t1/context", {"message": "hi", "optoins": {}})
    assert_error(reply, 400, "invalid_input", "optoins")


def test_given_a_body_that_is_not_json_when_posting_then_400(api: Api) -> None:
    reply = api("POST", "/v1/threads", raw_body="{not json")
    assert_error(reply, 400, "invalid_input", "body")


def test_given_a_missing_body_when_posting_then_400(api: Api) -> None:
    assert_error(api.post("/v1/threads/t1/messages"), 400, "invalid_input", "body")


def test_given_input_the_core_refuses_when_saving_then_400_with_the_cores_field(api: Api) -> None:
    reply = api.post("/v1/threads/t1/messages", {"messages": [{"role": "system", "content": "x"}]})
    assert_error(reply, 400, "invalid_input", "messages[0].role")
    reply = api.get("/v1/threads/t1/messages", query={"cursor": "not-a-cursor"})
    assert reply.status in (400, 404)


def test_given_bad_options_when_context_then_400_naming_the_option(api: Api) -> None:
    reply = api.post(
        "/v1/threads/t1/context", {"message": "hi", "options": {"semantic_recall": {"top_k": -1}}}
    )
    assert_error(reply, 400, "invalid_input", "semantic_recall.top_k")


# --- 403, 404, 409 -------------------------------------------------------------------------------


def test_given_jwt_mode_and_another_subject_when_calling_then_403(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_sqlite(monkeypatch, tmp_path / "jwt.db", MEMSTACK_AUTH="jwt")
    from functions.api.app import handler

    reply = Api(handler, "user-a", claims={"sub": "user-b"}).get("/v1/threads")
    assert_error(reply, 403, "forbidden", "resource_id")
    reset_process_state()


def test_given_a_missing_thread_when_read_then_404(api: Api) -> None:
    assert_error(api.get("/v1/threads/nope"), 404, "not_found", "thread_id")


def test_given_an_unknown_route_when_called_then_404_in_the_same_shape(api: Api) -> None:
    assert_error(api.get("/v2/threads"), 404, "not_found")
    assert_error(api("OPTIONS", "/v2/threads"), 404, "not_found")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/v1/threads", "GET, POST"),
        ("PUT", "/v1/threads/t1", "DELETE, GET, PATCH"),
        ("HEAD", "/v1/threads/t1/messages", "GET, POST"),
        ("OPTIONS", "/v1/working-memory", "GET, PUT"),
        ("GET", "/v1/threads/t1/context", "POST"),
        ("POST", "/v1/health", "GET"),
        ("BREW", "/v1/messages/delete", "POST"),
    ],
)
def test_given_a_route_called_with_another_method_then_405_with_allow(
    api: Api, method: str, path: str, allowed: str
) -> None:
    reply = api(method, path)
    assert_error(reply, 405, "method_not_allowed")
    assert reply.headers["Allow"] == [allowed]


def test_given_an_existing_thread_id_when_created_again_then_409(api: Api) -> None:
    assert api.post("/v1/threads", {"id": "t1"}).status == 201
    assert_error(api.post("/v1/threads", {"id": "t1"}), 409, "conflict")


def test_given_a_lost_race_when_writing_working_memory_then_409(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    break_memory(monkeypatch, "update_working_memory", Conflict("lost the race every time"))
    assert_error(api.put("/v1/working-memory", {"working_memory": "x"}), 409, "conflict")


# --- 413, 415 ------------------------------------------------------------------------------------


def test_given_a_body_over_the_limit_when_posting_then_413_before_parsing(api: Api) -> None:
    import memstack.bootstrap

    body = json.dumps({"messages": ["x" * (MAX_BODY_BYTES + 1)]})
    reply = api("POST", "/v1/threads/t1/messages", raw_body=body)
    assert_error(reply, 413, "payload_too_large", "body")
    assert str(MAX_BODY_BYTES) in reply.error["message"]
    assert memstack.bootstrap._memory is None, "the body is refused before anything else happens"


def test_given_a_base64_body_over_the_limit_when_posting_then_413(api: Api) -> None:
    reply = api(
        "POST", "/v1/threads/t1/messages", raw_body=b"{" + b" " * MAX_BODY_BYTES + b"}", base64_body=True
    )
    assert_error(reply, 413, "payload_too_large", "body")


def test_given_a_base64_body_under_the_limit_when_posting_then_it_is_decoded(api: Api) -> None:
    reply = api("POST", "/v1/threads", body={"id": "b64"}, base64_body=True)
    assert reply.status == 201 and reply.body["id"] == "b64"


def test_given_more_messages_than_a_batch_takes_when_saving_then_413(api: Api) -> None:
    reply = api.post("/v1/threads/t1/messages", {"messages": ["m"] * 1001})
    assert_error(reply, 413, "payload_too_large", "messages")


def test_given_a_form_body_when_posting_then_415(api: Api) -> None:
    reply = api(
        "POST", "/v1/threads", raw_body="id=t1", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert_error(reply, 415, "unsupported_media_type")


# --- 429, 503, 500 -------------------------------------------------------------------------------


def test_given_a_throttled_backend_when_calling_then_429(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    break_memory(monkeypatch, "list_threads", Throttled("DynamoDB throttled; retry later"))
    assert_error(api.get("/v1/threads"), 429, "throttled")


def test_given_an_unavailable_backend_when_calling_then_503(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    break_memory(monkeypatch, "save_messages", Unavailable("store down"))
    assert_error(api.post("/v1/threads/t1/messages", {"messages": ["x"]}), 503, "unavailable")


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every captured record at INFO or above with all its fields (extras included), as one string."""
    return "\n".join(repr(vars(r)) for r in caplog.records if r.levelno >= logging.INFO)


def test_given_an_unexpected_error_when_calling_then_500_internal_and_nothing_leaks(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    break_memory(monkeypatch, "get_thread", RuntimeError("db password hunter2 at /srv/secret.py"))
    reply = api.get("/v1/threads/t1")
    assert_error(reply, 500, "internal")
    assert "hunter2" not in reply.raw and "secret.py" not in reply.raw and "RuntimeError" not in reply.raw
    logs = logged(caplog)
    assert "hunter2" not in logs, "the exception's message may quote input: not logged"
    assert "RuntimeError" in logs


def test_given_bad_settings_when_the_memory_is_built_then_500_not_the_callers_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_sqlite(monkeypatch, tmp_path / "m.db", MEMSTACK_EMBEDDER="no-such-embedder")
    from functions.api.app import handler

    assert_error(Api(handler).get("/v1/threads"), 500, "internal")
    reset_process_state()


# --- logs ----------------------------------------------------------------------------------------


def test_given_a_turn_when_served_then_info_logs_hold_ids_and_counts_never_text(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO")  # Powertools' own DEBUG lines echo route arguments; INFO and up must not
    secret = "PEANUT-ALLERGY-SECRET"
    api.post("/v1/threads/t1/messages", {"messages": [f"I have a {secret}"]})
    api.put("/v1/working-memory", {"working_memory": f"# Notes {secret}"})
    api.post(
        "/v1/threads/t1/context",
        {
            "message": f"about my {secret}?",
            "options": {"working_memory": {"enabled": True}},
            "count_tokens": True,
        },
    )
    api.post("/v1/threads/t1/recall", {"query": secret})
    assert caplog.records
    assert secret not in logged(caplog)
    context = [r for r in caplog.records if r.getMessage() == "context"]
    assert context and vars(context[0])["token_count"] > 0 and vars(context[0])["thread_id"] == "t1"


def test_given_an_event_of_another_shape_when_resolved_then_an_error_response_not_an_exception(
    api: Api,
) -> None:
    event = api_event("POST", "/v1/threads", query={"resource_id": "u"}, body={"id": "x"})
    event["body"] = base64.b64encode(b"\xff\xfe").decode()
    event["isBase64Encoded"] = True
    from functions.api.app import handler

    result = handler(event, None)
    assert result["statusCode"] == 400


LONG = "n" * 257
FILTER_101 = {"$and": [{f"k{i}": 1} for i in range(101)]}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (
            "/v1/threads/t1/messages",
            {"messages": [{"content": "x", "author": {"id": "u", "name": LONG}}]},
            "messages[0].author.name",
        ),
        (
            "/v1/threads/t1/messages",
            {"messages": [{"content": "x", "author": {"id": "u", "role": LONG}}]},
            "messages[0].author.role",
        ),
        (
            "/v1/threads/t1/context",
            {"message": {"content": "x", "author": {"id": "u", "name": LONG}}},
            "message.author.name",
        ),
        ("/v1/threads", {"id": "t2", "title": "t" * 1001}, "title"),
        (
            "/v1/threads/t1/context",
            {"message": "x", "options": {"working_memory": {"enabled": True, "template": "t" * 16_001}}},
            "working_memory.template",
        ),
        (
            "/v1/threads/t1/recall",
            {"query": "x", "options": {"semantic_recall": {"filter": FILTER_101}}},
            "semantic_recall.filter",
        ),
    ],
    ids=["author-name", "author-role", "context-author", "title", "template", "filter-conditions"],
)
def test_given_a_field_over_its_size_limit_when_posting_then_413_naming_it(
    api: Api, path: str, body: dict[str, Any], field: str
) -> None:
    """Every size limit answers 413 ``payload_too_large`` (docs/api.md "Errors"), whichever check finds it:
    the request's schema, the core's inputs or the options."""
    reply = api.post(path, body)
    assert_error(reply, 413, "payload_too_large")
    assert reply.error["field"].endswith(field), reply.raw
    assert "limit" in reply.error["message"]


def test_given_an_id_over_256_characters_when_posting_then_400_as_an_id_is_malformed(api: Api) -> None:
    assert_error(api.post("/v1/threads", {"id": "i" * 257}), 400, "invalid_input", "id")
