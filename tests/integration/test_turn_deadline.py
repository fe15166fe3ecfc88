"""A turn is never held hostage: ``context()`` answers within ``context_timeout_ms`` whatever the Observer's
endpoint, a slow Reflector or a slow embedder does (issue: "context() has a hard deadline").

The model endpoint is a real HTTP server on 127.0.0.1 driven through the real ``OpenAIChatModel``; the
figures asserted are loose upper bounds (the budget plus a margin), never timings of the happy path.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest

from memstack import Memory, deadline
from memstack.adapters.hash_embed import HashEmbedder
from memstack.adapters.openai import OpenAIChatModel
from memstack.adapters.testing import RecordingScheduler, ScriptedChatModel
from memstack.ports import ChatResult, Vector
from tests.observation_support import om_memory, sentence

R, T = "res-1", "thread-1"
BUDGET_MS = 1_500
MARGIN_S = 1.5
"""Slack over the budget for the store reads and assembly on a loaded 2-core machine."""

SMALL: dict[str, Any] = {
    "observation": {"message_tokens": 1_000, "buffer_tokens": False},
    "reflection": {"observation_tokens": 600},
}


class Endpoint(ThreadingHTTPServer):
    """An OpenAI-compatible endpoint that misbehaves: ``mode`` is ``hang`` (never answers until the test
    ends) or ``busy`` (503 with ``Retry-After: 20``)."""

    daemon_threads = True

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests = 0
        self.release = threading.Event()
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: Endpoint

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.requests += 1
        if self.server.mode == "hang":
            self.server.release.wait(60)
            return
        body = json.dumps({"error": {"message": "busy", "type": "server_error"}}).encode()
        self.send_response(503)
        self.send_header("content-type", "application/json")
        self.send_header("retry-after", "20")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(params=["hang", "busy"])
def endpoint(request: pytest.FixtureRequest) -> Iterator[Endpoint]:
    import openai  # noqa: F401  # imported before the clock starts: a cold import can take a second

    server = Endpoint(request.param)
    worker = threading.Thread(target=server.serve_forever, daemon=True)
    worker.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()


def save(memory: Any, count: int) -> None:
    memory.save_messages(
        thread_id=T,
        resource_id=R,
        messages=[
            {"id": f"m{i}", "role": "user" if i % 2 else "assistant", "content": sentence(i)}
            for i in range(1, count + 1)
        ],
    )


def test_given_an_observer_endpoint_that_hangs_or_says_retry_after_20s_when_context_is_over_block_after_then_it_answers_within_the_budget(
    endpoint: Endpoint,
) -> None:
    chat = OpenAIChatModel("gpt-4o-mini", api_key="k", base_url=endpoint.base_url, timeout=10, max_retries=2)
    with om_memory(
        chat, scheduler=RecordingScheduler(), observational_memory=SMALL, context_timeout_ms=BUDGET_MS
    ) as memory:
        save(memory, 60)  # well over block_after (1,200 tokens)
        started = time.monotonic()
        ctx = memory.context(thread_id=T, resource_id=R, message="hi")
        elapsed = time.monotonic() - started
        assert elapsed < BUDGET_MS / 1000 + MARGIN_S, f"context() took {elapsed:.1f}s"
        assert endpoint.requests >= 1
        assert [m.id for m in ctx.messages][:2] == ["m1", "m2"]  # answered from the raw tail
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.failure_count >= 1
        assert rec.last_error is not None and rec.last_error.split(":")[0] in (
            "DeadlineExceeded",
            "Unavailable",
        )
        assert rec.pending_since is not None  # due: the sweep takes the work over


class SlowChat(ScriptedChatModel):
    """A scripted model that takes ``seconds`` to answer (it cannot be interrupted)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.release = threading.Event()

    def complete(self, messages: Any, **kwargs: Any) -> ChatResult:
        self.release.wait(self.seconds)
        return super().complete(messages, **kwargs)


def test_given_a_slow_reflector_ladder_when_context_is_over_the_reflection_block_after_then_it_answers_within_the_budget() -> (
    None
):
    chat = SlowChat(0.05)
    with om_memory(
        chat, scheduler=RecordingScheduler(), observational_memory=SMALL, context_timeout_ms=60_000
    ) as memory:
        save(memory, 60)
        memory.context(thread_id=T, resource_id=R, message="hi")  # observes (fast)
        chat.seconds = 1.0  # each Reflector level now takes 1 s: 4 levels would take 4 s
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None
        before = rec.active_observations
        # a log far over the reflection's block_after, with nothing the Reflector can compress under it
        memory.store.put_observation_record(
            rec.model_copy(
                update={
                    "active_observations": before + "\n" + "\n".join(f"* 🔴 fact {i}" for i in range(400)),
                    "observation_tokens": 5_000,
                }
            ),
            expected_version=rec.version,
        )
        started = time.monotonic()
        memory.context(thread_id=T, resource_id=R, message="hi", options={"context_timeout_ms": BUDGET_MS})
        elapsed = time.monotonic() - started
        assert elapsed < BUDGET_MS / 1000 + MARGIN_S, f"context() took {elapsed:.1f}s"


class SlowEmbedder(HashEmbedder):
    """The hash embedder, ``delay`` seconds slower on queries once ``delay`` is set."""

    delay = 0.0

    def embed_query(self, text: str) -> Vector:
        time.sleep(self.delay)
        return super().embed_query(text)


@pytest.mark.parametrize("parallel", [True, False], ids=["beside-the-reads", "inline-default"])
def test_given_a_slow_embedder_when_context_recalls_then_the_turn_is_answered_without_recall(
    caplog: pytest.LogCaptureFixture, parallel: bool
) -> None:
    emb = SlowEmbedder()
    memory = om_memory(
        None, embedder=emb, semantic_recall={"top_k": 2, "mode": "vector"}, context_timeout_ms=500
    )
    assert memory.parallel_recall is False  # the embedded default
    memory.parallel_recall = parallel
    with memory:
        save(memory, 30)
        emb.delay = 3.0
        started = time.monotonic()
        with caplog.at_level("WARNING"):
            ctx = memory.context(thread_id=T, resource_id=R, message="hiking near the lake")
        elapsed = time.monotonic() - started
        assert elapsed < 0.5 + MARGIN_S, f"context() took {elapsed:.1f}s"
        assert [m.id for m in ctx.messages][-2:] == ["m30", ctx.messages[-1].id]
        assert any("DeadlineExceeded" in r.getMessage() for r in caplog.records)
        emb.delay = 0.0
        caplog.clear()
        with caplog.at_level("WARNING"):  # within the budget, recall answers again
            memory.context(thread_id=T, resource_id=R, message="hiking near the lake")
        assert not any("semantic recall failed" in r.getMessage() for r in caplog.records)


def test_given_nested_deadlines_when_read_then_the_sooner_one_wins_and_pool_work_sees_it() -> None:
    assert deadline.remaining() is None
    with deadline.within(10):
        with deadline.within(0.5):
            left = deadline.remaining()
            assert left is not None and left <= 0.5
            seen: list[float | None] = []
            worker = threading.Thread(target=deadline.carry(lambda: seen.append(deadline.remaining())))
            worker.start()
            worker.join()
            assert seen[0] is not None and seen[0] <= 0.5
        with deadline.within(60):
            left = deadline.remaining()
            assert left is not None and left <= 10
    assert deadline.remaining() is None


class LambdaContext:
    """The part of the Lambda runtime's context object the API reads: the time left."""

    function_name = "memstack-context"
    aws_request_id = "req-1"

    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_given_a_lambda_with_little_time_left_when_context_is_posted_then_the_turn_ends_before_the_invocation() -> (
    None
):
    from memstack.api import AuthConfig, create_app
    from tests.integration.events import Api

    chat = SlowChat(30.0)  # a synchronous Observer that would outlive the invocation
    with om_memory(chat, scheduler=RecordingScheduler(), observational_memory=SMALL) as memory:
        save(memory, 60)
        app = create_app(memory, auth=AuthConfig())
        # 3.8 s left: the API keeps LAMBDA_MARGIN_MS (3 s) back, so the turn has 0.8 s, not 20 s
        api = Api(lambda event, _: app.resolve(event, cast(Any, LambdaContext(3_800))), "user-a")
        started = time.monotonic()
        reply = api.post(f"/v1/threads/{T}/context", {"message": "hi"})
        elapsed = time.monotonic() - started
        assert reply.status == 200, reply.raw
        assert elapsed < 0.8 + MARGIN_S, f"the context route took {elapsed:.1f}s"
        chat.release.set()


def test_given_the_embedded_default_with_an_offline_embedder_when_its_recall_is_slow_then_the_turn_is_answered_within_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # An in-process embedder is usually fast, but its first call may load a model and a large resource's
    # search takes its time: the turn's bound must not depend on the embedder being a network one.
    with Memory.local(tmp_path / "m.db", embedder="hash", context_timeout_ms=500) as memory:
        memory.save_messages(thread_id=T, resource_id=R, messages=["I went hiking near the lake", "nice"])
        embedder = memory.recall_engine.embedder
        slow_query = embedder.embed_query

        def slow(text: str) -> Vector:
            time.sleep(3.0)
            return slow_query(text)

        monkeypatch.setattr(embedder, "embed_query", slow)
        started = time.monotonic()
        with caplog.at_level("WARNING"):
            ctx = memory.context(thread_id="t-2", resource_id=R, message="where did I go hiking?")
        elapsed = time.monotonic() - started
    assert elapsed < 0.5 + MARGIN_S, f"context() took {elapsed:.1f}s"
    assert ctx.recalled == []
    assert any("DeadlineExceeded" in r.getMessage() for r in caplog.records)
