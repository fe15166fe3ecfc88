"""Running a snippet in a fresh interpreter, where no SDK is imported yet: what an import-order test needs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_fresh(code: str) -> str:
    """What ``code`` (dedented) prints, stripped, run by a new interpreter with ``shared/`` on its path and no
    other environment; fails the test with the interpreter's stderr if the snippet raises."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "shared"), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()
