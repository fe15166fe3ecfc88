"""One botocore session per process for every client of this package.

A botocore session caches the service models and endpoint data it has parsed; a fresh session per client
re-reads them (about 0.1 s each, on every cold start). Creating clients from a shared session is not
thread-safe, so it happens under a lock; the clients themselves are thread-safe.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_session: Any = None


def _shared_session() -> Any:
    global _session
    if _session is None:
        import botocore.session

        _session = botocore.session.get_session()
    return _session


def create_client(service: str, **kwargs: Any) -> Any:
    """A botocore client of ``service`` made by the shared session (``kwargs`` as ``create_client``)."""
    with _lock:
        return _shared_session().create_client(service, **kwargs)


def pynamodb_client(connection: Any) -> Any:
    """Build a PynamoDB connection's botocore client now, from the shared session.

    PynamoDB (6.x) makes its client lazily from a per-thread session kept in ``connection._local``; its
    lazy creation is not thread-safe, so the store builds the client once, up front.
    """
    with _lock:
        local = getattr(connection, "_local", None)
        if local is not None and getattr(local, "session", None) is None:
            local.session = _shared_session()
        return connection.client
