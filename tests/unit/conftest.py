"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memstack.adapters.sqlite.db import SqliteDatabase


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement any connection of a ``SqliteDatabase`` runs, with its parameters expanded."""
    statements: list[str] = []
    original = SqliteDatabase._open

    def opened(self: SqliteDatabase, *, writer: bool) -> Any:
        conn = original(self, writer=writer)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(SqliteDatabase, "_open", opened)
    yield statements
