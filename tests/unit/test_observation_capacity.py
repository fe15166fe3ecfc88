"""The observation record's bounds hold on every path that writes it (``observation/capacity.py``).

A verbose Observer — every answer about 50 KB of unique 🔴 lines, much larger than the messages it
observed — drives each path that can grow the record, while the Reflector is down or cannot shrink the log:
appending buffered chunks, activating them, observing synchronously, and a reflection that fails. On every
path the writes commit (no ``PayloadTooLarge`` from the record's size, so saves never back off for it and
the unobserved tail keeps moving) and the log stays within the reflection's ``block_after``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from memstack.adapters.testing import ChatCall, ScriptedChatModel
from memstack.errors import Unavailable
from memstack.model import MAX_OBSERVATION_RECORD_BYTES
from memstack.observation.capacity import record_bytes
from tests.observation_support import om_memory

R, T = "res-1", "thread-1"

BUFFERED: dict[str, Any] = {"observation": {"message_tokens": 3_000, "buffer_tokens": 300}}
SYNCHRONOUS: dict[str, Any] = {"observation": {"message_tokens": 3_000, "buffer_tokens": False}}


def verbose_chat(reflector: str) -> ScriptedChatModel:
    """Observer answers of 2,000 unique 🔴 lines (~50 KB, ~20k tokens); the Reflector ``down`` (HTTP 503)
    or ``useless`` (answers a longer log of 🔴 lines, which is refused as not smaller)."""
    calls = itertools.count()

    def lines(tag: str, count: int) -> str:
        n = next(calls)
        body = "\n".join(
            f"* 🔴 (12:00) {tag} {n}-{j} user number {n * 10_000 + j} likes item{j} in city{j % 97}"
            for j in range(count)
        )
        return f"<observations>\nDate: May 8, 2023\n{body}\n</observations>"

    def respond(call: ChatCall) -> str:
        if call.kind == "observer":
            return lines("fact", 2_000)
        if call.kind == "reflector":
            if reflector == "down":
                raise Unavailable("reflector endpoint down (HTTP 503)")
            return lines("kept", 4_000)
        return "A title"

    return ScriptedChatModel(respond=respond)


def turn(memory: Any, i: int) -> None:
    """One saved turn, about 130 tokens."""
    words = " ".join(f"word{i}x{j}" for j in range(60))
    memory.save_messages(
        thread_id=T,
        resource_id=R,
        messages=[
            {"id": f"u{i}", "role": "user", "content": f"turn {i}: {words}"},
            {"id": f"a{i}", "role": "assistant", "content": f"reply {i}"},
        ],
    )


def chunks_appended(memory: Any) -> None:
    """Buffering only: chunks accumulate below ``message_tokens`` until they alone pass the byte cap."""
    for i in range(20):  # ~2,600 tokens: under the 3,000 at which they would be activated
        turn(memory, i)


def chunks_activated(memory: Any) -> None:
    """Buffered chunks activated onto the log, time and again, with reflection failing."""
    for i in range(60):
        turn(memory, i)


def observed_synchronously(memory: Any) -> None:
    """A backlog observed by ``observe()`` in batches (no buffering), with reflection failing."""
    for i in range(60):
        turn(memory, i)
    for _ in range(3):
        memory.observe(resource_id=R, thread_id=T, reason="threshold")


PATHS: dict[str, tuple[dict[str, Any], Callable[[Any], None]]] = {
    "buffered chunk append": (BUFFERED, chunks_appended),
    "buffered activation": (BUFFERED, chunks_activated),
    "synchronous observation": (SYNCHRONOUS, observed_synchronously),
}


@pytest.mark.parametrize("reflector", ["down", "useless"])
@pytest.mark.parametrize("path", list(PATHS))
def test_given_a_verbose_observer_when_each_write_path_runs_then_it_commits_and_the_log_stays_bounded(
    path: str, reflector: str
) -> None:
    options, drive = PATHS[path]
    chat = verbose_chat(reflector)
    with om_memory(chat, observational_memory=options) as memory:
        drive(memory)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and chat.count("observer") >= 5, "the Observer was not driven hard enough"
        om = memory.options.observational_memory
        t = memory.observation.thresholds(om, rec)
        error = rec.last_error or ""
        assert not error.startswith("PayloadTooLarge"), (
            f"{path}: a write failed for the record's size: {error}"
        )
        assert error == "" or error.startswith("ReflectionFailed"), f"{path}: {error}"
        assert record_bytes(rec) <= MAX_OBSERVATION_RECORD_BYTES
        assert rec.observation_tokens <= t.reflection_block_after, (
            f"{path}: the log is {rec.observation_tokens} tokens, past the reflection's block_after "
            f"({t.reflection_block_after})"
        )
        # the unobserved tail kept moving: saves did not back off the Observer
        _, _, pending = memory.observation.view(om, R, T)
        assert pending < t.message_tokens, f"{path}: {pending} tokens wait unobserved"
        if path == "buffered chunk append":
            assert rec.buffered_chunks, "the chunks were committed"
        else:
            assert rec.observed_seq(T) > 0 and rec.observation_tokens > 0
            assert error.startswith("ReflectionFailed"), (
                "the Reflector's failure stays recorded for the sweep"
            )
        ctx = memory.context(thread_id=T, resource_id=R, message="hi")
        shown = sum(memory.tokenizer.count(s.text) for s in ctx.system if s.kind == "observations")
        # the log as shown: plus its framing (the layer's tags, relative-date notes on `Date:` headers)
        assert shown <= t.reflection_block_after * 1.01, f"{path}: {shown} tokens of observations shown"
