"""Building the opensearch-py client, and translating its errors to ``memstack.errors``.

Nothing here connects at import time: :func:`make_client` builds a client whose first request opens the
connection.

Auth modes (``service``):

* ``aoss`` — OpenSearch Serverless collection, SigV4 with service name ``aoss``.
* ``es`` — managed OpenSearch Service domain, SigV4 with service name ``es``.
* ``none`` — a self-run cluster (or the test double): HTTP basic auth when ``username`` is given, else none.

SigV4 uses ``RequestsHttpConnection`` with ``RequestsAWSV4SignerAuth`` (opensearch-py's current name for
``AWSV4SignerAuth``): the signer runs as a ``requests`` auth hook on the final, serialised request, so the
payload hash covers the exact bytes sent. Credentials come from boto3's default chain (Lambda role, env,
profile) and are refreshed by botocore; the signer freezes them per request.
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
DEFAULT_MAX_RETRIES = 2
"""Transport retries on connection errors, timeouts and 502/503/504 (opensearch-py's ``retry_on_status``)."""


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
        region: the AWS region for SigV4; unset, boto3's configured region.
        username, password: basic auth for ``none``.
        timeout: seconds per request.
        max_retries: transport retries on connection errors, timeouts and 502/503/504.
        credentials: botocore credentials for SigV4; unset, boto3's default chain.

    Raises:
        InvalidInput: an unknown ``service``, a malformed endpoint, SigV4 without a region or credentials,
            or basic auth asked with a SigV4 service.
    """
    from urllib.parse import urlparse

    from opensearchpy import OpenSearch, RequestsHttpConnection

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
    if service == "none":
        if username:
            auth = (username, password or "")
    else:
        if username:
            raise InvalidInput(f"basic auth is not used with service {service!r} (SigV4)", field="username")
        auth = _sigv4(service, region, credentials)
    return OpenSearch(
        hosts=[host],
        http_auth=auth,
        use_ssl=use_ssl,
        verify_certs=use_ssl,
        connection_class=RequestsHttpConnection,
        timeout=timeout,
        max_retries=max_retries,
        retry_on_timeout=True,
        http_compress=False,
        pool_maxsize=10,
    )


def _sigv4(service: str, region: str | None, credentials: Any) -> Any:
    import boto3
    from opensearchpy import RequestsAWSV4SignerAuth

    session = boto3.Session()
    region = region or session.region_name
    if not region:
        raise InvalidInput("SigV4 needs an AWS region (set AWS_REGION)", field="region")
    credentials = credentials or session.get_credentials()
    if credentials is None:
        raise InvalidInput("SigV4 needs AWS credentials and none were found", field="credentials")
    return RequestsAWSV4SignerAuth(credentials, region, service)


def call(action: str, request: Callable[[], T]) -> T:
    """Run one client request, translating opensearch-py errors.

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
        raise translate(action, exc) from exc


def translate(action: str, exc: Exception) -> MemstackError:
    """The ``MemstackError`` for an opensearch-py exception raised during ``action``."""
    from opensearchpy.exceptions import ConnectionError, TransportError

    if isinstance(exc, ConnectionError):
        logger.warning("opensearch %s: connection failed (%s)", action, type(exc).__name__)
        return Unavailable(f"OpenSearch could not be reached during {action} ({type(exc).__name__})")
    if isinstance(exc, TransportError):
        status = exc.status_code
        error_type, reason = describe(exc.info)
        logger.warning("opensearch %s: status %s (%s)", action, status, error_type)
        if status == 400:
            return InvalidInput(f"OpenSearch rejected the {action} request (400 {error_type}: {reason})")
        if status in (401, 403):
            return Unavailable(
                f"OpenSearch refused the {action} request ({status} {error_type}); check the credentials and "
                "the domain's or collection's access policy"
            )
        return Unavailable(f"OpenSearch failed during {action} ({status} {error_type})")
    return Unavailable(f"OpenSearch failed during {action} ({type(exc).__name__})")


def describe(info: Any) -> tuple[str, str]:
    """The error type and a short reason (at most 300 characters) from an OpenSearch error body."""
    error = info.get("error") if isinstance(info, dict) else info
    if isinstance(error, dict):
        reason = error.get("reason")
        root = error.get("root_cause")
        if not reason and isinstance(root, list) and root and isinstance(root[0], dict):
            reason = root[0].get("reason")
        return str(error.get("type", "error")), str(reason or "")[:300]
    return "error", str(error or "")[:300]
