"""The main job (``memstack demo``) on a committed LoCoMo excerpt, and the LoCoMo reader."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from memstack import InvalidInput, Memory
from memstack.cli import main
from memstack.demo import run
from memstack.locomo import evidence_ids, load, parse_date

DATA = Path(__file__).resolve().parents[1] / "data" / "locomo-excerpt.json"


def test_given_locomo_dates_when_parsed_then_utc_times() -> None:
    assert parse_date("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00+00:00"
    assert parse_date("12:09 am on 1 January, 2024").isoformat() == "2024-01-01T00:09:00+00:00"
    assert parse_date("garbage").year == 2023


def test_given_malformed_evidence_when_read_then_split_or_skipped_never_fatal() -> None:
    valid = {"D1:3", "D2:1", "D8:6", "D9:17"}
    assert evidence_ids(["D8:6; D9:17", "D10:", "D", "D:11:26", "D1:3", "D1:3"], valid) == [
        "D8:6",
        "D9:17",
        "D1:3",
    ]
    assert evidence_ids(None, valid) == []


def test_given_the_excerpt_when_loaded_then_sessions_are_threads_and_category_5_is_skipped() -> None:
    (conv,) = load(DATA)
    assert list(conv.sessions) == ["conv-26-excerpt-session_1", "conv-26-excerpt-session_2"]
    first = conv.sessions["conv-26-excerpt-session_1"][0]
    assert first.message_id == "conv-26-excerpt:D1:1" and first.text.startswith("Caroline: ")
    assert all(q.category != 5 for q in conv.questions)
    malformed = [q for q in conv.questions if q.text == "Malformed evidence ids?"][0]
    assert malformed.evidence == ("conv-26-excerpt:D1:3", "conv-26-excerpt:D2:1")
    captioned = [t for turns in conv.sessions.values() for t in turns if "[shares an image:" in t.text]
    assert captioned


def test_given_a_gzip_compressed_file_when_loaded_then_the_same_conversations(tmp_path: Path) -> None:
    packed = tmp_path / "excerpt.json.gz"
    packed.write_bytes(gzip.compress(DATA.read_bytes()))
    assert load(packed) == load(DATA)
    assert load(packed)[0].asked_at == max(t.created_at for ts in load(DATA)[0].sessions.values() for t in ts)
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(b"not gzip")
    with pytest.raises(InvalidInput, match="cannot read"):
        load(broken)


def test_given_bad_data_when_loaded_then_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        load(tmp_path / "missing.json")
    with pytest.raises(InvalidInput):
        load(DATA, [5])


def test_given_the_excerpt_when_replayed_then_turns_are_stored_and_evidence_is_recalled(
    tmp_path: Path,
) -> None:
    conversations = load(DATA)
    with Memory.local(tmp_path / "demo.db", embedder="hash") as memory:
        result = run(memory, conversations, progress=None)
        stored = memory.list_messages(
            thread_id="conv-26-excerpt-session_1", resource_id="conv-26-excerpt", limit=1000
        ).messages
    assert result.messages == conversations[0].turn_count == 35
    assert len(stored) == 18 and stored[0].id == "conv-26-excerpt:D1:1"
    assert len(result.scores) == 13
    assert result.evidence_recall >= 0.5
    assert result.result_line().startswith("RESULT conversations=1 messages=35 questions=13 evidence_recall=")


def test_given_the_cli_when_demo_runs_then_the_last_line_is_the_result(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["demo", "--data", str(DATA), "--embedder", "hash", "--quiet"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    assert out[-1].startswith("RESULT conversations=1 messages=35 questions=13 ")
    assert any(line.startswith("4 single-hop") or line.startswith("2 temporal") for line in out)


def test_given_a_bad_conversation_index_when_demo_runs_then_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--data", str(DATA), "--conversations", "7", "--embedder", "hash"]) == 2
    assert "out of range" in capsys.readouterr().err


def test_given_a_conversation_listed_twice_when_demo_runs_then_exit_2_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--data", str(DATA), "--conversations", "0,0", "--embedder", "hash"]) == 2
    assert "conversation 0 is listed twice" in capsys.readouterr().err


def test_given_malformed_samples_when_loaded_then_invalid_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"sample_id": "x"}, {"conversation": {"session_1": [{"dia_id": "D1:1"}]}}]')
    with pytest.raises(InvalidInput):
        load(bad, [0])
    with pytest.raises(InvalidInput):
        load(bad, [1])


def test_given_the_openai_embedder_without_a_key_when_demo_runs_then_a_clear_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["demo", "--data", str(DATA), "--embedder", "openai", "--quiet"]) == 2
    assert "api_key" in capsys.readouterr().err


def test_given_no_model_when_demo_runs_observational_then_it_says_it_skipped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "MEMSTACK_OPENAI_API_KEY", "OPENAI_BASE_URL", "MEMSTACK_OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["demo", "--data", str(DATA), "--embedder", "hash", "--quiet", "--observational"]) == 0
    captured = capsys.readouterr()
    assert "observational memory SKIPPED" in captured.err
    assert "OBSERVATIONAL" not in captured.out
    assert captured.out.strip().splitlines()[-1].startswith("RESULT ")


def test_given_a_compatible_endpoint_when_demo_runs_observational_then_the_layer_reports(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx
    import respx

    from memstack.adapters.testing import ScriptedChatModel
    from tests.openai_support import scripted_completion

    scripted = ScriptedChatModel()

    def answer(request: httpx.Request) -> httpx.Response:
        return scripted_completion(scripted, request)

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://llm.test/v1")
    with respx.mock(base_url="http://llm.test/v1", assert_all_called=True) as router:
        router.post("/chat/completions").mock(side_effect=answer)
        code = main(
            [
                "demo",
                "--data",
                str(DATA),
                "--embedder",
                "hash",
                "--quiet",
                "--observational",
                "--message-tokens",
                "300",
            ]
        )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "observational memory on" in captured.err
    lines = captured.out.strip().splitlines()
    assert lines[-1].startswith("RESULT conversations=1 messages=35 ")
    om = next(line for line in lines if line.startswith("OBSERVATIONAL "))
    figures = dict(part.split("=") for part in om.split()[1:])
    assert int(figures["observer_calls"]) >= 2 and int(figures["observed_messages"]) > 0
    assert int(figures["failures"]) == 0 and int(figures["model_input_tokens"]) > 0


def test_given_the_repository_when_the_default_data_is_looked_for_then_its_own_locomo_subset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memstack import demo

    monkeypatch.chdir(tmp_path)  # a working directory with no data and no sibling shared folder

    path = demo.default_data_path()

    assert path == Path(__file__).resolve().parents[2] / "data" / "locomo" / "locomo-dev-2.json.gz"
    assert [c.resource_id for c in load(path)] == ["conv-26", "conv-30"]


def test_given_no_data_anywhere_when_the_default_data_is_looked_for_then_invalid_input_naming_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memstack import demo

    monkeypatch.setattr(demo, "_repo_roots", lambda: [tmp_path / "repo"])

    with pytest.raises(InvalidInput, match="--data") as caught:
        demo.default_data_path()
    assert caught.value.field == "data"
