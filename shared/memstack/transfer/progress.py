"""How long jobs report progress, without knowing how it is shown (a bar on a terminal, plain lines in a
log: ``memstack.cli.progress``)."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """Receives a job's size once, then its advances."""

    def start(self, total: int, unit: str) -> None:
        """The job's size in ``unit`` (``messages``, ``bytes``); 0 when unknown."""
        ...

    def advance(self, n: int) -> None:
        """``n`` more units are done."""
        ...


class NoProgress:
    """Reports nothing."""

    def start(self, total: int, unit: str) -> None:
        """Ignored."""

    def advance(self, n: int) -> None:
        """Ignored."""
