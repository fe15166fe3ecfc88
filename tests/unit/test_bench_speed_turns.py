"""speed.py's per-resource protocol: a copy of the store kept at each size, the sizes measured in turns."""

from __future__ import annotations

import io
import sqlite3
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from benchmarks.speed import (
    MODES,
    STORE_BYTES_PER_MESSAGE,
    MemstackSide,
    check_disk,
    disk_needed,
    grow_copies,
    measure_in_turns,
)

from memstack import locomo
from memstack.demo import default_data_path


class Recorder:
    """A ``Memory`` stand-in that appends each call to a shared log."""

    def __init__(self, size: int, log: list[tuple[str, int, str]]) -> None:
        self.size, self.log = size, log

    def save_messages(self, *, thread_id: str, resource_id: str, messages: list[dict[str, Any]]) -> None:
        self.log.append(("save", self.size, messages[0]["id"]))

    def context(self, *, thread_id: str, resource_id: str, message: str, options: dict[str, Any]) -> None:
        self.log.append(("context", self.size, f"{options['semantic_recall']['mode']}:{message}"))


def _conversation(messages: int, questions: int) -> Any:
    turns = [
        SimpleNamespace(message_id=f"m{i}", role="user", text=f"text {i}", created_at=None)
        for i in range(messages)
    ]
    return SimpleNamespace(
        resource_id="conv",
        sessions={"s1": turns[: messages // 2], "s2": turns[messages // 2 :]},
        questions=[SimpleNamespace(text=f"q{i}") for i in range(questions)],
    )


def test_given_three_sizes_when_measured_in_turns_then_every_call_reaches_every_size_before_the_next() -> (
    None
):
    log: list[tuple[str, int, str]] = []
    memories = {size: Recorder(size, log) for size in (10, 20, 30)}
    figures = measure_in_turns(memories, _conversation(4, 2), "run0", MODES)
    saves = [entry for entry in log if entry[0] == "save"]
    contexts = [entry for entry in log if entry[0] == "context"]
    # each message goes to all three sizes before the next one, the first size rotating
    assert [size for _, size, _ in saves] == [10, 20, 30, 20, 30, 10, 30, 10, 20, 10, 20, 30]
    assert [mid for _, _, mid in saves[:3]] == ["conv-run0:m0"] * 3
    # each question in each mode reaches all sizes before the next mode; modes rotate per question too
    assert len(contexts) == 2 * len(MODES) * 3
    first = contexts[:3]
    assert {size for _, size, _ in first} == {10, 20, 30} and len({call for _, _, call in first}) == 1
    assert [call for _, _, call in contexts[::3]] == [f"{m}:q0" for m in MODES] + [
        f"{m}:q1" for m in (*MODES[1:], MODES[0])
    ]
    assert set(figures) == {10, 20, 30}
    assert set(figures[10]) >= {"save_ms_p50", "save_cpu_ms_p50", "context_ms_p50", "context_vector_ms_p50"}


def test_given_a_growing_store_when_copies_are_kept_then_each_copy_holds_its_size(tmp_path: Path) -> None:
    conversations = locomo.load(default_data_path())
    (tmp_path / "src").mkdir()
    side = MemstackSide(tmp_path / "src", conversations, one="one-user")
    grown = grow_copies(side, [30, 120], tmp_path, "one", io.StringIO())
    assert sorted(grown) == [30, 120]
    for size, g in grown.items():
        with closing(sqlite3.connect(g["path"])) as db:
            (count,) = db.execute("SELECT count(*) FROM messages WHERE resource_id = 'one-user'").fetchone()
        assert count == size, "the copy holds what the store held at that size, not later growth"
    assert not (tmp_path / "src" / "speed.db").exists(), "the growing store is deleted once copied"


def test_given_the_default_sizes_when_the_disk_needed_is_estimated_then_it_holds_every_copy_and_the_growing_store() -> (
    None
):
    needed = disk_needed([1_000, 10_000, 100_000], [10_000, 100_000, 1_000_000])
    # the 1k+10k+100k copies stay; then the 10k+100k+1M copies and the 1M store growing beside its copy
    assert needed == STORE_BYTES_PER_MESSAGE * (111_000 + 1_110_000 + 1_000_000)
    # without a corpus the peak is the long-lived user's copies and its growing store
    assert disk_needed([1_000, 100_000], []) == STORE_BYTES_PER_MESSAGE * (101_000 + 100_000)
    assert disk_needed([], []) == 0


def test_given_too_little_free_space_when_the_resource_scenario_starts_then_it_stops_naming_both_amounts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    monkeypatch.setattr(shutil, "disk_usage", lambda _path: SimpleNamespace(free=3_000_000_000))
    with pytest.raises(SystemExit, match=r"needs about 9\.0 GB free in .* and 3\.0 GB are free"):
        check_disk(tmp_path, 9_000_000_000)
    check_disk(tmp_path, 2_000_000_000)
