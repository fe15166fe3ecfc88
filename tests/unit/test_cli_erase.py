"""``memstack erase``: the local database (asks for the resource id unless ``--yes``, prints the receipt's
counts) and ``--url`` through the client."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstack import Memory
from memstack.cli import main


def filled(path: Path) -> None:
    with Memory.local(path, embedder="hash") as memory:
        memory.save_messages(resource_id="user-a", thread_id="t1", messages=["one", "two"])
        memory.save_messages(resource_id="user-b", thread_id="t1", messages=["kept"])


def threads(path: Path, resource_id: str) -> list[str]:
    with Memory.local(path, embedder="hash") as memory:
        return [t.id for t in memory.list_threads(resource_id=resource_id).threads]


def test_given_yes_when_erasing_a_local_resource_then_it_is_gone_and_the_counts_are_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memory.db"
    filled(db)

    code = main(["erase", "--resource", "user-a", "--db", str(db), "--embedder", "hash", "--yes"])

    out = capsys.readouterr().out
    assert code == 0
    assert "erased resource 'user-a'" in out
    assert "threads              1" in out and "messages             2" in out
    assert threads(db, "user-a") == [] and threads(db, "user-b") == ["t1"]


@pytest.mark.parametrize(("answer", "erased"), [("user-a\n", True), ("yes\n", False), ("", False)])
def test_given_no_yes_when_erasing_then_only_typing_the_resource_id_confirms(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    answer: str,
    erased: bool,
) -> None:
    import io

    db = tmp_path / "memory.db"
    filled(db)
    monkeypatch.setattr("sys.stdin", io.StringIO(answer))

    code = main(["erase", "--resource", "user-a", "--db", str(db), "--embedder", "hash"])

    assert code == (0 if erased else 1)
    assert threads(db, "user-a") == ([] if erased else ["t1"])
    if not erased:
        assert "nothing was erased" in capsys.readouterr().err


def test_given_url_with_local_options_when_erasing_then_exit_2_naming_the_conflict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["erase", "--resource", "user-a", "--url", "http://127.0.0.1:9", "--db", "x.db", "--yes"])

    assert code == 2
    assert "--url" in capsys.readouterr().err


def test_given_url_when_erasing_then_the_client_sends_the_delete_with_the_headers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import httpx

    seen: list[httpx.Request] = []
    counts = {
        "threads": 3,
        "messages": 9,
        "working_memory": 1,
        "observation_records": 2,
        "index_documents": 12,
    }

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"resource_id": "user-a", "counts": counts})

    real_client = httpx.Client
    monkeypatch.setattr(
        httpx, "Client", lambda **kw: real_client(**{**kw, "transport": httpx.MockTransport(answer)})
    )

    code = main(
        [
            "erase",
            "--resource",
            "user-a",
            "--url",
            "http://memstack.test",
            "--header",
            "Authorization: Bearer t",
            "--yes",
        ]
    )

    assert code == 0
    (request,) = seen
    assert (request.method, str(request.url)) == ("DELETE", "http://memstack.test/v1/resources/user-a")
    assert request.headers["Authorization"] == "Bearer t"
    assert "index_documents      12" in capsys.readouterr().out


def test_given_a_mistyped_database_path_when_erasing_then_it_refuses_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo" / "memory.db"

    code = main(["erase", "--resource", "user-a", "--db", str(missing), "--embedder", "hash", "--yes"])

    assert code != 0
    assert "no database at" in capsys.readouterr().err
    assert not missing.parent.exists()


def test_given_json_when_erasing_then_the_receipt_as_the_api_answers_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    db = tmp_path / "memory.db"
    filled(db)

    code = main(["erase", "--resource", "user-a", "--db", str(db), "--embedder", "hash", "--yes", "--json"])

    receipt = json.loads(capsys.readouterr().out)
    assert code == 0
    assert receipt["resource_id"] == "user-a" and receipt["counts"]["messages"] == 2
