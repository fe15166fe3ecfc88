"""Working memory written by two OS processes on one SQLite file: JSON mode loses
no update; markdown mode ends with a complete document, each writer seeing success or a clean Conflict."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from memstack import Conflict, Memory

SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "integer"}}
JSON_WM = {"enabled": True, "schema": SCHEMA, "max_tokens": 10_000}
MD_WM = {"enabled": True}
ROUNDS = 100


def _json_writer(path: str, name: str, ready: Any, scope: str) -> None:
    options = {**JSON_WM, "scope": scope}
    with Memory.local(path, embedder="hash", semantic_recall=False, working_memory=options) as m:
        ready.wait()
        for i in range(ROUNDS):
            m.update_working_memory(thread_id="t", resource_id="r", working_memory={f"{name}{i}": i, name: i})


def _markdown_writer(path: str, name: str, ready: Any, conflicts: Any) -> None:
    with Memory.local(path, embedder="hash", semantic_recall=False, working_memory=MD_WM) as m:
        ready.wait()
        for i in range(ROUNDS):
            line = f"- {name} {i}"
            try:
                m.update_working_memory(thread_id="t", resource_id="r", working_memory="\n".join([line] * 20))
            except Conflict:
                with conflicts.get_lock():
                    conflicts.value += 1


def _run(target: Any, path: str, *extra: Any) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(2)
    procs = [ctx.Process(target=target, args=(path, name, ready, *extra)) for name in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0], "a writer process failed"


@pytest.mark.parametrize("scope", ["resource", "thread"])
def test_given_two_processes_merging_different_fields_when_done_then_no_update_is_lost(
    tmp_path: Path, scope: str
) -> None:
    path = str(tmp_path / "wm.db")
    options = {**JSON_WM, "scope": scope}
    with Memory.local(path, embedder="hash", semantic_recall=False) as m:
        m.create_thread(resource_id="r", thread_id="t")
    _run(_json_writer, path, scope)
    with Memory.local(path, embedder="hash", semantic_recall=False, working_memory=options) as m:
        stored = json.loads(m.get_working_memory(thread_id="t", resource_id="r") or "{}")
    expected = {f"{n}{i}": i for n in "ab" for i in range(ROUNDS)} | {"a": ROUNDS - 1, "b": ROUNDS - 1}
    assert stored == expected


def test_given_two_processes_replacing_markdown_when_done_then_the_document_is_whole(tmp_path: Path) -> None:
    path = str(tmp_path / "md.db")
    conflicts = multiprocessing.get_context("spawn").Value("i", 0)
    _run(_markdown_writer, path, conflicts)
    with Memory.local(path, embedder="hash", semantic_recall=False, working_memory=MD_WM) as m:
        doc = m.get_working_memory(thread_id="t", resource_id="r") or ""
    lines = doc.split("\n")
    assert len(lines) == 20 and len(set(lines)) == 1, "the stored document mixes two writes"
    assert conflicts.value <= 2 * ROUNDS
