"""The clients of this package, from the process-wide botocore session (``memstack.adapters.aws_session``)."""

from __future__ import annotations

from typing import Any

from memstack.adapters import aws_session
from memstack.adapters.aws_session import create_client

__all__ = ["create_client", "pynamodb_client"]


def pynamodb_client(connection: Any) -> Any:
    """Build a PynamoDB connection's botocore client now, from the shared session.

    PynamoDB (6.x) makes its client lazily from a per-thread session kept in ``connection._local``; its
    lazy creation is not thread-safe, so the store builds the client once, up front.
    """
    with aws_session._lock:
        local = getattr(connection, "_local", None)
        if local is not None and getattr(local, "session", None) is None:
            local.session = aws_session.session()
        return connection.client
