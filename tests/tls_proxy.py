"""TLS in front of a plain HTTP test server on 127.0.0.1, as every AWS and OpenAI endpoint speaks it.

A function's first request on AWS opens TLS connections (DynamoDB, OpenSearch, the OpenAI API): each client
loads its CA bundle and runs a handshake, CPU the function pays once per connection. The cold-start world
(tests/cold_world.py) puts a ``TlsProxy`` in front of each of its servers, and the clients trust a bundle of
certifi's roots plus this module's certificate (``LocalCertificate``), so the first request loads a bundle of
the size it loads on AWS.
"""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class LocalCertificate:
    """A self-signed certificate for ``127.0.0.1`` and ``localhost`` (RSA 2048, valid for two days), written
    under ``folder``: ``cert``, ``key``, and ``bundle`` — certifi's CA bundle with the certificate appended,
    the file the clients verify against.

    Raises:
        OSError: ``folder`` cannot be written.
    """

    def __init__(self, folder: Path) -> None:
        import certifi
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import NameOID

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "memstack test endpoint")])
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                ),
                critical=False,
            )
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        pem = certificate.public_bytes(serialization.Encoding.PEM)
        self.cert = folder / "endpoint.pem"
        self.key = folder / "endpoint-key.pem"
        self.bundle = folder / "ca-bundle.pem"
        self.cert.write_bytes(pem)
        self.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        self.bundle.write_bytes(Path(certifi.where()).read_bytes().rstrip(b"\n") + b"\n" + pem)

    def server_context(self) -> ssl.SSLContext:
        """A server-side TLS context holding the certificate and its key."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context


class TlsProxy:
    """An HTTPS reverse proxy on ``127.0.0.1`` in front of a plain HTTP server there, keeping its clients'
    connections alive as AWS endpoints do.

    Each request read on a TLS connection is sent to the upstream server (``http.client``, a connection per
    request: moto's server closes each one) and its answer written back with its length, the client's
    connection left open; so a client makes one TLS handshake per connection, as against DynamoDB or
    OpenSearch, where relaying bytes would hand it the upstream's closes and a handshake per request.

    Args:
        upstream_port: the plain server's port on 127.0.0.1.
        context: the server-side TLS context (``LocalCertificate.server_context``).

    Attributes:
        port: the TLS port to connect to.
        accepted: connections accepted so far.
    """

    def __init__(self, upstream_port: int, context: ssl.SSLContext) -> None:
        proxy = self
        self.accepted = 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                proxy.accepted += 1
                super().setup()

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
                try:
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    data = answer.read()
                    self.send_response(answer.status, answer.reason)
                    for key, value in answer.getheaders():
                        if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                            self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    upstream.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _forward

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port: int = self._server.server_address[1]
        threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="tls-proxy", daemon=True
        ).start()

    def close(self) -> None:
        """Stop serving and close the listening socket."""
        self._server.shutdown()
        self._server.server_close()


_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
)
"""Headers of one connection, not of the message (RFC 9110 §7.6.1): never forwarded."""


@contextmanager
def tls_in_front(upstream_port: int, certificate: LocalCertificate) -> Iterator[str]:
    """A ``TlsProxy`` for the server on ``upstream_port``; yields its ``https://127.0.0.1:<port>`` URL."""
    proxy = TlsProxy(upstream_port, certificate.server_context())
    try:
        yield f"https://127.0.0.1:{proxy.port}"
    finally:
        proxy.close()
