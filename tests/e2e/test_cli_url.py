"""The operator's commands through ``--url`` (a ``memstack serve`` on loopback, through
``MemstackClient``) answer as they do on the local database: one convention, ``--db`` or ``--url``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstack import Memory
from memstack.cli import main
from tests.e2e.serve_support import running_serve


def answer(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_given_a_served_database_when_browsing_by_url_then_the_answers_are_those_of_the_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memory.db"
    with Memory.local(db, embedder="hash", background="inline") as memory:
        memory.save_messages(resource_id="alice", thread_id="trip", messages=["We sail to Bergen in June"])
        memory.save_messages(resource_id="alice", thread_id="bread", messages=["I bake sourdough on Sundays"])
    local = ["--db", str(db), "--embedder", "hash", "--json"]

    with running_serve("--db", str(db), "--embedder", "hash", cwd=tmp_path) as server:
        remote = ["--url", server.url, "--json"]
        for command in (
            ["threads", "--resource", "alice"],
            ["messages", "--resource", "alice", "--thread", "trip"],
            ["recall", "sourdough", "--resource", "alice", "--thread", "x"],
            ["observations", "--resource", "alice", "--thread", "trip"],
        ):
            assert answer(capsys, *command, *remote) == answer(capsys, *command, *local), command
        where = ["--resource", "alice", "--thread", "trip", *remote]
        answer(capsys, "working-memory", "set", *where, "--text", "# Alice\n- sails")
        assert answer(capsys, "working-memory", "get", *where) == {"working_memory": "# Alice\n- sails"}
        resource_only = ["--resource", "alice", *remote]  # resource scope needs no thread, remote or local
        assert answer(capsys, "working-memory", "get", *resource_only) == {
            "working_memory": "# Alice\n- sails"
        }
        context = answer(capsys, "context", *where, "--message", "when do we sail?")
        assert context["request"]["messages"][-1] == {"role": "user", "content": "when do we sail?"}  # type: ignore[index]
        local_context = answer(
            capsys,
            "context",
            "--db",
            str(db),
            "--embedder",
            "hash",
            "--json",
            *where[:4],
            "--message",
            "when do we sail?",
        )
        assert isinstance(context["token_count"], int)  # type: ignore[index]
        assert context["token_count"] == local_context["token_count"]  # type: ignore[index]
