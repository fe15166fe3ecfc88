"""The operator's toolkit on a local database: ``memstack threads``, ``messages``, ``recall``,
``context``, ``working-memory``, ``observations``, ``export``/``import``/``reindex`` and ``--version``,
in text and ``--json``, and the one convention for where a command acts (``--db`` or ``--url``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstack import Memory
from memstack.cli import main

LOCAL = ["--embedder", "hash"]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "memory.db"
    with Memory.local(path, embedder="hash", background="inline") as memory:
        memory.save_messages(
            resource_id="alice",
            thread_id="trip",
            messages=[
                {"role": "user", "content": "We sail to Bergen in June"},
                {"role": "assistant", "content": "Pack rain gear for Bergen."},
            ],
        )
        memory.update_thread(resource_id="alice", thread_id="trip", title="Bergen trip")
        memory.save_messages(resource_id="alice", thread_id="bread", messages=["I bake sourdough on Sundays"])
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_given_a_database_when_listing_threads_as_json_then_each_thread_with_its_counts(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "threads", "--resource", "alice", "--db", str(db), *LOCAL, "--json")
    threads = json.loads(out)["threads"]
    assert code == 0
    assert {(t["id"], t["title"], t["last_seq"]) for t in threads} == {
        ("trip", "Bergen trip", 2),
        ("bread", "", 1),
    }


def test_given_a_thread_when_listing_messages_as_text_then_seq_role_and_text(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "messages", "--resource", "alice", "--thread", "trip", "--db", str(db), *LOCAL)
    assert code == 0
    assert out.splitlines() == [
        "    1 user      We sail to Bergen in June",
        "    2 assistant Pack rain gear for Bergen.",
    ]


def test_given_a_query_when_recalling_then_the_matching_message_ranks_first_with_its_retrievers_ranks(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "recall",
        "sourdough Sundays",
        "--resource",
        "alice",
        "--thread",
        "new",
        "--db",
        str(db),
        *LOCAL,
        "--json",
    )
    found = json.loads(out)
    assert code == 0
    assert found["hits"][0]["thread_id"] == "bread" and found["hits"][0]["keyword_rank"] == 1


def test_given_working_memory_set_when_got_then_the_same_document_at_each_scope(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--resource", "alice", "--db", str(db), *LOCAL]
    assert run(capsys, "working-memory", "set", *where, "--text", "# Alice\n- sails")[0] == 0
    assert (
        run(
            capsys,
            "working-memory",
            "set",
            *where,
            "--thread",
            "trip",
            "--scope",
            "thread",
            "--text",
            "# Trip",
        )[0]
        == 0
    )

    assert json.loads(run(capsys, "working-memory", "get", *where, "--json")[1]) == {
        "working_memory": "# Alice\n- sails"
    }
    assert (
        run(capsys, "working-memory", "get", *where, "--thread", "trip", "--scope", "thread")[1] == "# Trip\n"
    )


@pytest.mark.parametrize("source", ["file", "stdin"])
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"\xff\xfe# Alice", None),  # UTF-16's byte-order mark: not UTF-8
        (b"# Alice\n- caf\xe9", None),  # Latin-1
        (b"# Alice\n- \xed\xa0\x80", None),  # an encoded surrogate
        (b"\xef\xbb\xbf# Alice\r\n- sails", "# Alice\n- sails"),  # UTF-8 with a BOM and CRLF
    ],
)
def test_given_a_document_file_when_setting_working_memory_then_utf8_is_read_and_anything_else_exit_2(
    db: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    source: str,
    raw: bytes,
    expected: str | None,
) -> None:
    """A file and standard input give the same answer: the document, or exit 2 naming ``--file``."""
    import io

    path = tmp_path / "doc.md"
    path.write_bytes(raw)
    if source == "stdin":
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(raw)))
    name = str(path) if source == "file" else "-"

    code, _, err = run(
        capsys, "working-memory", "set", "--resource", "alice", "--db", str(db), *LOCAL, "--file", name
    )

    if expected is None:
        assert code == 2 and "is not UTF-8 text" in err and "Traceback" not in err
    else:
        assert code == 0
        got = run(capsys, "working-memory", "get", "--resource", "alice", "--db", str(db), *LOCAL, "--json")[
            1
        ]
        assert json.loads(got) == {"working_memory": expected}


def test_given_thread_scope_without_a_thread_when_getting_working_memory_then_exit_2_naming_it(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        capsys, "working-memory", "get", "--resource", "alice", "--scope", "thread", "--db", str(db), *LOCAL
    )
    assert code == 2 and "--thread" in err


def test_given_a_turn_when_asking_for_the_context_then_the_request_holds_history_and_the_new_message(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "context",
        "--resource",
        "alice",
        "--thread",
        "trip",
        "--message",
        "when?",
        "--db",
        str(db),
        *LOCAL,
        "--json",
    )
    request = json.loads(out)
    contents = [m["content"] for m in request["request"]["messages"]]
    assert code == 0 and contents[-3:] == ["We sail to Bergen in June", "Pack rain gear for Bergen.", "when?"]
    assert request["token_count"] > 0


def test_given_a_thread_when_showing_observations_then_the_record_as_the_api_shows_it(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "observations", "--resource", "alice", "--thread", "trip", "--db", str(db), *LOCAL, "--json"
    )
    record = json.loads(out)["record"]
    assert code == 0
    assert record["scope"] == "thread" and record["usage"]["embedding_calls"] >= 1  # what indexing cost


def test_given_a_missing_thread_when_showing_observations_then_exit_2_not_found(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        capsys, "observations", "--resource", "alice", "--thread", "nope", "--db", str(db), *LOCAL
    )
    assert code == 2 and "not found" in err


def test_given_a_mistyped_database_when_listing_then_exit_2_and_no_file_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "threads", "--resource", "alice", "--db", str(tmp_path / "typo.db"), *LOCAL)
    assert code == 2 and "no database" in err and not (tmp_path / "typo.db").exists()


def test_given_url_and_db_when_running_a_command_then_exit_2_naming_the_mix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "threads", "--resource", "a", "--url", "http://127.0.0.1:9", "--db", "x.db")
    assert code == 2 and "--url" in err and "--db" in err


def test_given_export_then_import_into_a_new_database_when_exported_again_then_the_same_lines(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second, target = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "copy.db"
    assert run(capsys, "export", "--db", str(db), *LOCAL, "-o", str(first))[0] == 0
    code, out, err = run(capsys, "import", str(first), "--db", str(target), *LOCAL, "--json")
    assert code == 0 and json.loads(out)["counts"]["messages"] == 3
    assert "import: " in err  # progress as plain lines: stderr is not a terminal here
    assert run(capsys, "export", "--db", str(target), *LOCAL, "-o", str(second))[0] == 0

    assert first.read_text().splitlines()[1:] == second.read_text().splitlines()[1:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "b.jsonl", "copy.db", "memory.db"]


def test_given_deleted_messages_when_exporting_then_the_summary_counts_what_the_file_holds(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Memory.local(db, embedder="hash") as memory:
        first = memory.list_messages(resource_id="alice", thread_id="trip").messages[0]
        memory.delete_messages(resource_id="alice", message_ids=[first.id])
    out_file = tmp_path / "a.jsonl"

    code, out, err = run(capsys, "export", "--db", str(db), *LOCAL, "-o", str(out_file), "--json")

    held = [json.loads(line)["type"] for line in out_file.read_text().splitlines()]
    assert code == 0 and held.count("message") == 2
    assert json.loads(out)["counts"] == {
        "resources": 0,
        "threads": 2,
        "messages": 2,
        "observation_records": held.count("observation_record"),
    }
    code, _, err = run(capsys, "export", "--db", str(db), *LOCAL, "-o", str(out_file))
    assert "exported 0 resources, 2 threads, 2 messages" in err


def test_given_a_bad_file_when_importing_then_exit_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.jsonl").write_text('{"type":"header","format":"memstack-export","version":1}\n{oops\n')
    code, _, err = run(capsys, "import", str(tmp_path / "bad.jsonl"), "--db", str(tmp_path / "t.db"), *LOCAL)
    assert code == 2 and "line 2: not JSON" in err


def test_given_a_database_when_reindexed_with_the_local_embedder_then_recall_works_with_it_and_not_with_the_old(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "reindex", "--db", str(db), "--embedder", "local", "--json")
    assert code == 0 and json.loads(out)["model_id"] == "multilingual-e5-small"

    code, out, _ = run(
        capsys,
        "recall",
        "baking bread",
        "--resource",
        "alice",
        "--thread",
        "x",
        "--db",
        str(db),
        "--embedder",
        "local",
        "--json",
        "--mode",
        "vector",
    )
    assert code == 0 and json.loads(out)["hits"][0]["thread_id"] == "bread"
    code, _, err = run(capsys, "threads", "--resource", "alice", "--db", str(db), *LOCAL)
    assert code == 2 and "memstack reindex" in err


def test_given_one_resource_and_another_embedder_when_reindexing_then_exit_2_saying_to_reindex_everything(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "reindex", "--resource", "alice", "--db", str(db), "--embedder", "local")
    assert code == 2 and "without --resource" in err
    assert "run the same command again" not in err, "a refused reindex would be refused again"


def test_given_a_resource_that_does_not_exist_when_reindexing_then_exit_2_without_a_resume_hint(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "reindex", "--resource", "nobody", "--db", str(db), *LOCAL)
    assert code == 2 and "'nobody' not found" in err
    assert "run the same command again" not in err


def test_given_version_when_asked_then_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"memstack {version('memstack')}\n"


def test_given_the_deployment_turns_semantic_recall_off_when_reindexing_then_exit_2_saying_so(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSTACK_OPTIONS", '{"semantic_recall": false, "observational_memory": true}')
    code, _, err = run(capsys, "reindex", "--db", str(db), "--embedder", "local")
    assert code == 2 and "semantic recall is off" in err

    monkeypatch.delenv("MEMSTACK_OPTIONS")
    assert run(capsys, "threads", "--resource", "alice", "--db", str(db), *LOCAL)[0] == 0  # left as it was


@pytest.mark.parametrize("command", [["serve"], ["mcp"], ["studio", "--url", "http://127.0.0.1:1"]])
@pytest.mark.parametrize("value", ["99999", "65536", "-1", "eighty"])
def test_given_a_port_outside_the_tcp_range_when_parsing_then_exit_2_naming_the_flag(
    command: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([*command, "--port", value])

    assert stopped.value.code == 2
    assert "argument --port" in capsys.readouterr().err
