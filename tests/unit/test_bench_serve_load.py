"""``benchmarks/serve_load.py``'s lean client speaks enough HTTP/1.1 to ``memstack serve``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from benchmarks.serve_load import RESOURCE, THREAD, LeanConnection, context_request, health_request

from memstack import Memory
from tests.served import serving


@pytest.fixture
def port() -> Iterator[int]:
    with Memory.local(":memory:", embedder="hash") as memory:
        memory.save_messages(thread_id=THREAD, resource_id=RESOURCE, messages=["my dog is called Rex"])
        with serving(memory) as url:
            yield int(url.rsplit(":", 1)[1])


def test_given_a_keep_alive_connection_when_requests_follow_each_other_then_each_status_is_read(
    port: int,
) -> None:
    conn = LeanConnection(port)
    try:
        for _ in range(3):  # each answer read whole: the next one starts at its own status line
            assert conn.send(context_request(port, "what is my dog called?")) == 200
            assert conn.send(health_request(port)) == 200
        missing = f"GET /v1/nowhere HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        assert conn.send(missing) == 404
        assert conn.send(health_request(port)) == 200
    finally:
        conn.close()


def test_given_two_requests_sent_at_once_when_read_then_the_second_answer_is_kept_for_the_next_call(
    port: int,
) -> None:
    conn = LeanConnection(port)
    missing = f"GET /v1/nowhere HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    try:
        assert conn.send(missing + health_request(port)) == 404
        assert conn.send(b"") == 200  # the health answer, read from what came after the 404's body
        assert conn.send(missing) == 404
    finally:
        conn.close()
