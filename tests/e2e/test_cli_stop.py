"""Long jobs stop cleanly: ``memstack import`` and ``memstack export`` in a subprocess, stopped by Ctrl-C
(SIGINT) or SIGTERM mid-job, exit 130 or 143 with a one-line message and no traceback, leave no temporary
file behind (no partial export, no SQLite journal), and a stopped import completes when run again.

The job stops itself (SIGSTOP) right after its progress starts, so the signal always lands mid-job however
fast the job is and however loaded the machine; the test then signals it and resumes it (SIGCONT).
Waiting for the progress line and pausing from outside instead races a fast job to its end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.serve_support import clean_env

T = "2024-05-01T12:00:00Z"
THREADS, PER_THREAD = 5, 1_000
JOB_SECONDS = 120


def write_export(path: Path) -> None:
    """An export file of ``THREADS`` threads of ``PER_THREAD`` messages, written directly."""
    lines = [
        {
            "type": "header",
            "format": "memstack-export",
            "version": 1,
            "exported_at": T,
            "selection": {"resource_id": None, "thread_id": None},
        }
    ]
    for t in range(THREADS):
        thread = {
            "id": f"t{t}",
            "resource_id": "r",
            "title": "",
            "metadata": {},
            "created_at": T,
            "updated_at": T,
        }
        lines.append({"type": "thread", **thread, "version": 0, "last_seq": PER_THREAD})
        lines += [
            {
                "type": "message",
                "id": f"t{t}-m{s}",
                "thread_id": f"t{t}",
                "resource_id": "r",
                "role": "user",
                "parts": [{"type": "text", "text": f"message {s} of thread {t}: sailing, bread, violins"}],
                "created_at": T,
                "seq": s,
            }
            for s in range(1, PER_THREAD + 1)
        ]
    counts = {"resources": 0, "threads": THREADS, "messages": THREADS * PER_THREAD, "observation_records": 0}
    lines.append({"type": "end", "counts": counts})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


PAUSED_AT_START = """
import os, signal, sys
from memstack.cli import main, progress

started = progress.ProgressBar.start

def start(self, total, unit):
    started(self, total, unit)
    self.stream.flush()
    os.kill(os.getpid(), signal.SIGSTOP)

progress.ProgressBar.start = start
raise SystemExit(main(sys.argv[1:]))
"""
"""``memstack`` whose progress bar stops the process once its first line is out."""


def memstack(*args: str, cwd: Path) -> subprocess.Popen[str]:
    """``memstack *args`` that stops itself (SIGSTOP) when its job's progress starts."""
    return subprocess.Popen(
        [sys.executable, "-c", PAUSED_AT_START, *args],
        cwd=cwd,
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(*args: str, cwd: Path) -> str:
    """Run ``memstack *args`` to its end; its stdout (it must succeed)."""
    done = subprocess.run(
        [sys.executable, "-m", "memstack.cli", *args],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=JOB_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def stop_mid_job(
    process: subprocess.Popen[str], job: str, signum: int, paused: Callable[[], None] = lambda: None
) -> tuple[int, str]:
    """Wait for the job to stop itself at its first progress line (and call ``paused``), send ``signum``,
    resume it; its exit code and stderr."""
    assert process.stderr is not None
    _, status = os.waitpid(process.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), f"{job} ended before its progress started: {process.stderr.read()}"
    seen = [process.stderr.readline()]
    assert seen[0].startswith(f"{job}: 0/"), seen
    paused()
    process.send_signal(signum)
    process.send_signal(signal.SIGCONT)
    rest = process.stderr.read()
    return process.wait(timeout=JOB_SECONDS), "".join(seen) + rest


@pytest.fixture(scope="module")
def export_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "big.jsonl"
    write_export(path)
    return path


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_given_an_import_when_stopped_mid_job_then_clean_exit_no_leftovers_and_a_rerun_completes_it(
    tmp_path: Path, export_file: Path, signum: int, code: int
) -> None:
    args = ["import", str(export_file), "--db", "memory.db", "--embedder", "hash"]

    exit_code, err = stop_mid_job(memstack(*args, cwd=tmp_path), "import", signum)

    assert exit_code == code, err
    assert "Traceback" not in err and "memstack import: stopped" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.db"]  # no -wal, -shm or -journal
    rerun = finished(*args, "--json", "--quiet", cwd=tmp_path)
    assert json.loads(rerun)["counts"]["messages"] == THREADS * PER_THREAD


def test_given_an_export_to_a_file_when_terminated_mid_job_then_exit_143_and_no_file_is_left(
    tmp_path: Path, export_file: Path
) -> None:
    finished("import", str(export_file), "--db", "memory.db", "--embedder", "hash", "--quiet", cwd=tmp_path)

    process = memstack("export", "--db", "memory.db", "--embedder", "hash", "-o", "out.jsonl", cwd=tmp_path)

    def partial_is_there() -> None:
        assert [n for n in os.listdir(tmp_path) if n.startswith(".out.jsonl.partial-")]

    exit_code, err = stop_mid_job(process, "export", signal.SIGTERM, partial_is_there)

    assert exit_code == 143, err
    assert "Traceback" not in err and "memstack export: stopped (SIGTERM)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.db"]
    assert not any(name.startswith(".out.jsonl") for name in os.listdir(tmp_path))
