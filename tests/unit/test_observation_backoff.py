"""Observational memory when the model fails: every failure kind backs off (the failed stage only), a job
that was queued behind a failing call checks the backoff when it starts, observation keeps moving while
the Reflector fails, and ``close()`` says what it left unfinished and leaves it for the sweep.

The clock is a hand-moved one (``Clock``): backoffs are tested by moving time, never by waiting.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memstack.adapters.testing import DEGENERATE, ChatCall, RecordingScheduler, ScriptedChatModel
from memstack.errors import Unavailable
from memstack.model import utcnow
from memstack.observation import scheduler as scheduler_module
from memstack.observation.engine import (
    MAX_SWEEP_BACKOFF,
    REFLECTION_BACKOFF,
    TRUNCATE_TO_SHARE,
    ReflectorUnavailable,
)
from tests.observation_support import om_memory, save_sentences, sentence

R, T = "res-1", "thread-1"

# the trial's options: a batch observed every ~8 messages, a log reflected past 150 tokens
TIGHT: dict[str, Any] = {
    "observation": {"message_tokens": 200, "buffer_tokens": False},
    "reflection": {"observation_tokens": 150},
}


class Clock:
    """A clock the test moves (``Clock`` port)."""

    def __init__(self) -> None:
        self.at = utcnow()

    def now(self) -> datetime:
        return self.at

    def advance(self, delta: timedelta) -> None:
        self.at += delta


class Failing:
    """An ``on_call`` hook that raises ``error`` for the calls of ``kind`` while ``down``."""

    def __init__(self, kind: str, error: Exception) -> None:
        self.kind, self.error, self.down = kind, error, True

    def __call__(self, call: ChatCall) -> None:
        if self.down and call.kind == self.kind:
            raise self.error


def with_clock(memory: Any) -> Clock:
    clock = Clock()
    memory.observation.clock = clock
    return clock


def test_a_reflector_answering_5xx_backs_off_while_observation_keeps_the_context_bounded() -> None:
    hook = Failing("reflector", Unavailable("OpenAI chat (m) failed after 2 attempt(s): HTTP 500"))
    chat = ScriptedChatModel(on_call=hook)
    with om_memory(chat, observational_memory=TIGHT) as memory:
        clock = with_clock(memory)
        om = memory.options.observational_memory
        for k in range(1, 51):
            save_sentences(memory, R, T, k, 1)
            clock.advance(timedelta(seconds=5))  # 50 turns in about 4 minutes
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None
        t = memory.observation.thresholds(om, rec)
        # the cursor kept moving: what is unobserved is under one batch (message_tokens)
        assert rec.observed_seq(T) >= 40, rec.observed_seq(T)
        assert rec.pending_message_tokens < t.message_tokens
        ctx = memory.context(thread_id=T, resource_id=R, message="hi")
        assert len(ctx.messages) <= 10
        # the log stays bounded: cut without a model once past the reflection's hard point, so at most
        # that plus one Observer answer (itself cut to TRUNCATE_TO_SHARE of the reflection threshold)
        assert rec.observation_tokens <= t.reflection_block_after + t.observation_tokens * TRUNCATE_TO_SHARE
        # the Reflector was not called on every save: once, then after each backoff (2 min, then 4)
        assert chat.count("reflector") <= 3, chat.count("reflector")
        assert rec.last_error is not None and rec.last_error.startswith(
            "ReflectionFailed: the Reflector could not run (ReflectorUnavailable: OpenAI chat (m) failed"
        )
        # the model recovers: the next save after the backoff reflects and the failure is healed
        hook.down = False
        clock.advance(timedelta(hours=1))
        save_sentences(memory, R, T, 51, 8)
        after = memory.get_observation_record(resource_id=R, thread_id=T)
        assert after is not None and after.generation_count >= 1
        assert after.failure_count == 0 and after.last_error is None and after.retry_at is None


def test_an_observer_answering_5xx_is_not_called_again_on_every_save() -> None:
    hook = Failing("observer", Unavailable("OpenAI chat (m) failed after 1 attempt(s): HTTP 500"))
    chat = ScriptedChatModel(on_call=hook)
    with om_memory(chat, observational_memory=TIGHT) as memory:
        clock = with_clock(memory)
        save_sentences(memory, R, T, 1, 10)  # over message_tokens: one failed observation
        assert chat.count("observer") == 1
        for k in range(11, 19):
            save_sentences(memory, R, T, k, 1)
            clock.advance(timedelta(seconds=10))
        assert chat.count("observer") == 1
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.failure_count == 1 and rec.observed_seq(T) == 0
        assert rec.last_error is not None and rec.last_error.startswith("Unavailable: OpenAI chat")
        # the figures are true while nothing can be observed: 18 messages wait
        expected = memory.observation.count(
            memory.list_messages(thread_id=T, resource_id=R, limit=100).messages
        )
        assert rec.pending_message_tokens == expected > 0
        # after the backoff (2 min) the next save tries again; a second failure doubles it (4 min)
        clock.advance(REFLECTION_BACKOFF)
        save_sentences(memory, R, T, 19, 1)
        assert chat.count("observer") == 2
        clock.advance(REFLECTION_BACKOFF)
        save_sentences(memory, R, T, 20, 1)
        assert chat.count("observer") == 2
        hook.down = False
        clock.advance(REFLECTION_BACKOFF * 2)
        save_sentences(memory, R, T, 21, 1)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.failure_count == 0 and rec.observed_seq(T) >= 20


@pytest.mark.parametrize(
    ("retry_after", "wait"),
    [
        (600.0, timedelta(seconds=600)),
        (1.0, REFLECTION_BACKOFF),
        (1e300, MAX_SWEEP_BACKOFF),
        (float("inf"), REFLECTION_BACKOFF),
        (float("nan"), REFLECTION_BACKOFF),
    ],
    ids=[
        "retry-after-longer",
        "retry-after-shorter",
        "retry-after-huge",
        "retry-after-inf",
        "retry-after-nan",
    ],
)
def test_the_backoff_is_the_longer_of_its_interval_and_the_retry_after(
    retry_after: float, wait: timedelta
) -> None:
    hook = Failing("observer", Unavailable("HTTP 429", retry_after=retry_after))
    chat = ScriptedChatModel(on_call=hook)
    with om_memory(chat, observational_memory=TIGHT) as memory:
        clock = with_clock(memory)
        start = clock.now()
        save_sentences(memory, R, T, 1, 10)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.retry_at == start + wait
        hook.down = False
        clock.advance(wait - timedelta(seconds=1))
        save_sentences(memory, R, T, 11, 1)
        assert chat.count("observer") == 1
        clock.advance(timedelta(seconds=2))
        save_sentences(memory, R, T, 12, 1)
        assert chat.count("observer") == 2


@pytest.mark.parametrize("failure", ["unusable", "http500"])
def test_jobs_queued_behind_a_failing_call_check_the_backoff_when_they_start(failure: str) -> None:
    started, release = threading.Event(), threading.Event()

    def hold(call: ChatCall) -> str:
        started.set()
        release.wait(30)
        if failure == "http500":
            raise Unavailable("OpenAI chat (m) failed after 1 attempt(s): HTTP 500")
        return DEGENERATE  # unusable: retried once, then ObservationFailed

    def answer(call: ChatCall) -> str:
        return hold(call) if call.kind == "observer" else "A title"

    chat = ScriptedChatModel(respond=answer)
    with om_memory(chat, background="thread", observational_memory=TIGHT) as memory:
        with_clock(memory)
        save_sentences(memory, R, T, 1, 10)
        assert started.wait(30)
        for k in range(11, 23):  # each save queues a job (a new last seq, a new key) behind the hung one
            save_sentences(memory, R, T, k, 1)
        release.set()
        assert memory.settled(60)
        assert chat.count("observer") == (1 if failure == "http500" else 2)  # the first job's only
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.failure_count == 1


THREADS = ["a", "b", "c"]


def stop_with_a_hung_observer(path: str, stop: Callable[[Any], None], release: threading.Event) -> list[str]:
    """Three threads' jobs queued behind an Observer call that hangs, then ``stop(memory)`` (a close, or the
    exit hook); returns the ``RuntimeWarning`` texts it gave. The hung call ends (failing) once ``release``
    is set: the caller sets it after its checks, since a process the exit hook gave up on ends with the
    call still hanging (a failure it recorded meanwhile would back its thread off, which no exit allows)."""
    started = threading.Event()

    def hang(call: ChatCall) -> None:
        if call.kind == "observer":
            started.set()
            release.wait(60)
            raise Unavailable("the model hung")

    memory = om_memory(
        ScriptedChatModel(on_call=hang), background="thread", path=path, observational_memory=TIGHT
    )
    try:
        for thread in THREADS:  # one save each: one job each
            memory.save_messages(
                thread_id=thread, resource_id=R, messages=[sentence(i) for i in range(1, 11)]
            )
        assert started.wait(30)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            stop(memory)
    except BaseException:
        release.set()
        raise
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def assert_the_sweep_finishes_them(path: str) -> None:
    with om_memory(ScriptedChatModel(), path=path, observational_memory=TIGHT) as again:
        result = again.sweep_observations(idle_seconds=0)
        assert result.started == len(THREADS)
        assert again.settled(60)
        for thread in THREADS:
            rec = again.get_observation_record(resource_id=R, thread_id=thread)
            assert rec is not None and rec.observed_seq(thread) == 10, thread


def test_close_names_the_jobs_it_leaves_and_the_sweep_finishes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduler_module, "CLOSE_TIMEOUT", 0.5, raising=False)
    path = str(tmp_path / "om.db")

    release = threading.Event()
    try:
        said = stop_with_a_hung_observer(path, lambda memory: memory.close(), release)

        assert len(said) == 1, said
        assert "left 3 background observation job(s) unfinished (1 running, 2 not started)" in said[0]
        assert all(f"(thread {thread})" in said[0] for thread in THREADS)
        assert sentence(1) not in said[0] and "hiking" not in said[0]
        assert_the_sweep_finishes_them(path)
    finally:
        release.set()


def test_a_script_that_ends_without_close_leaves_its_unfinished_jobs_due_for_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interpreter's exit hook (``_drain_at_exit``) waits for a scheduler nobody closed, then gives its
    jobs up as a close() that runs out of time does: named in a warning, their records marked due."""
    # the hook drains every unclosed scheduler of the process: only this test's, not other tests' leftovers
    monkeypatch.setattr(scheduler_module, "_open", weakref.WeakSet())
    path = str(tmp_path / "om.db")

    # what atexit runs when a script ends without closing its Memory
    release = threading.Event()
    try:
        said = stop_with_a_hung_observer(
            path, lambda _: scheduler_module._drain_at_exit(timeout=0.5), release
        )

        assert len(said) == 2, said
        assert "still queued at exit" in said[0]
        assert "the interpreter's exit waited" in said[1] and "marked due" in said[1]
        assert all(f"(thread {thread})" in said[1] for thread in THREADS)
        assert_the_sweep_finishes_them(path)
    finally:
        release.set()


def test_close_with_everything_finished_says_nothing() -> None:
    chat = ScriptedChatModel()
    memory = om_memory(chat, background="thread", observational_memory=TIGHT)
    save_sentences(memory, R, T, 1, 10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        memory.close()
    assert [w for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert chat.count("observer") == 1


def test_a_reflector_failure_recorded_by_the_state_machines_catch_backs_off_reflection_only() -> None:
    """On AWS the Catch records the Reflect task's error by its class name: the Reflector's model failing
    must be named apart from the Observer's (``ReflectorUnavailable``), or saves stop observing."""
    hook = Failing("reflector", Unavailable("OpenAI chat (m) failed after 1 attempt(s): HTTP 500"))
    chat = ScriptedChatModel(on_call=hook)
    jobs = RecordingScheduler()
    with om_memory(chat, scheduler=jobs, observational_memory=TIGHT) as memory:
        clock = with_clock(memory)
        for start in (1, 31):  # two Observe tasks: the log ends over the reflection threshold
            save_sentences(memory, R, T, start, 30)
            result = memory.observe(resource_id=R, thread_id=T)
        assert result.should_reflect
        with pytest.raises(ReflectorUnavailable) as failed:
            memory.reflect(resource_id=R, thread_id=T)
        assert isinstance(failed.value, Unavailable) and failed.value.status == 503
        error = f"{type(failed.value).__name__}: {failed.value.message}"  # what the Catch records
        memory.record_observation_failure(resource_id=R, thread_id=T, error=error)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and not memory.observation.reflection_due(
            memory.options.observational_memory, rec
        )
        save_sentences(memory, R, T, 61, 10)  # saves still schedule observation
        assert jobs.jobs and jobs.jobs[-1].reason == "threshold"
        # the Observer's failure, recorded the same way, stops them
        memory.record_observation_failure(resource_id=R, thread_id=T, error="Unavailable: HTTP 500")
        count = len(jobs.jobs)
        clock.advance(timedelta(seconds=30))
        save_sentences(memory, R, T, 71, 10)
        assert len(jobs.jobs) == count
