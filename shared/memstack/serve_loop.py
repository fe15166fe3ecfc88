"""``memstack serve``'s request loop for a ``Memory`` whose requests are CPU in this process.

``memstack.serve.LocalServer`` gives every connection a thread. When the ``Memory`` computes in this
process (``bootstrap.computes_in_process``: SQLite and an offline embedder) the requests of one process
are answered one at a time anyway (``LocalServer.serial``), and the threads only cost CPU: each request
woke its connection's thread, which then queued for the answering lock and the GIL behind the others
(measured with 4 keep-alive clients on 2 workers: ~0.3-0.7 ms of CPU per request above one client's).
``LoopServer`` serves every connection of the process from one thread instead: a ``selectors`` loop that
accepts, reads whatever arrived, answers each complete request in turn and writes the answer in one
``send``. Semantic recall still runs on its deadline-bounded pool thread (``turn.reads.run_waited``).

What a client sees is ``LocalServer``'s (docs/api.md, ``memstack.serve``): HTTP/1.1 keep-alive (HTTP/1.0
closes unless it asks ``Connection: keep-alive``), ``Expect: 100-continue`` answered, ``TCP_NODELAY`` and
one ``send`` per answer, the same routes, answers, limits and access line (``answer_before_body``,
``api_answer``, ``LocalServer.access``). Limits of the request head follow the stdlib server's: a request
line over ``MAX_LINE_BYTES`` is 414, a head over ``MAX_HEAD_BYTES`` or with more than ``MAX_HEADERS``
headers 431, a malformed one 400, a major version above 1 505, all in the API's JSON error shape with the
connection closed. Time limits: a connection that sends nothing for ``read_timeout`` seconds is closed
(a request cut off in its head silently, a body that stopped arriving with 408), and a client that reads
nothing of its answer for as long is closed too.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from email.utils import formatdate
from http import HTTPStatus
from typing import Any

from memstack.serve import (
    _STDLIB_CODES,
    CLAIMS_HEADER,
    LINGER_SECONDS,
    Answer,
    Early,
    LocalServer,
    _error,
    _log,
    answer_before_body,
    api_answer,
    body_limit,
    late_body,
    origin_form,
)

MAX_LINE_BYTES = 65_536
"""The longest request line (the stdlib server's limit, ``http.server``): longer is 414."""

MAX_HEAD_BYTES = 65_536
"""The largest request head (request line and headers): larger is 431."""

MAX_HEADERS = 100
"""The most header lines a request may have (the stdlib's ``http.client._MAXHEADERS``): more is 431."""

_RECV_BYTES = 1 << 16
_CLAIMS_LOWER = CLAIMS_HEADER.lower()
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class _Refused(Exception):
    """A request head the loop cannot take: answered with ``status`` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Head:
    """A parsed request head."""

    __slots__ = ("close", "expect_continue", "headers", "method", "pairs", "path", "query", "size")

    def __init__(self, raw: bytes, size: int) -> None:
        lines = raw.decode("latin-1").split("\n")
        words = lines[0].rstrip("\r").split(" ")
        if len(words) != 3 or not words[0] or not words[1]:
            raise _Refused(400, f"bad request line {lines[0][:80]!r}")
        self.method, target, version = words
        minor = _version(version)
        self.pairs: list[tuple[str, str]] = []
        self.headers: dict[str, str] = {}
        for line in lines[1:]:
            line = line.rstrip("\r")
            if not line:
                continue
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip() or line[0] in " \t":
                raise _Refused(400, "malformed header line")
            value = value.strip(" \t")
            self.pairs.append((name, value))
            self.headers.setdefault(name.lower(), value)  # the first occurrence, as the stdlib reads it
        if len(self.pairs) > MAX_HEADERS:
            raise _Refused(431, f"more than {MAX_HEADERS} headers")
        self.path, _, self.query = origin_form(target).partition("?")
        tokens = {t.strip().lower() for t in self.headers.get("connection", "").split(",")}
        self.close = "close" in tokens or (minor == 0 and "keep-alive" not in tokens)
        self.expect_continue = minor >= 1 and self.headers.get("expect", "").lower() == "100-continue"
        self.size = size

    def header(self, name: str) -> str | None:
        """A header's (first) value by name, case-insensitive."""
        return self.headers.get(name.lower())

    def fields(self, name: str) -> list[str]:
        """The values of every field of a header by name, case-insensitive, in order."""
        lowered = name.lower()
        return [value for field, value in self.pairs if field.lower() == lowered]


def _version(text: str) -> int:
    """The minor version of ``HTTP/1.x`` (400 for anything unreadable, 505 for a major version above 1)."""
    major, dot, minor = text.removeprefix("HTTP/").partition(".")
    if not text.startswith("HTTP/") or not dot or not major.isdigit() or not minor.isdigit():
        raise _Refused(400, f"bad request version {text[:20]!r}")
    if int(major) != 1:
        raise _Refused(505, f"HTTP version {text[5:][:10]} is not supported")
    return int(minor)


def _head_end(data: bytearray) -> int:
    """Where the request head in ``data`` ends (past its empty line), or -1 while it is incomplete."""
    crlf, lf = data.find(b"\n\r\n"), data.find(b"\n\n")
    ends = [i + 3 for i in (crlf,) if i >= 0] + [i + 2 for i in (lf,) if i >= 0]
    return min(ends) if ends else -1


class _Conn:
    """One client connection of the loop: what it sent but is not answered yet, what is not yet written."""

    __slots__ = (
        "closed",
        "closing",
        "head",
        "inbox",
        "lingering",
        "outbox",
        "sent_continue",
        "sock",
        "until",
    )

    def __init__(self, sock: socket.socket, until: float) -> None:
        self.sock = sock
        self.inbox = bytearray()
        self.outbox = b""
        self.head: _Head | None = None
        self.until = until  # the monotonic time by which something must move, else it is closed
        self.closing = False  # close once the outbox is written
        self.lingering = False  # written and shut for writing: drain the input until LINGER_SECONDS
        self.sent_continue = False
        self.closed = False


class LoopServer(LocalServer):
    """``LocalServer`` answering every connection from one thread (``serve_forever``'s), one request at a
    time: for a ``Memory`` that computes in this process (``make_server`` chooses it).

    Same constructor, address, pool, access log, connection balance and shutdown as ``LocalServer``;
    ``serial`` is always true.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["serial"] = True
        # before the base class binds: a failed bind calls server_close, which reads these
        self._conns: dict[int, _Conn] = {}
        self._selector = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._date = (0, "")
        super().__init__(*args, **kwargs)

    # ------------------------------------------------------------------------------ the server's life

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve until ``shutdown``: accept, read, answer and write on this thread.

        Args:
            poll_interval: how often (seconds) the loop looks for a shutdown request and expired
                connections when nothing happens.
        """
        self._stop.clear()
        self._stopped.clear()
        self.socket.setblocking(False)
        self._selector.register(self.socket, selectors.EVENT_READ, None)
        try:
            while not self._stop.is_set():
                for key, mask in self._selector.select(self._wait(poll_interval)):
                    if key.data is None:
                        self._accept()
                    else:
                        self._ready(key.data, mask)
                self._expire(time.monotonic())
        finally:
            self._selector.unregister(self.socket)
            self._flush_all()
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop ``serve_forever`` after the request it is answering, if any, and wait until it returns."""
        self._stop.set()
        self._stopped.wait()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until the loop is not answering a request (it has returned, or was never started);
        ``False`` if ``timeout`` seconds passed first."""
        return self._stopped.wait(timeout)

    def server_close(self) -> None:
        """Close every connection, then the listening socket and the selector."""
        for conn in list(self._conns.values()):
            self._close(conn)
        super().server_close()
        self._selector.close()

    def _wait(self, poll_interval: float) -> float:
        if not self._conns:
            return poll_interval
        soonest = min(conn.until for conn in self._conns.values())
        return max(0.0, min(poll_interval, soonest - time.monotonic()))

    def _flush_all(self) -> None:
        """Write what answers are still unwritten at shutdown (bounded by ``LINGER_SECONDS`` each)."""
        for conn in list(self._conns.values()):
            if conn.outbox and not conn.lingering:
                with suppress(OSError):
                    conn.sock.settimeout(LINGER_SECONDS)
                    conn.sock.sendall(conn.outbox)
                conn.outbox = b""

    # --------------------------------------------------------------------------------- connections

    def _accept(self) -> None:
        if self.balance is not None and not self.balance.may_accept():
            return
        try:
            sock, _ = self.socket.accept()
        except (BlockingIOError, InterruptedError):  # another worker took it
            return
        except OSError as exc:  # out of descriptors, a connection reset before accept: the next one
            _log.debug("accept failed: %s", type(exc).__name__)
            return
        if self.balance is not None:
            self.balance.opened()
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        conn = _Conn(sock, time.monotonic() + self.config.read_timeout)
        self._conns[sock.fileno()] = conn
        self._selector.register(sock, selectors.EVENT_READ, conn)

    def _close(self, conn: _Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        self._conns.pop(conn.sock.fileno(), None)
        with suppress(KeyError, ValueError):
            self._selector.unregister(conn.sock)
        conn.sock.close()
        if self.balance is not None:
            self.balance.closed()

    def _expire(self, now: float) -> None:
        for conn in [c for c in self._conns.values() if c.until <= now]:
            self._guarded(conn, self._timed_out)

    def _timed_out(self, conn: _Conn) -> None:
        if conn.head is not None and not conn.outbox and not conn.lingering:
            # the head came, the body stopped arriving: answered, then drained and closed
            self._answer(conn, conn.head, late_body(self.config.read_timeout), close=True, linger=True)
        else:  # idle, cut off in its head, not reading its answer, or done lingering
            self._close(conn)

    def _ready(self, conn: _Conn, mask: int) -> None:
        if mask & selectors.EVENT_WRITE:
            self._guarded(conn, self._write)
        elif conn.lingering:
            self._guarded(conn, self._drain)
        else:
            self._guarded(conn, self._read)

    def _guarded(self, conn: _Conn, step: Callable[[_Conn], None]) -> None:
        """Run one step of a connection's work; whatever it raises ends that connection, never the loop."""
        try:
            step(conn)
        except (BlockingIOError, InterruptedError):  # woken with nothing to read or no room: look again later
            return
        except (ConnectionError, TimeoutError) as exc:  # the client went away: no traceback
            _log.debug("connection ended: %s", type(exc).__name__)
            self._close(conn)
        except Exception:
            self.handle_error(conn.sock, ("-", 0))
            self._close(conn)

    def _read(self, conn: _Conn) -> None:
        data = conn.sock.recv(_RECV_BYTES)
        if not data:  # the client closed (or half-closed): nothing more will come
            self._close(conn)
            return
        conn.inbox += data
        conn.until = time.monotonic() + self.config.read_timeout
        self._serve_inbox(conn)

    def _drain(self, conn: _Conn) -> None:
        if not conn.sock.recv(_RECV_BYTES):
            self._close(conn)

    def _write(self, conn: _Conn) -> None:
        sent = conn.sock.send(conn.outbox)
        conn.outbox = conn.outbox[sent:]
        conn.until = time.monotonic() + self.config.read_timeout
        if not conn.outbox:
            self._selector.modify(conn.sock, selectors.EVENT_READ, conn)
            self._written(conn)
            if not conn.closed and not conn.lingering:
                self._serve_inbox(conn)  # requests that came while the answer was being written

    def _written(self, conn: _Conn) -> None:
        """The answer is out: close the connection, or shut it for writing and drain it for a while
        (the refused body, so that the client reads the answer rather than a reset), or keep it."""
        if conn.lingering:
            with suppress(OSError):
                conn.sock.shutdown(socket.SHUT_WR)
            conn.until = time.monotonic() + LINGER_SECONDS
        elif conn.closing:
            self._close(conn)

    # ------------------------------------------------------------------------------------ requests

    def _serve_inbox(self, conn: _Conn) -> None:
        """Answer every complete request in the connection's input, in order (pipelining), until one
        is incomplete, an answer waits to be written, or the connection is to close."""
        while not conn.outbox and not conn.closing and not conn.closed:
            if conn.head is None:
                try:
                    head = self._parse(conn)
                except _Refused as refusal:
                    self._refuse(conn, refusal)
                    return
                if head is None:
                    return
                conn.head = head
            head = conn.head
            if not self._serve_one(conn, head):
                return

    def _parse(self, conn: _Conn) -> _Head | None:
        blank = len(conn.inbox) - len(conn.inbox.lstrip(b"\r\n"))
        if blank:  # empty lines before a request line are ignored (RFC 9112 §2.2)
            del conn.inbox[:blank]
        end = _head_end(conn.inbox)
        newline = conn.inbox.find(b"\n", 0, MAX_LINE_BYTES + 2)
        if newline < 0 and len(conn.inbox) > MAX_LINE_BYTES + 1:
            raise _Refused(414, f"the request line is longer than {MAX_LINE_BYTES} bytes")
        if end > MAX_HEAD_BYTES or (end < 0 and len(conn.inbox) > MAX_HEAD_BYTES):
            raise _Refused(431, f"the request head is larger than {MAX_HEAD_BYTES} bytes")
        if end < 0:
            return None
        return _Head(bytes(conn.inbox[:end]), end)

    def _serve_one(self, conn: _Conn, head: _Head) -> bool:
        """Answer ``head`` once its body is in; ``False`` while the body is still arriving."""
        started = time.perf_counter()
        verb = "GET" if head.method == "HEAD" else head.method
        early = answer_before_body(verb, head.path, head.fields, body_limit(self.config))
        if isinstance(early, Early):
            del conn.inbox[: head.size]
            self._answer(conn, head, early.answer, close=early.close, linger=early.linger, started=started)
            return True
        if len(conn.inbox) < head.size + early:
            if head.expect_continue and not conn.sent_continue:
                conn.sent_continue = True
                with suppress(
                    BlockingIOError
                ):  # 8 bytes into an empty buffer; a client that waits sends anyway
                    conn.sock.send(_CONTINUE)
            return False
        body = bytes(conn.inbox[head.size : head.size + early]) if early else None
        del conn.inbox[: head.size + early]
        pairs = [(k, v) for k, v in head.pairs if k.lower() != _CLAIMS_LOWER]
        answer = api_answer(self, verb, head.path, head.query, pairs, body, head.header(CLAIMS_HEADER))
        self._answer(conn, head, answer, close=head.close, started=started)
        return True

    def _refuse(self, conn: _Conn, refusal: _Refused) -> None:
        """Answer a head the loop cannot take (JSON error, the connection closed)."""
        status = refusal.status
        answer = _error(status, _STDLIB_CODES.get(status, "invalid_input"), str(refusal), None)
        line = bytes(conn.inbox[: conn.inbox.find(b"\n")]).decode("latin-1").split(" ")
        conn.inbox.clear()
        self._send(conn, status, answer[1], answer[2], close=True, head_only=False)
        path = line[1].partition("?")[0] if len(line) > 1 else "-"
        self.access(line[0] or "-", path or "-", status, 0.0)

    def _answer(
        self,
        conn: _Conn,
        head: _Head,
        answer: Answer,
        *,
        close: bool,
        linger: bool = False,
        started: float | None = None,
    ) -> None:
        status, headers, body = answer
        conn.head = None
        conn.sent_continue = False
        conn.lingering = linger
        self._send(
            conn, status, headers, body, close=close or self._stop.is_set(), head_only=head.method == "HEAD"
        )
        ms = 0.0 if started is None else (time.perf_counter() - started) * 1000
        self.access(head.method, head.path, status, ms)

    def _send(
        self,
        conn: _Conn,
        status: int,
        headers: list[tuple[str, str]],
        body: bytes,
        *,
        close: bool,
        head_only: bool,
    ) -> None:
        """Write the answer in one ``send`` (what the socket does not take now is written when it is
        writable); ``close`` ends the connection after it."""
        lines = [f"HTTP/1.1 {status} {_phrase(status)}", "Server: memstack-serve", f"Date: {self._now()}"]
        lines += [f"{name}: {value}" for name, value in headers if name.lower() not in _FRAMING]
        lines.append(f"Content-Length: {len(body)}")
        if close:
            lines.append("Connection: close")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if not head_only and status >= 200 and status not in (204, 304):
            data += body
        conn.closing = close
        try:
            sent = conn.sock.send(data)
        except BlockingIOError:
            sent = 0
        conn.outbox = data[sent:]
        conn.until = time.monotonic() + self.config.read_timeout
        if conn.outbox:  # the rest when the socket is writable; nothing more is read meanwhile
            self._selector.modify(conn.sock, selectors.EVENT_WRITE, conn)
        else:
            self._written(conn)

    def _now(self) -> str:
        """The ``Date`` header's value (RFC 9110 §6.6.1), made once a second."""
        second = int(time.time())
        if self._date[0] != second:
            self._date = (second, formatdate(second, usegmt=True))
        return self._date[1]


_FRAMING = frozenset({"content-length", "connection"})
"""Headers the server writes itself."""


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
