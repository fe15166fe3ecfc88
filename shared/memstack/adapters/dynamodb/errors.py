"""Translation of PynamoDB, botocore and S3 errors into ``memstack.errors`` (nothing raw escapes).

* a lost condition (``ConditionalCheckFailedException``, a cancelled transaction whose reasons are
  ``ConditionalCheckFailed`` or ``TransactionConflict``) → ``Conflict``
* throttling (``ProvisionedThroughputExceededException``, ``ThrottlingException``,
  ``RequestLimitExceeded``, S3 ``SlowDown``) → ``Throttled`` (a kind of ``Unavailable``; HTTP 429)
* connection errors, timeouts and 5xx → ``Unavailable``
* an item over DynamoDB's 400 KB limit → ``PayloadTooLarge``
* anything else (a missing table, a validation error) → ``Unavailable``, with the code in the message
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError
from pynamodb.exceptions import PynamoDBException, TransactWriteError

from memstack.errors import Conflict, MemstackError, PayloadTooLarge, Throttled, Unavailable

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
    client_error = _client_error(exc)
    if client_error is not None:
        message = str(client_error.response.get("Error", {}).get("Message", ""))
        status = client_error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if "Item size" in message and "maximum allowed size" in message:
            return PayloadTooLarge(f"{action}: an item exceeds DynamoDB's 400 KB item limit")
        if "ValidationError" in reasons and "size" in message.lower():
            return PayloadTooLarge(f"{action}: a transaction exceeds DynamoDB's 4 MB limit")
        if isinstance(status, int) and status >= 500:
            return Unavailable(f"{action}: AWS error {code} (HTTP {status}); retry later")
        log.warning("unexpected AWS error", extra={"action": action, "code": code})
        return Unavailable(f"{action}: AWS error {code}")
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
