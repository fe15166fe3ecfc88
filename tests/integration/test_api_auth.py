"""Auth modes of the REST API: IAM (the default, ``resource_id`` trusted) and JWT (``resource_id`` must equal a
token claim, 403 otherwise)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.events import Api, reset_process_state, use_sqlite


def jwt_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> Api:
    use_sqlite(monkeypatch, tmp_path / "memory.db", MEMSTACK_AUTH="jwt", **env)
    from functions.api.app import handler

    return Api(handler, "user-a")


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    yield
    reset_process_state()


def test_given_iam_mode_when_any_resource_is_named_then_it_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_sqlite(monkeypatch, tmp_path / "memory.db")
    from functions.api.app import handler

    assert Api(handler, "user-a").post("/v1/threads", {"id": "t"}).status == 201
    assert Api(handler, "user-a", claims={"sub": "someone-else"}).get("/v1/threads/t").status == 200


def test_given_jwt_mode_when_the_sub_claim_matches_then_the_call_is_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = jwt_api(tmp_path, monkeypatch)
    reply = api.post("/v1/threads", {"id": "t"}, claims={"sub": "user-a", "email": "a@example.com"})
    assert reply.status == 201
    assert reply.body["resource_id"] == "user-a"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/threads", None),
        ("POST", "/v1/threads", {"id": "t"}),
        ("GET", "/v1/threads/t", None),
        ("POST", "/v1/threads/t/messages", {"messages": ["x"]}),
        ("GET", "/v1/threads/t/messages", None),
        ("POST", "/v1/messages/delete", {"message_ids": ["m"]}),
        ("POST", "/v1/threads/t/context", {"message": "hi"}),
        ("POST", "/v1/threads/t/recall", {"query": "hi"}),
        ("GET", "/v1/working-memory", None),
        ("PUT", "/v1/working-memory", {"working_memory": "x"}),
        ("GET", "/v1/threads/t/working-memory", None),
    ],
)
def test_given_jwt_mode_when_the_claim_names_another_resource_then_403_on_every_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str, path: str, body: object
) -> None:
    api = jwt_api(tmp_path, monkeypatch)
    reply = api(method, path, body=body, claims={"sub": "user-b"})
    assert reply.status == 403, reply.raw
    assert reply.error == {
        "code": "forbidden",
        "message": "resource_id does not match the token's 'sub' claim",
        "field": "resource_id",
    }


def test_given_jwt_mode_when_the_claim_is_missing_then_403(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = jwt_api(tmp_path, monkeypatch)
    assert api.get("/v1/threads", claims={"email": "a@example.com"}).status == 403
    assert api.get("/v1/threads", claims=None).status == 403, "no authorizer at all"


def test_given_jwt_mode_when_the_body_is_invalid_and_the_claim_differs_then_403_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = jwt_api(tmp_path, monkeypatch)
    assert api.post("/v1/threads/t/messages", {"nonsense": 1}, claims={"sub": "user-b"}).status == 403


def test_given_a_configured_claim_when_it_matches_then_served_and_sub_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = jwt_api(tmp_path, monkeypatch, MEMSTACK_JWT_RESOURCE_CLAIM="custom:tenant")
    assert api.get("/v1/threads", claims={"sub": "user-a"}).status == 403
    assert api.get("/v1/threads", claims={"sub": "x", "custom:tenant": "user-a"}).status == 200


def test_given_a_lambda_authorizer_context_when_it_holds_the_claim_then_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = jwt_api(tmp_path, monkeypatch)
    assert api.get("/v1/threads", claims=None, authorizer={"sub": "user-a", "principalId": "p"}).status == 200
    assert api.get("/v1/threads", claims=None, authorizer={"sub": "user-b"}).status == 403


def test_given_jwt_mode_when_health_is_asked_then_no_claim_is_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = jwt_api(tmp_path, monkeypatch)
    assert api.get("/v1/health", resource_id="").status == 200


def test_given_jwt_mode_when_two_tenants_each_own_a_thread_then_each_sees_only_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = jwt_api(tmp_path, monkeypatch)
    a.claims = {"sub": "user-a"}
    b = a.as_resource("user-b", claims={"sub": "user-b"})
    assert b.post("/v1/threads/tb/messages", {"messages": ["b's"]}).status == 200
    assert a.get("/v1/threads/tb").status == 404
    assert a.get("/v1/threads/tb", resource_id="user-b").status == 403
    assert [t["id"] for t in b.get("/v1/threads").body["threads"]] == ["tb"]
    assert a.get("/v1/threads").body["threads"] == []
