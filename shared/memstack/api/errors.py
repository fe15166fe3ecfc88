"""The one place where errors become HTTP responses: ``{"error": {"code", "message", "field"?}}``.

A ``MemstackError`` answers with its class's own ``status`` and ``code`` (the table in
``memstack.errors``, which ``memstack.client`` reads back); the resolver's own refusals use the same
classes: request validation → ``InvalidInput`` (400), no route → ``NotFound`` (404), a route but not for
this method → ``MethodNotAllowed`` (405, ``Allow`` header), a body that is not JSON →
``UnsupportedMediaType`` (415, field ``content-type``). Anything else is 500 ``internal``, with no details.

Log lines carry ids, codes and the error's class, never message text or working-memory content.
"""

from __future__ import annotations

import json
import logging
import re
import traceback
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import content_types
from aws_lambda_powertools.event_handler.api_gateway import Response

from memstack.api.ids import NOT_ROUTABLE
from memstack.errors import InvalidInput, MemstackError, MethodNotAllowed, error_class, from_validation

logger = logging.getLogger(__name__)

INTERNAL_MESSAGE = "internal error; the request id identifies it in the logs"
INTERNAL_CODE = "internal"

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
    logger.info("request failed", extra={"status": MethodNotAllowed.status, "code": MethodNotAllowed.code})
    return error_response(
        MethodNotAllowed.status,
        MethodNotAllowed.code,
        f"{method} is not allowed here (allowed: {listed})",
        None,
        {"Allow": listed},
    )


def from_memstack_error(exc: MemstackError) -> Response[Any]:
    """The response of a ``MemstackError``: its own ``status``, ``code``, ``message`` and ``field``
    (messages never hold message text or working-memory content: errors.py). An error whose status no
    class of the table has (the base class's 500) is an internal error."""
    if error_class(status=exc.status) is None:
        return internal_error(exc)
    status = exc.status
    logger.info("request failed", extra={"status": status, "code": exc.code, "field": exc.field})
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
    field path (413 ``payload_too_large`` when it is a size limit: ``errors.from_validation``). The message
    is pydantic's short description (never the rejected value)."""
    if not errors:
        return from_memstack_error(InvalidInput("the request is invalid"))
    first = errors[0]
    loc = tuple(first.get("loc") or ())
    kind = str(first.get("type", ""))
    if kind == "json_invalid" and loc[:1] == ("body",) and all(isinstance(p, int) for p in loc[1:]):
        return from_memstack_error(InvalidInput("the request body is not valid JSON", field="body"))
    field = field_path(loc, model_params)
    if kind == "json_invalid":
        message = f"{field} is not valid JSON"
    elif kind == "missing":
        message = f"{field} is required"
    else:
        message = _library_wording(first, field) or (f"{field}: {first.get('msg', 'invalid value')}")
    more = len(errors) - 1
    if more:
        message += f" (and {more} more error{'s' if more > 1 else ''})"
    return from_memstack_error(from_validation(kind, message, field))


PHRASED_KINDS = frozenset({"int_range", NOT_ROUTABLE})
"""Error types of the API's own validators (``memstack.api.schemas``) whose message is a predicate in the
library's words (``must be an integer from 1 to 1000``): the answer says ``<field> <message>``."""


def _library_wording(error: dict[str, Any], field: str) -> str | None:
    """The message ``Memory`` gives for the same fault, for the pydantic error types the request schemas
    raise where the library has a check of its own (``memstack.model.check_id``, ``usecases.checks``,
    ``inputs.coerce_message``), so a caller reads the same words from ``Memory`` and over HTTP; ``None``
    keeps pydantic's."""
    kind, ctx = str(error.get("type", "")), error.get("ctx") or {}
    if kind in PHRASED_KINDS:
        return f"{field} {error.get('msg', 'is invalid')}"
    if kind == "literal_error":
        # ctx["expected"] is pydantic's "'user', 'assistant', 'system' or 'tool'"
        names = re.findall(r"'((?:[^'\\]|\\.)*)'", str(ctx.get("expected", "")))
        return f"{field} must be one of {', '.join(names)}" if names else None
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return f"{field} must be a non-empty string"
    if kind == "string_too_long":
        return f"{field} is longer than the limit of {ctx.get('max_length')} characters"
    if kind == "too_short" and ctx.get("min_length") == 1:
        return f"{field} must be a non-empty list"
    if kind == "dict_type":
        return f"{field} must be a JSON object"
    if kind == "extra_forbidden":
        owner, _, key = field.rpartition(".")
        return f"{owner or 'the request'} has unknown field {key!r}"
    if kind in {"string_type", "list_type"}:
        return f"{field} must be a {'string' if kind == 'string_type' else 'list'}"
    return None


def from_status(status: int, message: str | None = None) -> Response[Any]:
    """An error response for a status Powertools decided (no route 404, unsupported media type 415): the
    code of that status's class in the table, or ``internal``."""
    cls = error_class(status=status)
    code = cls.code if cls is not None else INTERNAL_CODE
    text = message or HTTPStatus(status).phrase.lower()
    return error_response(status, code, text)


def internal_error(exc: BaseException) -> Response[Any]:
    """500 ``internal``: the class and stack frames are logged (never the exception's message, which
    might quote input); the caller learns nothing about the internals."""
    frames = "".join(traceback.format_tb(exc.__traceback__))
    logger.error("unhandled error", extra={"error": type(exc).__name__, "frames": frames})
    return error_response(500, INTERNAL_CODE, INTERNAL_MESSAGE)
