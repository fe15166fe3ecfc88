"""Saves and recall when the embedder misbehaves: a stored write is reported as stored (the unindexed ids
are answered, never a retryable error) and the index is completed in the background; saves and ``recall()``
run under the turn's deadline; an all-zero vector for text with words is refused like NaN, never cached,
never marked indexed."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from memstack import Memory, SavedBatch
from memstack import deadline as deadlines
from memstack.adapters.hash_embed import HashEmbedder
from memstack.api import AuthConfig, create_app, handle_http
from memstack.errors import MemstackError, Unavailable
from memstack.layers.base import LayerBase
from memstack.model import Message, Thread
from memstack.usecases.index_retry import IndexRetry

R, T = "r1", "t1"
VECTOR = {"semantic_recall": {"mode": "vector", "top_k": 3, "message_range": 0, "scope": "resource"}}


class RemoteLikeEmbedder:
    """A remote model's behaviour over the hash embedder's vectors: ``mode`` ``ok``, ``down`` (raises
    ``Unavailable``, as the OpenAI adapter does after its retries) or ``zero`` (answers all-zero vectors).
    Records the deadline's time left at each call (``None`` without a deadline)."""

    def __init__(self) -> None:
        self.inner = HashEmbedder(64)
        self.model_id = "remote-64"
        self.dimension = 64
        self.symmetric = True
        self.mode = "ok"
        self.calls = 0
        self.time_left: list[float | None] = []

    def _answer(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        self.time_left.append(deadlines.remaining())
        if self.mode == "down":
            raise Unavailable("embeddings endpoint answered HTTP 500")
        if self.mode == "zero":
            return [[0.0] * self.dimension for _ in texts]
        if self.mode.startswith("times "):  # finite as float64, yet not a float32 the index can keep
            scale = float(self.mode.removeprefix("times "))
            return [[x * scale for x in v] for v in self.inner.embed_documents(texts)]
        return self.inner.embed_documents(texts)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self._answer(texts) if texts else []

    def embed_query(self, text: str) -> list[float]:
        return self._answer([text])[0]


class ManualTimer:
    """A ``Timer`` for ``IndexRetry`` that only records what was armed; the test fires it."""

    def __init__(self) -> None:
        self.armed: list[tuple[float, Callable[[], None]]] = []
        self.cancelled = 0

    def __call__(self, seconds: float, fn: Callable[[], None]) -> ManualTimer:
        self.armed.append((seconds, fn))
        return self

    def cancel(self) -> None:
        self.cancelled += 1


@pytest.fixture
def embedder() -> RemoteLikeEmbedder:
    return RemoteLikeEmbedder()


@pytest.fixture
def memory(tmp_path: Path, embedder: RemoteLikeEmbedder) -> Iterator[Memory]:
    with Memory.local(tmp_path / "m.db", embedder=embedder, background="inline") as m:
        timer = ManualTimer()
        m._index_retry = IndexRetry(m.reconcile_index, timer=timer)  # fired by the test, not by the clock
        m._core.on_unindexed = m._index_retry.poke
        m.test_timer = timer  # type: ignore[attr-defined]
        yield m


def vector_hits(memory: Memory, query: str) -> list[str]:
    return [
        h.message_id for h in memory.recall(thread_id="t2", resource_id=R, query=query, options=VECTOR).hits
    ]


# --- item 1: a stored write is reported as stored -----------------------------------------------------


def test_given_the_embedder_down_when_saving_then_the_save_succeeds_naming_the_unindexed_ids(
    memory: Memory, embedder: RemoteLikeEmbedder
) -> None:
    embedder.mode = "down"

    saved = memory.save_messages(thread_id=T, resource_id=R, messages=["I play the cello", "Lovely."])

    assert isinstance(saved, SavedBatch)
    assert [m.text for m in saved] == ["I play the cello", "Lovely."]
    assert saved.unindexed == tuple(m.id for m in saved)
    assert saved.index_error is not None and "Unavailable" in saved.index_error
    stored = memory.list_messages(thread_id=T, resource_id=R).messages
    assert len(stored) == 2, "the turn must be stored exactly once"
    assert memory.index_health(resource_id=R).not_indexed == 2


def test_given_a_save_left_unindexed_when_the_background_retry_runs_then_the_messages_become_searchable(
    memory: Memory, embedder: RemoteLikeEmbedder
) -> None:
    embedder.mode = "down"
    saved = memory.save_messages(thread_id=T, resource_id=R, messages=["I play the cello"])
    timer: ManualTimer = memory.test_timer  # type: ignore[attr-defined]
    assert memory.index_retry.pending and len(timer.armed) == 1

    timer.armed[-1][1]()  # still down: the retry backs off
    assert len(timer.armed) == 2 and timer.armed[1][0] > timer.armed[0][0]

    embedder.mode = "ok"
    timer.armed[-1][1]()

    assert vector_hits(memory, "I play the cello") == [saved[0].id]
    assert not memory.index_retry.pending
    assert memory.index_health(resource_id=R).not_indexed == 0
    assert len(memory.list_messages(thread_id=T, resource_id=R).messages) == 1


def test_given_the_embedder_down_when_posting_messages_then_201_with_the_unindexed_ids(
    memory: Memory, embedder: RemoteLikeEmbedder
) -> None:
    app = create_app(memory, auth=AuthConfig())
    embedder.mode = "down"

    answer = handle_http(
        app,
        "POST",
        f"/v1/threads/{T}/messages",
        f"resource_id={R}",
        {"Content-Type": "application/json"},
        json.dumps({"messages": [{"role": "user", "content": "I play the cello"}]}).encode(),
    )

    assert 200 <= answer.status < 300, answer.body
    data = json.loads(answer.body)
    assert data["unindexed"] == [data["messages"][0]["id"]]
    assert len(memory.list_messages(thread_id=T, resource_id=R).messages) == 1


class FailingFollowUp(LayerBase):
    """A layer whose follow-up work fails after the store committed."""

    name = "failing"

    def after_save(self, thread: Thread, options: Any, saved: Sequence[Message]) -> None:
        raise Unavailable("the scheduler is down", retry_after=7.0)


def test_given_a_follow_up_that_fails_after_the_store_committed_then_the_error_names_the_stored_ids(
    memory: Memory,
) -> None:
    memory._core.layers = (*memory._core.layers, FailingFollowUp())

    with pytest.raises(Unavailable) as err:
        memory.save_messages(thread_id=T, resource_id=R, messages=[{"id": "m-1", "content": "hello"}])

    assert err.value.saved_ids == ["m-1"]
    assert "m-1" in err.value.message and "again with these ids is safe" in err.value.message
    assert err.value.retry_after == 7.0, "the dependency's Retry-After survives the restated message"
    assert str(err.value) == err.value.message and err.value.args == (err.value.message,)


# --- item 2: deadlines --------------------------------------------------------------------------------


def test_given_a_context_timeout_when_saving_and_recalling_then_the_embedder_runs_under_that_deadline(
    tmp_path: Path, embedder: RemoteLikeEmbedder
) -> None:
    with Memory.local(
        tmp_path / "m.db", embedder=embedder, background="inline", context_timeout_ms=3_000
    ) as m:
        m.save_messages(thread_id=T, resource_id=R, messages=["I own a red bicycle"])
        m.recall(thread_id=T, resource_id=R, query="bicycle", options=VECTOR)

    assert len(embedder.time_left) == 2
    for left in embedder.time_left:
        assert left is not None and 0 < left <= 3.0, "the save and recall() must pass the turn's deadline on"


class HangingEmbeddings(BaseHTTPRequestHandler):
    """An OpenAI-compatible embeddings endpoint that never answers until the test releases it."""

    release = threading.Event()
    requests = 0

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        type(self).requests += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.release.wait(60)
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def hanging_url() -> Iterator[str]:
    HangingEmbeddings.release.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), HangingEmbeddings)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        HangingEmbeddings.release.set()
        server.shutdown()
        server.server_close()


def test_given_a_hanging_embeddings_endpoint_when_saving_and_recalling_then_neither_waits_out_the_sdk_retries(
    tmp_path: Path, hanging_url: str
) -> None:
    from memstack.adapters.openai.embedder import OpenAIEmbedder

    # 30 s per attempt and 4 retries: about 156 s without a deadline
    embedder = OpenAIEmbedder(
        "fake-emb", dimensions=64, base_url=hanging_url, api_key="k", timeout=30, max_retries=4
    )
    with Memory.local(tmp_path / "m.db", embedder=embedder, background="inline", context_timeout_ms=500) as m:
        m.index_retry.close()  # this test is about the caller's wait, not the background's
        started = time.monotonic()
        saved = m.save_messages(thread_id=T, resource_id=R, messages=["I play the cello"])
        with pytest.raises(Unavailable):
            m.recall(thread_id=T, resource_id=R, query="cello", options=VECTOR)
        waited = time.monotonic() - started

    assert saved.unindexed == (saved[0].id,)
    assert waited < 25, f"save + recall waited {waited:.1f} s under a 0.5 s deadline"


def test_given_the_turns_deadline_when_a_bedrock_retry_would_end_past_it_then_it_is_not_made() -> None:
    from botocore.exceptions import ClientError

    from memstack.adapters.bedrock.connection import BedrockConnection

    sleeps: list[float] = []
    calls = 0

    def throttled(client: Any) -> Any:
        nonlocal calls
        calls += 1
        raise ClientError(
            {"Error": {"Code": "ThrottlingException"}, "ResponseMetadata": {"HTTPStatusCode": 429}}, "X"
        )

    connection = BedrockConnection(
        region="us-east-1", timeout=30, max_retries=4, client=object(), sleep=sleeps.append
    )
    with deadlines.within(0.2), pytest.raises(Unavailable) as err:  # the first backoff is 0.25-0.5 s
        connection.call(throttled, what="embeddings", model="m", field="texts")

    assert calls == 1 and sleeps == []
    assert "deadline" in err.value.message


# --- item 3: all-zero vectors -------------------------------------------------------------------------


def test_given_zero_vectors_for_words_when_saved_then_unindexed_and_found_once_the_model_recovers(
    memory: Memory, embedder: RemoteLikeEmbedder
) -> None:
    embedder.mode = "zero"
    saved = memory.save_messages(thread_id=T, resource_id=R, messages=["I play the cello"])

    assert saved.unindexed == (saved[0].id,), "a zero vector for words must not count as indexed"
    assert memory.index_health(resource_id=R).not_indexed == 1
    with pytest.raises(Unavailable):
        vector_hits(memory, "I play the cello")  # the zero query vector is refused, not cached

    embedder.mode = "ok"
    memory.reconcile_index()

    assert vector_hits(memory, "I play the cello") == [saved[0].id]
    health = memory.index_health(resource_id=R)
    assert (health.indexed, health.not_indexed) == (1, 0)


@pytest.mark.parametrize("scale", ["1e300", "1e-320"], ids=["past float32", "below float32"])
def test_given_vectors_float32_cannot_hold_when_saved_and_asked_then_a_fault_of_the_embedder_not_the_caller(
    memory: Memory, embedder: RemoteLikeEmbedder, scale: str
) -> None:
    """The index keeps float32: a value past its range (inf as float32) or a vector that rounds to all zero
    is the embedder's malformed answer — the save is stored and retried, the turn degrades — never the
    caller's ``InvalidInput`` (which a turn re-raises and a retry never repeats)."""
    embedder.mode = f"times {scale}"
    saved = memory.save_messages(thread_id=T, resource_id=R, messages=["I play the cello"])
    assert saved.unindexed == (saved[0].id,) and "Unavailable" in str(saved.index_error)

    context = memory.context(thread_id="t2", resource_id=R, message="what do I play?")
    assert list(context.recalled) == []  # the turn answered; the message is not indexed yet
    with pytest.raises(Unavailable):
        vector_hits(memory, "I play the cello")

    embedder.mode = "ok"
    memory.reconcile_index()
    assert vector_hits(memory, "I play the cello") == [saved[0].id]


def test_given_a_zero_vector_for_text_without_words_then_it_is_accepted(
    memory: Memory, embedder: RemoteLikeEmbedder
) -> None:
    embedder.mode = "zero"

    saved = memory.save_messages(thread_id=T, resource_id=R, messages=["!!! ...", "🎻🎻"])

    assert saved.unindexed == ()


def test_given_the_hash_embedder_that_declares_zero_for_words_then_its_zero_is_accepted() -> None:
    from memstack.recall import SemanticRecall

    engine = SemanticRecall.__new__(SemanticRecall)
    engine.embedder = HashEmbedder(8)
    assert engine.valid_vector([0.0] * 8, "ab") == [0.0] * 8
    engine.embedder = RemoteLikeEmbedder()  # type: ignore[assignment]
    with pytest.raises(MemstackError):
        engine.valid_vector([0.0] * 64, "ab")


def test_given_the_embedder_down_when_recalling_in_hybrid_mode_then_keyword_hits_still_answer(
    memory: Memory, embedder: RemoteLikeEmbedder
) -> None:
    saved = memory.save_messages(thread_id=T, resource_id=R, messages=["I own a red bicycle"])
    embedder.mode = "down"
    hybrid = {"semantic_recall": {**VECTOR["semantic_recall"], "mode": "hybrid"}}

    found = memory.recall(thread_id="t2", resource_id=R, query="red bicycle", options=hybrid)

    assert [h.message_id for h in found.hits] == [saved[0].id]
    assert found.hits[0].vector_score is None and found.hits[0].keyword_score is not None
    with pytest.raises(Unavailable):
        vector_hits(memory, "red bicycle")  # vector mode has nothing to fall back on


# --- an embedder that hangs or trickles: the deadline is the caller's, whatever the transport -------------


class StuckEmbedder(RemoteLikeEmbedder):
    """Hangs on every call while ``stuck`` is unset (an in-process model that never returns)."""

    def __init__(self) -> None:
        super().__init__()
        self.unstuck = threading.Event()
        self.threads: list[str] = []

    def _answer(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.append(threading.current_thread().name)
        self.unstuck.wait(30)
        return super()._answer(texts)


def assert_save_and_recall_wait_only_the_deadline(tmp_path: Path, embedder: Any) -> None:
    """A save stores its message and reports it unindexed, and ``recall()`` answers ``Unavailable``, each
    within a few seconds under a 0.4 s deadline, though the embedder would take far longer."""
    with Memory.local(tmp_path / "m.db", embedder=embedder, background="inline", context_timeout_ms=400) as m:
        m.index_retry.close()  # this is about the caller's wait, not the background's
        started = time.monotonic()
        saved = m.save_messages(thread_id=T, resource_id=R, messages=["I play the cello"])
        save_took = time.monotonic() - started
        started = time.monotonic()
        with pytest.raises(Unavailable) as err:
            m.recall(thread_id=T, resource_id=R, query="cello", options=VECTOR)
        recall_took = time.monotonic() - started
    assert saved.unindexed == (saved[0].id,)
    assert "deadline" in err.value.message
    assert save_took < 3 and recall_took < 3, (save_took, recall_took)


def test_given_an_in_process_embedder_that_hangs_when_saving_and_recalling_then_each_waits_only_the_deadline(
    tmp_path: Path,
) -> None:
    embedder = StuckEmbedder()
    try:
        assert_save_and_recall_wait_only_the_deadline(tmp_path, embedder)
        assert embedder.threads and all(name == "memstack-guard" for name in embedder.threads)
    finally:
        embedder.unstuck.set()


def test_given_calls_still_running_past_their_deadline_when_the_limit_is_reached_then_the_next_is_refused_at_once() -> (
    None
):
    release = threading.Event()
    guard = deadlines.Guard("the stuck thing", limit=2)
    started = time.monotonic()
    try:
        for _ in range(2):
            with deadlines.within(0.05), pytest.raises(Unavailable, match="within the turn's deadline"):
                guard.call(release.wait, 30)
        with deadlines.within(5), pytest.raises(Unavailable, match="2 calls to it are still running"):
            guard.call(release.wait, 30)
        assert time.monotonic() - started < 2, "refused at once, not waited for"
    finally:
        release.set()
    time.sleep(0.2)
    with deadlines.within(5):
        assert guard.call(lambda: "answered") == "answered", "the threads came back"


def test_given_an_embedder_of_bounded_latency_then_it_runs_on_the_callers_thread(tmp_path: Path) -> None:
    seen: list[str] = []

    class Bounded(HashEmbedder):
        def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
            seen.append(threading.current_thread().name)
            return super().embed_documents(texts)

    with Memory.local(tmp_path / "m.db", embedder=Bounded(64), background="inline") as m:
        m.save_messages(thread_id=T, resource_id=R, messages=["I play the cello"])
    assert seen == [threading.current_thread().name]


class TricklingEmbeddings(BaseHTTPRequestHandler):
    """An OpenAI-compatible embeddings endpoint that sends its answer one byte every 0.1 s: each read
    arrives well within any read timeout, so only a deadline on the whole call ends the wait."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = json.dumps(
            {
                "object": "list",
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
                "data": [
                    {"object": "embedding", "index": i, "embedding": [1.0, 0, 0, 0]}
                    for i in range(len(texts))
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        for i in range(len(data)):
            try:
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.1)


def test_given_an_endpoint_that_trickles_its_answer_when_saving_and_recalling_then_each_waits_only_the_deadline(
    tmp_path: Path,
) -> None:
    from memstack.adapters.openai.embedder import OpenAIEmbedder

    server = ThreadingHTTPServer(("127.0.0.1", 0), TricklingEmbeddings)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        embedder = OpenAIEmbedder("fake-emb", dimensions=4, base_url=url, api_key="k", timeout=30)
        assert_save_and_recall_wait_only_the_deadline(tmp_path, embedder)  # the answer takes ~15 s
    finally:
        server.shutdown()
        server.server_close()
