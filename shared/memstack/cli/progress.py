"""Progress of long jobs (export, import, reindex): a ``tqdm`` bar on a terminal, plain lines otherwise
(a log, a pipe, CI), so output that is not a terminal never fills with carriage returns."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

LINE_EVERY_SECONDS = 5.0
"""Without a terminal, a line at least this often while the job advances…"""

LINE_EVERY_FRACTION = 0.1
"""…and at every tenth of the job."""


class ProgressBar:
    """``memstack.transfer.Progress`` shown on ``stream`` (stderr): a bar when it is a terminal, else
    lines ``label: done/total unit (percent)``. ``quiet`` shows nothing. Use as a context manager: the
    bar is closed (and the last line written) on the way out, also on Ctrl-C.
    """

    def __init__(self, label: str, *, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.total = 0
        self.unit = ""
        self.done = 0
        self._bar: Any = None
        self._shown_at = 0.0
        self._shown_fraction = 0.0

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, total: int, unit: str) -> None:
        """Begin showing a job of ``total`` ``unit``s (0: unknown)."""
        self.total, self.unit, self.done = total, unit, 0
        if self.quiet:
            return
        if self.stream.isatty():
            from tqdm import tqdm

            self._bar = tqdm(
                total=total or None,
                desc=self.label,
                unit="B" if unit == "bytes" else f" {unit}",
                unit_scale=unit == "bytes",
                file=self.stream,
                dynamic_ncols=True,
            )
        else:
            self._line()

    def advance(self, n: int) -> None:
        """``n`` more units done."""
        if n <= 0:
            return
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif not self.quiet:
            fraction = self.done / self.total if self.total else 0.0
            now = time.monotonic()
            if (
                fraction - self._shown_fraction >= LINE_EVERY_FRACTION
                or now - self._shown_at >= LINE_EVERY_SECONDS
            ):
                self._line()

    def close(self) -> None:
        """Stop showing: close the bar, or write the last line if it is not written yet."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif not self.quiet and self.unit and self._shown_fraction < 1.0 and self.done:
            self._line()

    def _line(self) -> None:
        self._shown_at = time.monotonic()
        self._shown_fraction = self.done / self.total if self.total else 0.0
        percent = f" ({100 * self._shown_fraction:.0f}%)" if self.total else ""
        of = f"/{self.total}" if self.total else ""
        print(f"{self.label}: {self.done}{of} {self.unit}{percent}", file=self.stream, flush=True)
