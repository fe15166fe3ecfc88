"""``POST /v1/threads/{thread_id}/clone`` into another resource: allowed where the caller may act for both
resources (IAM: a trusted backend), refused with 403 in JWT mode for any resource but the token's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.events import Api, reset_process_state, use_sqlite


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    yield
    reset_process_state()


def test_given_iam_mode_when_a_thread_is_cloned_into_another_resource_then_it_lands_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_sqlite(monkeypatch, tmp_path / "memory.db")
    from functions.api.app import handler

    source, target = Api(handler, "user-a"), Api(handler, "user-b")
    assert source.post("/v1/threads/t/messages", {"messages": ["Lisbon on Friday"]}).status == 200

    reply = source.post("/v1/threads/t/clone", {"new_thread_id": "copy", "target_resource_id": "user-b"})

    assert reply.status == 201, reply.raw
    assert reply.body["thread"]["resource_id"] == "user-b"
    assert [m["resource_id"] for m in reply.body["messages"]] == ["user-b"]
    assert (
        target.get("/v1/threads/copy/messages").body["messages"][0]["parts"][0]["text"] == "Lisbon on Friday"
    )
    assert source.get("/v1/threads/copy").status == 404, "the clone is the target's, not the source's"


def test_given_jwt_mode_when_cloning_into_another_resource_then_403_and_nothing_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_sqlite(monkeypatch, tmp_path / "memory.db", MEMSTACK_AUTH="jwt")
    from functions.api.app import handler

    owner = Api(handler, "user-a", claims={"sub": "user-a"})
    assert owner.post("/v1/threads/t/messages", {"messages": ["mine"]}).status == 200

    refused = owner.post("/v1/threads/t/clone", {"new_thread_id": "copy", "target_resource_id": "user-b"})
    same = owner.post("/v1/threads/t/clone", {"new_thread_id": "copy", "target_resource_id": "user-a"})

    assert refused.status == 403 and refused.error["code"] == "forbidden", refused.raw
    assert same.status == 201 and same.body["thread"]["resource_id"] == "user-a"
    other = Api(handler, "user-b", claims={"sub": "user-b"})
    assert other.get("/v1/threads/copy").status == 404


def test_given_a_boolean_message_limit_when_cloning_then_400_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_sqlite(monkeypatch, tmp_path / "memory.db")
    from functions.api.app import handler

    api = Api(handler, "user-a")
    assert api.post("/v1/threads/t/messages", {"messages": ["one", "two"]}).status == 200

    reply = api.post("/v1/threads/t/clone", {"new_thread_id": "copy", "message_limit": True})

    assert reply.status == 400 and reply.error["code"] == "invalid_input", reply.raw
    assert "message_limit" in reply.error["field"]
