"""Factories of the DynamoDB store for the conformance suite: moto in-process and moto's server.

* ``dynamodb_moto_store``: ``moto.mock_aws()`` around the test; a table and bucket made for it.
* ``dynamodb_server_store``: one ``ThreadedMotoServer`` per test process on a free port of 127.0.0.1
  (started on first use, stopped at exit); each store gets a fresh, uniquely named table and bucket, and
  talks to the server over real HTTP through ``endpoint_url``.

moto applies a TransactWriteItems item by item without a lock, so two concurrent transactions can
interleave their condition checks and writes (DynamoDB never does), and its rollback copy of the table
breaks when another request changes the table meanwhile. ``make_moto_transactions_atomic`` serialises
moto's DynamoDB backend calls, making the emulator keep DynamoDB's promise rather than changing what is
tested.
"""

from __future__ import annotations

import atexit
import functools
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memstack.ports import MemoryStore

_server_lock = threading.Lock()
_server_url: str | None = None


def fake_aws_environment() -> None:
    """Fake credentials and a region for botocore (never real ones: setdefault keeps an explicit value
    only when the test environment set one)."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(name, value)


@functools.cache
def make_moto_transactions_atomic() -> None:
    """Serialise moto's DynamoDB backend calls: a TransactWriteItems deep-copies the table for its
    rollback while concurrent requests would otherwise read and change it.

    moto also deep-copies the whole table once per item of a transaction (all before applying any), which
    makes a 100-item transaction on a 1 MB table take seconds; within one call the copies are of the same
    unchanged table, so one copy is shared."""
    import copy
    import types

    from moto.dynamodb import models
    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.RLock()
    for name, original in list(vars(DynamoDBBackend).items()):
        if name.startswith("_") or not callable(original):
            continue

        def locked(self: Any, *args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
            with lock:
                if _name != "transact_write_items":
                    return _original(self, *args, **kwargs)
                tables: dict[int, tuple[Any, Any]] = {}  # id → (table, its copy): both kept alive

                def deepcopy_once(value: Any) -> Any:
                    if type(value).__name__ != "Table":
                        return copy.deepcopy(value)
                    if id(value) not in tables:
                        tables[id(value)] = (value, copy.deepcopy(value))
                    return tables[id(value)][1]

                models.copy = types.SimpleNamespace(deepcopy=deepcopy_once)  # type: ignore[attr-defined]
                try:
                    return _original(self, *args, **kwargs)
                finally:
                    models.copy = copy  # type: ignore[attr-defined]

        setattr(DynamoDBBackend, name, functools.wraps(original)(locked))


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@contextmanager
def dynamodb_moto_store(tmp: Any = None, **options: Any) -> Iterator[MemoryStore]:
    """A fresh ``DynamoDBMemoryStore`` (with a bucket) inside ``moto.mock_aws()``; ``options`` go to
    the store's constructor."""
    import moto

    from memstack.adapters.dynamodb import DynamoDBMemoryStore, create_table

    fake_aws_environment()
    make_moto_transactions_atomic()
    table, bucket = _unique("memstack"), _unique("memstack-bodies")
    with moto.mock_aws():
        create_table(table_name=table, region="us-east-1", bucket=bucket)
        options.setdefault("bucket", bucket)
        yield DynamoDBMemoryStore(table_name=table, region="us-east-1", **options)


def moto_server_url() -> str:
    """The URL of this process's moto server, started on first use and stopped at exit."""
    global _server_url
    with _server_lock:
        if _server_url is None:
            from moto.server import ThreadedMotoServer

            fake_aws_environment()
            make_moto_transactions_atomic()
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
            server.start()
            atexit.register(server.stop)
            _server_url = f"http://127.0.0.1:{port}"
        return _server_url


@contextmanager
def dynamodb_server_store(tmp: Any = None, **options: Any) -> Iterator[MemoryStore]:
    """A fresh ``DynamoDBMemoryStore`` on a uniquely named table and bucket of the moto server."""
    from memstack.adapters.dynamodb import DynamoDBMemoryStore, create_table

    url = moto_server_url()
    table, bucket = _unique("memstack"), _unique("memstack-bodies")
    create_table(table_name=table, region="us-east-1", endpoint_url=url, bucket=bucket, s3_endpoint_url=url)
    options.setdefault("bucket", bucket)
    yield DynamoDBMemoryStore(
        table_name=table, region="us-east-1", endpoint_url=url, s3_endpoint_url=url, **options
    )
