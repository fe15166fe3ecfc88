"""The committed OpenAPI document, the plain-HTTP adapter for a local server, and the handlers' wiring."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstack import Memory
from memstack.api import AuthConfig, create_app, handle_http, to_event, to_http_response
from memstack.api.openapi import render
from tests.integration.events import Api, reset_process_state, use_sqlite

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "openapi.json"
REGENERATE = "python -m memstack.api.openapi > docs/openapi.json"


def test_given_the_routes_when_the_openapi_document_is_generated_then_it_equals_the_committed_one() -> None:
    assert COMMITTED.read_text() == render(), f"docs/openapi.json is stale: run `{REGENERATE}`"


def test_given_the_document_then_every_route_but_health_takes_resource_id_and_errors_share_one_schema() -> (
    None
):
    doc = json.loads(render())
    assert doc["openapi"].startswith("3.")
    for path, methods in doc["paths"].items():
        for method, operation in methods.items():
            params = {(p["in"], p["name"]): p for p in operation.get("parameters", [])}
            if path != "/v1/health":
                named = params.get(("query", "resource_id")) or params.get(("path", "resource_id"))
                assert named is not None and named["required"] is True, (method, path)
            assert "422" not in operation["responses"]
            for status in ("400", "403", "404", "405", "409", "413", "415", "429", "500", "503"):
                schema = operation["responses"][status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorOut"}


def test_given_the_document_then_recall_hits_carry_seq_and_thread_ids_state_the_routing_rule() -> None:
    schemas = json.loads(render())["components"]["schemas"]
    assert "seq" in schemas["RecallHit"]["required"]
    create_id = schemas["CreateThreadBody"]["properties"]["id"]
    assert "'..'" in json.dumps(create_id)


def test_given_the_module_when_run_then_it_prints_the_document() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memstack.api.openapi"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert json.loads(out)["info"]["title"] == "Memstack API"


# --- the plain-HTTP adapter (what `memstack serve` builds on) -------------------------------------


@pytest.fixture
def memory() -> Iterator[Memory]:
    with Memory.local(":memory:", embedder="hash") as m:
        yield m


def test_given_a_plain_http_request_when_handled_then_status_headers_and_body_come_back(
    memory: Memory,
) -> None:
    app = create_app(memory, auth=AuthConfig())
    body = json.dumps({"messages": ["hello", {"role": "assistant", "content": "hi"}]}).encode()
    saved = handle_http(
        app, "POST", "/v1/threads/t1/messages", "resource_id=u1", {"Content-Type": "application/json"}, body
    )
    assert saved.status == 200
    assert ("Content-Type", "application/json") in saved.headers
    ctx = handle_http(
        app, "post", "/v1/threads/t1/context", {"resource_id": "u1"}, None, b'{"message": "again"}'
    )
    assert [m["content"] for m in json.loads(ctx.body)["messages"]] == ["hello", "hi", "again"]
    gone = handle_http(app, "DELETE", "/v1/threads/t1", "resource_id=u1")
    assert (gone.status, gone.body) == (204, b"")


def test_given_claims_when_a_jwt_app_handles_a_request_then_they_are_checked(memory: Memory) -> None:
    app = create_app(memory, auth=AuthConfig(mode="jwt", resource_claim="sub"))
    assert handle_http(app, "GET", "/v1/threads", "resource_id=u1", claims={"sub": "u1"}).status == 200
    assert handle_http(app, "GET", "/v1/threads", "resource_id=u1", claims={"sub": "u2"}).status == 403


def test_given_binary_and_repeated_values_when_converted_then_the_event_keeps_them() -> None:
    event = to_event("put", "/v1/a%20b", "x=1&x=2", [("X-H", "1"), ("X-H", "2")], b"\xff")
    assert event["path"] == "/v1/a b" and event["httpMethod"] == "PUT"
    assert event["multiValueQueryStringParameters"] == {"x": ["1", "2"]}
    assert event["queryStringParameters"] == {"x": "2"}
    assert event["multiValueHeaders"] == {"X-H": ["1", "2"]}
    assert event["isBase64Encoded"] is True
    response = to_http_response(
        {"statusCode": 201, "multiValueHeaders": {"A": ["1", "2"]}, "body": "aGk=", "isBase64Encoded": True}
    )
    assert (response.status, response.headers, response.body) == (201, [("A", "1"), ("A", "2")], b"hi")


def test_given_a_memory_provider_when_the_app_is_created_then_nothing_is_built_until_a_request() -> None:
    built: list[Memory] = []

    def provider() -> Memory:
        if not built:
            built.append(Memory.local(":memory:", embedder="hash"))
        return built[0]

    app = create_app(provider, auth=AuthConfig())
    assert built == []
    assert handle_http(app, "GET", "/v1/threads", "resource_id=u").status == 200
    assert handle_http(app, "GET", "/v1/threads", "resource_id=u").status == 200
    assert len(built) == 1
    built[0].close()


# --- the handlers --------------------------------------------------------------------------------


def test_given_the_handler_modules_when_imported_then_no_memory_is_built_and_no_backend_client_loaded() -> (
    None
):
    code = (
        "import sys; sys.path[:0] = ['.']\n"
        "import functions.api.app, functions.context.app, memstack.bootstrap\n"
        "assert memstack.bootstrap._memory is None\n"
        "heavy = {'pynamodb', 'opensearchpy', 'openai', 'sqlite_vec', 'tiktoken', 'numpy'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_given_the_context_function_when_called_then_it_serves_context_and_not_the_other_routes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_sqlite(monkeypatch, tmp_path / "memory.db")
    from functions.context.app import handler

    api = Api(handler, "user-a")
    assert api.post("/v1/threads/t1/context", {"message": "hi"}).status == 200
    for reply in (
        api.post("/v1/threads/t1/recall", {"query": "hi"}),  # API Gateway sends these to the api function
        api.post("/v1/threads/t1/messages", {"messages": ["x"]}),
    ):
        assert reply.status == 404 and reply.error["code"] == "not_found"
    reset_process_state()


def test_given_the_route_sets_then_the_context_set_is_the_context_route_and_all_serves_every_router() -> None:
    from memstack.api.app import ROUTE_SETS, served_routes

    assert served_routes("context") == [("POST", "/v1/threads/{thread_id}/context")]
    documented = {(m.upper(), p) for p, ops in json.loads(render())["paths"].items() for m in ops}
    assert set(served_routes("all")) == documented
    assert set(ROUTE_SETS["context"]) <= set(ROUTE_SETS["all"])
