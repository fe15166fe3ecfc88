"""``make bench ARGS="--quick"`` writes to its own folder: the committed full-run results stay as they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks import run_all

ROOT = Path(__file__).resolve().parents[2]


def test_given_quick_when_run_all_writes_then_the_committed_full_run_is_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_all, "RESULTS", tmp_path)
    (tmp_path / "README.md").write_text("the committed full run")
    (tmp_path / "run_all.json").write_text('{"quick": false}')

    code = run_all.main(["--quick", "--no-mastra", "--skip", ",".join(run_all.STEPS)])

    assert code == 0
    assert (tmp_path / "README.md").read_text() == "the committed full run"
    assert json.loads((tmp_path / "run_all.json").read_text()) == {"quick": False}
    assert json.loads((tmp_path / "quick" / "run_all.json").read_text())["quick"] is True
    assert "run_all.py --quick" in (tmp_path / "quick" / "README.md").read_text()


def test_given_the_quick_folder_when_git_looks_then_it_is_ignored() -> None:
    ignored = (ROOT / ".gitignore").read_text().splitlines()

    assert run_all.results_dir(quick=True) == run_all.RESULTS / "quick"
    assert "benchmarks/results/quick/" in ignored
