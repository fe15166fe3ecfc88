"""Errors raised by Memstack, each with a stable ``code``, its HTTP ``status`` and the offending ``field``.

Each class carries its own ``code`` and ``status``; ``error_classes`` and ``error_class`` derive the one
code/class/status table from them, which both sides of the HTTP API read: ``memstack.api.errors`` (class →
status and code) and ``memstack.client`` (code → class). A new error is a new subclass here, nothing else.

=========================  ======  ==========================
class                      status  ``code``
=========================  ======  ==========================
``InvalidInput``           400     ``invalid_input``
``Forbidden``              403     ``forbidden``
``NotFound``               404     ``not_found``
``MethodNotAllowed``       405     ``method_not_allowed``
``RequestTimeout``         408     ``request_timeout``
``Conflict``               409     ``conflict``
``PayloadTooLarge``        413     ``payload_too_large``
``UnsupportedMediaType``   415     ``unsupported_media_type``
``Throttled``              429     ``throttled``
``Unavailable``            503     ``unavailable``
=========================  ======  ==========================

``memstack.observation.engine`` adds ``ObservationFailed`` (502, ``observation_failed``) and its
``ReflectionFailed`` (502, ``reflection_failed``).
"""

from __future__ import annotations

import copy
import math
from typing import Self


class MemstackError(Exception):
    """Base class of every error Memstack raises on purpose.

    Attributes:
        code: stable, machine-readable error code (snake_case), e.g. ``"invalid_input"``.
        message: human-readable explanation; never contains message text or working-memory content.
        field: the input field at fault (dotted path such as ``"messages[2].role"``), or ``None``.
        saved_ids, unsaved_ids: set by a save that failed part way (a DynamoDB batch over several
            transactions): the ids it stored and the ids it did not; ``None`` otherwise.
    """

    code = "memstack_error"
    status = 500
    saved_ids: list[str] | None = None
    unsaved_ids: list[str] | None = None

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.message} (field: {self.field})" if self.field else self.message

    def restated(self, message: str) -> Self:
        """A copy of this error with another message, every other attribute kept (``field``, ``code``, a
        subclass's own such as ``Unavailable.retry_after``): for a caller that adds what it knows, e.g. which
        messages a failed save had already stored."""
        restated = copy.copy(self)
        restated.message = message
        restated.args = (message,)
        return restated

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


def from_validation(kind: str, message: str, field: str | None) -> InvalidInput | PayloadTooLarge:
    """The error of one failed validation (a pydantic error's ``type``, message and field path):
    ``PayloadTooLarge`` when its ``kind`` is ``PayloadTooLarge.code`` — the type the size-limited fields
    report (``memstack.model.SizeLimit``): every size limit answers 413, the way the API's errors table
    documents (docs/api.md "Errors") — else ``InvalidInput``."""
    if kind == PayloadTooLarge.code:
        return PayloadTooLarge(message, field=field)
    return InvalidInput(message, field=field)


class Unavailable(MemstackError):
    """A dependency (store, index, embedder, model) failed or throttled; retry later (HTTP 503).

    Attributes:
        retry_after: seconds the dependency asked the caller to wait (an HTTP ``Retry-After``), or
            ``None`` when it said nothing (or nothing usable: a negative or non-finite value is dropped).
            Background observation waits at least this long before calling the model again, at most its
            cap (docs/observational-memory.md "Scheduling").
    """

    code = "unavailable"
    status = 503

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, field=field, code=code)
        usable = isinstance(retry_after, int | float) and math.isfinite(retry_after) and retry_after >= 0
        self.retry_after = float(retry_after) if usable and retry_after is not None else None


class MethodNotAllowed(InvalidInput):
    """The path exists, but not for this HTTP method (HTTP 405; the response's ``Allow`` header lists the
    methods it has). A kind of ``InvalidInput``: the request is at fault."""

    code = "method_not_allowed"
    status = 405


class UnsupportedMediaType(InvalidInput):
    """The request body is not JSON by its ``Content-Type`` (HTTP 415, field ``content-type``)."""

    code = "unsupported_media_type"
    status = 415


class RequestTimeout(Unavailable):
    """The server gave up waiting for the request itself (HTTP 408, e.g. ``memstack serve`` reading a slow
    body); retry. A kind of ``Unavailable``."""

    code = "request_timeout"
    status = 408


class Throttled(Unavailable):
    """A dependency throttled the request (e.g. DynamoDB's ``ThrottlingException``); retry later with
    backoff (HTTP 429). A kind of ``Unavailable``, so code that retries on ``Unavailable`` still does."""

    code = "throttled"
    status = 429


def error_classes() -> dict[str, type[MemstackError]]:
    """Every public ``MemstackError`` subclass of the library (this module's, and those of modules imported
    so far, such as ``memstack.observation.engine.ObservationFailed``), keyed by its ``code``; parents come
    before their subclasses.

    Returns:
        ``{code: class}``, e.g. ``{"invalid_input": InvalidInput, "throttled": Throttled, ...}``.

    Raises:
        RuntimeError: two classes share a code (the table would be ambiguous).
    """
    found: dict[str, type[MemstackError]] = {}
    pending: list[type[MemstackError]] = list(MemstackError.__subclasses__())
    while pending:
        cls = pending.pop(0)
        pending.extend(cls.__subclasses__())
        if not cls.__module__.startswith("memstack.") or cls.__name__.startswith("_"):
            continue
        if cls.code in found and found[cls.code] is not cls:
            raise RuntimeError(f"{cls.__name__} and {found[cls.code].__name__} share the code {cls.code!r}")
        found[cls.code] = cls
    return found


def error_class(code: str | None = None, status: int | None = None) -> type[MemstackError] | None:
    """The class of an error ``code`` (first), or else the most general class of an HTTP ``status``, or
    ``None`` for neither.

    Args:
        code: a ``code`` from an error body, e.g. ``"not_found"``.
        status: an HTTP status, e.g. ``404``.
    """
    classes = error_classes()
    if code is not None and code in classes:
        return classes[code]
    return next((cls for cls in classes.values() if status is not None and cls.status == status), None)
