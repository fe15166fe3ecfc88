"""Building the opensearch-py client, and translating its errors to ``memstack.errors``.

Nothing here connects at import time: :func:`make_client` builds a client whose first request opens the
connection.

Auth modes (``service``):

* ``aoss`` — OpenSearch Serverless collection, SigV4 with service name ``aoss``.
* ``es`` — managed OpenSearch Service domain, SigV4 with service name ``es``.
* ``none`` — a self-run cluster (or the test double): HTTP basic auth when ``username`` is given, else none.

The connection is opensearch-py's ``Urllib3HttpConnection`` (``urllib3`` is botocore's transport, imported by
every function anyway), not ``RequestsHttpConnection``: ``requests`` and its dependencies cost a cold
function's first request ~19 ms of CPU for nothing the adapter needs (``benchmarks/cold_start.py``). SigV4
is :class:`SigV4Headers`, the connection's callable ``http_auth``: it is called with the method, the full URL
and the final body bytes (after compression) and returns the headers to send, so the payload hash covers the
exact bytes sent, as opensearch-py's ``Urllib3AWSV4SignerAuth`` does — which is not used because its module
imports ``requests`` at the top. Credentials come from botocore's default chain (Lambda role, env, profile)
and are refreshed by botocore; the signer freezes them per request.

Timeouts and retries: the client's own timeout (:data:`DEFAULT_TIMEOUT_SECONDS`) covers start-up
requests; the adapter passes a per-request ``request_timeout`` to searches
(:data:`SEARCH_TIMEOUT_SECONDS`) and writes (:data:`WRITE_TIMEOUT_SECONDS`). The transport retries only
connection errors and 502/503/504 (:data:`DEFAULT_MAX_RETRIES` times), **never a timeout**: a timed-out
request re-sent would only add load to a cluster that is already too slow, so it fails at once with
``Unavailable`` naming the timeout.

Logging: opensearch-py's ``opensearch`` logger logs every failed request as a WARNING with a traceback.
:func:`make_client` gives it a ``NullHandler``, so with no logging configured Python's last-resort handler no
longer prints those tracebacks to stderr (the error is translated and raised; the caller reports it);
records still propagate to handlers an application configures. This module logs translated errors at
DEBUG only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from memstack.errors import InvalidInput, MemstackError, Unavailable

logger = logging.getLogger(__name__)

Service = Literal["es", "aoss", "none"]

T = TypeVar("T")

DEFAULT_TIMEOUT_SECONDS = 10.0
"""Seconds per request unless the request says otherwise (start-up: index check, creation, mapping)."""

SEARCH_TIMEOUT_SECONDS = 10.0
"""Default ``request_timeout`` of a search (``_search``/``_msearch``): what one conversational turn can wait."""

WRITE_TIMEOUT_SECONDS = 30.0
"""Default ``request_timeout`` of a write (``_bulk`` of up to 500 actions, ``_delete_by_query``)."""

DEFAULT_MAX_RETRIES = 2
"""Transport retries on connection errors and 502/503/504 (opensearch-py's ``retry_on_status``); timeouts
are never retried."""


def make_client(
    endpoint: str,
    *,
    service: Service,
    region: str | None = None,
    username: str | None = None,
    password: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    max_retries: int = DEFAULT_MAX_RETRIES,
    credentials: Any = None,
) -> Any:
    """An ``opensearchpy.OpenSearch`` client for ``endpoint``.

    Args:
        endpoint: the domain or collection URL with scheme (``https://xyz.us-east-1.aoss.amazonaws.com``);
            a port in the URL is kept.
        service: ``aoss`` or ``es`` (SigV4 with that service name), or ``none`` (basic auth or none).
        region: the AWS region for SigV4; unset, botocore's configured region
            (``memstack.adapters.aws_session``).
        username, password: basic auth for ``none``.
        timeout: seconds per request that does not pass its own ``request_timeout`` (the adapter passes one
            for searches and writes).
        max_retries: transport retries on connection errors and 502/503/504; a timeout is never retried.
        credentials: botocore credentials for SigV4; unset, botocore's default chain.

    A SigV4 endpoint (``aoss``, ``es``) is an AWS one: over HTTPS its certificate is verified against the CA
    bundle botocore is configured with (``AWS_CA_BUNDLE`` or the profile's ``ca_bundle``;
    ``aws_session.ca_bundle``), as the DynamoDB and S3 clients verify theirs, so a network that re-signs TLS
    (a corporate proxy) needs one setting for all of them; without one, certifi's roots.

    Raises:
        InvalidInput: an unknown ``service``, a malformed endpoint, SigV4 without a region or credentials,
            or basic auth asked with a SigV4 service.
    """
    from urllib.parse import urlparse

    # by their modules: in a function (``sdk.install``) ``opensearchpy.connection``'s ``__init__``, which
    # imports ``requests`` for ``RequestsHttpConnection``, then stays unrun
    from opensearchpy.client import OpenSearch
    from opensearchpy.connection.http_urllib3 import Urllib3HttpConnection

    _quiet_library_logger()
    if service not in ("es", "aoss", "none"):
        raise InvalidInput("service must be 'es', 'aoss' or 'none'", field="service")
    url = urlparse(endpoint)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise InvalidInput("endpoint must be a URL such as https://host[:port]", field="endpoint")
    use_ssl = url.scheme == "https"
    host = {"host": url.hostname, "port": url.port or (443 if use_ssl else 80)}
    if url.path not in ("", "/"):
        host["url_prefix"] = url.path.rstrip("/")
    auth: Any = None
    ca_certs: str | None = None
    if service == "none":
        if username:
            auth = (username, password or "")
    else:
        if username:
            raise InvalidInput(f"basic auth is not used with service {service!r} (SigV4)", field="username")
        auth = _sigv4(service, region, credentials)
        if use_ssl:
            from memstack.adapters import aws_session

            ca_certs = aws_session.ca_bundle()
    return OpenSearch(
        hosts=[host],
        http_auth=auth,
        use_ssl=use_ssl,
        verify_certs=use_ssl,
        ca_certs=ca_certs,
        connection_class=Urllib3HttpConnection,
        timeout=timeout,
        max_retries=max_retries,
        retry_on_timeout=False,
        http_compress=False,
        pool_maxsize=10,
    )


def _quiet_library_logger() -> None:
    """Give opensearch-py's ``opensearch`` logger a ``NullHandler`` (once): only Python's last-resort
    stderr output is suppressed; propagation to configured handlers is untouched."""
    library = logging.getLogger("opensearch")
    if not any(isinstance(h, logging.NullHandler) for h in library.handlers):
        library.addHandler(logging.NullHandler())


class SigV4Headers:
    """The SigV4 ``http_auth`` of opensearch-py's ``Urllib3HttpConnection``: called with each request's
    method, full URL (``scheme://host:port/path?query``) and final body bytes, returns the headers that sign
    it (``Authorization``, ``X-Amz-Date``, ``X-Amz-Content-SHA256`` — the payload's hash, which Serverless
    requires — and ``X-Amz-Security-Token`` with temporary credentials), signed by botocore's ``SigV4Auth``.

    Args:
        credentials: botocore credentials (refreshable ones are frozen per request, so a refresh between
            reading the key and the secret cannot mix two sets).
        region: the region of the domain or collection.
        service: ``es`` or ``aoss``.
    """

    def __init__(self, credentials: Any, region: str, service: str) -> None:
        self.credentials = credentials
        self.region = region
        self.service = service

    def __repr__(self) -> str:  # never show the credentials
        return f"SigV4Headers(region={self.region!r}, service={self.service!r})"

    def __call__(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        """The headers that sign ``method url`` with ``body`` (SigV4, AWS General Reference "Signature
        Version 4 signing process")."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method=method.upper(), url=url, data=body)
        signer = SigV4Auth(self.credentials.get_frozen_credentials(), self.service, self.region)
        request.headers["X-Amz-Content-SHA256"] = signer.payload(request)
        signer.add_auth(request)
        return dict(request.headers.items())


def _sigv4(service: str, region: str | None, credentials: Any) -> SigV4Headers:
    from memstack.adapters import aws_session

    region = region or aws_session.region()
    if not region:
        raise InvalidInput("SigV4 needs an AWS region (set AWS_REGION)", field="region")
    credentials = credentials or aws_session.credentials()
    if credentials is None:
        raise InvalidInput("SigV4 needs AWS credentials and none were found", field="credentials")
    return SigV4Headers(credentials, region, service)


def call(
    action: str, request: Callable[[], T], *, index: str | None = None, timeout: float | None = None
) -> T:
    """Run one client request, translating opensearch-py errors (see :func:`translate`).

    Args:
        action: what the request does, for messages (``"search"``, ``"bulk write"``).
        request: the request; it raises opensearch-py's exceptions.
        index: the index concerned, named in messages.
        timeout: the request's timeout in seconds, named in a timeout's message.

    Raises:
        Unavailable: a connection error or timeout, 429, any 5xx, 401/403 (credentials or access policy),
            404 (index missing) and any other unexpected status.
        InvalidInput: 400 — OpenSearch rejected the request (the message names the error type and reason).
    """
    try:
        return request()
    except MemstackError:
        raise
    except Exception as exc:
        raise translate(action, exc, index=index, timeout=timeout) from exc


def translate(
    action: str, exc: Exception, *, index: str | None = None, timeout: float | None = None
) -> MemstackError:
    """The ``MemstackError`` for an opensearch-py exception raised during ``action``.

    The message names the action, the index (when given) and the status or the timeout; never a document.
    Logged at DEBUG only: the error is raised and the caller reports it.
    """
    from opensearchpy.exceptions import ConnectionError, ConnectionTimeout, TransportError

    where = f"{action} on index {index}" if index else action
    if isinstance(exc, ConnectionTimeout):
        seconds = f"{timeout:g} s" if timeout is not None else "the client's timeout"
        logger.debug("opensearch %s: timed out after %s", where, seconds)
        return Unavailable(
            f"OpenSearch did not answer the {where} within {seconds} (request timeout; not retried)"
        )
    if isinstance(exc, ConnectionError):
        logger.debug("opensearch %s: connection failed (%s)", where, type(exc).__name__)
        return Unavailable(f"OpenSearch could not be reached during {where} ({type(exc).__name__})")
    if isinstance(exc, TransportError):
        status = exc.status_code
        error_type, reason = describe(exc.info)
        logger.debug("opensearch %s: status %s (%s)", where, status, error_type)
        if status == 400:
            return InvalidInput(f"OpenSearch rejected the {where} request (400 {error_type}: {reason})")
        if status in (401, 403):
            return Unavailable(
                f"OpenSearch refused the {where} request ({status} {error_type}); check the credentials and "
                "the domain's or collection's access policy"
            )
        return Unavailable(f"OpenSearch failed during {where} ({status} {error_type})")
    logger.debug("opensearch %s: %s", where, type(exc).__name__)
    return Unavailable(f"OpenSearch failed during {where} ({type(exc).__name__})")


def describe(info: Any, limit: int = 300) -> tuple[str, str]:
    """The error type and a short reason (at most ``limit`` characters) from an OpenSearch error body
    (``{"error": {...}}``) or a bulk item's or by-query failure's error object.

    The reason never carries document text: OpenSearch's "Preview of field's value: …" suffix (mapping
    errors quote the refused value) is cut, and whitespace is collapsed.
    """
    error = info.get("error") if isinstance(info, dict) and "error" in info else info
    if isinstance(info, dict) and "cause" in info and "error" not in info:
        error = info["cause"]  # a _delete_by_query failure
    if isinstance(error, dict):
        reason = error.get("reason")
        root = error.get("root_cause")
        if not reason and isinstance(root, list) and root and isinstance(root[0], dict):
            reason = root[0].get("reason")
        return str(error.get("type", "error")), _safe_reason(reason, limit)
    return "error", _safe_reason(error, limit)


def _safe_reason(reason: Any, limit: int) -> str:
    text = " ".join(str(reason or "").split())
    cut = text.find("Preview of field's value")
    if cut >= 0:
        text = text[:cut].rstrip(" .:;,")
    return text if len(text) <= limit else text[: limit - 1] + "…"
