"""Conformance suite of the ``ObservationScheduler`` port: ``InProcessScheduler`` (worker thread and
inline), ``StepFunctionsScheduler`` under moto and the shipped ``RecordingScheduler`` run it unchanged
(subjects in ``SCHEDULER_FACTORIES``, tests/contract/scheduler_support.py).

The contract, from ``memstack.ports.ObservationScheduler`` and ``ObservationJob``:

* a submitted job is started once, with its ids, key and reason intact;
* a key is started at most once: submitting it again (even for another reason) is quietly ignored, which
  is what makes two triggers that saw the same state start one piece of work;
* keys of up to 80 characters of ``[A-Za-z0-9_-]`` are accepted;
* a job that cannot be started raises ``Unavailable`` and is not started;
* a scheduler with a worker returns from ``submit`` before the job ends (the inline scheduler runs the
  job inside ``submit`` by design: tests, simulations, one-shot scripts);
* ``close()`` (where there is one) keeps every job already accepted and may be called twice.
"""

from __future__ import annotations

import string
from collections.abc import Iterator

import pytest

from memstack.errors import Unavailable
from memstack.ports import ObservationJob, ObservationScheduler

from .scheduler_support import CAN_FAIL, HAS_WORKER, SCHEDULER_FACTORIES, SchedulerSubject


def job(n: int, *, reason: str = "threshold", key: str | None = None) -> ObservationJob:
    return ObservationJob(
        resource_id=f"res-{n}", thread_id=f"thread-{n}", key=key or f"om-job-{n}-v1-s{n}", reason=reason
    )


@pytest.fixture(params=sorted(SCHEDULER_FACTORIES))
def subject(request: pytest.FixtureRequest) -> Iterator[SchedulerSubject]:
    with SCHEDULER_FACTORIES[request.param]() as made:
        yield made


@pytest.fixture(params=sorted(CAN_FAIL))
def breakable(request: pytest.FixtureRequest) -> Iterator[SchedulerSubject]:
    """The schedulers that can fail to start a job (in-process ones only queue it)."""
    with SCHEDULER_FACTORIES[request.param]() as made:
        assert made.fail is not None
        yield made


@pytest.fixture(params=sorted(HAS_WORKER))
def worker(request: pytest.FixtureRequest) -> Iterator[SchedulerSubject]:
    """The schedulers that run jobs on a thread of their own."""
    with SCHEDULER_FACTORIES[request.param]() as made:
        assert made.gate is not None and made.finished is not None
        yield made


def test_given_a_scheduler_then_it_satisfies_the_port(subject: SchedulerSubject) -> None:
    assert isinstance(subject.scheduler, ObservationScheduler)


def test_given_a_job_when_submitted_then_it_is_started_once_with_its_ids_key_and_reason(
    subject: SchedulerSubject,
) -> None:
    subject.scheduler.submit(job(1, reason="buffer"))
    assert subject.started() == [job(1, reason="buffer")]


def test_given_a_key_submitted_again_when_started_then_only_the_first_runs_and_nothing_is_raised(
    subject: SchedulerSubject,
) -> None:
    subject.scheduler.submit(job(1))
    subject.scheduler.submit(job(1))
    subject.scheduler.submit(job(1, reason="sweep"))  # same key, another payload
    assert subject.started() == [job(1)]


def test_given_many_jobs_when_submitted_then_each_is_started_exactly_once(subject: SchedulerSubject) -> None:
    jobs = [job(n) for n in range(12)]
    for each in jobs + jobs[::3]:
        subject.scheduler.submit(each)
    started = subject.started()
    assert sorted(started, key=lambda j: j.key) == sorted(jobs, key=lambda j: j.key)


def test_given_the_longest_key_the_port_allows_when_submitted_then_it_is_started(
    subject: SchedulerSubject,
) -> None:
    alphabet = string.ascii_letters + string.digits + "_-"
    longest = (alphabet * 2)[:80]
    subject.scheduler.submit(job(1, key=longest))
    assert [j.key for j in subject.started()] == [longest]


def test_given_a_job_that_cannot_be_started_when_submitted_then_unavailable_and_not_started(
    breakable: SchedulerSubject,
) -> None:
    assert breakable.fail is not None
    breakable.fail(job(1))
    with pytest.raises(Unavailable):
        breakable.scheduler.submit(job(1))
    assert breakable.started() == []


def test_given_a_worker_when_a_job_is_submitted_then_submit_returns_before_the_job_ends(
    worker: SchedulerSubject,
) -> None:
    assert worker.gate is not None and worker.finished is not None
    worker.gate.clear()
    worker.scheduler.submit(job(1))
    assert worker.finished() == [], "submit waited for the job"
    worker.gate.set()
    assert worker.started() == [job(1)]


def test_given_accepted_jobs_when_closed_twice_then_every_job_is_kept(subject: SchedulerSubject) -> None:
    close = getattr(subject.scheduler, "close", None)
    assert close is not None, "every shipped scheduler can be closed"
    subject.scheduler.submit(job(1))
    subject.scheduler.submit(job(2))
    close()
    close()
    assert sorted(j.key for j in subject.started()) == [job(1).key, job(2).key]
