"""HTTP rules of the API through ``handle_http`` (plain HTTP, percent-encoded paths): which thread ids the
routes can address, clone conflicts, ``seq`` in recall hits, case-insensitive media types and the query
parameters each route declares."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from memstack import InvalidInput, Memory
from memstack.api import AuthConfig, HttpResponse, MemstackResolver, create_app, handle_http
from memstack.api.http import to_event, to_http_response
from memstack.api.ids import ROUTABLE_SPECIALS
from memstack.model import check_routable_id

JSON = {"Content-Type": "application/json"}
EVERY_SPECIAL = "id" + ROUTABLE_SPECIALS + "é字٣_"
"""A thread id with every character the routes accept besides ASCII letters and digits."""


@pytest.fixture
def memory() -> Iterator[Memory]:
    with Memory.local(":memory:", embedder="hash") as m:
        yield m


@pytest.fixture
def app(memory: Memory) -> MemstackResolver:
    return create_app(memory, auth=AuthConfig())


def call(
    app: MemstackResolver,
    method: str,
    path: str,
    body: Any = None,
    query: str = "resource_id=u1",
    headers: dict[str, str] | None = None,
) -> tuple[HttpResponse, Any]:
    """One request; the answer and its decoded JSON body (``None`` when empty)."""
    raw = json.dumps(body).encode() if body is not None else None
    answer = handle_http(app, method, path, query, headers or JSON, raw)
    return answer, json.loads(answer.body) if answer.body else None


def thread_path(thread_id: str, *rest: str) -> str:
    """``/v1/threads/<thread_id>/...`` with the id percent-encoded as one path segment."""
    return "/".join(["/v1/threads", quote(thread_id, safe=""), *rest])


def error_of(answer: HttpResponse, data: Any, status: int, code: str) -> dict[str, Any]:
    assert answer.status == status, data
    assert data["error"]["code"] == code, data
    error: dict[str, Any] = data["error"]
    return error


# --- 1. thread ids the routes can address ----------------------------------------------------------


@pytest.mark.parametrize("thread_id", [EVERY_SPECIAL, "a b", "~", "...", "x.", "ÄÖü"])
def test_given_a_routable_thread_id_when_created_then_every_thread_route_reaches_it(
    app: MemstackResolver, thread_id: str
) -> None:
    created, body = call(app, "POST", "/v1/threads", {"id": thread_id})
    assert (created.status, body["id"]) == (201, thread_id)

    got, body = call(app, "GET", thread_path(thread_id))
    assert (got.status, body["id"]) == (200, thread_id)
    saved, body = call(app, "POST", thread_path(thread_id, "messages"), {"messages": ["hello there"]})
    assert (saved.status, body["messages"][0]["thread_id"]) == (200, thread_id)
    context, body = call(app, "POST", thread_path(thread_id, "context"), {"message": "and now?"})
    assert context.status == 200
    assert [m["thread_id"] for m in body["conversation"]][0] == thread_id
    cloned, body = call(app, "POST", thread_path(thread_id, "clone"), {"new_thread_id": thread_id + "(copy)"})
    assert (cloned.status, body["thread"]["id"]) == (201, thread_id + "(copy)")
    assert call(app, "GET", thread_path(thread_id + "(copy)"))[0].status == 200
    assert call(app, "DELETE", thread_path(thread_id))[0].status == 204
    assert call(app, "GET", thread_path(thread_id))[0].status == 404


REFUSED = {
    "slash": "a/b",
    "hash": "a#b",
    "question mark": "a?b",
    "double quote": 'a"b',
    "backslash": "a\\b",
    "backtick": "a`b",
    "currency sign": "a€b",
    "emoji": "a\U0001f600b",
    "zero-width space": "a\u200bb",
    "control character": "a\nb",
    "percent sign (decoding a path must not change an id)": "a%41b",
    "dot segment": ".",
    "dot-dot segment": "..",
}


@pytest.mark.parametrize("thread_id", list(REFUSED.values()), ids=list(REFUSED))
def test_given_an_id_the_routes_cannot_address_when_creating_or_cloning_then_400_naming_the_rule(
    app: MemstackResolver, thread_id: str
) -> None:
    created, body = call(app, "POST", "/v1/threads", {"id": thread_id})
    error = error_of(created, body, 400, "invalid_input")
    assert error["field"] == "id"
    with pytest.raises(InvalidInput) as library:
        check_routable_id(thread_id, "id")
    assert error["message"] == library.value.message, "the library's words (the rule, or a control character)"

    assert call(app, "POST", "/v1/threads", {"id": "source"})[0].status == 201
    cloned, body = call(app, "POST", thread_path("source", "clone"), {"new_thread_id": thread_id})
    assert error_of(cloned, body, 400, "invalid_input")["field"] == "new_thread_id"
    listed, body = call(app, "GET", "/v1/threads")
    assert [t["id"] for t in body["threads"]] == ["source"], "nothing unreachable was created"


@pytest.mark.parametrize("thread_id", list(REFUSED.values()), ids=list(REFUSED))
def test_given_the_library_when_an_unroutable_id_is_used_then_it_is_refused_by_the_same_rule(
    memory: Memory, thread_id: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        memory.create_thread(resource_id="u1", thread_id=thread_id)
    assert err.value.field == "thread_id"
    assert memory.list_threads(resource_id="u1").threads == ()


UNROUTABLE_MATCHED = {"dot": ".", "dot-dot": "..", "percent": "%", "trailing percent": "50%"}
"""Ids the routes' path pattern matches (sent percent-encoded; a path is decoded, and ``%`` alone stays
``%`` however often it is) but the rule refuses."""


def _encoded(value: str) -> str:
    return "".join(f"%{byte:02X}" for byte in value.encode())


def _id_routes(app: MemstackResolver) -> list[tuple[str, str]]:
    """(method, OpenAPI path) of every route but health."""
    return [(r.method, r.openapi_path) for r in app._routes() if r.openapi_path != "/v1/health"]


@pytest.mark.parametrize("bad", list(UNROUTABLE_MATCHED.values()), ids=list(UNROUTABLE_MATCHED))
def test_given_an_unroutable_id_in_any_path_or_query_then_every_route_answers_400_naming_it(
    app: MemstackResolver, memory: Memory, bad: str
) -> None:
    """The rule holds on every route, removals included, whichever ids the ``Memory`` method behind a route
    takes (``delete_thread``, ``erase_resource`` and ``delete_messages`` take any valid id, so data stored
    under a legacy id stays removable in the library): over HTTP such an id is never reached."""
    memory.save_messages(thread_id="t", resource_id="u1", messages=["kept"])
    checked = 0
    for method, path in _id_routes(app):
        for name in ("thread_id", "resource_id"):
            if "{" + name + "}" not in path:
                continue
            target = path.replace("{" + name + "}", _encoded(bad)).replace("{thread_id}", "t")
            query = "" if name == "resource_id" else "resource_id=u1"
            answer, body = call(app, method, target, query=query)
            error = error_of(answer, body, 400, "invalid_input")
            assert error["field"] == name and ROUTABLE_SPECIALS in error["message"], (method, path, body)
            checked += 1
        if "{resource_id}" in path:
            continue  # the erase route takes no query
        concrete = path.replace("{thread_id}", "t")
        answer, body = call(app, method, concrete, query=f"resource_id={_encoded(bad)}")
        error = error_of(answer, body, 400, "invalid_input")
        assert error["field"] == "resource_id" and ROUTABLE_SPECIALS in error["message"], (method, path, body)
        checked += 1
    assert checked > len(_id_routes(app))
    assert [m.parts[0].text for m in memory.list_messages(thread_id="t", resource_id="u1").messages] == [
        "kept"
    ]


@pytest.mark.parametrize("thread_id", [EVERY_SPECIAL, "a b", "ÄÖü"])
def test_given_an_event_whose_path_is_still_percent_encoded_when_resolved_then_the_route_gets_the_id(
    app: MemstackResolver, thread_id: str
) -> None:
    assert call(app, "POST", "/v1/threads", {"id": thread_id})[0].status == 201
    event = to_event("GET", "/v1/threads/placeholder", "resource_id=u1", JSON)
    event["path"] = thread_path(thread_id)  # as an integration that does not decode the path hands it
    answer = to_http_response(app.resolve(event, None))
    assert (answer.status, json.loads(answer.body)["id"]) == (200, thread_id)


# --- 2. clone onto an existing thread ---------------------------------------------------------------


def test_given_an_existing_thread_id_when_cloning_onto_it_then_409_and_both_threads_are_unchanged(
    app: MemstackResolver,
) -> None:
    call(app, "POST", thread_path("t", "messages"), {"messages": ["one", "two"]})
    call(app, "POST", thread_path("t2", "messages"), {"messages": ["other"]})

    for body in (
        {"new_thread_id": "t2"},
        {"new_thread_id": "t2", "message_limit": 1},
        {"new_thread_id": "t"},
    ):
        answer, data = call(app, "POST", thread_path("t", "clone"), body)
        assert error_of(answer, data, 409, "conflict")["field"] == "new_thread_id"

    _, page = call(app, "GET", thread_path("t2", "messages"))
    assert [m["content"] if "content" in m else m["parts"][0]["text"] for m in page["messages"]] == ["other"]


# --- 6. seq in recall hits --------------------------------------------------------------------------


def test_given_saved_messages_when_recalled_over_http_then_each_hit_has_the_messages_seq(
    app: MemstackResolver, memory: Memory
) -> None:
    call(app, "POST", thread_path("t1", "messages"), {"messages": ["filler", "I keep bees in my garden"]})

    answer, body = call(app, "POST", thread_path("t2", "recall"), {"query": "bees garden"})

    assert answer.status == 200 and body["hits"]
    direct = memory.recall(thread_id="t2", resource_id="u1", query="bees garden")
    assert [(h["message_id"], h["seq"]) for h in body["hits"]] == [(h.message_id, h.seq) for h in direct.hits]
    seqs = {m["id"]: m["seq"] for m in body["messages"]}
    assert all(h["seq"] == seqs[h["message_id"]] >= 1 for h in body["hits"])


# --- 7. media types ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "APPLICATION/JSON",
        "Application/Json; Charset=UTF-8",
        "application/json;charset=utf-8",
        "application/vnd.x+JSON",
    ],
)
def test_given_a_json_media_type_in_any_case_when_posting_then_the_body_is_read(
    app: MemstackResolver, content_type: str
) -> None:
    answer, body = call(app, "POST", "/v1/threads", {"id": "t1"}, headers={"content-type": content_type})
    assert (answer.status, body["id"]) == (201, "t1")


@pytest.mark.parametrize("raw", [b"id=t1", None])
def test_given_a_media_type_that_is_not_json_then_415_naming_content_type(
    app: MemstackResolver, raw: bytes | None
) -> None:
    answer = handle_http(app, "POST", "/v1/threads", "resource_id=u1", {"Content-Type": "text/plain"}, raw)
    error = error_of(answer, json.loads(answer.body), 415, "unsupported_media_type")
    assert error["field"] == "content-type"


# --- 8. query parameters ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "query", "field"),
    [
        ("GET", "/v1/threads", "resource_id=u1&limt=5", "limt"),
        ("GET", "/v1/threads/t1", "resource_id=u1&limit=5", "limit"),
        ("POST", "/v1/threads/t1/context", "resource_id=u1&options=%7B%7D", "options"),
        ("GET", "/v1/working-memory", "resource_id=u1&scope=thread", "scope"),
        ("DELETE", "/v1/threads/t1", "resource_id=u1&force=1", "force"),
    ],
)
def test_given_a_query_parameter_the_route_does_not_declare_then_400_naming_it(
    app: MemstackResolver, method: str, path: str, query: str, field: str
) -> None:
    body = {"message": "hi"} if method == "POST" else None
    answer, data = call(app, method, path, body, query=query)
    error = error_of(answer, data, 400, "invalid_input")
    assert error["field"] == field and "unknown query parameter" in error["message"]


@pytest.mark.parametrize(
    ("path", "query", "field"),
    [
        ("/v1/threads", "resource_id=u1&limit=1&limit=2", "limit"),
        ("/v1/threads", "resource_id=u1&order_by=created_at&order_by=updated_at", "order_by"),
        ("/v1/threads/t1/messages", "resource_id=u1&last=1&last=1", "last"),
        ("/v1/working-memory", "resource_id=u1&options=%7B%7D&options=%7B%7D", "options"),
    ],
)
def test_given_a_single_valued_query_parameter_twice_then_400_naming_it(
    app: MemstackResolver, path: str, query: str, field: str
) -> None:
    call(app, "POST", "/v1/threads", {"id": "t1"})
    answer, data = call(app, "GET", path, query=query)
    assert error_of(answer, data, 400, "invalid_input")["field"] == field


def test_given_declared_query_parameters_when_listing_then_they_are_taken_and_health_ignores_any(
    app: MemstackResolver,
) -> None:
    listed, _ = call(
        app, "GET", "/v1/threads", query="resource_id=u1&limit=5&direction=asc&order_by=updated_at"
    )
    assert listed.status == 200
    assert call(app, "GET", "/v1/health", query="probe=1&probe=2")[0].status == 200


def test_given_non_ascii_text_when_answered_then_the_body_is_powertools_compact_ascii_json(
    app: MemstackResolver,
) -> None:
    from memstack.api.app import _POWERTOOLS_JSON

    text = 'naïve café 字 😀 "quoted" \\ tab\there'
    call(app, "POST", "/v1/threads/t1/messages", {"messages": [text, "second"]})
    answer, body = call(app, "POST", "/v1/threads/t1/context", {"message": f"and {text}?"})
    assert answer.status == 200
    assert answer.body.decode("ascii") == _POWERTOOLS_JSON(body)  # the very text Powertools wrote
    assert text in [m["content"] for m in body["messages"]]


def test_given_values_json_has_no_form_for_when_serialised_then_powertools_rules_apply() -> None:
    from dataclasses import dataclass
    from decimal import Decimal

    from memstack.api.app import _POWERTOOLS_JSON, dump_json_text

    @dataclass
    class Point:
        x: int

    for value in [{"a": [1, 2.5, None, True]}, {"d": Decimal("1.5")}, {"p": Point(3)}, "é"]:
        assert dump_json_text(value) == _POWERTOOLS_JSON(value)
    with pytest.raises(TypeError):
        dump_json_text({"o": object()})
