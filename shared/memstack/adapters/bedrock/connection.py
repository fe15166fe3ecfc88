"""One ``bedrock-runtime`` client with Memstack's own retries and error mapping, shared by the embedder and
the chat model — the same policy as the OpenAI adapter (``memstack.adapters.openai.connection``).

botocore's own retries are turned off (``total_max_attempts=1``) so that every retry happens here, where
it is explicit and testable: the OpenAI adapter's jittered exponential backoff (``BASE_DELAY``, ``MAX_DELAY``), at most ``max_retries`` retries. Errors leave as
``memstack.errors`` (Bedrock Runtime API reference, "Errors" of ``InvokeModel`` and ``Converse``):

==============================================================  ===========================================
What Bedrock answered                                           Raised
==============================================================  ===========================================
``AccessDeniedException`` (IAM or model access not granted)     ``InvalidInput`` (field ``model``), at once
``ResourceNotFoundException`` (no such model)                   ``InvalidInput`` (field ``model``), at once
``ValidationException`` (e.g. too long an input)                ``InvalidInput`` (field of the request), at once
``ServiceQuotaExceededException``                               ``Unavailable``, at once (retrying cannot help)
``ThrottlingException``, ``ModelNotReadyException``,            retried; ``Unavailable`` once retries run out
``ServiceUnavailableException``, ``InternalServerException``,
``ModelTimeoutException``, ``ModelErrorException``, other 5xx,
connection errors and timeouts
no credentials                                                  ``InvalidInput`` (field ``aws_credentials``)
text that is not UTF-8 (a lone surrogate)                       ``InvalidInput`` (field of the request), unsent
malformed response                                              ``Unavailable``
==============================================================  ===========================================

Under a turn's deadline (``memstack.deadline.within``) no attempt starts with less than
``MIN_ATTEMPT_SECONDS`` left and no retry is made whose backoff would end past the deadline: the call fails
with ``Unavailable`` instead. A botocore client's read timeout is fixed when it is built, so an attempt
already sent may still run to ``timeout``.

Messages name the error code and the model, never Bedrock's error text (which may quote the input).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from memstack import deadline
from memstack.adapters.openai.connection import MIN_ATTEMPT_SECONDS, _backoff, check_retry_options
from memstack.errors import InvalidInput, MemstackError, Unavailable

__all__ = ["BedrockConnection"]

RETRIED = frozenset(
    {
        "ThrottlingException",
        "ModelNotReadyException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelTimeoutException",
        "ModelErrorException",
    }
)
"""Error codes worth retrying (Bedrock: ``ModelNotReadyException`` asks the caller to retry)."""

_T = TypeVar("_T")


class BedrockConnection:
    """A lazily built ``bedrock-runtime`` client plus the retry loop and error mapping of the module docstring.

    Thread-safe: the client is built once under a lock; botocore clients are safe to share between threads.
    """

    def __init__(
        self,
        *,
        region: str | None,
        timeout: float,
        max_retries: int,
        client: Any | None,
        sleep: Callable[[float], None],
    ) -> None:
        """Check the options; builds nothing.

        Args:
            region: the Bedrock region; ``None`` uses botocore's chain (``AWS_REGION``, the profile).
            timeout: read timeout in seconds of each request.
            max_retries: retries after the first attempt, so at most ``max_retries + 1`` requests.
            client: a ready ``bedrock-runtime`` client to use instead (tests pass one under a Stubber).
            sleep: the wait between attempts, ``time.sleep`` unless a test injects another.

        Raises:
            InvalidInput: ``timeout`` not positive; ``max_retries`` negative.
        """
        check_retry_options(timeout, max_retries)
        self.region = region
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self._client = client
        self._sleep = sleep
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"BedrockConnection(region={self.region!r}, timeout={self.timeout}, max_retries={self.max_retries})"

    def client(self) -> Any:
        """The ``bedrock-runtime`` client, built on first use from the process-wide botocore session
        (``memstack.adapters.aws_session``): one client per connection, the service model parsed once per
        process."""
        with self._lock:
            if self._client is None:
                from botocore.config import Config

                from memstack.adapters.aws_session import create_client

                config = Config(
                    read_timeout=self.timeout,
                    connect_timeout=min(self.timeout, 10.0),
                    retries={"total_max_attempts": 1, "mode": "standard"},
                )
                self._client = create_client("bedrock-runtime", region_name=self.region, config=config)
            return self._client

    def call(self, request: Callable[[Any], _T], *, what: str, model: str, field: str) -> _T:
        """Run ``request(client)``, retrying the retryable errors with backoff.

        Args:
            request: one ``bedrock-runtime`` call.
            what: the operation for messages, e.g. ``"embeddings"``.
            model: the model id asked, for messages.
            field: the input field a ``ValidationException`` is blamed on.

        Returns:
            What ``request`` returned.

        Raises:
            InvalidInput, Unavailable: as in the module docstring.
        """
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

        client = self.client()
        attempts = self.max_retries + 1
        failure = ""
        made = 0
        for attempt in range(attempts):
            left = deadline.remaining()
            if left is not None and left < MIN_ATTEMPT_SECONDS:
                raise Unavailable(
                    f"Bedrock {what} ({model}): the turn's deadline passed after {attempt} attempt(s)"
                )
            made += 1
            try:
                return request(client)
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
                error = _client_error(code, status, what=what, model=model, field=field)
                if error is not None:
                    raise error from None
                failure = code or f"HTTP {status}"
            except UnicodeEncodeError:  # a lone surrogate (e.g. from a JSON "\ud800" escape) cannot be sent
                raise InvalidInput(
                    f"Bedrock {what} ({model}): the {field} are not valid text (a lone surrogate)",
                    field=field,
                ) from None
            except (NoCredentialsError, NoRegionError) as exc:
                raise InvalidInput(
                    f"Bedrock {what} ({model}): {type(exc).__name__}: no AWS credentials or region configured",
                    field="aws_credentials",
                ) from None
            except BotoCoreError as exc:  # connection errors, timeouts
                failure = type(exc).__name__
            if attempt + 1 == attempts:
                break
            pause = _backoff(attempt)
            left = deadline.remaining()
            if left is not None and pause + MIN_ATTEMPT_SECONDS > left:
                failure += "; the next retry would end past the turn's deadline"
                break
            self._sleep(pause)
        raise Unavailable(f"Bedrock {what} ({model}) failed after {made} attempt(s): {failure}")


def _client_error(code: str, status: int, *, what: str, model: str, field: str) -> MemstackError | None:
    """The error to raise at once for a Bedrock error ``code``, or ``None`` if it is worth retrying."""
    if code in RETRIED or (status >= 500 and code not in ("AccessDeniedException",)):
        return None
    if code == "AccessDeniedException":
        return InvalidInput(
            f"Bedrock {what}: access denied to model {model!r} (grant bedrock:InvokeModel on its ARN and "
            "enable access to the model in the Bedrock console)",
            field="model",
        )
    if code == "ResourceNotFoundException":
        return InvalidInput(f"Bedrock {what}: model {model!r} not found in this region", field="model")
    if code == "ServiceQuotaExceededException":
        return Unavailable(f"Bedrock {what} ({model}): service quota exceeded")
    if code == "ValidationException":
        return InvalidInput(f"Bedrock {what} ({model}) refused the request: ValidationException", field=field)
    return InvalidInput(f"Bedrock {what} ({model}) refused the request: {code or status}", field=field)
