"""A quiet JSON-answering request handler for the HTTP test doubles that run on 127.0.0.1."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, no access log on stderr; ``answer`` sends a JSON body with its length."""

    protocol_version = "HTTP/1.1"

    def answer(self, status: int, body: Any) -> None:
        """Send ``body`` (JSON-serialisable; other values as ``str``) with ``status``."""
        out = json.dumps(body, default=str).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass
