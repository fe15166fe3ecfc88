"""``memstack.snapstart``: priming runs only in SnapStart's init, reads without writing, and never fails
the init."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from memstack import Memory, NotFound
from memstack.errors import Unavailable
from memstack.snapstart import INIT_TYPE_ENV, PRIME_RESOURCE, PRIME_THREAD, after_restore, prime


def test_given_an_on_demand_init_when_priming_then_nothing_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(INIT_TYPE_ENV, "on-demand")
    built: list[int] = []
    assert prime(lambda: built.append(1) or Memory.local(":memory:", embedder="hash")) is False
    assert built == []


def test_given_a_snap_start_init_when_priming_then_the_memory_assembles_a_context_and_saves_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(INIT_TYPE_ENV, "snap-start")
    memory = Memory.local(tmp_path / "m.db", embedder="hash")
    calls: list[str] = []
    original = memory.context

    def spy(**kwargs: object) -> object:
        calls.append(str(kwargs["resource_id"]))
        return original(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(memory, "context", spy)
    try:
        assert prime(lambda: memory) is True
        assert calls == [PRIME_RESOURCE]
        with pytest.raises(NotFound):
            memory.get_thread(thread_id=PRIME_THREAD, resource_id=PRIME_RESOURCE)
    finally:
        memory.close()


def test_given_the_handlers_resolver_when_priming_then_a_restored_request_builds_no_pydantic_schema(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pydantic._internal._generate_schema import GenerateSchema

    from memstack.api import create_app
    from memstack.snapstart import priming_event

    monkeypatch.setenv(INIT_TYPE_ENV, "snap-start")
    memory = Memory.local(tmp_path / "m.db", embedder="hash")
    app = create_app(memory, routes="context")
    statuses: list[int] = []

    def resolve(event: dict[str, object], context: object) -> dict[str, object]:
        response = app.resolve(event, None)
        statuses.append(int(response["statusCode"]))
        return response

    built: list[object] = []
    generate = GenerateSchema.generate_schema

    def counting(self: GenerateSchema, obj: object) -> object:
        built.append(obj)
        return generate(self, obj)

    try:
        assert prime(lambda: memory, resolve) is True
        monkeypatch.setattr(GenerateSchema, "generate_schema", counting)
        resolve(priming_event(), None)  # the first request after a restore
        assert statuses == [200, 200]
        assert built == [], "the route's models were left to the first request after the restore"
        with pytest.raises(NotFound):
            memory.get_thread(thread_id=PRIME_THREAD, resource_id=PRIME_RESOURCE)
    finally:
        memory.close()


def test_given_an_unreachable_backend_when_priming_then_init_goes_on_with_a_warning_naming_the_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(INIT_TYPE_ENV, "snap-start")

    def unreachable() -> Memory:
        raise Unavailable("OpenSearch cannot be reached")

    with caplog.at_level(logging.WARNING, logger="memstack.snapstart"):
        assert prime(unreachable) is True
    assert "SnapStart priming failed (Unavailable)" in caplog.text


def test_given_a_restore_then_random_draws_differ_from_the_snapshots() -> None:
    random.seed(7)
    state = random.getstate()
    expected = random.random()
    random.setstate(state)  # two environments restored from one snapshot start here
    after_restore()
    assert random.random() != expected
