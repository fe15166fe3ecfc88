"""The Studio's static files as HTTP answers: ``/`` redirects to ``/studio/``, ``/studio/<name>`` answers
the packaged file (``memstack/studio/static``), anything else is not the Studio's (``None``)."""

from __future__ import annotations

import json
from importlib import resources

STUDIO_PATH = "/studio/"
"""Where the Studio lives (``/`` and ``/studio`` redirect here)."""

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
"""The media types of the files the Studio ships (a file of another type is never served)."""

SECURITY_HEADERS = (
    # the page loads only its own files and talks only to its own origin (the API or the proxy)
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-cache"),
)
"""Headers of every Studio answer."""

Answer = tuple[int, list[tuple[str, str]], bytes]
"""``(status, headers, body)``."""


def studio_response(method: str, path: str) -> Answer | None:
    """The answer to ``method path`` when it is the Studio's, else ``None`` (the API answers it).

    ``GET``/``HEAD`` of ``/`` or ``/studio`` → 302 to ``/studio/``; of ``/studio/`` → ``index.html``; of
    ``/studio/<name>`` → the packaged file (only plain names of the types in ``CONTENT_TYPES``). Another
    method on a Studio path is 405 with ``Allow: GET, HEAD``; a missing file is 404. Errors use the API's
    JSON error shape.

    Args:
        method: the request method (upper case).
        path: the request path, without the query string.
    """
    if path in ("/", "/studio"):
        if method not in ("GET", "HEAD"):
            return _error(405, "method_not_allowed", f"{method} is not allowed on {path}", allow=True)
        return 302, [("Location", STUDIO_PATH), *SECURITY_HEADERS], b""
    if not path.startswith(STUDIO_PATH):
        return None
    if method not in ("GET", "HEAD"):
        return _error(405, "method_not_allowed", f"{method} is not allowed on {path}", allow=True)
    name = path[len(STUDIO_PATH) :] or "index.html"
    body = _asset(name)
    if body is None:
        return _error(404, "not_found", f"no Studio file {path}")
    suffix = name[name.rfind(".") :]
    return 200, [("Content-Type", CONTENT_TYPES[suffix]), *SECURITY_HEADERS], body


def _asset(name: str) -> bytes | None:
    """The packaged file ``name``; ``None`` unless it is a plain file name of a served type."""
    if "/" in name or "\\" in name or name.startswith(".") or name[name.rfind(".") :] not in CONTENT_TYPES:
        return None
    path = resources.files("memstack.studio").joinpath("static", name)
    if not path.is_file():
        return None
    return path.read_bytes()


def _error(status: int, code: str, message: str, *, allow: bool = False) -> Answer:
    from memstack.api.errors import error_body

    headers = [("Content-Type", "application/json"), *SECURITY_HEADERS]
    if allow:
        headers.append(("Allow", "GET, HEAD"))
    return status, headers, json.dumps(error_body(code, message), separators=(",", ":")).encode()
