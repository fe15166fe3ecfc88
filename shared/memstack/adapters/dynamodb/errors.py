"""Translation of PynamoDB, botocore and S3 errors into ``memstack.errors`` (nothing raw escapes).

* a lost condition (``ConditionalCheckFailedException``, a cancelled transaction whose reasons are
  ``ConditionalCheckFailed`` or ``TransactionConflict``) → ``Conflict``
* throttling (``ProvisionedThroughputExceededException``, ``ThrottlingException``,
  ``RequestLimitExceeded``, S3 ``SlowDown``) → ``Throttled`` (a kind of ``Unavailable``; HTTP 429)
* connection errors, timeouts and 5xx → ``Unavailable``
* an item over DynamoDB's 400 KB limit → ``PayloadTooLarge``
* no region or no credentials → ``InvalidInput`` naming the setting (a deployment mistake, not an outage)
* a missing table or bucket, refused credentials, a table of another schema → ``Unavailable`` with a
  message that names the setting to check
* anything else → ``Unavailable``, with the code in the message
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    InvalidRegionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)
from pynamodb.exceptions import PynamoDBException, TransactWriteError

from memstack.errors import Conflict, InvalidInput, MemstackError, PayloadTooLarge, Throttled, Unavailable

log = logging.getLogger(__name__)

CONDITION_CODES = frozenset({"ConditionalCheckFailedException", "TransactionConflictException"})
THROTTLING_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "Throttling",
        "SlowDown",
        "ThrottlingError",
    }
)
LOST_RACE_REASONS = frozenset({"ConditionalCheckFailed", "TransactionConflict"})


HINTS = {
    "ResourceNotFoundException": "the DynamoDB table does not exist: check MEMSTACK_TABLE and the region "
    "(MEMSTACK_CREATE_RESOURCES=true creates it on a local endpoint; on AWS the stack creates it)",
    "NoSuchBucket": "the S3 bucket does not exist: check MEMSTACK_BUCKET "
    "(MEMSTACK_CREATE_RESOURCES=true creates it on a local endpoint)",
    "ValidationException": "DynamoDB refused the request: is MEMSTACK_TABLE a Memstack table (string keys pk/sk)?",
    "UnrecognizedClientException": "AWS refused the credentials",
    "InvalidSignatureException": "AWS refused the request signature: check the credentials and region",
    "AccessDeniedException": "access denied: the role lacks a permission",
    "AccessDenied": "access denied: the role lacks a permission",
}
"""AWS error code → what to tell the operator (never data from the request)."""


def _root(exc: BaseException) -> BaseException:
    """The library error behind PynamoDB's wrappers (``cause``/``__cause__`` chains)."""
    seen = 0
    while seen < 5:
        inner = exc.cause if isinstance(exc, PynamoDBException) and exc.cause is not None else exc.__cause__
        if not isinstance(inner, BotoCoreError | ClientError | PynamoDBException):
            return exc
        exc, seen = inner, seen + 1
    return exc


def _client_error(exc: BaseException) -> ClientError | None:
    cause = exc.cause if isinstance(exc, PynamoDBException) else exc
    return cause if isinstance(cause, ClientError) else None


def error_code(exc: BaseException) -> str | None:
    """The AWS error code behind a PynamoDB or botocore error (``None`` for connection errors)."""
    client_error = _client_error(exc)
    if client_error is None:
        return None
    code = client_error.response.get("Error", {}).get("Code")
    return str(code) if code else None


def cancellation_codes(exc: BaseException) -> list[str]:
    """The reason codes of a cancelled transaction, one per item (``"None"`` for items that passed)."""
    if not isinstance(exc, TransactWriteError) or error_code(exc) != "TransactionCanceledException":
        return []
    return [reason.code if reason is not None else "None" for reason in exc.cancellation_reasons]


def lost_race(exc: BaseException) -> bool:
    """``True`` if the write failed only because a condition did not hold or another transaction was in
    flight on the same items: re-reading and retrying may succeed."""
    code = error_code(exc)
    if code in CONDITION_CODES:
        return True
    reasons = cancellation_codes(exc)
    return (
        bool(reasons)
        and any(r in LOST_RACE_REASONS for r in reasons)
        and all(r in LOST_RACE_REASONS or r == "None" for r in reasons)
    )


def translate(exc: BaseException, action: str) -> MemstackError:
    """The ``MemstackError`` for a library error raised while doing ``action`` (e.g. "save messages")."""
    if isinstance(exc, MemstackError):
        return exc
    if lost_race(exc):
        return Conflict(f"{action}: a concurrent write changed the data first")
    code = error_code(exc)
    reasons = cancellation_codes(exc)
    if code in THROTTLING_CODES or any(r in THROTTLING_CODES for r in reasons):
        return Throttled(f"{action}: throttled by AWS ({code}); retry later")
    root = _root(exc)
    if isinstance(root, NoRegionError | InvalidRegionError):
        return InvalidInput(
            f"{action}: no valid AWS region; set MEMSTACK_REGION (or AWS_REGION)", field="MEMSTACK_REGION"
        )
    if isinstance(root, NoCredentialsError | PartialCredentialsError):
        return InvalidInput(
            f"{action}: no AWS credentials found (environment, shared config, or the function's role)",
            field="AWS_ACCESS_KEY_ID",
        )
    client_error = _client_error(exc) or (root if isinstance(root, ClientError) else None)
    if client_error is not None:
        code = code or str(client_error.response.get("Error", {}).get("Code", "")) or None
        message = str(client_error.response.get("Error", {}).get("Message", ""))
        status = client_error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if "Item size" in message and "maximum allowed size" in message:
            return PayloadTooLarge(f"{action}: an item exceeds DynamoDB's 400 KB item limit")
        if "ValidationError" in reasons and "size" in message.lower():
            return PayloadTooLarge(f"{action}: a transaction exceeds DynamoDB's 4 MB limit")
        if isinstance(status, int) and status >= 500:
            return Unavailable(f"{action}: AWS error {code} (HTTP {status}); retry later")
        if code in HINTS:
            return Unavailable(f"{action}: {HINTS[code]} (AWS error {code})")
        log.debug("unexpected AWS error", extra={"action": action, "code": code})
        return Unavailable(f"{action}: AWS error {code}")
    if isinstance(root, BotoCoreError):
        # botocore's own messages name the endpoint and the failure, never request data
        return Unavailable(f"{action}: AWS unreachable ({type(root).__name__}: {str(root)[:200]})")
    if isinstance(exc, BotoCoreError | PynamoDBException):
        return Unavailable(f"{action}: AWS unreachable ({type(exc).__name__})")
    return Unavailable(f"{action}: {type(exc).__name__}")


@contextmanager
def translated(action: str) -> Iterator[None]:
    """Run a block of AWS calls; any PynamoDB, botocore or S3 error leaves it as a ``MemstackError``."""
    try:
        yield
    except MemstackError:
        raise
    except (PynamoDBException, BotoCoreError, ClientError) as exc:
        raise translate(exc, action) from exc
