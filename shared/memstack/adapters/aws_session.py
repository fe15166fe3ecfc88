"""One botocore session per process for every AWS client Memstack makes (DynamoDB, S3, Secrets Manager,
Step Functions, Bedrock) and for the OpenSearch adapter's SigV4 credentials.

A botocore session caches what it has parsed (endpoint rules, service models, the credential chain); a
fresh ``boto3.Session()`` per client parses them again and imports ``boto3`` itself (with ``s3transfer``),
tens of milliseconds of CPU each on a Lambda cold start (``benchmarks/cold_start.py``). Clients are made
from ``botocore`` directly: a boto3 client is a botocore client, so Stubber and moto behave the same.
Creating clients from a shared session is not thread-safe, so it happens under a lock; the clients
themselves are thread-safe. Nothing is imported or read until the first call. The session's data loader is
``memstack.adapters.aws_loader.ServiceLoader``: botocore's, without the listing of every service that its
loader does before loading one service's model (a third of the first client's creation).
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["ca_bundle", "create_client", "credentials", "region", "session"]

_lock = threading.RLock()
_session: Any = None


def session() -> Any:
    """The process-wide ``botocore.session.Session`` (made on first use, with the ``ServiceLoader``)."""
    global _session
    with _lock:
        if _session is None:
            import botocore.session

            from memstack.adapters.aws_loader import create_loader

            made = botocore.session.get_session()
            # the data loader botocore would make, minus its listing of every service per client
            made.register_component("data_loader", create_loader(made.get_config_variable("data_path")))
            _session = made
        return _session


def create_client(service: str, **kwargs: Any) -> Any:
    """A botocore client of ``service`` from the shared session (``kwargs`` as botocore's
    ``Session.create_client``: ``region_name``, ``endpoint_url``, ``config`` ...).

    Raises:
        botocore.exceptions.NoRegionError: no region given and none configured.
    """
    with _lock:
        return session().create_client(service, **kwargs)


def region() -> str | None:
    """The region botocore's configuration chain names (``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile),
    or ``None``."""
    with _lock:
        value = session().get_config_variable("region")
    return str(value) if value else None


def ca_bundle() -> str | None:
    """The CA bundle botocore's configuration names for verifying AWS endpoints (``AWS_CA_BUNDLE``, else
    the profile's ``ca_bundle``), or ``None`` for the library's default roots. Memstack's own client of an
    AWS endpoint (the OpenSearch adapter's) verifies against it as botocore's clients do."""
    with _lock:
        value = session().get_config_variable("ca_bundle")
    return str(value) if value else None


def credentials() -> Any:
    """The credentials of botocore's default chain (environment, profile, container or instance role), or
    ``None`` if none are found.

    Resolved afresh on each call through the shared session's provider chain (no service model is loaded),
    as a new ``boto3.Session()`` would: ``Session.get_credentials`` would keep the first answer for the
    life of the process.
    """
    with _lock:
        provider = session().get_component("credential_provider")
    return provider.load_credentials()
