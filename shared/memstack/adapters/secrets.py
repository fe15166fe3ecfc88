"""Reading a Secrets Manager secret's string value: through the AWS Parameters and Secrets Lambda Extension
when the function has it, else with a botocore ``secretsmanager`` client.

The extension (a Lambda layer, wired by infra/functions.py) serves ``GET /secretsmanager/get?secretId=...``
on ``localhost`` at ``PARAMETERS_SECRETS_EXTENSION_HTTP_PORT``, authenticated by the function's session
token in ``X-Aws-Parameters-Secrets-Token``, and answers GetSecretValue's JSON (AWS Secrets Manager User
Guide, "Use AWS Secrets Manager secrets in AWS Lambda functions"). Asking it costs the function a local HTTP
request on ``http.client`` (already imported by botocore's ``urllib3``) instead of a ``secretsmanager``
client: its service model, endpoint rule set and client class, ~25 ms of CPU on a cold function's first
request (``benchmarks/cold_start.py``). The extension runs in its own process, which the figure leaves out.

The extension is asked only when the port is configured (infra sets it with the layer) and the credentials
carry a session token (Lambda's always do). Anything but its answer with a string value — nothing
listening, a timeout, an error status, a malformed body — falls back to the client, so the result and the
errors are the client's whatever the extension did.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote

from memstack.errors import InvalidInput, Unavailable

__all__ = ["EXTENSION_HOST", "EXTENSION_TIMEOUT_SECONDS", "read_secret_string"]

logger = logging.getLogger(__name__)

EXTENSION_HOST = "localhost"
"""Where the extension listens (AWS's documented address)."""

EXTENSION_TIMEOUT_SECONDS = 5.0
"""Seconds for the extension's answer (on a cache miss it calls Secrets Manager itself)."""


def read_secret_string(
    secret_id: str,
    *,
    region: str | None,
    field: str,
    what: str = "the secret",
    extension_port: int | None = None,
) -> str:
    """The string value of the secret ``secret_id`` (an ARN or name), stripped of surrounding white space.

    Args:
        secret_id: the secret's ARN or name.
        region: the region of the ``secretsmanager`` client; ``None``: botocore's configured one.
        field: the setting named by errors (``MEMSTACK_OPENAI_API_KEY_SECRET_ARN``).
        what: the secret as errors name it (``the OpenAI key secret``).
        extension_port: the Parameters and Secrets extension's port, or ``None`` for the client only.

    Raises:
        Unavailable: the secret cannot be read (missing, no permission, Secrets Manager unreachable).
        InvalidInput: the secret has no string value.
    """
    value = _from_extension(secret_id, extension_port) if extension_port is not None else None
    if value is None:
        value = _from_client(secret_id, region=region, field=field, what=what)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{what} has no string value", field=field)
    return value.strip()


def _from_extension(secret_id: str, port: int) -> str | None:
    """The secret's ``SecretString`` as the extension on ``port`` answers it, or ``None`` when it does not
    (not running, no session token, an error status, a malformed answer)."""
    import http.client

    from memstack.adapters import aws_session

    credentials = aws_session.credentials()
    token = credentials.get_frozen_credentials().token if credentials is not None else None
    if not token:
        return None
    connection = http.client.HTTPConnection(EXTENSION_HOST, port, timeout=EXTENSION_TIMEOUT_SECONDS)
    try:
        connection.request(
            "GET",
            f"/secretsmanager/get?secretId={quote(secret_id, safe='')}",
            headers={"X-Aws-Parameters-Secrets-Token": token},
        )
        response = connection.getresponse()
        body = response.read()
    except OSError as exc:  # nothing listening, a reset, a timeout
        logger.info(
            "secrets extension on port %d not answering (%s); using the client", port, type(exc).__name__
        )
        return None
    finally:
        connection.close()
    if response.status != 200:
        logger.info("secrets extension answered HTTP %d; using the client", response.status)
        return None
    try:
        value = json.loads(body).get("SecretString")
    except (ValueError, AttributeError):
        value = None
    if not isinstance(value, str):
        logger.info("secrets extension answered without a string value; using the client")
        return None
    return value


def _from_client(secret_id: str, *, region: str | None, field: str, what: str) -> Any:
    """``GetSecretValue``'s ``SecretString`` from a ``secretsmanager`` client of the shared session."""
    from botocore.exceptions import BotoCoreError, ClientError

    from memstack.adapters.aws_session import create_client

    try:
        client = create_client("secretsmanager", region_name=region)
        try:
            return client.get_secret_value(SecretId=secret_id).get("SecretString")
        finally:
            client.close()
    except (BotoCoreError, ClientError) as exc:
        raise Unavailable(f"cannot read {what}: {type(exc).__name__}", field=field) from exc
