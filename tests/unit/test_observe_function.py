"""The ``observe`` function's own logic (functions/observe/app.py): the Catch path's error text, event
checks, and the sweep (every due job submitted, a failing one does not stop the others)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from memstack.adapters.testing import RecordingScheduler
from memstack.errors import InvalidInput, Unavailable
from memstack.ports import ObservationJob
from tests.observation_support import om_memory

ROOT = Path(__file__).resolve().parents[2]
ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:observation"


def load() -> Any:
    spec = importlib.util.spec_from_file_location("observe_app", ROOT / "functions" / "observe" / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


app = load()


def test_given_a_lambda_error_cause_then_the_text_is_its_name_and_the_start_of_its_message() -> None:
    cause = json.dumps(
        {"errorMessage": "x" * 1000, "errorType": "Unavailable", "stackTrace": ["secret frame"]}
    )
    text = app.failure_text({"Error": "Unavailable", "Cause": cause})
    assert text == "Unavailable: " + "x" * 300
    assert "secret frame" not in text


def test_given_step_functions_own_errors_then_the_text_keeps_a_plain_cause() -> None:
    assert (
        app.failure_text({"Error": "States.Timeout", "Cause": "Task timed out"})
        == "States.Timeout: Task timed out"
    )
    assert app.failure_text({"Error": "States.Timeout"}) == "States.Timeout"
    assert app.failure_text(None) == "Unknown"


@pytest.mark.parametrize("event", [{}, {"resource_id": "r1"}, {"resource_id": 3, "thread_id": "t1"}, []])
def test_given_an_event_without_ids_then_invalid_input(event: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app, "memory_from_env", lambda: pytest.fail("no memory for a bad event"))
    with pytest.raises(InvalidInput):
        app.handler(event, None)


class SweepMemory:
    """A local ``Memory`` whose sweep finds ``jobs`` due (the store's due-work query is tested elsewhere)."""

    def __init__(self, jobs: list[ObservationJob], scheduler: RecordingScheduler) -> None:
        self.memory = om_memory(None, scheduler=scheduler)
        self.scheduler = scheduler
        self.asked: list[tuple[int, int]] = []

        def due(*, idle_seconds: int, limit: int) -> list[ObservationJob]:
            self.asked.append((idle_seconds, limit))
            return jobs

        self.memory.observation_work = due  # type: ignore[method-assign]


def jobs(n: int) -> list[ObservationJob]:
    return [
        ObservationJob(resource_id="r1", thread_id=f"t{i}", key=f"om-{i}-sweep", reason="sweep")
        for i in range(n)
    ]


def test_given_due_work_when_swept_then_every_job_is_submitted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTACK_OBSERVATION_STATE_MACHINE_ARN", ARN)
    memory = SweepMemory(jobs(3), RecordingScheduler())
    monkeypatch.setattr(app, "memory_from_env", lambda: memory.memory)
    assert app.sweep({"idle_seconds": 600, "limit": 10}, None) == {"started": 3}
    assert memory.asked == [(600, 10)]
    assert memory.scheduler.submitted == ["om-0-sweep", "om-1-sweep", "om-2-sweep"]
    assert app.sweep({}, None) == {"started": 3}  # a bare scheduled event: the defaults
    assert memory.asked[-1] == (300, 100)


def test_given_one_job_failing_to_start_when_swept_then_the_others_start_and_the_run_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMSTACK_OBSERVATION_STATE_MACHINE_ARN", ARN)
    memory = SweepMemory(jobs(3), RecordingScheduler(failing={"om-1-sweep"}))
    monkeypatch.setattr(app, "memory_from_env", lambda: memory.memory)
    with pytest.raises(Unavailable, match="1 of 3"):
        app.sweep({}, None)
    assert memory.scheduler.submitted == ["om-0-sweep", "om-2-sweep"]


def test_given_no_state_machine_or_bad_numbers_when_swept_then_invalid_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MEMSTACK_OBSERVATION_STATE_MACHINE_ARN", raising=False)
    monkeypatch.setattr(app, "memory_from_env", lambda: pytest.fail("not built"))
    with pytest.raises(InvalidInput) as caught:
        app.sweep({}, None)
    assert caught.value.field == "MEMSTACK_OBSERVATION_STATE_MACHINE_ARN"
    monkeypatch.setenv("MEMSTACK_OBSERVATION_STATE_MACHINE_ARN", ARN)
    for event in ({"limit": 0}, {"idle_seconds": -1}, {"limit": True}):
        with pytest.raises(InvalidInput):
            app.sweep(event, None)
