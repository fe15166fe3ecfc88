"""The runnable examples in ``examples/``, each run as a user would run it: ``memstack serve`` as a
subprocess, then the example as a subprocess against it, offline, with its scripted model."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstack.client import MemstackClient
from tests.e2e.serve_support import Served, clean_env, running_serve

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    scratch = tmp_path_factory.mktemp("examples")
    with running_serve("--db", str(scratch / "memory.db"), "--embedder", "hash", cwd=scratch) as server:
        yield server


def run_example(name: str, *args: str, returncode: int = 0) -> str:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=ROOT,
        env=clean_env({"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent"}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == returncode, result.stdout + result.stderr
    return result.stdout if returncode == 0 else result.stderr


def test_given_the_strands_example_when_run_scripted_then_the_second_agent_remembers(served: Served) -> None:
    pytest.importorskip("strands")
    out = run_example(
        "strands_agent.py", "--url", served.url, "--model", "scripted", "--resource-id", "ex-strands"
    )
    assert "agent: A vegetarian tasca in Lisbon" in out
    assert "the second agent was shown working memory: True" in out
    with MemstackClient(served.url, resource_id="ex-strands") as client:
        stored = client.list_messages(thread_id="example-strands", last=100).messages
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant", "user", "assistant"]


def test_given_the_agents_sdk_example_when_run_scripted_then_memory_reaches_the_model(served: Served) -> None:
    pytest.importorskip("agents")
    out = run_example(
        "openai_agents_session.py", "--url", served.url, "--model", "scripted", "--resource-id", "ex-agents"
    )
    assert "agent: It is sunny in Porto, Ana." in out
    assert "the model was shown memory: True" in out
    assert "items in the session: 6" in out


def test_given_the_mcp_client_config_when_used_then_memstack_mcp_answers_over_stdio(served: Served) -> None:
    pytest.importorskip("mcp")
    out = run_example("mcp_client.py", "--url", served.url)
    assert (
        "tools: get_context, get_working_memory, list_threads, recall, remember, update_working_memory" in out
    )
    assert "recalled: My passport expires in June 2027" in out
    with MemstackClient(served.url, resource_id="example-user") as client:
        assert [t.id for t in client.list_threads().threads] == ["mcp-example"]


def test_given_no_memstack_api_when_the_mcp_client_runs_then_it_says_why_without_a_traceback(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    err = run_example("mcp_client.py", "--url", url, returncode=1)
    assert "error: remember:" in err and "unavailable" in err and "memstack serve" in err
    assert "Traceback" not in err
