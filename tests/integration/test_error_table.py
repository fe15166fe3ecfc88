"""One error table: every ``MemstackError`` class answers with its own status and code over HTTP, and the
client raises the same class back (memstack.errors.error_classes, api/errors.py, client.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

import memstack  # noqa: F401 - loads every module that defines error classes
from memstack import Memory
from memstack.api import AuthConfig, create_app
from memstack.client import error_from_response
from memstack.errors import MemstackError, error_class, error_classes
from tests.integration.events import Api


@pytest.fixture
def memory() -> Iterator[Memory]:
    with Memory.local(":memory:", embedder="hash") as m:
        yield m


def test_given_the_library_then_the_table_holds_every_error_class_once_with_a_distinct_code() -> None:
    classes = error_classes()
    assert {"invalid_input", "not_found", "method_not_allowed", "unsupported_media_type", "throttled"} <= set(
        classes
    )
    assert "observation_failed" in classes, "classes of other modules are in the table"
    assert all(code == cls.code for code, cls in classes.items())
    assert error_class(status=400) is classes["invalid_input"], "a status maps to its most general class"


@pytest.mark.parametrize("cls", list(error_classes().values()), ids=lambda c: c.__name__)
def test_given_an_error_class_when_a_route_raises_it_then_the_client_raises_the_same_class(
    cls: type[MemstackError], memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(**_: object) -> None:
        raise cls("what went wrong", field="thread_id")

    monkeypatch.setattr(memory, "get_thread", fail)
    reply = Api(create_app(memory, auth=AuthConfig()).resolve, "u1").get("/v1/threads/t1")

    assert (reply.status, reply.error["code"]) == (cls.status, cls.code)
    exc = error_from_response(httpx.Response(reply.status, content=json.dumps(reply.body).encode()))
    assert type(exc) is cls
    assert (exc.code, exc.message, exc.field, exc.status) == (
        cls.code,
        "what went wrong",
        "thread_id",
        cls.status,
    )
