"""A test double of the AWS Parameters and Secrets Lambda Extension's HTTP API, on 127.0.0.1: ``GET
/secretsmanager/get?secretId=...`` with the ``X-Aws-Parameters-Secrets-Token`` header answers
GetSecretValue's JSON from a Secrets Manager client (moto's in tests), as the extension answers from its
cache or Secrets Manager. A missing or wrong token gets 401, a secret the client cannot read 400, as the
extension does."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.json_http import JsonHandler


class SecretsExtensionDouble:
    """The extension's secrets endpoint, serving ``get_secret_value`` (a Secrets Manager client's method).

    Attributes:
        port: where it listens on 127.0.0.1.
        requests: the ``secretId`` of each request received.
        status: when set, every request gets this status instead of an answer (an unhealthy extension).
    """

    def __init__(self, get_secret_value: Callable[..., dict[str, Any]], *, token: str) -> None:
        self.requests: list[str] = []
        self.status: int | None = None
        double = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                url = urlparse(self.path)
                secret_id = parse_qs(url.query).get("secretId", [""])[0]
                double.requests.append(secret_id)
                if double.status is not None:
                    return self.answer(double.status, {"message": "injected"})
                if url.path != "/secretsmanager/get" or not secret_id:
                    return self.answer(400, {"message": "bad request"})
                if self.headers.get("X-Aws-Parameters-Secrets-Token") != token:
                    return self.answer(401, {"message": "not authorized"})
                try:
                    answer = get_secret_value(SecretId=secret_id)
                except Exception as exc:  # the client's error, as the extension relays it
                    return self.answer(400, {"message": type(exc).__name__})
                self.answer(200, {k: v for k, v in answer.items() if k != "ResponseMetadata"})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])

    def __enter__(self) -> SecretsExtensionDouble:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
