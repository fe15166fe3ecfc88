"""``DELETE /v1/resources/{resource_id}``: the erasure over HTTP on the embedded default — the receipt, nothing
of the resource left in the SQLite file, zeros the second time, JWT ownership, refused ids."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstack.model import ObservationRecord
from tests.erase_support import remnants
from tests.integration.events import Api, reset_process_state, use_sqlite

WM_RESOURCE = {"working_memory": {"enabled": True, "scope": "resource"}}
ZEROS = {"threads": 0, "messages": 0, "working_memory": 0, "observation_records": 0, "index_documents": 0}


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    yield
    reset_process_state()


def fill(api: Api) -> None:
    """Threads, messages, resource- and thread-scope working memory and an observation record, over HTTP
    (the record through the process's store: no route writes one directly)."""
    import memstack.bootstrap

    assert (
        api.post("/v1/threads/trip/messages", {"messages": ["Lisbon on Friday", "and Porto"]}).status == 200
    )
    assert api.post("/v1/threads/diet/messages", {"messages": ["I am vegan"]}).status == 200
    assert api.put("/v1/working-memory", {"working_memory": "# User", "options": WM_RESOURCE}).status == 204
    trip = {"working_memory": "# Trip", "options": {"working_memory": {"enabled": True, "scope": "thread"}}}
    assert api.put("/v1/threads/trip/working-memory", trip).status == 204
    rid = api.resource_id
    assert rid is not None and memstack.bootstrap._memory is not None
    memstack.bootstrap._memory.store.put_observation_record(
        ObservationRecord(scope="resource", resource_id=rid, active_observations="* vegan"),
        expected_version=0,
    )


def process_store() -> object:
    import memstack.bootstrap

    assert memstack.bootstrap._memory is not None
    return memstack.bootstrap._memory.store


def test_given_two_resources_when_one_is_erased_over_http_then_its_receipt_comes_back_and_nothing_remains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_sqlite(monkeypatch, tmp_path / "memory.db")
    from functions.api.app import handler

    a, b = f"erase-a-{uuid.uuid4().hex[:8]}", f"erase-b-{uuid.uuid4().hex[:8]}"
    fill(Api(handler, a))
    fill(Api(handler, b))
    before_b = sorted(remnants(b, store=process_store()))
    edge = Api(handler, None)  # the resource is in the path: no resource_id query

    reply = edge.delete(f"/v1/resources/{a}")

    assert reply.status == 200, reply.raw
    assert reply.body["resource_id"] == a
    counts = reply.body["counts"]
    assert {k: counts[k] for k in ("threads", "messages", "working_memory", "observation_records")} == {
        "threads": 2,
        "messages": 3,
        "working_memory": 1,
        "observation_records": 1,
    }
    assert counts["index_documents"] >= 3
    assert remnants(a, store=process_store()) == []
    assert sorted(remnants(b, store=process_store())) == before_b
    assert Api(handler, a).get("/v1/threads").body["threads"] == []
    assert edge.delete(f"/v1/resources/{a}").body == {"resource_id": a, "counts": ZEROS}


def test_given_jwt_mode_when_another_resources_token_erases_then_403_and_its_own_token_may(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_sqlite(monkeypatch, tmp_path / "memory.db", MEMSTACK_AUTH="jwt")
    from functions.api.app import handler

    owner = Api(handler, "user-a", claims={"sub": "user-a"})
    assert owner.post("/v1/threads/t/messages", {"messages": ["mine"]}).status == 200
    edge = Api(handler, None)

    refused = edge.delete("/v1/resources/user-a", claims={"sub": "user-b"})
    missing = edge.delete("/v1/resources/user-a", claims={"email": "a@example.com"})

    assert refused.status == 403, refused.raw
    assert refused.error == {
        "code": "forbidden",
        "message": "resource_id does not match the token's 'sub' claim",
        "field": "resource_id",
    }
    assert missing.status == 403
    assert owner.get("/v1/threads/t").status == 200, "a refused erasure deletes nothing"
    erased = edge.delete("/v1/resources/user-a", claims={"sub": "user-a"})
    assert erased.status == 200 and erased.body["counts"]["threads"] == 1
    assert owner.get("/v1/threads/t").status == 404


@pytest.mark.parametrize("bad", ["x" * 257, " "], ids=["too-long", "blank"])
def test_given_a_refused_resource_id_when_erased_then_400_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    use_sqlite(monkeypatch, tmp_path / "memory.db")
    from functions.api.app import handler

    reply = Api(handler, None).delete(f"/v1/resources/{bad}")

    assert reply.status == 400, reply.raw
    assert reply.error["code"] == "invalid_input" and reply.error["field"] == "resource_id"


def test_given_a_query_parameter_when_erasing_then_400_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_sqlite(monkeypatch, tmp_path / "memory.db")
    from functions.api.app import handler

    reply = Api(handler, None).delete("/v1/resources/user-a", query={"force": "yes"})

    assert reply.status == 400, reply.raw
    assert reply.error["field"] == "force"
