"""Errors raised by Memstack, each with a stable ``code`` and the offending ``field``.

The HTTP layer (a later issue) maps each class to one status code in one place:
InvalidInput → 400, Forbidden → 403, NotFound → 404, Conflict → 409, PayloadTooLarge → 413,
Throttled → 429, Unavailable → 503 (``memstack.api.errors``).
"""

from __future__ import annotations


class MemstackError(Exception):
    """Base class of every error Memstack raises on purpose.

    Attributes:
        code: stable, machine-readable error code (snake_case), e.g. ``"invalid_input"``.
        message: human-readable explanation; never contains message text or working-memory content.
        field: the input field at fault (dotted path such as ``"messages[2].role"``), or ``None``.
    """

    code = "memstack_error"
    status = 500

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.message} (field: {self.field})" if self.field else self.message

    def to_dict(self) -> dict[str, str]:
        """The error as the API's JSON body: ``{"code", "message", "field"?}``."""
        body = {"code": self.code, "message": self.message}
        if self.field:
            body["field"] = self.field
        return body


class InvalidInput(MemstackError):
    """The input is malformed or breaks a documented rule (HTTP 400)."""

    code = "invalid_input"
    status = 400


class Forbidden(MemstackError):
    """The caller may not do this (HTTP 403)."""

    code = "forbidden"
    status = 403


class NotFound(MemstackError):
    """No such thread, message or resource *for this resource* (HTTP 404).

    Another resource's thread is reported as not found, never as forbidden, so that ids of other
    tenants do not leak.
    """

    code = "not_found"
    status = 404


class Conflict(MemstackError):
    """The write lost a race or collides with existing data (HTTP 409)."""

    code = "conflict"
    status = 409


class PayloadTooLarge(MemstackError):
    """A size, count or token limit was exceeded; the message names the limit (HTTP 413)."""

    code = "payload_too_large"
    status = 413


class Unavailable(MemstackError):
    """A dependency (store, index, embedder, model) failed or throttled; retry later (HTTP 503)."""

    code = "unavailable"
    status = 503


class Throttled(Unavailable):
    """A dependency throttled the request (e.g. DynamoDB's ``ThrottlingException``); retry later with
    backoff (HTTP 429). A kind of ``Unavailable``, so code that retries on ``Unavailable`` still does."""

    code = "throttled"
    status = 429
