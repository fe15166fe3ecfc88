"""Fixtures of the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memstack import Memory
from memstack.client import MemstackClient
from tests.served import serving


@pytest.fixture(params=["memory", "client"])
def backend(request: pytest.FixtureRequest, memory: Memory) -> Iterator[Any]:
    """What an integration runs over: the module's ``memory`` in-process, or the same memory through the
    HTTP API (``memstack serve``'s server on loopback) and ``MemstackClient``."""
    if request.param == "memory":
        yield memory
        return
    with serving(memory) as url, MemstackClient(url) as client:
        yield client
