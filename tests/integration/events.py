"""API Gateway REST proxy events shaped as ``sam local generate-event apigateway aws-proxy`` writes them, and
a small caller that sends them to a Lambda handler and decodes the JSON answer.

Written apart from ``memstack.api.http.to_event`` on purpose: the handlers are tested with events built
from the AWS sample, not with the library's own builder.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

# `sam local generate-event apigateway aws-proxy` (SAM CLI 1.x), with the sample's values.
_SAM_AWS_PROXY: dict[str, Any] = {
    "body": "eyJ0ZXN0IjoiYm9keSJ9",
    "resource": "/{proxy+}",
    "path": "/path/to/resource",
    "httpMethod": "POST",
    "isBase64Encoded": True,
    "queryStringParameters": {"foo": "bar"},
    "multiValueQueryStringParameters": {"foo": ["bar"]},
    "pathParameters": {"proxy": "/path/to/resource"},
    "stageVariables": {"baz": "qux"},
    "headers": {
        "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,image/webp,*/*;q=0.8",
        "Accept-Encoding": "gzip, deflate, sdch",
        "Accept-Language": "en-US,en;q=0.8",
        "Cache-Control": "max-age=0",
        "CloudFront-Forwarded-Proto": "https",
        "CloudFront-Is-Desktop-Viewer": "true",
        "CloudFront-Is-Mobile-Viewer": "false",
        "CloudFront-Is-SmartTV-Viewer": "false",
        "CloudFront-Is-Tablet-Viewer": "false",
        "CloudFront-Viewer-Country": "US",
        "Host": "1234567890.execute-api.us-east-1.amazonaws.com",
        "Upgrade-Insecure-Requests": "1",
        "User-Agent": "Custom User Agent String",
        "Via": "1.1 08f323deadbeefa7af34d5feb414ce27.cloudfront.net (CloudFront)",
        "X-Amz-Cf-Id": "cDehVQoZnx43VYQb9j2-nvCh-9z396Uhbp027Y2JvkCPNLmGJHqlaA==",
        "X-Forwarded-For": "127.0.0.1, 127.0.0.2",
        "X-Forwarded-Port": "443",
        "X-Forwarded-Proto": "https",
    },
    "multiValueHeaders": {
        "Accept": ["text/html,application/xhtml+xml,application/xml;q=0.9,image/webp,*/*;q=0.8"],
        "Accept-Encoding": ["gzip, deflate, sdch"],
        "Accept-Language": ["en-US,en;q=0.8"],
        "Cache-Control": ["max-age=0"],
        "CloudFront-Forwarded-Proto": ["https"],
        "CloudFront-Is-Desktop-Viewer": ["true"],
        "CloudFront-Is-Mobile-Viewer": ["false"],
        "CloudFront-Is-SmartTV-Viewer": ["false"],
        "CloudFront-Is-Tablet-Viewer": ["false"],
        "CloudFront-Viewer-Country": ["US"],
        "Host": ["0123456789.execute-api.us-east-1.amazonaws.com"],
        "Upgrade-Insecure-Requests": ["1"],
        "User-Agent": ["Custom User Agent String"],
        "Via": ["1.1 08f323deadbeefa7af34d5feb414ce27.cloudfront.net (CloudFront)"],
        "X-Amz-Cf-Id": ["cDehVQoZnx43VYQb9j2-nvCh-9z396Uhbp027Y2JvkCPNLmGJHqlaA=="],
        "X-Forwarded-For": ["127.0.0.1, 127.0.0.2"],
        "X-Forwarded-Port": ["443"],
        "X-Forwarded-Proto": ["https"],
    },
    "requestContext": {
        "accountId": "123456789012",
        "resourceId": "123456",
        "stage": "prod",
        "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
        "requestTime": "09/Apr/2015:12:34:56 +0000",
        "requestTimeEpoch": 1428582896000,
        "identity": {
            "cognitoIdentityPoolId": None,
            "accountId": None,
            "cognitoIdentityId": None,
            "caller": None,
            "accessKey": None,
            "sourceIp": "127.0.0.1",
            "cognitoAuthenticationType": None,
            "cognitoAuthenticationProvider": None,
            "userArn": None,
            "userAgent": "Custom User Agent String",
            "user": None,
        },
        "path": "/prod/path/to/resource",
        "resourcePath": "/{proxy+}",
        "httpMethod": "POST",
        "apiId": "1234567890",
        "protocol": "HTTP/1.1",
    },
}


def api_event(
    method: str,
    path: str,
    *,
    query: Mapping[str, str | list[str]] | None = None,
    body: Any = None,
    raw_body: bytes | str | None = None,
    base64_body: bool = False,
    headers: Mapping[str, str] | None = None,
    claims: Mapping[str, Any] | None = None,
    authorizer: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A REST proxy event for ``method path`` (``path`` as API Gateway passes it, e.g. ``/v1/threads``).

    Args:
        query: query parameters; a list value is a repeated parameter.
        body: a JSON value to send as the body (``Content-Type: application/json``).
        raw_body: the body as is (instead of ``body``).
        base64_body: send the body base64-encoded (``isBase64Encoded``), as API Gateway does for binary media.
        headers: extra headers (override the sample's).
        claims: JWT/Cognito authorizer claims (``requestContext.authorizer.claims``).
        authorizer: the whole ``requestContext.authorizer`` object (a Lambda authorizer's context).
    """
    event = copy.deepcopy(_SAM_AWS_PROXY)
    event["httpMethod"] = event["requestContext"]["httpMethod"] = method
    event["path"] = path
    event["pathParameters"] = {"proxy": path.lstrip("/")}
    event["requestContext"]["path"] = f"/prod{path}"
    event["requestContext"]["requestId"] = str(uuid.uuid4())
    if query:
        multi = {k: v if isinstance(v, list) else [v] for k, v in query.items()}
        event["multiValueQueryStringParameters"] = multi
        event["queryStringParameters"] = {k: v[-1] for k, v in multi.items()}
    else:
        event["multiValueQueryStringParameters"] = event["queryStringParameters"] = None
    data: bytes | None = None
    if raw_body is not None:
        data = raw_body.encode() if isinstance(raw_body, str) else raw_body
    elif body is not None:
        data = json.dumps(body).encode()
    all_headers = dict(event["headers"])
    if data is not None:
        all_headers["Content-Type"] = "application/json"
    all_headers.update(headers or {})
    event["headers"] = all_headers
    event["multiValueHeaders"] = {k: [v] for k, v in all_headers.items()}
    if data is None:
        event["body"], event["isBase64Encoded"] = None, False
    elif base64_body:
        event["body"], event["isBase64Encoded"] = base64.b64encode(data).decode(), True
    else:
        event["body"], event["isBase64Encoded"] = data.decode(), False
    if authorizer is not None:
        event["requestContext"]["authorizer"] = dict(authorizer)
    if claims is not None:
        event["requestContext"]["authorizer"] = {"claims": dict(claims)}
    return event


@dataclass
class Reply:
    """A decoded handler response."""

    status: int
    headers: dict[str, list[str]]
    body: Any
    raw: str

    @property
    def error(self) -> dict[str, Any]:
        """The ``error`` object of an error response."""
        assert isinstance(self.body, dict) and "error" in self.body, self.raw
        error: dict[str, Any] = self.body["error"]
        return error


@dataclass
class Api:
    """Calls a Lambda handler with REST proxy events for one resource (``resource_id`` in every query)."""

    handler: Handler
    resource_id: str | None = "user-a"
    claims: Mapping[str, Any] | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)

    def __call__(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | list[str]] | None = None,
        body: Any = None,
        resource_id: str | None = None,
        **kwargs: Any,
    ) -> Reply:
        """Send one request; the resource's id is added to the query unless one is given."""
        params: dict[str, str | list[str]] = dict(query or {})
        rid = resource_id if resource_id is not None else self.resource_id
        if rid is not None and "resource_id" not in params:
            params["resource_id"] = rid
        kwargs.setdefault("claims", self.claims)
        event = api_event(method, path, query=params, body=body, **kwargs)
        self.calls.append(event)
        result = self.handler(event, None)
        headers = {k: list(v) for k, v in (result.get("multiValueHeaders") or {}).items()}
        for k, v in (result.get("headers") or {}).items():
            headers.setdefault(k, [v])
        raw = result.get("body") or ""
        if result.get("isBase64Encoded"):
            raw = base64.b64decode(raw).decode()
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = None
        return Reply(result["statusCode"], headers, decoded, raw)

    def get(self, path: str, **kwargs: Any) -> Reply:
        """``GET path``."""
        return self("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        """``POST path`` with a JSON body."""
        return self("POST", path, body=body, **kwargs)

    def put(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        """``PUT path`` with a JSON body."""
        return self("PUT", path, body=body, **kwargs)

    def patch(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        """``PATCH path`` with a JSON body."""
        return self("PATCH", path, body=body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Reply:
        """``DELETE path``."""
        return self("DELETE", path, **kwargs)

    def as_resource(self, resource_id: str, claims: Mapping[str, Any] | None = None) -> Api:
        """The same handler acting for another resource."""
        return Api(self.handler, resource_id, claims)


def reset_process_state() -> None:
    """Forget the process-wide ``Memory``, auth settings and observability instruments of the handlers
    (closing the ``Memory``), as a fresh Lambda execution environment would start."""
    import memstack.api.auth
    import memstack.bootstrap
    import memstack.observability

    if memstack.bootstrap._memory is not None:
        memstack.bootstrap._memory.close()
    memstack.bootstrap._memory = None
    memstack.api.auth._auth = None
    memstack.observability.reset()


def use_sqlite(monkeypatch: Any, db_path: Any, **env: str) -> None:
    """Configure the handlers' environment for the embedded default (SQLite file at ``db_path``, hash
    embedder) plus ``env`` (e.g. ``MEMSTACK_AUTH="jwt"``), from a fresh process state."""
    reset_process_state()
    for name in ("MEMSTACK_AUTH", "MEMSTACK_JWT_RESOURCE_CLAIM", "MEMSTACK_INDEXING"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {
        "MEMSTACK_BACKEND": "sqlite",
        "MEMSTACK_DB_PATH": str(db_path),
        "MEMSTACK_EMBEDDER": "hash",
        **env,
    }.items():
        monkeypatch.setenv(name, value)
