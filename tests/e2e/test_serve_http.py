"""``memstack serve``'s HTTP handling in-process (``make_server`` on a loopback port, SQLite in memory),
driven with raw sockets: every method answers JSON, a declared but unsent body never holds a thread, and a
client that hangs up leaves no traceback."""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from memstack import Memory
from memstack.serve import LocalServer, ServeConfig, make_server
from memstack.serve_loop import LoopServer

READ_TIMEOUT = 0.5


@dataclass
class Raw:
    """An HTTP answer as read off the socket."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, object]:
        data: dict[str, object] = json.loads(self.body)
        return data


@contextmanager
def running_server(
    mode: str, monkeypatch: pytest.MonkeyPatch, read_timeout: float = READ_TIMEOUT
) -> Iterator[LocalServer]:
    """The server ``make_server`` gives this CPU-bound ``Memory`` (``loop``: ``LoopServer``, one thread for
    every connection), or the thread-per-connection ``LocalServer`` a network-bound one gets (``threads``)."""
    memory = Memory.local(":memory:", embedder="hash")
    if mode == "threads":
        monkeypatch.setattr("memstack.bootstrap.computes_in_process", lambda _memory: False)
    config = ServeConfig(host="127.0.0.1", port=0, max_body_bytes=1000, read_timeout=read_timeout)
    srv = make_server(memory, config, log=io.StringIO())
    assert isinstance(srv, LoopServer) is (mode == "loop")
    loop = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    loop.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    memory.close()


@pytest.fixture(params=["loop", "threads"])
def server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalServer]:
    """``running_server`` in each mode, with the short ``READ_TIMEOUT`` the timeout tests wait out."""
    with running_server(request.param, monkeypatch) as srv:
        yield srv


def connect(server: LocalServer) -> socket.socket:
    host, port = server.server_address[:2]
    sock = socket.create_connection((str(host), int(port)), timeout=5)
    return sock


def read_answer(sock: socket.socket, *, head: bool = False) -> Raw:
    """One response (status line, headers, ``Content-Length`` bytes of body unless ``head``)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    top, _, rest = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = 0 if head else int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return Raw(status, headers, rest[:length])


def answers_until_closed(sock: socket.socket) -> list[Raw]:
    """Every response the server sends until it closes the connection (answers to pipelined requests)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    answers = []
    while data:
        top, _, data = data.partition(b"\r\n\r\n")
        lines = top.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        answers.append(Raw(int(lines[0].split(" ")[1]), headers, data[:length]))
        data = data[length:]
    return answers


def refused(server: LocalServer, raw: bytes) -> Raw:
    """The answer to ``raw``, checking that the server closes the connection after it."""
    with connect(server) as sock:
        sock.sendall(raw)
        answer = read_answer(sock)
        assert closed_by_server(sock), "a refused request closes its connection"
    return answer


def request(server: LocalServer, raw: bytes, *, head: bool = False) -> Raw:
    with connect(server) as sock:
        sock.sendall(raw)
        return read_answer(sock, head=head)


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


# --- every method answers JSON ------------------------------------------------------------------------


def test_given_head_on_a_get_route_then_gets_status_and_headers_without_a_body(server: LocalServer) -> None:
    get = request(server, b"GET /v1/threads?resource_id=u HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    with connect(server) as sock:
        sock.sendall(b"HEAD /v1/threads?resource_id=u HTTP/1.1\r\nHost: x\r\n\r\n")
        head = read_answer(sock, head=True)
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        after = read_answer(sock)  # no stray body bytes on the kept-alive connection

    assert (head.status, head.headers["content-type"]) == (200, "application/json")
    assert head.headers["content-length"] == get.headers["content-length"]
    assert head.body == b""
    assert after.status == 200 and after.json()["status"] == "ok"


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("OPTIONS", "/v1/threads", "GET, POST"),
        ("TRACE", "/v1/threads/t1", "DELETE, GET, PATCH"),
        ("BREW", "/v1/health", "GET"),
        ("HEAD", "/v1/threads/t1/context", "POST"),
    ],
)
def test_given_any_other_method_on_a_known_path_then_405_json_with_allow(
    server: LocalServer, method: str, path: str, allowed: str
) -> None:
    raw = f"{method} {path}?resource_id=u HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    answer = request(server, raw)
    assert answer.status == 405
    assert answer.headers["allow"] == allowed
    if method != "HEAD":
        assert answer.json()["error"]["code"] == "method_not_allowed"


def test_given_a_malformed_request_line_then_the_refusal_is_json_too(server: LocalServer) -> None:
    answer = request(server, b"GET /v1/health HTTP/1.1\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n")
    assert answer.status == 431
    assert answer.headers["content-type"] == "application/json"
    assert "error" in answer.json()


# --- declared but unsent bodies -----------------------------------------------------------------------


@pytest.mark.parametrize("declared", [99999999999, 1001])
def test_given_a_declared_length_over_the_limit_then_413_at_once_and_the_connection_closes(
    server: LocalServer, declared: int
) -> None:
    started = time.monotonic()
    with connect(server) as sock:
        sock.sendall(
            f"POST /v1/threads?resource_id=u HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {declared}\r\n\r\n{{}}".encode()
        )
        answer = read_answer(sock)
        assert closed_by_server(sock)
    assert time.monotonic() - started < READ_TIMEOUT + 1.5
    assert (answer.status, answer.json()["error"]["code"]) == (413, "payload_too_large")  # type: ignore[index]


def _with_lengths(*lengths: str, body: bytes) -> bytes:
    fields = "".join(f"Content-Length: {value}\r\n" for value in lengths)
    return (
        f"POST /v1/threads?resource_id=u HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{fields}\r\n"
    ).encode() + body


HIDDEN = b"POST /v1/threads?resource_id=smuggled HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
"""A second request inside a body, which a server reading by the first of two lengths would run."""


@pytest.mark.parametrize("lengths", [("2", str(2 + len(HIDDEN))), (str(2 + len(HIDDEN)), "2"), ("2, 87",)])
def test_given_content_length_fields_that_differ_then_400_closed_and_nothing_in_the_body_runs(
    server: LocalServer, lengths: tuple[str, ...]
) -> None:
    answer = refused(server, _with_lengths(*lengths, body=b"{}" + HIDDEN))

    error = answer.json()["error"]
    assert (answer.status, error["code"], error["field"]) == (400, "invalid_input", "content-length")  # type: ignore[index]
    listed = request(server, b"GET /v1/threads?resource_id=smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
    assert listed.json()["threads"] == []


@pytest.mark.parametrize("codings", [("identity", "chunked"), ("identity, chunked",), ("gzip",)])
def test_given_a_transfer_coding_in_any_field_then_411_closed_and_nothing_in_the_body_runs(
    server: LocalServer, codings: tuple[str, ...]
) -> None:
    fields = "".join(f"Transfer-Encoding: {value}\r\n" for value in codings)
    raw = (
        (
            "POST /v1/threads?resource_id=u HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"{fields}Content-Length: 2\r\n\r\n"
        ).encode()
        + b"{}"
        + HIDDEN
    )

    answer = refused(server, raw)

    assert answer.status == 411
    listed = request(server, b"GET /v1/threads?resource_id=smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
    assert listed.json()["threads"] == []


@pytest.mark.parametrize("value", ["+2", "1_2", "-1", "0x2", "\u0662", "2.0", "two"])
def test_given_a_content_length_that_is_not_digits_then_400_and_closed(
    server: LocalServer, value: str
) -> None:
    raw = _with_lengths("PLACEHOLDER", body=b"{}").replace(b"PLACEHOLDER", value.encode())

    answer = refused(server, raw)

    assert (answer.status, answer.json()["error"]["field"]) == (400, "content-length")  # type: ignore[index]


@pytest.mark.parametrize("lengths", [("2", "2"), ("2, 2",), ("2", "02")])
def test_given_content_length_fields_that_agree_then_the_request_is_served(
    server: LocalServer, lengths: tuple[str, ...]
) -> None:
    answer = request(server, _with_lengths(*lengths, body=b"{}"))

    assert answer.status == 201, answer.body


def test_given_a_body_shorter_than_declared_then_408_after_the_read_timeout_and_closed(
    server: LocalServer,
) -> None:
    started = time.monotonic()
    with connect(server) as sock:
        sock.sendall(
            b"POST /v1/threads?resource_id=u HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{}"
        )
        answer = read_answer(sock)
        assert closed_by_server(sock)
    assert READ_TIMEOUT <= time.monotonic() - started < READ_TIMEOUT + 3
    error = answer.json()["error"]
    assert (answer.status, error["code"], error["field"]) == (408, "request_timeout", "body")  # type: ignore[index]


def test_given_requests_after_a_slow_client_then_the_server_still_answers(server: LocalServer) -> None:
    idle = [connect(server) for _ in range(3)]  # connections that never send a byte
    try:
        answer = request(server, b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert answer.status == 200
        for sock in idle:
            assert closed_by_server(sock), "an idle connection is closed after the read timeout"
    finally:
        for sock in idle:
            sock.close()


# --- clients that hang up -----------------------------------------------------------------------------


def test_given_clients_that_reset_the_connection_then_no_traceback_is_printed(
    server: LocalServer, capfd: pytest.CaptureFixture[str]
) -> None:
    import struct

    body = json.dumps({"messages": ["x" * 200]}).encode()
    for _ in range(5):
        sock = connect(server)
        sock.sendall(
            b"POST /v1/threads/t1/messages?resource_id=u HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # RST before the answer is written
        sock = connect(server)
        sock.sendall(b"GET /v1/thr")  # a request cut off mid-line, then a reset
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    time.sleep(0.3)
    assert request(server, b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").status == 200

    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipeError" not in err and "ConnectionResetError" not in err


def test_given_64_clients_connecting_at_once_when_none_is_accepted_yet_then_every_connect_completes() -> None:
    memory = Memory.local(":memory:", embedder="hash")
    srv = make_server(memory, ServeConfig(host="127.0.0.1", port=0), log=io.StringIO())
    host, port = srv.server_address[:2]
    sockets: list[socket.socket] = []
    try:
        for _ in range(64):  # the listen backlog holds them all: no SYN is dropped and retried for seconds
            sockets.append(socket.create_connection((str(host), int(port)), timeout=0.5))
    finally:
        for s in sockets:
            s.close()
        srv.server_close()
        memory.close()
    assert len(sockets) == 64


def test_given_a_keep_alive_request_when_answered_then_head_and_body_leave_in_one_send_without_nagle(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    nodelay: list[int] = []
    original = socket.socket.send

    def counting(self: socket.socket, data: bytes, flags: int = 0) -> int:
        if threading.current_thread() is not threading.main_thread():
            writes.append(len(data))
            nodelay.append(self.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        return original(self, data, flags)

    monkeypatch.setattr(socket.socket, "send", counting)
    with connect(server) as sock:
        for _ in range(2):
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = read_answer(sock)
            assert answer.status == 200 and answer.body
    assert len(writes) == 2, writes  # one send per response: status line, headers and body together
    assert all(nodelay), "TCP_NODELAY is not set on the connection"


# --- one connection, several requests; slow and stalled clients ---------------------------------------


@pytest.mark.parametrize(
    "target", ["http://127.0.0.1:{port}/v1/threads?resource_id=u", "HTTP://x/v1/threads?resource_id=u"]
)
def test_given_a_request_target_in_absolute_form_then_it_is_served_as_its_path(
    server: LocalServer, target: str
) -> None:
    port = server.server_address[1]
    raw = f"GET {target.format(port=port)} HTTP/1.1\r\nHost: x\r\n\r\n".encode()

    answer = request(server, raw)

    assert answer.status == 200 and answer.json()["threads"] == []


def test_given_two_requests_in_one_send_when_pipelined_then_both_are_answered_in_order(
    server: LocalServer,
) -> None:
    with connect(server) as sock:
        sock.sendall(
            b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /v1/threads?resource_id=u HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        first, second = answers_until_closed(sock)
    assert first.json()["status"] == "ok"
    assert second.status == 200 and "threads" in second.json()


def test_given_expect_100_continue_when_the_body_waits_then_100_comes_first_and_the_body_is_read(
    server: LocalServer,
) -> None:
    body = json.dumps({"id": "t-expect"}).encode()
    with connect(server) as sock:
        sock.sendall(
            b"POST /v1/threads?resource_id=u HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Expect: 100-continue\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        )
        interim = read_answer(sock, head=True)
        sock.sendall(body)
        answer = read_answer(sock)
    assert interim.status == 100
    assert answer.status == 201 and answer.json()["id"] == "t-expect"


def test_given_http_1_0_without_keep_alive_then_the_answer_closes_the_connection(server: LocalServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /v1/health HTTP/1.0\r\n\r\n")
        answer = read_answer(sock)
        assert closed_by_server(sock)
    assert answer.status == 200 and answer.headers["connection"] == "close"


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET /v1/" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
        (b"GET /v1/health HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(101)) + b"\r\n", 431),
    ],
    ids=["long-line", "101-headers"],
)
def test_given_a_request_head_over_a_limit_then_the_answer_is_json_and_the_connection_closes(
    server: LocalServer, raw: bytes, status: int
) -> None:
    answer = refused(server, raw)
    assert answer.status == status
    assert answer.headers["content-type"] == "application/json" and "error" in answer.json()


@pytest.mark.parametrize("server", ["loop"], indirect=True)  # the stdlib answers these without a status line
@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET /v1/health HTTP/2.0\r\n\r\n", 505),
        (b"GET /v1/health\r\n\r\n", 400),
        (b"GET  HTTP/1.1\r\n\r\n", 400),
    ],
    ids=["http-2", "no-version", "empty-target"],
)
def test_given_a_request_line_the_loop_cannot_read_then_a_json_error_with_its_status_line(
    server: LocalServer, raw: bytes, status: int
) -> None:
    answer = refused(server, raw)
    assert answer.status == status
    assert answer.json()["error"]["code"] == "invalid_input"  # type: ignore[index]


def test_given_a_client_sending_its_request_slowly_then_others_are_answered_meanwhile_and_it_too(
    server: LocalServer,
) -> None:
    body = json.dumps({"id": "t-slow"}).encode()
    head = (
        b"POST /v1/threads?resource_id=u HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
    )
    with connect(server) as slow:
        slow.sendall(head[:20])
        started = time.monotonic()
        other = request(server, b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert time.monotonic() - started < READ_TIMEOUT / 2  # not queued behind the slow client
        for piece in (head[20:], body[:5], body[5:]):
            time.sleep(READ_TIMEOUT / 4)  # each piece within the read timeout of the one before
            slow.sendall(piece)
        answer = read_answer(slow)
    assert other.status == 200
    assert answer.status == 201 and answer.json()["id"] == "t-slow"


@pytest.mark.parametrize("mode", ["loop", "threads"])
def test_given_a_client_that_does_not_read_its_answers_then_others_are_still_answered(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a read timeout far beyond any scheduling delay: the other answer must come while the stalled
    # connection still holds its answers, not after the server gave up on it
    stall = 60.0
    with running_server(mode, monkeypatch, read_timeout=stall) as server:
        assert (
            request(server, b"GET /openapi.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").status
            == 200
        )
        host, port = server.server_address[:2]
        stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # its answers fill the buffers at once
        stalled.settimeout(5)
        try:
            stalled.connect((str(host), int(port)))
            stalled.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n" * 40)
            time.sleep(0.1)
            started = time.monotonic()
            other = request(server, b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert time.monotonic() - started < stall / 2
            assert other.status == 200
        finally:
            stalled.close()
