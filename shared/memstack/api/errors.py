"""The one place where errors become HTTP responses: ``{"error": {"code", "message", "field"?}}``.

=====================================  ======  ==========================
raised                                 status  ``error.code``
=====================================  ======  ==========================
``InvalidInput``, request validation   400     ``invalid_input``
``Forbidden`` (JWT claim mismatch)     403     ``forbidden``
``NotFound``, no such route            404     ``not_found``
a route, but not for this method       405     ``method_not_allowed`` (``Allow`` header)
``Conflict``                           409     ``conflict``
``PayloadTooLarge``, body over limit   413     ``payload_too_large``
unsupported ``Content-Type``           415     ``unsupported_media_type`` (field ``content-type``)
``Throttled``                          429     ``throttled``
anything else                          500     ``internal`` (no details)
``Unavailable``                        503     ``unavailable``
=====================================  ======  ==========================

Log lines carry ids, codes and the error's class, never message text or working-memory content.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from memstack.api.log import api_logger
from memstack.errors import MemstackError

INTERNAL_MESSAGE = "internal error; the request id identifies it in the logs"

_CODES = {
    400: "invalid_input",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "throttled",
    503: "unavailable",
}

_PART_TAGS = {"text", "reasoning", "tool_call", "tool_result", "file", "image"}

_PARAM_SOURCES = {"query", "path", "header", "cookie", "body", "form", "file"}


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The error document: ``{"error": {"code", "message", "field"?}}`` (``field`` only when known)."""
    inner: dict[str, Any] = {"code": code, "message": message}
    if field:
        inner["field"] = field
    return {"error": inner}


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response[Any]:
    """A JSON error ``Response`` with ``status``, the error document and any extra ``headers``."""
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(error_body(code, message, field), ensure_ascii=False, separators=(",", ":")),
        headers=headers,
    )


def method_not_allowed(method: str, allowed: Sequence[str]) -> Response[Any]:
    """405 ``method_not_allowed`` for a route that exists with other methods, naming them in ``Allow``."""
    listed = ", ".join(allowed)
    api_logger().info("request failed", extra={"status": 405, "code": "method_not_allowed"})
    return error_response(
        405,
        "method_not_allowed",
        f"{method} is not allowed here (allowed: {listed})",
        None,
        {"Allow": listed},
    )


def from_memstack_error(exc: MemstackError) -> Response[Any]:
    """The response of a ``MemstackError``: its own ``status``, ``code``, ``message`` and ``field``
    (messages never hold message text or working-memory content: errors.py)."""
    status = exc.status if exc.status in _CODES or exc.status == 500 else 500
    if status == 500:
        return internal_error(exc)
    api_logger().info("request failed", extra={"status": status, "code": exc.code, "field": exc.field})
    return error_response(status, exc.code, exc.message, exc.field)


def field_path(loc: Sequence[Any], model_params: frozenset[str] = frozenset()) -> str:
    """A pydantic error location as the dotted path of the request field, e.g. ``("body", "messages", 2,
    "role")`` → ``messages[2].role`` and ``("query", "query", "limit")`` → ``limit`` (``model_params``: the
    names of parameters that are whole pydantic models, whose own name is not part of the path)."""
    parts = list(loc)
    if parts and parts[0] in _PARAM_SOURCES:
        parts = parts[1:]
        if len(parts) > 1 and parts[0] in model_params:
            parts = parts[1:]
    out = ""
    for i, p in enumerate(parts):
        if i >= 2 and p in _PART_TAGS and isinstance(parts[i - 1], int) and parts[i - 2] == "parts":
            continue  # the discriminator's branch name, not a field
        if isinstance(p, int):
            out += f"[{p}]"
        elif p:
            out += f".{p}" if out else str(p)
    return out or (str(loc[0]) if loc else "request")


def from_validation_errors(
    errors: Sequence[dict[str, Any]], model_params: frozenset[str] = frozenset()
) -> Response[Any]:
    """400 ``invalid_input`` for Powertools/pydantic request validation errors, naming the first error's
    field path. The message is pydantic's short description (never the rejected value)."""
    if not errors:
        return error_response(400, "invalid_input", "the request is invalid")
    first = errors[0]
    loc = tuple(first.get("loc") or ())
    kind = str(first.get("type", ""))
    if kind == "json_invalid" and loc[:1] == ("body",) and all(isinstance(p, int) for p in loc[1:]):
        return error_response(400, "invalid_input", "the request body is not valid JSON", "body")
    field = field_path(loc, model_params)
    if kind == "json_invalid":
        message = f"{field} is not valid JSON"
    elif kind == "missing":
        message = f"{field} is required"
    else:
        message = f"{field}: {first.get('msg', 'invalid value')}"
    more = len(errors) - 1
    if more:
        message += f" (and {more} more error{'s' if more > 1 else ''})"
    api_logger().info("request failed", extra={"status": 400, "code": "invalid_input", "field": field})
    return error_response(400, "invalid_input", message, field)


def from_status(status: int, message: str | None = None) -> Response[Any]:
    """An error response for a status Powertools decided (no route 404, unsupported media type 415)."""
    code = _CODES.get(status, "internal")
    text = message or HTTPStatus(status).phrase.lower()
    return error_response(status, code, text)


def internal_error(exc: BaseException) -> Response[Any]:
    """500 ``internal``: the class and stack frames are logged (never the exception's message, which
    might quote input); the caller learns nothing about the internals."""
    frames = "".join(traceback.format_tb(exc.__traceback__))
    api_logger().error("unhandled error", extra={"error": type(exc).__name__, "frames": frames})
    return error_response(500, "internal", INTERNAL_MESSAGE)
