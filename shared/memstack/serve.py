"""``memstack serve``: the HTTP API of API Gateway on localhost, for development and end-to-end tests.

A thin adapter: each plain HTTP request becomes an API Gateway REST proxy event and back
(``memstack.api.http.handle_http``), so the routes, validation, error shape, body limit and auth check are
the very code the Lambda functions run (docs/api.md). Two servers do it with the same answers
(``answer_before_body``, ``api_answer``): ``LocalServer``, a stdlib ``ThreadingHTTPServer`` with a thread per
connection, for a ``Memory`` that waits on the network; and ``memstack.serve_loop.LoopServer``, every
connection from one thread, for a ``Memory`` that computes in this process (``make_server`` chooses).

* Backends: the embedded default (SQLite file + local/hash/openai embedder) or ``aws`` (DynamoDB, S3 and
  OpenSearch at the endpoints of the ``MEMSTACK_*`` settings: AWS itself, or moto and the OpenSearch test
  double). Indexing is always **inline** here: there is no DynamoDB stream locally, so ``save_messages``
  indexes before it answers even when ``MEMSTACK_INDEXING=stream`` is set (DESIGN.md "Local": background work
  runs in-process).
* Auth: ``iam`` (default) trusts ``resource_id`` as API Gateway does after checking SigV4. ``jwt`` is for
  **local testing only**: the token claims that a JWT authorizer would put in ``requestContext.authorizer.claims``
  are read from the request header ``X-Memstack-Claims`` (a JSON object, e.g. ``{"sub": "user-42"}``) and
  the API's claim rule applies to them. Nothing verifies a token: never expose this server.
* One log line per request on stderr: method, path (without the query string), status, milliseconds —
  never bodies or query values, so never a resource id (the erasure route's path shows
  ``/v1/resources/{resource_id}``). The API's own INFO lines are off unless ``verbose``. A client that hangs
  up (``BrokenPipeError``, ``ConnectionResetError``) costs one DEBUG line of the ``memstack.serve`` logger,
  never a traceback.
* Memstack Studio (``memstack.studio``): ``/`` and ``/studio`` redirect to ``/studio/``, which serves the
  packaged page; it calls the API routes of this same server.
* Every method gets the API's JSON error shape: HEAD is answered as GET without the body; OPTIONS and any
  other method reach the resolver, which answers 405 ``method_not_allowed`` (with ``Allow``) on a known path
  and 404 elsewhere; malformed requests the stdlib refuses (bad request line, header limits) get JSON too.
* Bodies: a declared ``Content-Length`` over the limit is answered 413 at once, without reading the body,
  and the connection is closed. Every connection has a socket read timeout (``read_timeout``, 30 s): a
  client that declares more than it sends is answered 408 and closed, so no thread waits forever. Framing
  that cannot be trusted — ``Content-Length`` fields that differ or are not digits, a ``Transfer-Encoding``
  — is refused (400, 411) and the connection closed, so nothing after it is read as another request. A
  request target in absolute form (``http://host/path``) is served as its path (RFC 9112 §3.2.2).
* Ctrl-C / SIGTERM: stop accepting, let requests in flight finish (up to ``SHUTDOWN_GRACE_SECONDS``),
  close the ``Memory``, exit 0.

The resolver keeps the current request on its instance, so each request borrows a resolver of its own from a
small pool (all over the one ``Memory``, whose adapters are thread-safe). One process answers on one core;
``memstack.serve_workers`` runs several of these servers as forked processes on one socket (``--workers``),
each through ``make_server(..., listener=...)`` and ``serve_until_stopped``.
"""

from __future__ import annotations

import json
import logging
import queue
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Literal, TextIO

from memstack.errors import InvalidInput

if TYPE_CHECKING:
    from memstack.api.app import MemstackResolver
    from memstack.memory import Memory
    from memstack.serve_workers import ConnectionBalance

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
CLAIMS_HEADER = "X-Memstack-Claims"
"""The header carrying JWT claims as JSON in ``--auth jwt`` mode (local testing only)."""

SHUTDOWN_GRACE_SECONDS = 10.0
"""How long a shutdown waits for requests in flight before closing the ``Memory``."""

READ_TIMEOUT_SECONDS = 30.0
"""Default socket read timeout of a connection: an idle keep-alive connection is closed after it, and a
request whose body does not arrive in time is answered 408."""

LINGER_SECONDS = 1.0
"""After refusing a body unread (413, 408), how long the input is drained before the socket closes, so
the client reads the answer rather than a connection reset (bounded: nothing is kept)."""

LISTEN_BACKLOG = 128
"""Connections the kernel queues before ``accept`` (the stdlib's default of 5 makes a burst of 16+ clients
wait for SYN retransmits, a second or more each)."""

_CHUNK = 1 << 16
_log = logging.getLogger(__name__)

_RESOURCE_PATH = "/v1/resources/"
"""Paths that name a resource (the erasure route): the access line shows the route, not the id."""

AuthMode = Literal["iam", "jwt"]


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """What ``serve`` needs besides the ``Memory``.

    Attributes:
        host, port: where to listen (``port`` 0: any free port; the URL printed names it).
        auth: ``iam`` (trust ``resource_id``) or ``jwt`` (claims from ``X-Memstack-Claims``; testing only).
        max_body_bytes: the API's body limit (a declared length over it is answered 413 without reading).
        verbose: keep the API's JSON INFO log lines (ids and counts only) besides the access line.
        read_timeout: the socket read timeout of every connection, in seconds (408 when a body is late).
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    auth: AuthMode = "iam"
    max_body_bytes: int | None = None
    verbose: bool = False
    read_timeout: float = READ_TIMEOUT_SECONDS


class _AppPool:
    """Resolvers over one ``Memory``, lent to one request at a time (the resolver is not re-entrant)."""

    def __init__(self, factory: Callable[[], MemstackResolver]) -> None:
        self._factory = factory
        self._free: queue.SimpleQueue[MemstackResolver] = queue.SimpleQueue()
        self._free.put(factory())  # the first one now: a broken set-up fails at start, not per request

    @contextmanager
    def borrow(self) -> Iterator[MemstackResolver]:
        try:
            app = self._free.get_nowait()
        except queue.Empty:
            app = self._factory()
        try:
            yield app
        finally:
            self._free.put(app)


class LocalServer(ThreadingHTTPServer):
    """The HTTP server: ``ThreadingHTTPServer`` plus the resolver pool, the auth mode, the access log and
    a count of requests in flight (for a graceful shutdown).

    Args:
        serial: answer one request at a time (``answering``): for a ``Memory`` whose work is CPU in this
            process (``make_server``), where threads answering at once only contend for the GIL.
        balance: the open-connection counts shared with the other workers (``serve_workers``): a worker
            holding more connections than another leaves a pending one to it (``ConnectionBalance``).
    """

    daemon_threads = True  # idle keep-alive connections do not hold the process open
    block_on_close = False
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        pool: _AppPool,
        config: ServeConfig,
        log: TextIO,
        *,
        listener: socket.socket | None = None,
        serial: bool = False,
        balance: ConnectionBalance | None = None,
    ) -> None:
        self.pool = pool
        self.config = config
        self.log = log
        self.serial = serial
        self.balance = balance
        self._answer_lock = threading.Lock()
        self.stopping = False
        self._in_flight = 0
        self._idle = threading.Condition()
        self._log_lock = threading.Lock()
        if listener is None:
            super().__init__(address, _Handler)
            return
        # a worker process: the parent bound and listens; every worker accepts on the same socket
        super().__init__(listener.getsockname()[:2], _Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = listener
        self.server_address = listener.getsockname()

    @property
    def url(self) -> str:
        """``http://host:port`` of the listening socket."""
        return url_of(self.server_address)

    @contextmanager
    def in_flight(self) -> Iterator[None]:
        with self._idle:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()

    @contextmanager
    def answering(self) -> Iterator[None]:
        """Around the API's work on one request (not the socket reads and writes): exclusive when
        ``serial``, so the requests of this process run one after another instead of interleaving at
        every SQLite call and socket operation (each a GIL hand-off between threads)."""
        if not self.serial:
            yield
            return
        with self._answer_lock:
            yield

    def _handle_request_noblock(self) -> None:
        # ``serve_forever`` calls this when the listener is readable: with a ``balance``, a worker holding
        # more connections than another leaves the pending connection to it for a while
        if self.balance is not None and not self.balance.may_accept():
            return
        super()._handle_request_noblock()  # type: ignore[misc]  # socketserver's, not in its stubs

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the accepted connection on a thread of its own, counted in ``balance`` until it ends."""
        if self.balance is None:
            super().process_request(request, client_address)
            return
        self.balance.opened()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.balance.closed()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            if self.balance is not None:
                self.balance.closed()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is in flight; ``False`` if ``timeout`` seconds passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout)

    def access(self, method: str, path: str, status: int, ms: float) -> None:
        """Write the one access line of a request."""
        if path.startswith(_RESOURCE_PATH):
            path = _RESOURCE_PATH + "{resource_id}"
        with self._log_lock:
            print(f"{method} {path} {status} {ms:.1f}ms", file=self.log, flush=True)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (reset, broken pipe, timeout) is one DEBUG line; anything else keeps the
        stdlib's report."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            _log.debug("connection from %s ended: %s", client_address[0], type(exc).__name__)
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: LocalServer
    protocol_version = "HTTP/1.1"  # keep-alive: every response carries Content-Length
    server_version = "memstack-serve"
    error_content_type = "application/json"
    # Buffered output: status line, headers and body leave in one send when the response fits (flushed at
    # the end of each request). Unbuffered, the head and the body were two sends, and Nagle's algorithm held
    # the second until the client's delayed ACK (~40 ms per keep-alive request).
    wbufsize = _CHUNK

    def setup(self) -> None:
        """``TCP_NODELAY`` and the socket read timeout of this connection (``ServeConfig.read_timeout``),
        then the streams."""
        self._linger = False
        super().setup()
        if self.connection.family in (socket.AF_INET, socket.AF_INET6):
            # a response larger than the buffer still leaves in several sends: none waits for an ACK
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connection.settimeout(self.server.config.read_timeout)

    def handle_expect_100(self) -> bool:
        """``100 Continue`` sent at once: the output is buffered (``wbufsize``), and a client that waits
        for it before sending its body (curl does, for bodies over 1 KiB) would otherwise wait until the
        body's read timeout answered 408."""
        answered = super().handle_expect_100()
        self.wfile.flush()
        return answered

    def __getattr__(self, name: str) -> Any:
        """``do_<METHOD>`` for every method (OPTIONS, TRACE, anything): the resolver answers it (405 with
        ``Allow`` on a known path, 404 elsewhere) instead of the stdlib's HTML 501 page."""
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Silenced: ``LocalServer.access`` writes the one line per request."""

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own refusals (malformed request line, too many or too long headers, …) in the API's
        JSON error shape, and the connection closed."""
        from http import HTTPStatus

        from memstack.api.errors import error_body

        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        status, headers, body = _error(
            code, _STDLIB_CODES.get(code, "invalid_input"), message or phrase, None
        )
        if code >= 500 and code not in _STDLIB_CODES:
            body = json.dumps(error_body("internal", message or phrase), separators=(",", ":")).encode()
        self.close_connection = True
        self.send_response(status, message)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and code >= 200 and code not in (204, 304):
            self.wfile.write(body)
        path = (getattr(self, "path", "") or "").partition("?")[0]
        self.server.access(getattr(self, "command", None) or "-", path or "-", code, 0.0)

    def _serve(self) -> None:
        started = time.perf_counter()
        method = self.command
        path, _, query = origin_form(self.path).partition("?")
        with self.server.in_flight():
            verb = "GET" if method == "HEAD" else method
            status, headers, body = self._respond(verb, path, query)
            if self.server.stopping:
                self.close_connection = True
            try:
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in ("content-length", "connection"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                if self.close_connection:
                    self.send_header("Connection", "close")
                self.end_headers()
                if method != "HEAD":  # HEAD: GET's status and headers, no body
                    self.wfile.write(body)
                self.wfile.flush()
                if self._linger:
                    self._lingering_close()
            except (ConnectionError, TimeoutError) as exc:  # the client went away: no traceback
                self.close_connection = True
                _log.debug("client went away during the response: %s", type(exc).__name__)
        self.server.access(method, path, status, (time.perf_counter() - started) * 1000)

    def _respond(self, verb: str, path: str, query: str) -> Answer:
        early = answer_before_body(verb, path, lambda name: self.headers.get_all(name) or [], self._limit())
        if isinstance(early, Early):
            self.close_connection = self.close_connection or early.close
            self._linger = early.linger
            return early.answer
        try:
            body = self._read_body(early) if early else None
        except TimeoutError:
            self.close_connection = self._linger = True
            return late_body(self.server.config.read_timeout)
        pairs = [(k, v) for k, v in self.headers.items() if k.lower() != _CLAIMS_LOWER]
        return api_answer(self.server, verb, path, query, pairs, body, self.headers.get(CLAIMS_HEADER))

    def _limit(self) -> int:
        return body_limit(self.server.config)

    def _read_body(self, length: int) -> bytes:
        """Exactly ``length`` bytes of body.

        Raises:
            TimeoutError: the socket read timeout passed, or the client closed before sending them all.
        """
        body = self.rfile.read(length)
        if len(body) < length:  # the peer half-closed early: it will never send the rest
            raise TimeoutError("short body")
        return body

    def _lingering_close(self) -> None:
        """Close our side for writing, then read and drop what the client still sends for at most
        ``LINGER_SECONDS``, so it reads the answer instead of a reset; the socket is closed after."""
        try:
            self.connection.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + LINGER_SECONDS
            self.connection.settimeout(LINGER_SECONDS)
            while time.monotonic() < deadline and self.connection.recv(_CHUNK):
                pass
        except OSError:  # the client already went away: nothing to wait for
            pass

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve


_STDLIB_CODES = {
    400: "invalid_input",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "payload_too_large",
    414: "invalid_input",
    431: "invalid_input",
    501: "method_not_allowed",
    505: "invalid_input",
}
"""Error codes for the statuses the stdlib's request parsing may answer (``send_error``)."""


Answer = tuple[int, list[tuple[str, str]], bytes]
"""An answer: status, headers (``Content-Length`` and ``Connection`` are the server's), body."""

_CLAIMS_LOWER = CLAIMS_HEADER.lower()


@dataclass(frozen=True, slots=True)
class Early:
    """An answer given before the request's body is read (``answer_before_body``).

    Attributes:
        answer: what to send.
        close: the connection cannot be reused (a body was declared and is left unread).
        linger: drain what the client still sends before closing (``LINGER_SECONDS``), so it reads the
            answer rather than a reset.
    """

    answer: Answer
    close: bool
    linger: bool = False


def body_limit(config: ServeConfig) -> int:
    """The request body limit in bytes: ``config.max_body_bytes``, else the API's ``MAX_BODY_BYTES``."""
    from memstack.api.app import MAX_BODY_BYTES

    return config.max_body_bytes if config.max_body_bytes is not None else MAX_BODY_BYTES


_ABSOLUTE_FORM = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")
"""The scheme and authority of a request target in absolute form (``http://host:port/path?query``)."""


def origin_form(target: str) -> str:
    """A request target as a path and query: the absolute form (``http://127.0.0.1:8765/v1/health``) loses
    its scheme and authority, which a server must accept (RFC 9112 §3.2.2) and this server, serving one
    origin, does not check; anything else is returned as it is."""
    found = _ABSOLUTE_FORM.match(target)
    if found is None:
        return target
    rest = target[found.end() :]
    return rest if rest.startswith("/") else "/" + rest


_DIGITS = re.compile(r"[0-9]+")
"""A ``Content-Length`` value (RFC 9112 §6.2: ``1*DIGIT``; no sign, space, ``_`` or other digits)."""


def answer_before_body(verb: str, path: str, fields: Callable[[str], list[str]], limit: int) -> Early | int:
    """What a request gets before its body is read, or the number of body bytes to read.

    Memstack Studio (``memstack.studio``) and the pages (``_PAGES``) answer at once (a body sent to them
    is never read, so that connection closes); the body's framing is checked next, over every field of a
    framing header, not its first (a server reading by one field while a proxy reads by another would take
    the rest of a body for a next request): any ``Transfer-Encoding`` other than ``identity`` is 411;
    ``Content-Length`` fields that are not one run of digits, or that declare different lengths, are 400
    (RFC 9112 §6.3); one over ``limit`` is 413 (the body unread: a lingering close). Every refusal closes
    the connection.

    Args:
        verb: the method (``GET`` for ``HEAD``).
        path: the request path, without the query string.
        fields: the values of every field of a request header by name (case-insensitive), in order; ``[]``
            when absent.
        limit: the body limit in bytes (``body_limit``).

    Returns:
        An ``Early`` answer, or the body's length (0: no body).
    """
    from memstack.studio import studio_response

    declared = {part.strip(" \t") for value in fields("Content-Length") for part in value.split(",")}
    declared.discard("")
    studio = studio_response(verb, path)
    if studio is None and path in _PAGES:
        studio = _page(verb, path)
    if studio is not None:
        return Early(studio, close=bool(declared - {"0"}))
    codings = {
        part.strip(" \t").lower() for value in fields("Transfer-Encoding") for part in value.split(",")
    }
    if codings - {"", "identity"}:
        return Early(
            _error(411, "invalid_input", "send the body with a Content-Length", "content-length"), close=True
        )
    if any(not _DIGITS.fullmatch(value) for value in declared):
        return Early(
            _error(400, "invalid_input", "Content-Length is not a number", "content-length"), close=True
        )
    if len({int(value) for value in declared}) > 1:
        message = "the request has Content-Length fields that declare different lengths"
        return Early(_error(400, "invalid_input", message, "content-length"), close=True)
    length = int(next(iter(declared), "0"))
    if length > limit:  # answered at once, the body unread; the connection cannot be reused
        message = f"the request body is larger than the limit of {limit} bytes"
        return Early(_error(413, "payload_too_large", message, "body"), close=True, linger=True)
    return length


def late_body(read_timeout: float) -> Answer:
    """The 408 answer to a body that did not arrive within the read timeout (seconds)."""
    return _error(
        408, "request_timeout", f"the request body did not arrive within {read_timeout:g} s", "body"
    )


def api_answer(
    server: LocalServer,
    verb: str,
    path: str,
    query: str,
    pairs: list[tuple[str, str]],
    body: bytes | None,
    claims_header: str | None,
) -> Answer:
    """The API's answer (``memstack.api.http.handle_http``) on a resolver borrowed from ``server``'s pool,
    inside ``server.answering()``.

    Args:
        pairs: the request headers (without ``X-Memstack-Claims``).
        claims_header: the ``X-Memstack-Claims`` value (read in ``jwt`` mode only: a JSON object, else 400).
    """
    from memstack.api.http import handle_http

    claims: Mapping[str, Any] | None = None
    if server.config.auth == "jwt" and claims_header is not None:
        try:
            parsed = json.loads(claims_header)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            return _error(400, "invalid_input", f"{CLAIMS_HEADER} must be a JSON object", _CLAIMS_LOWER)
        claims = parsed
    with server.answering(), server.pool.borrow() as app:
        response = handle_http(app, verb, path, query, pairs, body, claims=claims)
    return response.status, response.headers, response.body


_PAGES = {
    "/openapi.json": "application/json",
    "/docs": "text/html; charset=utf-8",
}
"""What ``serve`` answers beside the API's routes: the OpenAPI document and the reference page rendered
from it (``memstack.api.reference``); GET and HEAD only."""


def _page(method: str, path: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """The page at ``path`` (one of ``_PAGES``), or 405 for another method than GET (HEAD arrives as GET)."""
    from memstack.api.reference import openapi_json, reference_html

    if method != "GET":
        status, headers, body = _error(405, "method_not_allowed", f"{path} answers GET and HEAD", None)
        return status, [*headers, ("Allow", "GET, HEAD")], body
    body = openapi_json() if path == "/openapi.json" else reference_html()
    return 200, [("Content-Type", _PAGES[path]), ("Cache-Control", "no-cache")], body


def _error(
    status: int, code: str, message: str, field: str | None
) -> tuple[int, list[tuple[str, str]], bytes]:
    from memstack.api.errors import error_body

    body = json.dumps(error_body(code, message, field), separators=(",", ":")).encode()
    return status, [("Content-Type", "application/json")], body


def build_memory(
    backend: Literal["sqlite", "aws"] | None = None,
    *,
    db: str | None = None,
    embedder: str | None = None,
    options: dict[str, Any] | None = None,
) -> Memory:
    """The ``Memory`` that ``serve`` answers with, indexing inline.

    Args:
        backend: ``sqlite`` or ``aws``; ``None`` is ``MEMSTACK_BACKEND`` (default ``sqlite``).
        db: the SQLite file (default ``MEMSTACK_DB_PATH``, ``.memstack/memory.db``); ``sqlite`` only.
        embedder: ``local``, ``hash``, ``openai`` or ``bedrock``; ``None`` is the default rule,
            ``Settings.embedder_name`` (``MEMSTACK_EMBEDDER``, else ``openai`` with a key, else ``wordllama``),
            the rule ``Memory.local()`` follows too.
        options: memory options (``MemoryOptions`` names); ``None`` is ``MEMSTACK_OPTIONS``. Options that
            need a chat model get it from the settings (``bootstrap.chat_model_for``).

    Raises:
        InvalidInput: ``db`` with the aws backend; bad settings (``field`` names the variable).
        Unavailable: a backend cannot be reached at start-up (the OpenSearch index check, the SQLite file).
    """
    from memstack.bootstrap import build
    from memstack.settings import load_settings

    overrides: dict[str, object] = {"indexing": "inline"}  # no stream locally: index in-process
    if backend is not None:
        overrides["backend"] = backend
    if db is not None:
        overrides["db_path"] = db
    settings = load_settings(**overrides)
    if settings.backend == "aws" and db is not None:
        raise InvalidInput("--db applies to the sqlite backend only", field="db")
    return build(settings, embedder=embedder, options=options)


def make_server(
    memory: Memory,
    config: ServeConfig,
    *,
    log: TextIO | None = None,
    listener: socket.socket | None = None,
    balance: ConnectionBalance | None = None,
) -> LocalServer:
    """A bound (not yet serving) ``LocalServer`` answering with ``memory``.

    When ``memory`` computes in this process (``bootstrap.computes_in_process``: SQLite and an offline
    embedder) its requests are CPU under the GIL, answered one at a time: the server is
    ``memstack.serve_loop.LoopServer``, every connection served from one thread (measured with 4
    keep-alive clients, threads answering at once, or taking turns on a lock, cost more CPU per request).
    A ``Memory`` that waits on the network (AWS, an OpenAI or Bedrock embedder) gets ``LocalServer``, each
    request on its connection's thread, answering concurrently.

    Args:
        listener: a socket already bound and listening (a worker of ``serve_workers``); ``None`` binds
            ``config.host:config.port``.
        balance: the workers' shared connection counts (``serve_workers``), or ``None`` for one process.

    Raises:
        OSError: the address cannot be bound (in use, bad host).
    """
    from memstack.api.app import MAX_BODY_BYTES, create_app
    from memstack.api.auth import AuthConfig
    from memstack.bootstrap import computes_in_process

    # the claim name comes from MEMSTACK_JWT_RESOURCE_CLAIM (default sub), as on AWS; the mode from config
    auth = AuthConfig(mode=config.auth, resource_claim=AuthConfig.from_settings().resource_claim)
    limit = config.max_body_bytes if config.max_body_bytes is not None else MAX_BODY_BYTES
    pool = _AppPool(lambda: create_app(memory, auth=auth, max_body_bytes=limit))
    kind: Callable[..., LocalServer] = LocalServer
    if computes_in_process(memory):
        from memstack.serve_loop import LoopServer

        kind = LoopServer
    return kind(
        (config.host, config.port),
        pool,
        config,
        log if log is not None else sys.stderr,
        listener=listener,
        balance=balance,
    )


def serve(memory: Memory, config: ServeConfig, *, banner: str = "", out: TextIO | None = None) -> int:
    """Serve until Ctrl-C or SIGTERM, then shut down gracefully and close ``memory``.

    Prints ``memstack serve: listening on <url>`` (plus ``banner``) to ``out`` (stdout) once the socket is
    bound, and ``memstack serve: stopped`` at the end.

    Returns:
        The exit code: 0.

    Raises:
        OSError: the address cannot be bound.
    """
    from memstack.observability import emit_json_logs

    out = out if out is not None else sys.stdout
    # this process is the server: the access line is its one line per request, plus the API's JSON lines
    # at WARNING (at INFO when verbose); make_server, used in-process by tests and embedders, leaves the
    # process's logging alone
    emit_json_logs("INFO" if config.verbose else "WARNING")
    try:
        server = make_server(memory, config)
    except BaseException:
        memory.close()
        raise
    serve_until_stopped(
        server,
        memory,
        lambda: print(f"memstack serve: listening on {server.url}{banner}", file=out, flush=True),
        lambda: print("memstack serve: stopping", file=out, flush=True),
    )
    print("memstack serve: stopped", file=out, flush=True)
    return 0


@contextmanager
def stop_requested() -> Iterator[threading.Event]:
    """An event that Ctrl-C (SIGINT) or SIGTERM sets while inside (instead of raising or killing), so a
    server can stop gracefully; the previous handlers are restored on exit. Main thread only."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in stop_signals()}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def serve_until_stopped(
    server: LocalServer,
    memory: Memory,
    started: Callable[[], None] = lambda: None,
    stopping: Callable[[], None] = lambda: None,
) -> None:
    """Run ``server`` on a thread until SIGINT or SIGTERM (``stop_requested``); then stop accepting, wait for
    requests in flight (``SHUTDOWN_GRACE_SECONDS`` at most), close the socket and ``memory``."""
    loop = threading.Thread(target=server.serve_forever, args=(0.2,), name="memstack-serve", daemon=True)
    with stop_requested() as stop:
        try:
            loop.start()
            started()
            while not stop.wait(0.5):
                pass
            stopping()
        finally:
            server.stopping = True
            server.shutdown()  # no new requests
            server.wait_idle(SHUTDOWN_GRACE_SECONDS)
            server.server_close()
            memory.close()


def url_of(address: Any) -> str:
    """``http://host:port`` of a socket address (``[host]`` for IPv6)."""
    raw, port = address[:2]
    host = raw.decode() if isinstance(raw, bytes) else str(raw)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def stop_signals() -> list[signal.Signals]:
    """The signals that stop the server: SIGINT (Ctrl-C) and, where it exists, SIGTERM."""
    return [signal.SIGINT] + ([signal.SIGTERM] if hasattr(signal, "SIGTERM") else [])
