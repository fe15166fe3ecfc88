"""The operator's commands refuse what would look like success but is not, and say why in one line: an
export of a resource that does not exist, an output path that cannot be written, a file that is not an
export (which leaves no new database behind), a database built with another embedder or half rebuilt
(the message names the ``--embedder`` that opens it). An import run twice writes and embeds nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstack import Memory
from memstack.adapters.hash_embed import HashEmbedder
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SqliteSearchIndex
from memstack.bootstrap import build_local
from memstack.errors import InvalidInput
from memstack.transfer import Selection, reindex
from tests.unit.test_cli_toolkit import run
from tests.unit.test_reindex import VECTOR, Stopping, filled


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "memory.db"
    with Memory.local(path, embedder="hash", background="inline") as memory:
        memory.save_messages(
            resource_id="alice", thread_id="trip", messages=["We sail to Bergen", "Pack rain gear"]
        )
        memory.save_messages(resource_id="alice", thread_id="bread", messages=["I bake sourdough on Sundays"])
    return path


@pytest.mark.parametrize("command", ["export", "reindex"])
def test_given_a_resource_that_does_not_exist_when_exporting_or_reindexing_it_then_exit_2_naming_it(
    db: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    code, out, err = run(capsys, command, "--db", str(db), "--embedder", "hash", "--resource", "alcie")

    assert code == 2 and out == ""
    assert "resource 'alcie' not found" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("output", "says"),
    [("missing/dir/out.jsonl", "no directory"), (".", "is a directory")],
    ids=["missing-directory", "a-directory"],
)
def test_given_an_output_that_cannot_be_a_file_when_exporting_then_exit_2_before_any_work(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str, says: str
) -> None:
    code, _, err = run(capsys, "export", "--db", str(db), "-o", str(tmp_path / output))

    assert code == 2 and says in err and "--output" in err
    assert not (tmp_path / "missing").exists()


def test_given_a_file_the_system_refuses_when_exporting_then_one_line_and_exit_1(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "export", "--db", str(db), "-o", "/proc/memstack-export.jsonl", "--quiet")

    assert code == 1 and "Traceback" not in err
    assert err.startswith("memstack export: ") and "/proc/" in err and len(err.strip().splitlines()) == 1


def test_given_a_file_that_is_not_an_export_when_importing_into_a_new_database_then_no_file_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "notes.jsonl"
    bad.write_text('{"hello": "world"}\n')
    target = tmp_path / "new.db"

    code, _, err = run(capsys, "import", str(bad), "--db", str(target), "--embedder", "hash")

    assert code == 2 and "line 1" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.jsonl"]


def test_given_an_import_done_when_run_again_then_nothing_is_written_or_embedded_and_the_report_says_so(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / "alice.jsonl"
    assert run(capsys, "export", "--db", str(db), "-o", str(export), "--quiet")[0] == 0
    target = ["--db", str(tmp_path / "copy.db"), "--embedder", "hash", "--quiet", "--json"]

    first = json.loads(run(capsys, "import", str(export), *target)[1])
    second = json.loads(run(capsys, "import", str(export), *target)[1])

    assert (first["counts"]["threads"], first["counts"]["messages"]) == (2, 3)
    assert first["chunks_indexed"] == 3
    assert second["counts"] == dict.fromkeys(first["counts"], 0)
    assert second["unchanged"] == first["counts"] and second["chunks_indexed"] == 0


def test_given_a_rebuild_that_has_not_finished_when_exporting_then_the_records_come_out_whatever_the_embedder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memory.db"
    filled(db)
    _, before, _ = run(capsys, "export", "--db", str(db))
    with (
        build_local(path=db, embedder=Stopping(128, stop_at=2), options=VECTOR, rebuild_index=True) as memory,
        pytest.raises(KeyboardInterrupt),
    ):
        reindex(memory, Selection())

    code, after, err = run(capsys, "export", "--db", str(db))
    refused, _, opening = run(
        capsys, "threads", "--db", str(db), "--embedder", "hash", "--resource", "user-a"
    )

    assert code == 0, err
    assert [json.loads(line) for line in after.splitlines()[1:]] == [
        json.loads(line) for line in before.splitlines()[1:]
    ]  # all but the header's time
    assert refused == 2 and "finish it with `memstack reindex --embedder hash`" in opening


@pytest.mark.parametrize(
    ("model_id", "dimension", "name"),
    [
        ("wordllama-l2_supercat-256", 256, "wordllama"),
        ("multilingual-e5-small", 384, "local"),
        ("hash-256", 256, "hash"),
        ("openai/text-embedding-3-small@1536", 1536, "openai"),
        ("bedrock/amazon.titan-embed-text-v2:0", 1024, "bedrock"),
    ],
)
def test_given_a_database_of_each_embedder_when_opened_with_another_then_the_error_names_its_flag_once(
    tmp_path: Path, model_id: str, dimension: int, name: str
) -> None:
    path = tmp_path / "memory.db"
    database = SqliteDatabase(path)
    SqliteSearchIndex(
        database, dimension, model_id=model_id
    )  # the file records the model, as its first use does
    database.close()

    other = HashEmbedder(128)
    other.model_id = "another-model-128"  # of no built-in embedder: only the stored one is named

    with pytest.raises(InvalidInput) as err:
        build_local(path=path, embedder=other)

    message = err.value.message
    assert f"--embedder {name} " in message and message.count("memstack reindex") == 1
    assert err.value.field == "embedder"


def test_given_a_database_of_one_embedder_at_another_dimension_when_opened_then_the_fix_is_its_configuration(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.db"
    database = SqliteDatabase(path)
    SqliteSearchIndex(database, 128, model_id="hash-128")
    database.close()

    with pytest.raises(InvalidInput) as err:
        build_local(path=path, embedder="hash")

    assert "'hash-128' (128-dimensional vectors)" in err.value.message
    assert (
        "--embedder hash " not in err.value.message and "MEMSTACK_EMBEDDING_DIMENSIONS" in err.value.message
    )


@pytest.mark.parametrize("flag", [["--top-k", "-1"], ["--message-range", "-2"], ["--top-k", "0"]])
def test_given_bad_recall_options_when_running_the_demo_then_refused_before_its_banner_and_any_work(
    capsys: pytest.CaptureFixture[str], flag: list[str]
) -> None:
    code, out, err = run(capsys, "demo", "--embedder", "hash", *flag)

    assert code == 2 and out == ""
    assert err.count("\n") <= 1 and "semantic_recall." in err and "conversation(s)" not in err
