"""Fixtures of the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memstack import Memory
from memstack.client import MemstackClient
from tests.served import serving


@pytest.fixture
def memory() -> Iterator[Memory]:
    """An in-memory ``Memory`` (hash embedder, background work inline) with working memory on."""
    with Memory.local(
        ":memory:", embedder="hash", background="inline", working_memory={"enabled": True}
    ) as m:
        yield m


@pytest.fixture(params=["memory", "client"])
def backend(request: pytest.FixtureRequest, memory: Memory) -> Iterator[Any]:
    """What an integration runs over: the module's ``memory`` in-process, or the same memory through the
    HTTP API (``memstack serve``'s server on loopback) and ``MemstackClient``."""
    if request.param == "memory":
        yield memory
        return
    with serving(memory) as url, MemstackClient(url) as client:
        yield client
