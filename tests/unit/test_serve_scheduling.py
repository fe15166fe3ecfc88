"""How ``memstack serve`` spends its CPU: recall on its deadline-bounded thread, one request at a time per
process when the ``Memory`` is CPU-bound (``computes_in_process``), and keep-alive connections spread over the
workers (``memstack.serve_workers.ConnectionBalance``)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from memstack import Memory
from memstack.adapters.hash_embed import HashEmbedder
from memstack.bootstrap import build_local, computes_in_process
from memstack.ports import Vector
from memstack.serve_workers import ACCEPT_DEFER_SECONDS, ConnectionBalance
from tests.served import served_server

R, T = "u1", "t1"


class ThreadNotingEmbedder(HashEmbedder):
    """The hash embedder, noting the thread of every query embedding and how many run at once."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__()
        self.delay = delay
        self.threads: list[str] = []
        self.running = 0
        self.most_at_once = 0
        self._lock = threading.Lock()

    def embed_query(self, text: str) -> Vector:
        with self._lock:
            self.threads.append(threading.current_thread().name)
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            time.sleep(self.delay)
            return super().embed_query(text)
        finally:
            with self._lock:
                self.running -= 1

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        return super().embed_documents(texts)


class NetworkNamedEmbedder(ThreadNotingEmbedder):
    """The same vectors under a network embedder's model id (``openai/…``), as a stand-in for one."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__(delay)
        self.model_id = "openai/text-embedding-3-small"


def local(tmp_path: Path, embedder: str | HashEmbedder) -> Memory:
    return build_local(path=tmp_path / "m.db", embedder=embedder, background="inline")


def test_given_an_offline_embedder_when_built_locally_then_it_computes_in_process_and_recall_keeps_its_deadline(
    tmp_path: Path,
) -> None:
    for embedder in ("hash", ThreadNotingEmbedder()):
        with local(tmp_path / type(embedder).__name__, embedder) as memory:
            assert computes_in_process(memory)
            assert memory.parallel_recall is False


def test_given_a_network_embedder_when_built_locally_then_it_does_not_compute_in_process(
    tmp_path: Path,
) -> None:
    with local(tmp_path, NetworkNamedEmbedder()) as memory:
        assert not computes_in_process(memory)


def test_given_the_embedded_default_when_context_then_recall_runs_on_its_deadline_bounded_thread(
    tmp_path: Path,
) -> None:
    embedder = ThreadNotingEmbedder()
    with local(tmp_path, embedder) as memory:
        memory.save_messages(thread_id="old", resource_id=R, messages=["my dog is called Rex", "ok"])
        ctx = memory.context(thread_id=T, resource_id=R, message="what is my dog called?")
        assert [m.text for m in ctx.recalled][:1] == ["my dog is called Rex"]
        assert embedder.threads[-1] != threading.current_thread().name, embedder.threads


def ask_context(port: int, question: str, statuses: list[int]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST",
            f"/v1/threads/{T}/context?resource_id={R}",
            body=json.dumps({"message": question}),
            headers={"Content-Type": "application/json"},
        )
        response = conn.getresponse()
        response.read()
        statuses.append(response.status)
    finally:
        conn.close()


@pytest.mark.parametrize("in_process", [True, False], ids=["cpu-bound", "may-wait-on-network"])
def test_given_concurrent_requests_when_served_then_a_cpu_bound_memory_answers_them_in_turn(
    tmp_path: Path, in_process: bool
) -> None:
    embedder = ThreadNotingEmbedder(delay=0.15) if in_process else NetworkNamedEmbedder(delay=0.15)
    with local(tmp_path, embedder) as memory:
        memory.save_messages(thread_id="old", resource_id=R, messages=["my dog is called Rex"])
        with served_server(memory) as server:
            assert server.serial is in_process
            statuses: list[int] = []
            askers = [
                threading.Thread(target=ask_context, args=(server.server_address[1], f"dog {k}?", statuses))
                for k in range(3)
            ]
            for a in askers:
                a.start()
            for a in askers:
                a.join(30)
        assert statuses == [200, 200, 200]
        # serial: never two requests in the API at once; otherwise the waits on the embedder overlap
        assert (embedder.most_at_once == 1) is in_process, embedder.most_at_once


def test_given_a_worker_with_more_connections_when_one_is_pending_then_it_leaves_it_to_the_other() -> None:
    balance = ConnectionBalance(2)
    balance.claim(0)
    assert balance.may_accept()  # 0 and 0: anyone may take it
    balance.opened()
    assert balance.counts() == [1, 0]
    assert not balance.may_accept()  # 1 against 0: the other worker should take it
    balance.closed()
    assert balance.counts() == [0, 0]
    assert balance.may_accept()


def test_given_the_other_worker_never_accepts_when_deferring_then_the_connection_is_taken_after_the_bound() -> (
    None
):
    balance = ConnectionBalance(2)
    balance.claim(0)
    balance.opened()
    started = time.monotonic()
    while not balance.may_accept():
        assert time.monotonic() - started < ACCEPT_DEFER_SECONDS + 1.0, (
            "a pending connection was left forever"
        )
    assert time.monotonic() - started >= ACCEPT_DEFER_SECONDS


def test_given_a_replaced_worker_when_it_claims_its_slot_then_its_dead_predecessors_connections_are_gone() -> (
    None
):
    balance = ConnectionBalance(2)
    balance.claim(1)
    balance.opened()
    balance.opened()
    assert balance.counts() == [0, 2]
    assert not balance.all_ready()
    balance.claim(1)
    balance.mark_ready()
    assert balance.counts() == [0, 0]
    balance.claim(0)
    balance.mark_ready()
    assert balance.all_ready()
