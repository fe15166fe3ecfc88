"""``memstack serve`` as a real subprocess on a free loopback port, for the e2e tests.

``running_serve(...)`` starts ``python -m memstack.cli serve --port 0 ...`` in a clean environment (no
``MEMSTACK_*``/``OPENAI_*`` from the developer's shell unless passed), waits for the ``listening on <url>``
line, collects stderr (the access log) on a thread, and on exit sends SIGTERM and waits for the process.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 20.0
LISTENING = re.compile(r"listening on (http://\S+)")


@dataclass
class Served:
    """A running server: its URL, the process, and what it printed so far."""

    url: str
    process: subprocess.Popen[str]
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)

    def stop(self) -> int:
        """SIGTERM, then wait; returns the exit code (the readers drain the pipes to the end)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError("memstack serve did not stop within the grace period on SIGTERM") from None


def _pump(stream: object, sink: list[str], lines: queue.SimpleQueue[str] | None) -> None:
    for line in stream:  # type: ignore[attr-defined]
        sink.append(line.rstrip("\n"))
        if lines is not None:
            lines.put(line)
    if lines is not None:
        lines.put("")  # end of output: the process exited


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without Memstack/OpenAI settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTACK_", "OPENAI_"))}
    env.update(extra or {})
    return env


@contextmanager
def running_serve(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> Iterator[Served]:
    """Start ``memstack serve --host 127.0.0.1 --port 0 *args``; yield once it listens; stop it on exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", "memstack.cli", "serve", "--host", "127.0.0.1", "--port", "0", *args],
        cwd=cwd,
        env=clean_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out_lines: queue.SimpleQueue[str] = queue.SimpleQueue()
    served = Served(url="", process=process)
    readers = [
        threading.Thread(target=_pump, args=(process.stdout, served.stdout, out_lines), daemon=True),
        threading.Thread(target=_pump, args=(process.stderr, served.stderr, None), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        try:
            first = out_lines.get(timeout=START_TIMEOUT_SECONDS)
        except queue.Empty:
            raise AssertionError(f"memstack serve did not start: {served.stderr[-20:]}") from None
        if not first:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
            raise AssertionError(f"memstack serve exited ({process.returncode}): {served.stderr[-20:]}")
        found = LISTENING.search(first)
        assert found, f"unexpected first line {first!r}; stderr: {served.stderr[-20:]}"
        served.url = found.group(1)
        yield served
    finally:
        served.stop()
        for reader in readers:
            reader.join(timeout=5)
