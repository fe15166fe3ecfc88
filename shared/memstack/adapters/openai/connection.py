"""One OpenAI client with Memstack's own retries and error mapping, shared by the embedder and the chat model.

The SDK's client is built with ``max_retries=0`` so that every retry happens here, where it is explicit and
testable: jittered exponential backoff on HTTP 429 and 5xx and on connection errors and timeouts only,
honouring ``Retry-After``, at most ``max_retries`` retries. Errors leave as ``memstack.errors``:

======================================  =====================================================
What the endpoint did                   Raised
======================================  =====================================================
401, 403 (key rejected)                 ``InvalidInput`` (field ``api_key``), at once
404 (no such model)                     ``InvalidInput`` (field ``model``), at once
413                                     ``PayloadTooLarge``, at once
429 ``insufficient_quota``              ``Unavailable``, at once (retrying cannot help)
other 4xx (e.g. 400)                    ``InvalidInput`` (field of the request), at once
input not encodable as UTF-8            ``InvalidInput`` (field of the request), never sent
429, 5xx, connection error, timeout     retried; ``Unavailable`` once retries run out
malformed response                      ``Unavailable``
the turn's deadline passed              ``Unavailable``, at once (``memstack.deadline``)
======================================  =====================================================

Under a turn's deadline (``memstack.deadline.within``) every attempt's timeout is cut to the time left,
and a retry whose wait (backoff or ``Retry-After``) would end past the deadline is not made: the call
fails with ``Unavailable`` at the deadline instead of holding the turn.

Messages never carry the API key (the SDK's own 401 message shows part of it, so it is not chained) nor
the endpoint's error text, which some compatible servers fill with the input; they name the status and the
API's error ``code``/``param``/``type``.

The SDK is given an ``httpx.Client`` of our own: with ``openai`` 1.x and 2.x that is its native transport,
and ``openai`` 3.x (built on ``httpx2``) still accepts it, so timeouts, the connection pool and test mocks
(respx) behave the same on every SDK version this adapter allows.
"""

from __future__ import annotations

import email.utils
import json
import math
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

from memstack import deadline
from memstack.errors import InvalidInput, MemstackError, PayloadTooLarge, Unavailable

if TYPE_CHECKING:
    import httpx
    import openai

__all__ = ["DEFAULT_BASE_URL", "OpenAIConnection"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"

BASE_DELAY = 0.5
"""Seconds before the first retry; doubled each retry, then jittered to 50-100 % of that."""
MAX_DELAY = 20.0
"""Longest single wait, in seconds, also for a ``Retry-After`` asking for more (a Lambda cannot idle long)."""

MIN_ATTEMPT_SECONDS = 0.05
"""Under a deadline, no attempt is started with less time than this left."""

_T = TypeVar("_T")


def _drop_authorization(request: httpx.Request) -> None:
    """An httpx request hook: no ``Authorization`` header (a keyless OpenAI-compatible server)."""
    request.headers.pop("Authorization", None)


class OpenAIConnection:
    """A lazily built ``openai.OpenAI`` client plus the retry loop and error mapping of the module docstring.

    Thread-safe: the client is built once under a lock; the SDK client itself is safe to share.
    """

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        timeout: float,
        max_retries: int,
        client: openai.OpenAI | None,
        sleep: Callable[[float], None],
    ) -> None:
        """Check the options; builds nothing and opens nothing.

        Args:
            api_key: the key sent as a bearer token; required for api.openai.com unless ``client`` is given.
                With a ``base_url`` it may be ``None``: a local OpenAI-compatible server that needs no key
                gets requests without an ``Authorization`` header. Never read from the environment here
                (``memstack.bootstrap.make_embedder`` does that).
            base_url: the API root, e.g. ``http://localhost:11434/v1``; ``None`` means api.openai.com.
            timeout: seconds for each HTTP request (connect, read, write and pool wait each).
            max_retries: retries after the first attempt, so at most ``max_retries + 1`` requests.
            client: a ready SDK client to use instead (its own ``max_retries`` should be 0, else its retries
                multiply with these).
            sleep: the wait between attempts, ``time.sleep`` unless a test injects another.

        Raises:
            InvalidInput: no ``api_key``, no ``base_url`` and no ``client``; ``timeout`` not positive;
                ``max_retries`` negative.
        """
        if client is None and not api_key and not base_url:
            raise InvalidInput(
                "an OpenAI API key is required for api.openai.com (pass api_key or set OPENAI_API_KEY; "
                "for an OpenAI-compatible endpoint that needs no key, set OPENAI_BASE_URL)",
                field="api_key",
            )
        check_retry_options(timeout, max_retries)
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self._api_key = api_key
        self._client = client
        self._owns_client = client is None
        self._sleep = sleep
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIConnection(base_url={self.base_url!r}, timeout={self.timeout}, max_retries={self.max_retries})"

    def client(self) -> openai.OpenAI:
        """The SDK client, built (and ``openai`` imported) on first use."""
        with self._lock:
            if self._client is None:
                import httpx
                import openai  # lazily typed in a deployed function (bootstrap.memory_from_env, sdk.py)

                # keyless (a compatible server at base_url): every SDK version insists on some key, so
                # it gets a placeholder, and the transport drops the Authorization header it makes of it
                hooks = {} if self._api_key else {"request": [_drop_authorization]}
                http_client = httpx.Client(
                    timeout=httpx.Timeout(self.timeout), follow_redirects=True, event_hooks=hooks
                )
                self._client = openai.OpenAI(
                    api_key=self._api_key or "keyless",
                    base_url=self.base_url,
                    timeout=self.timeout,
                    max_retries=0,
                    # openai 3.x types it as httpx2.Client yet accepts httpx.Client (see the module docstring)
                    http_client=cast(Any, http_client),
                )
            return self._client

    def close(self) -> None:
        """Close the HTTP connection pool if this object built the client."""
        with self._lock:
            if self._client is not None and self._owns_client:
                self._client.close()
                self._client = None

    def call(self, request: Callable[[openai.OpenAI], _T], *, what: str, model: str, field: str) -> _T:
        """Run ``request(client)``, retrying throttling, 5xx and connection failures with backoff.

        Args:
            request: one SDK call.
            what: the operation for messages, e.g. ``"embeddings"``.
            model: the model asked, for messages.
            field: the input field a rejected request (other 4xx) is blamed on.

        Returns:
            What ``request`` returned.

        Raises:
            InvalidInput, PayloadTooLarge, Unavailable: as in the module docstring.
        """
        client = self.client()  # first: it imports the SDK the cheap way (sdk.py)
        import openai

        attempts = self.max_retries + 1
        made = 0
        for attempt in range(attempts):
            left = deadline.remaining()
            if left is not None and left < MIN_ATTEMPT_SECONDS:
                raise Unavailable(
                    f"OpenAI {what} ({model}) at {self.base_url}: the turn's deadline passed "
                    f"after {attempt} attempt(s)"
                )
            bounded = client if left is None or left >= self.timeout else client.with_options(timeout=left)
            made += 1
            try:
                return request(bounded)
            except UnicodeEncodeError:  # a lone surrogate (e.g. from a JSON "\ud800" escape) cannot be sent
                raise InvalidInput(
                    f"OpenAI {what} ({model}): the {field} are not valid text (a lone surrogate)", field=field
                ) from None
            except openai.APIStatusError as exc:
                error = _status_error(exc, what=what, model=model, field=field, base_url=self.base_url)
                if error is not None:
                    raise error from None  # the SDK's message may hold part of the key or the input
                failure = f"HTTP {exc.status_code}"
                wait = _retry_after(exc.response.headers)
            except openai.APIConnectionError as exc:  # includes APITimeoutError
                failure = "timed out" if isinstance(exc, openai.APITimeoutError) else "connection failed"
                wait = None
            except (openai.OpenAIError, json.JSONDecodeError, UnicodeDecodeError) as exc:
                # a malformed answer: the SDK's APIResponseValidationError, or a 200 whose body is not JSON
                # (or not UTF-8), which the SDK's parsing lets through as it is
                raise Unavailable(
                    f"OpenAI {what} ({model}) returned an unusable response: {type(exc).__name__}"
                ) from None
            if attempt + 1 == attempts:
                break
            pause = _backoff(attempt) if wait is None else min(wait, MAX_DELAY)
            left = deadline.remaining()
            if left is not None and pause + MIN_ATTEMPT_SECONDS > left:
                failure += "; the next retry would end past the turn's deadline"
                break
            self._sleep(pause)
        raise Unavailable(
            f"OpenAI {what} ({model}) at {self.base_url} failed after {made} attempt(s): {failure}",
            retry_after=wait,
        )


def _status_error(
    exc: openai.APIStatusError, *, what: str, model: str, field: str, base_url: str
) -> MemstackError | None:
    """The error to raise at once for ``exc``, or ``None`` if the status is worth retrying."""
    status = exc.status_code
    details = ", ".join(
        f"{k}={v}" for k, v in (("code", exc.code), ("param", exc.param), ("type", exc.type)) if v
    )
    suffix = f" ({details})" if details else ""
    if status in (401, 403):
        return InvalidInput(
            f"the OpenAI endpoint {base_url} rejected the API key (HTTP {status}); check the key and its "
            "permissions for this model",
            field="api_key",
        )
    if status == 429 and exc.code == "insufficient_quota":
        return Unavailable(f"OpenAI {what} ({model}): the account's quota is exhausted (HTTP 429){suffix}")
    if status == 429 or status >= 500:
        return None
    if status == 404:
        return InvalidInput(
            f"OpenAI {what}: model {model!r} not found at {base_url} (HTTP 404){suffix}", field="model"
        )
    if status == 413:
        return PayloadTooLarge(f"OpenAI {what} ({model}): request too large (HTTP 413){suffix}", field=field)
    return InvalidInput(
        f"OpenAI {what} rejected the request for model {model!r} (HTTP {status}){suffix}", field=field
    )


def _retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (OpenAI's) or ``Retry-After`` (seconds or an HTTP date,
    RFC 9110 §10.2.3); ``None`` when absent or unreadable — a value that is not a finite number (``inf``,
    ``nan``, which Python's ``float`` reads) is unreadable."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        seconds = _finite(raw_ms)
        if seconds is not None:
            return max(0.0, seconds / 1000)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = _finite(raw)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _finite(raw: str) -> float | None:
    """``raw`` as a finite number, else ``None``."""
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _backoff(attempt: int) -> float:
    """Exponential backoff with jitter: 50-100 % of ``BASE_DELAY * 2**attempt``, at most ``MAX_DELAY``."""
    ceiling = min(MAX_DELAY, BASE_DELAY * float(2**attempt))
    return ceiling * (0.5 + random.random() / 2)  # jitter, not cryptography


def check_retry_options(timeout: float, max_retries: int) -> None:
    """Check a connection's ``timeout`` (seconds, positive) and ``max_retries`` (0 or more).

    Raises:
        InvalidInput: naming the option.
    """
    if not timeout > 0:
        raise InvalidInput("timeout must be a positive number of seconds", field="timeout")
    if max_retries < 0:
        raise InvalidInput("max_retries must be >= 0", field="max_retries")


def default_sleep(seconds: float) -> None:
    """``time.sleep``, named so that signatures can default to it."""
    time.sleep(seconds)
