"""Request validation by the routes' own models (``memstack.api.validation``) answers as Powertools' OpenAPI
validation did: the same status, headers and body, byte for byte, for good and bad requests of every kind
(query, header, body, media type, JSON syntax, response types). The reference is a resolver of the same
routes with Powertools' validation switched back on; one difference is on purpose (a JSON array body).
"""

from __future__ import annotations

import json
import re
import sys
import warnings
from collections.abc import Iterator
from http import HTTPStatus
from typing import Annotated, Any

import pytest
from aws_lambda_powertools.event_handler.openapi.params import Query

from memstack import Memory
from memstack.api import AuthConfig, MemstackResolver, create_app
from memstack.api.params import with_powertools_markers
from memstack.api.schemas import ContextBody, ListThreadsQuery, RecallBody
from memstack.api.validation import route_plan
from tests.integration.events import api_event

R = {"resource_id": "u1"}
JSON = {"Content-Type": "application/json"}


def ev(method: str, path: str, query: dict[str, Any] | None = R, **kwargs: Any) -> dict[str, Any]:
    return api_event(method, path, query=query, **kwargs)


CASES: list[tuple[str, dict[str, Any]]] = [
    (
        "save",
        ev("POST", "/v1/threads/t1/messages", body={"messages": [{"id": "m1", "content": "hi, héllo"}]}),
    ),
    (
        "save if-match",
        ev("POST", "/v1/threads/t1/messages", body={"messages": ["a"]}, headers={"If-Match": '"1"'}),
    ),
    (
        "save if-match bad",
        ev("POST", "/v1/threads/t1/messages", body={"messages": ["x"]}, headers={"If-Match": "no"}),
    ),
    (
        "save if-match lower",
        ev("POST", "/v1/threads/t1/messages", body={"messages": ["x"]}, headers={"if-match": "9"}),
    ),
    ("context", ev("POST", "/v1/threads/t1/context", body={"message": "hello?"})),
    (
        "context options",
        ev(
            "POST",
            "/v1/threads/t1/context",
            body={"message": {"content": "x"}, "instructions": "be nice", "options": {"last_messages": 1}},
        ),
    ),
    ("empty array body", ev("POST", "/v1/threads/t1/context", body=[])),
    ("string body", ev("POST", "/v1/threads/t1/context", body="hello")),
    ("null body", ev("POST", "/v1/threads/t1/context", raw_body="null", headers=JSON)),
    ("no body", ev("POST", "/v1/threads/t1/context")),
    ("blank body", ev("POST", "/v1/threads/t1/context", raw_body="   ", headers=JSON)),
    ("not json", ev("POST", "/v1/threads/t1/context", raw_body="{bad", headers=JSON)),
    ("not json, no query", ev("POST", "/v1/threads/t1/context", query=None, raw_body="{bad", headers=JSON)),
    ("unknown field", ev("POST", "/v1/threads/t1/context", body={"message": "hi", "optoins": {}})),
    ("three errors", ev("POST", "/v1/threads/t1/context", body={"message": 5, "count_tokens": "x", "zz": 1})),
    ("no query", ev("POST", "/v1/threads/t1/context", query=None, body={"message": "hi"})),
    ("no query, bad body", ev("POST", "/v1/threads/t1/context", query=None, body={"message": 5})),
    ("no query, no body", ev("POST", "/v1/threads/t1/context", query=None)),
    (
        "empty resource",
        ev("POST", "/v1/threads/t1/context", query={"resource_id": ""}, body={"message": "hi"}),
    ),
    ("long resource", ev("POST", "/v1/threads/t1/context", query={"resource_id": "x" * 600}, body={})),
    (
        "bad option",
        ev("POST", "/v1/threads/t1/context", body={"options": {"semantic_recall": {"top_k": -1}}}),
    ),
    ("text, no body", ev("POST", "/v1/threads/t1/context", headers={"Content-Type": "text/plain"})),
    (
        "form, no body",
        ev("POST", "/v1/threads", headers={"Content-Type": "application/x-www-form-urlencoded"}),
    ),
    (
        "multipart, no body",
        ev("POST", "/v1/threads/t1/context", headers={"Content-Type": "multipart/form-data; boundary=x"}),
    ),
    (
        "json in capitals",
        ev("POST", "/v1/threads/t1/context", raw_body="{}", headers={"Content-Type": "Application/JSON"}),
    ),
    (
        "+json",
        ev(
            "POST",
            "/v1/threads/t1/context",
            raw_body="{}",
            headers={"Content-Type": "application/vnd.x+json"},
        ),
    ),
    ("base64", ev("POST", "/v1/threads/t1/context", body={"message": "hi"}, base64_body=True)),
    ("too deep", ev("POST", "/v1/threads/t1/context", raw_body="[" * 100_000 + "]" * 100_000, headers=JSON)),
    (
        "long integer",
        ev("POST", "/v1/threads/t1/context", raw_body='{"message": ' + "9" * 5000 + "}", headers=JSON),
    ),
    (
        "bad part",
        ev("POST", "/v1/threads/t1/context", body={"message": {"parts": [{"type": "text", "text": 5}]}}),
    ),
    ("unknown part", ev("POST", "/v1/threads/t1/context", body={"message": {"parts": [{"type": "nope"}]}})),
    ("get thread", ev("GET", "/v1/threads/t1")),
    ("list threads", ev("GET", "/v1/threads", query={**R, "limit": "5", "order_by": "updated_at"})),
    ("bad limit", ev("GET", "/v1/threads", query={**R, "limit": "many"})),
    ("two bad values", ev("GET", "/v1/threads", query={**R, "order_by": "title", "direction": "up"})),
    ("json query", ev("GET", "/v1/threads", query={**R, "metadata": '{"a": 1}'})),
    ("bad json query", ev("GET", "/v1/threads", query={**R, "metadata": "{a"})),
    ("json query of another type", ev("GET", "/v1/threads", query={**R, "metadata": "[1]"})),
    ("comma in a value", ev("GET", "/v1/threads", query={**R, "cursor": "a,b"})),
    ("include", ev("GET", "/v1/threads/t1/messages", query={**R, "include": '[{"id":"m1","before":1}]'})),
    (
        "bad include",
        ev("GET", "/v1/threads/t1/messages", query={**R, "include": '[{"id":"m1","before":true}]'}),
    ),
    ("create thread", ev("POST", "/v1/threads", body={"id": "t2", "title": "T", "metadata": {"a": 1}})),
    ("unroutable id", ev("POST", "/v1/threads", body={"id": "a/b"})),
    ("patch", ev("PATCH", "/v1/threads/t2", body={"title": 5})),
    ("clone", ev("POST", "/v1/threads/t1/clone", body={"new_thread_id": "t3", "message_limit": 1})),
    (
        "clone with true",
        ev("POST", "/v1/threads/t1/clone", body={"new_thread_id": "t4", "message_limit": True}),
    ),
    ("options query", ev("GET", "/v1/working-memory", query={**R, "options": '{"working_memory":{}}'})),
    ("put working memory", ev("PUT", "/v1/working-memory", body={"working_memory": "# Notes"})),
    ("put nothing", ev("PUT", "/v1/working-memory", body={})),
    (
        "tool call",
        ev("POST", "/v1/threads/t1/working-memory/tool-calls", body={"tool_call": {"id": "c", "type": "x"}}),
    ),
    ("recall", ev("POST", "/v1/threads/t1/recall", body={"query": "hello"})),
    ("observations", ev("GET", "/v1/threads/t1/observations", query={**R, "resource_usage": "maybe"})),
    ("inspect", ev("POST", "/v1/threads/t1/inspect", body={"message": "hey"})),
    ("index health", ev("GET", "/v1/index-health", query={**R, "limit": "0"})),
    ("delete none", ev("POST", "/v1/messages/delete", body={"message_ids": []})),
    ("delete thread", ev("DELETE", "/v1/threads/t2")),
    ("health", ev("GET", "/v1/health", query=None)),
    ("no route", ev("GET", "/v2/x")),
    ("erase", ev("DELETE", "/v1/resources/u9", query=None)),
]

_VOLATILE = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)?"
)


def powertools_validated(memory: Memory) -> MemstackResolver:
    """The same resolver with Powertools' OpenAPI validation on (as it was), its own off."""
    app = create_app(memory, auth=AuthConfig())
    for route in app._routes():
        route.func = with_powertools_markers(route.func)
    app._enable_validation = True  # Powertools builds its validation middlewares with the first route call
    app._has_response_validation_error = True
    app._response_validation_error_http_code = HTTPStatus.INTERNAL_SERVER_ERROR
    app.plan_of = lambda route: None  # type: ignore[method-assign]
    return app


def answers(app: MemstackResolver) -> list[tuple[str, int, Any, str]]:
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Powertools warns of a multipart body that is not base64
        for name, event in CASES:
            reply = app.resolve(event, None)
            body = _VOLATILE.sub("<v>", reply.get("body") or "")
            out.append((name, reply["statusCode"], reply.get("multiValueHeaders"), body))
    return out


@pytest.fixture
def memories() -> Iterator[tuple[Memory, Memory]]:
    with (
        Memory.local(":memory:", embedder="hash") as ours,
        Memory.local(":memory:", embedder="hash") as theirs,
    ):
        yield ours, theirs


def test_given_good_and_bad_requests_then_the_routes_models_answer_as_powertools_validation_did(
    memories: tuple[Memory, Memory],
) -> None:
    ours, theirs = memories

    mine = answers(create_app(ours, auth=AuthConfig()))
    reference = answers(powertools_validated(theirs))

    assert len(mine) == len(CASES)
    for got, expected in zip(mine, reference, strict=True):
        assert got == expected, got[0]


def test_given_the_reference_then_it_really_ran_powertools_validation(
    memories: tuple[Memory, Memory],
) -> None:
    app = powertools_validated(memories[1])
    answers(app)

    assert "aws_lambda_powertools.event_handler.middlewares.openapi_validation" in sys.modules
    assert hasattr(app, "_request_validation_middleware")


def test_given_a_json_array_body_then_400_where_powertools_took_its_first_element(
    memories: tuple[Memory, Memory],
) -> None:
    event = ev("POST", "/v1/threads/t1/context", body=[{"message": "hi"}])

    mine = create_app(memories[0], auth=AuthConfig()).resolve(event, None)
    theirs = powertools_validated(memories[1]).resolve(event, None)

    assert theirs["statusCode"] == 200, "Powertools' form normalisation took the array's first element"
    assert mine["statusCode"] == 400
    assert json.loads(mine["body"])["error"] == {
        "code": "invalid_input",
        "message": "body: Input should be a valid dictionary or object to extract fields from",
        "field": "body",
    }


def test_given_the_api_served_then_powertools_validation_machinery_is_never_imported(tmp_path: Any) -> None:
    """A request through ``create_app`` must not pull Powertools' OpenAPI validation back in (a fresh
    interpreter: this test process imports it for the reference)."""
    import subprocess

    program = (
        "import json, sys\n"
        "from memstack import Memory\n"
        "from memstack.api import AuthConfig, create_app, to_event\n"
        "m = Memory.local(':memory:', embedder='hash')\n"
        "app = create_app(m, auth=AuthConfig())\n"
        "e = to_event('POST', '/v1/threads/t/context', 'resource_id=u', {'content-type': 'application/json'}, b'{}')\n"
        "assert app.resolve(e, None)['statusCode'] == 200\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=120
    )
    modules = set(json.loads(out.stdout.strip().splitlines()[-1]))

    for name in (
        "aws_lambda_powertools.event_handler.middlewares.openapi_validation",
        "aws_lambda_powertools.event_handler.openapi.dependant",
        "aws_lambda_powertools.event_handler.openapi.params",
        "aws_lambda_powertools.event_handler.openapi.compat",
    ):
        assert name not in modules, f"{name} imported by a request"


def test_given_a_route_with_scalar_query_parameters_then_each_is_validated_by_its_type() -> None:
    def page(thread_id: str, limit: int, tags: list[str], resource_id: str = "r") -> dict[str, int]:
        return {"limit": limit}

    plan = route_plan(page, "/v1/threads/{thread_id}/page")

    assert dict(plan.query_names) == {"limit": False, "tags": True, "resource_id": False}
    assert plan.body is None and plan.query is None


def test_given_a_query_model_then_its_fields_are_the_query_names() -> None:
    def listing(query: Annotated[ListThreadsQuery, Query()]) -> dict[str, int]:
        return {}

    plan = route_plan(listing, "/v1/threads")

    assert set(plan.query_names) == set(ListThreadsQuery.model_fields)


@pytest.mark.parametrize(
    "path",
    ["/v1/things/{thing}", "/v1/things"],
)
def test_given_a_signature_the_api_cannot_fill_then_type_error_names_the_route(path: str) -> None:
    def bad(thing: int, a: ContextBody, b: RecallBody) -> None:
        return None

    with pytest.raises(TypeError, match="route bad"):
        route_plan(bad, path)
