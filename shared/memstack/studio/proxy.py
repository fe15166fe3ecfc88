"""``memstack studio --url``: the Studio page served locally, its API requests forwarded to a deployed
Memstack API and signed on the way.

The page calls ``/v1/…`` at its own origin; this server answers the page's files itself
(``memstack.studio.studio_response``) and forwards every ``/v1/…`` request — method, path and query as
sent, the body, ``Content-Type`` and ``If-Match`` — to ``<url>/v1/…`` through an ``httpx`` client carrying
the caller's credentials: SigV4 (``memstack.client.SigV4Auth``, as ``MemstackClient(sigv4=True)``) or a
JWT bearer token. The API's answer (status, body, ``Content-Type``, ``Allow``, ``ETag``) goes back as it
came. The browser never sees the credentials.

Limits: a body over the API's limit (``MAX_BODY_BYTES``) is answered 413 without being read or sent; a body
without ``Content-Length`` 411; a connection whose body is late 408 (``read_timeout``). An API that does not
answer is 503 ``unavailable`` naming the URL and the cause. Anything else is 404 ``not_found``.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO

import httpx

from memstack.errors import InvalidInput
from memstack.studio.command import DEFAULT_PORT

logger = logging.getLogger(__name__)

FORWARDED_REQUEST_HEADERS = ("content-type", "if-match", "accept")
"""Request headers passed to the API (no cookies, no browser identity, no ``Host``)."""

FORWARDED_RESPONSE_HEADERS = ("content-type", "allow", "etag", "retry-after")
"""Answer headers passed back to the page."""

API_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """Where ``memstack studio`` listens and which API it forwards to.

    Attributes:
        url: the API's root without ``/v1`` (e.g. ``https://abc.execute-api.eu-west-1.amazonaws.com/prod``).
        host, port: where to listen (``port`` 0: any free port).
        sigv4: sign each forwarded request with SigV4 (IAM auth; botocore's credentials and region).
        jwt: a bearer token sent as ``Authorization`` (JWT auth).
        read_timeout: seconds a connection may take to send its body.
    """

    url: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    sigv4: bool = False
    jwt: str | None = None
    read_timeout: float = 30.0


def api_client(config: ProxyConfig, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """The ``httpx`` client that forwards the page's requests with ``config``'s credentials.

    Raises:
        InvalidInput: both ``sigv4`` and ``jwt``, a URL that is not ``http(s)``, an empty token, or SigV4
            without credentials or region (``SigV4Auth``).
    """
    from memstack.client import SigV4Auth

    if config.sigv4 and config.jwt is not None:
        raise InvalidInput("give --sigv4 or --jwt, not both", field="jwt")
    if not config.url.startswith(("http://", "https://")):
        raise InvalidInput(f"--url must be an http(s) URL, not {config.url!r}", field="url")
    headers: dict[str, str] = {}
    if config.jwt is not None:
        if not config.jwt.strip():
            raise InvalidInput("--jwt needs a token", field="jwt")
        headers["Authorization"] = f"Bearer {config.jwt.strip()}"
    auth = SigV4Auth(url=config.url) if config.sigv4 else None
    return httpx.Client(timeout=API_TIMEOUT_SECONDS, headers=headers, auth=auth, transport=transport)


class StudioServer(ThreadingHTTPServer):
    """The Studio's local server: the page's files, and ``/v1/…`` forwarded through ``client``."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, config: ProxyConfig, client: httpx.Client, log: TextIO) -> None:
        self.config = config
        self.client = client
        self.base_url = config.url.rstrip("/")
        self.log = log
        self._log_lock = threading.Lock()
        super().__init__((config.host, config.port), _Handler)

    @property
    def url(self) -> str:
        """``http://host:port`` of the listening socket."""
        host, port = self.server_address[:2]
        shown = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{f'[{shown}]' if ':' in shown else shown}:{port}"

    def access(self, method: str, path: str, status: int) -> None:
        """One line per request: method, path without the query (no resource id), status."""
        with self._log_lock:
            print(f"{method} {path} {status}", file=self.log, flush=True)


class _Handler(BaseHTTPRequestHandler):
    server: StudioServer
    protocol_version = "HTTP/1.1"
    server_version = "memstack-studio"

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.config.read_timeout)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Silenced: ``StudioServer.access`` writes the one line per request."""

    def do_GET(self) -> None:
        self._serve()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    def _serve(self) -> None:
        from memstack.studio.assets import studio_response

        self._body_read = False
        method = "GET" if self.command == "HEAD" else self.command
        path = self.path.partition("?")[0]
        answer = studio_response(method, path)
        if answer is None:
            answer = (
                self._forward(method)
                if path.startswith("/v1/")
                else _error(404, "not_found", f"no route {method} {path}")
            )
        if not self._body_read and (
            self.headers.get("Content-Length", "0") not in ("", "0") or self.headers.get("Transfer-Encoding")
        ):
            self.close_connection = True  # a body left unread: this connection cannot carry another request
        status, headers, body = answer
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.server.access(self.command, path, status)

    def _forward(self, method: str) -> tuple[int, list[tuple[str, str]], bytes]:
        from memstack.api.app import MAX_BODY_BYTES

        if self.headers.get("Transfer-Encoding", "").lower() not in ("", "identity"):
            return _error(411, "invalid_input", "send the body with a Content-Length", "content-length")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return _error(400, "invalid_input", "Content-Length is not a number", "content-length")
        if length > MAX_BODY_BYTES:
            return _error(
                413,
                "payload_too_large",
                f"the request body is larger than the limit of {MAX_BODY_BYTES} bytes",
                "body",
            )
        try:
            body = self.rfile.read(length) if length > 0 else b""
        except TimeoutError:
            return _error(408, "request_timeout", "the request body did not arrive in time", "body")
        self._body_read = True
        headers = {k: v for k, v in self.headers.items() if k.lower() in FORWARDED_REQUEST_HEADERS}
        try:
            response = self.server.client.request(
                method, self.server.base_url + self.path, content=body or None, headers=headers
            )
        except httpx.HTTPError as exc:
            logger.warning("the API did not answer: %s", type(exc).__name__)
            return _error(
                503,
                "unavailable",
                f"the Memstack API at {self.server.base_url} did not answer: {type(exc).__name__}",
            )
        out = [(k, v) for k, v in response.headers.items() if k.lower() in FORWARDED_RESPONSE_HEADERS]
        return response.status_code, out, response.content


def _error(
    status: int, code: str, message: str, field: str | None = None
) -> tuple[int, list[tuple[str, str]], bytes]:
    from memstack.api.errors import error_body

    return (
        status,
        [("Content-Type", "application/json")],
        json.dumps(error_body(code, message, field)).encode(),
    )


def make_studio_server(
    config: ProxyConfig, *, transport: httpx.BaseTransport | None = None, log: TextIO | None = None
) -> StudioServer:
    """A bound (not yet serving) ``StudioServer`` forwarding to ``config.url``.

    Args:
        transport: the ``httpx`` transport to the API (tests); default: the network.
        log: where the access lines go (default stderr).

    Raises:
        InvalidInput: bad ``config`` (``api_client``). OSError: the address cannot be bound.
    """
    client = api_client(config, transport)
    try:
        return StudioServer(config, client, log if log is not None else sys.stderr)
    except BaseException:
        client.close()
        raise


def run_studio(config: ProxyConfig, *, out: TextIO | None = None) -> int:
    """Serve until Ctrl-C or SIGTERM; prints ``memstack studio: open <url>/studio/`` once listening.

    Returns:
        The exit code: 0.

    Raises:
        InvalidInput: bad ``config``. OSError: the address cannot be bound.
    """
    from memstack.serve import stop_requested

    out = out if out is not None else sys.stdout
    server = make_studio_server(config)
    loop = threading.Thread(target=server.serve_forever, args=(0.2,), name="memstack-studio", daemon=True)
    with stop_requested() as stop:
        try:
            loop.start()
            print(f"memstack studio: open {server.url}/studio/ (API {server.base_url})", file=out, flush=True)
            while not stop.wait(0.5):
                pass
        finally:
            server.shutdown()
            server.server_close()
            server.client.close()
    print("memstack studio: stopped", file=out, flush=True)
    return 0
