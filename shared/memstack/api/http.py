"""Plain HTTP ⇄ API Gateway REST proxy events, so a local server (``memstack serve``) is a thin adapter:

    response = handle_http(app, "POST", "/v1/threads/t1/context", "resource_id=u1", headers, body)
    # → HttpResponse(status=200, headers=[("Content-Type", "application/json")], body=b"...")

The event has the shape API Gateway sends to a Lambda proxy integration (``sam local generate-event apigateway
aws-proxy``): ``path``, ``httpMethod``, single- and multi-value query and headers, ``body`` (base64 when it is
not UTF-8), ``requestContext`` (with ``authorizer.claims`` when claims are given, as a JWT authorizer sets
them).
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote

if TYPE_CHECKING:
    from memstack.api.app import MemstackResolver

Headers = Mapping[str, str] | Iterable[tuple[str, str]]
Query = str | Mapping[str, str | Sequence[str]] | None


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A response to write back: status code, header pairs (repeated names allowed) and the body bytes."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


def _query_lists(query: Query) -> dict[str, list[str]]:
    if query is None:
        return {}
    if isinstance(query, str):
        # bytes that are not UTF-8 become lone surrogates, which the resolver refuses (400), rather than
        # U+FFFD, which would make "%FF", "%C0" and "%EF%BF%BD" name one resource
        return parse_qs(query.lstrip("?"), keep_blank_values=True, errors="surrogateescape")
    return {k: [v] if isinstance(v, str) else list(v) for k, v in query.items()}


def _header_pairs(headers: Headers | None) -> list[tuple[str, str]]:
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        return [(str(k), str(v)) for k, v in headers.items()]
    return [(str(k), str(v)) for k, v in headers]


def to_event(
    method: str,
    path: str,
    query: Query = None,
    headers: Headers | None = None,
    body: bytes | None = None,
    *,
    claims: Mapping[str, Any] | None = None,
    stage: str = "local",
    source_ip: str = "127.0.0.1",
) -> dict[str, Any]:
    """An API Gateway REST proxy event for a plain HTTP request.

    Args:
        method: the HTTP method (any case).
        path: the request path without the query string (percent-decoded here, as API Gateway does).
        query: the raw query string (``a=1&b=2``) or a mapping of names to a value or a list of values.
        headers: a mapping, or pairs (a repeated name keeps every value in ``multiValueHeaders``).
        body: the raw body bytes; UTF-8 text is passed as is, anything else base64-encoded.
        claims: token claims as a JWT authorizer would set them (``requestContext.authorizer.claims``).
        stage: the stage name in ``requestContext``.
        source_ip: the caller's address in ``requestContext.identity``.
    """
    params = _query_lists(query)
    pairs = _header_pairs(headers)
    multi_headers: dict[str, list[str]] = {}
    for name, value in pairs:
        multi_headers.setdefault(name, []).append(value)
    encoded = False
    text: str | None = None
    if body:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text, encoded = base64.b64encode(body).decode("ascii"), True
    path = unquote(path.split("?", 1)[0], errors="surrogateescape") or "/"
    now = time.time()
    request_context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "local",
        "domainName": "localhost",
        "httpMethod": method.upper(),
        "identity": {"sourceIp": source_ip, "userAgent": dict(pairs).get("User-Agent", "")},
        "path": f"/{stage}{path}",
        "protocol": "HTTP/1.1",
        "requestId": str(uuid.uuid4()),
        "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
        "requestTimeEpoch": int(now * 1000),
        "resourceId": "local",
        "resourcePath": "/{proxy+}",
        "stage": stage,
    }
    if claims is not None:
        request_context["authorizer"] = {"claims": dict(claims)}
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method.upper(),
        "headers": {name: values[-1] for name, values in multi_headers.items()} or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": {k: v[-1] for k, v in params.items()} or None,
        "multiValueQueryStringParameters": params or None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": request_context,
        "body": text,
        "isBase64Encoded": encoded,
    }


def to_http_response(result: Mapping[str, Any]) -> HttpResponse:
    """The ``(status, headers, body)`` of a Lambda proxy response (``multiValueHeaders`` and ``headers``
    merged; a base64 body decoded)."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name, values in (result.get("multiValueHeaders") or {}).items():
        seen.add(name.lower())
        pairs += [(name, str(v)) for v in values]
    for name, value in (result.get("headers") or {}).items():
        if name.lower() not in seen:
            pairs.append((name, str(value)))
    raw = result.get("body") or ""
    body = base64.b64decode(raw) if result.get("isBase64Encoded") else str(raw).encode("utf-8")
    return HttpResponse(status=int(result.get("statusCode", 500)), headers=pairs, body=body)


def handle_http(
    app: MemstackResolver,
    method: str,
    path: str,
    query: Query = None,
    headers: Headers | None = None,
    body: bytes | None = None,
    *,
    claims: Mapping[str, Any] | None = None,
) -> HttpResponse:
    """Serve one plain HTTP request with the resolver: ``to_event`` → ``app.resolve`` → ``to_http_response``."""
    event = to_event(method, path, query, headers, body, claims=claims)
    return to_http_response(app.resolve(event, None))
