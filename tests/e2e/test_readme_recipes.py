"""The README's shell recipes do what they say: the AWS-backend recipe (moto's server and the OpenSearch
double around ``memstack demo --backend aws``) stops both servers however the demo ends."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _aws_recipe() -> str:
    """The README's ```sh block that starts moto_server, as written."""
    blocks = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    (recipe,) = [b for b in blocks if "moto_server" in b and "opensearch_double" in b]
    return recipe


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def _runnable(tmp_path: Path, demo: str) -> tuple[str, dict[str, str]]:
    """The recipe on free ports with this interpreter, logs in ``tmp_path``, and ``demo`` (a shell line)
    in place of the demo's command; plus the environment that finds the package and the double."""
    python = shlex.quote(sys.executable)
    # the recipe's own paths first: the interpreter may itself live under /tmp (a clone there)
    script = (
        _aws_recipe()
        .replace("/tmp/", f"{tmp_path}/")
        .replace(".venv/bin/python", python)
        .replace(".venv/bin/moto_server", f"{python} -m moto.server")
        .replace("5000", str(_free_port()))
        .replace("9200", str(_free_port()))
    )
    script = re.sub(r"\.venv/bin/memstack demo [^\n]*", demo, script, count=1)
    assert demo in script, "the recipe no longer runs memstack demo: update this test"
    return script, {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}


def _gone(pids: list[int]) -> list[int]:
    """Of ``pids``, those still running after up to 10 s."""
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if _alive(pid)]


def test_given_the_readme_aws_recipe_when_the_demo_fails_then_both_servers_are_stopped(
    tmp_path: Path,
) -> None:
    # the demo's line reports the servers' pids, then fails as a demo that hits an error does
    script, env = _runnable(tmp_path, 'echo "pids $moto $double"; false')

    done = subprocess.run(
        ["timeout", "100", "bash", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    found = re.search(r"pids (\d+) (\d+)", done.stdout)
    assert found, f"the servers never came up: {done.stdout} {done.stderr}"
    assert not _gone([int(found.group(1)), int(found.group(2))]), "a server outlived the recipe"


def test_given_the_readme_aws_recipe_when_ctrl_c_interrupts_the_demo_then_both_servers_are_stopped(
    tmp_path: Path,
) -> None:
    script, env = _runnable(tmp_path, 'echo "pids $moto $double"; sleep 60')
    # its own process group, as a terminal's foreground job: Ctrl-C is SIGINT to the whole group
    shell = subprocess.Popen(
        ["bash", "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert shell.stdout is not None
        found = re.search(r"pids (\d+) (\d+)", shell.stdout.readline())
        assert found, "the servers never came up"
        os.killpg(shell.pid, signal.SIGINT)
        code = shell.wait(timeout=30)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)

    assert code == 130
    assert not _gone([int(found.group(1)), int(found.group(2))]), "a server outlived Ctrl-C"
