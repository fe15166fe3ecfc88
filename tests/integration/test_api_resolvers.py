"""Several resolvers in one process (``memstack serve`` lends one per request from a pool): a request that is
resolved while another resolver serves a request of its own still sees its own event."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memstack import Memory
from memstack.api import AuthConfig, create_app
from tests.integration.events import Api


@pytest.fixture
def memory() -> Iterator[Memory]:
    with Memory.local(":memory:", embedder="hash") as m:
        yield m


def test_given_two_resolvers_when_one_request_runs_inside_another_then_each_logs_its_own_method_and_path(
    memory: Memory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="memstack.api")
    first = Api(create_app(memory, auth=AuthConfig()).resolve, "u1")
    second = Api(create_app(memory, auth=AuthConfig()).resolve, "u1")
    first.post("/v1/threads", {"id": "t1"})
    real_get_thread = memory.get_thread

    def get_thread_while_another_request_runs(**kwargs: Any) -> Any:
        assert second.post("/v1/threads/t2/messages", {"messages": ["hi"]}).status == 200
        return real_get_thread(**kwargs)

    monkeypatch.setattr(memory, "get_thread", get_thread_while_another_request_runs)
    caplog.clear()

    reply = first.get("/v1/threads/t1")

    assert reply.status == 200 and reply.body["id"] == "t1"
    lines = [vars(r) for r in caplog.records if r.getMessage() == "request"]
    assert [(line["method"], line["route"]) for line in lines] == [
        ("POST", "/v1/threads/{thread_id}/messages"),
        ("GET", "/v1/threads/{thread_id}"),
    ]


def test_given_a_route_registered_after_the_first_request_then_the_pre_check_knows_it_and_its_query(
    memory: Memory,
) -> None:
    """The pre-check's route table is built once, not per request: a route added later (Powertools allows
    it at any time) must still be matched (405 with its method, not 404) and its query names checked."""
    app = create_app(memory, auth=AuthConfig())
    api = Api(app.resolve, "u1")
    assert api.get("/v1/health").status == 200  # the table is built here

    @app.get("/v1/late/<name>")
    def late(name: str, resource_id: str, extra: str = "") -> dict[str, str]:
        return {"name": name, "extra": extra}

    assert api.get("/v1/late/x", query={"extra": "y"}).body == {"name": "x", "extra": "y"}
    assert api.post("/v1/late/x", {}).status == 405
    unknown = api.get("/v1/late/x", query={"nope": "1"})
    assert unknown.status == 400
    assert unknown.body["error"]["field"] == "nope"
