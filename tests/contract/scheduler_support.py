"""Subjects of the ``ObservationScheduler`` conformance suite: ``InProcessScheduler`` on its worker thread
and inline, ``StepFunctionsScheduler`` under moto, and the shipped ``RecordingScheduler``.

Each subject tells the suite which jobs have started (waiting for background work where there is any), and
how to make the next submit fail where the scheduler can fail to start a job.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from memstack.adapters.testing import RecordingScheduler
from memstack.observation.scheduler import InProcessScheduler
from memstack.ports import ObservationJob, ObservationScheduler

REGION = "us-east-1"
DEFINITION = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}})


@dataclass
class SchedulerSubject:
    """A scheduler under test.

    Attributes:
        scheduler: the adapter.
        started: the jobs started so far (after the scheduler's background work has settled), in no set order.
        fail: makes submitting ``job`` fail to start it (the suite expects ``Unavailable``); ``None`` when
            the scheduler cannot fail to start a job.
        gate: for a scheduler that runs jobs on its own thread, an event each job waits on (up to 5 s)
            before it finishes (set it to let the jobs end); ``None`` otherwise.
        finished: for a gated scheduler, the jobs finished so far, without waiting.
    """

    scheduler: ObservationScheduler
    started: Callable[[], list[ObservationJob]]
    fail: Callable[[ObservationJob], None] | None = None
    gate: threading.Event | None = None
    finished: Callable[[], list[ObservationJob]] | None = None


@contextmanager
def in_process(*, synchronous: bool) -> Iterator[SchedulerSubject]:
    ran: list[ObservationJob] = []
    gate = threading.Event()
    gate.set()

    def run(job: ObservationJob) -> None:
        gate.wait(5)
        ran.append(job)

    scheduler = InProcessScheduler(run, synchronous=synchronous)

    def started() -> list[ObservationJob]:
        assert scheduler.settled(30), "the worker did not finish its jobs"
        return list(ran)

    if synchronous:
        yield SchedulerSubject(scheduler, started)
    else:
        yield SchedulerSubject(scheduler, started, gate=gate, finished=lambda: list(ran))
    gate.set()
    scheduler.close()


@contextmanager
def step_functions() -> Iterator[SchedulerSubject]:
    import os

    import boto3
    import moto

    from memstack.adapters.stepfunctions import StepFunctionsScheduler

    saved = {name: os.environ.get(name) for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"})
    try:
        with moto.mock_aws():
            client = boto3.client("stepfunctions", region_name=REGION)
            arn = client.create_state_machine(
                name="observation",
                definition=DEFINITION,
                roleArn="arn:aws:iam::123456789012:role/observation",
            )["stateMachineArn"]
            scheduler = StepFunctionsScheduler(arn)

            def started() -> list[ObservationJob]:
                try:
                    executions = client.list_executions(stateMachineArn=arn)["executions"]
                except client.exceptions.StateMachineDoesNotExist:
                    return []  # deleted by ``fail``: nothing can have started
                out = []
                for execution in executions:
                    described = client.describe_execution(executionArn=execution["executionArn"])
                    out.append(ObservationJob(**json.loads(described["input"])))
                return out

            def fail(job: ObservationJob) -> None:
                client.delete_state_machine(stateMachineArn=arn)

            yield SchedulerSubject(scheduler, started, fail=fail)
            scheduler.close()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def recording() -> Iterator[SchedulerSubject]:
    scheduler = RecordingScheduler()
    yield SchedulerSubject(
        scheduler, started=lambda: list(scheduler.jobs), fail=lambda job: scheduler.failing.add(job.key)
    )


SCHEDULER_FACTORIES: dict[str, Callable[[], Any]] = {
    "in-process-thread": lambda: in_process(synchronous=False),
    "in-process-inline": lambda: in_process(synchronous=True),
    "stepfunctions-moto": step_functions,
    "recording": recording,
}
"""name → factory(): a context manager yielding a fresh ``SchedulerSubject``."""

CAN_FAIL = frozenset({"stepfunctions-moto", "recording"})
"""Subjects that can fail to start a job (their ``fail`` is set); in-process schedulers only queue jobs."""

HAS_WORKER = frozenset({"in-process-thread"})
"""Subjects that run jobs on a thread of their own (their ``gate`` is set); Step Functions runs them
elsewhere, the inline scheduler inside ``submit``, the recording one never."""
