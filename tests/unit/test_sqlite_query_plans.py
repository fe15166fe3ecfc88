"""Every SQLite statement on the save and context paths is planned on a resource-keyed index, so a
resource's cost does not grow with the rest of the file (issue 17: a resource's context at 1M stored
messages costs what it costs at 10k). Each statement the paths run is traced, then ``EXPLAIN QUERY PLAN``
is asked of it on the same file, before and after ``ANALYZE`` (statistics an operator may add, which can
move SQLite's planner)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlean
import sqlite_vec

from memstack import Memory

RESOURCE_TABLES = (
    "threads",
    "messages",
    "resources",
    "observations",
    "search_chunks",
    "search_postings",
    "search_pending_chunks",
    "search_keyword_stats",
    "search_generations",
)
"""The tables that hold every resource's rows: a read of one resource must start at its key."""

RESOURCE_KEYED = re.compile(
    r"USING (?:COVERING )?(?:INDEX \w+|PRIMARY KEY) \("
    r"(?:(?:resource_id|id)=\?|message_id=\? AND resource_id=\?)"
)
"""A search that starts at a resource's key (``resources`` is keyed by ``id``, the resource id), or a point
look-up of one message's chunks on the unique ``(message_id, resource_id, chunk)`` key."""

ROWID_LOOKUP = "USING INTEGER PRIMARY KEY (rowid=?)"
"""A search of given rowids: as many steps as rowids, whatever the resource's or the file's size."""


def words(n: int, salt: str) -> str:
    topics = ("hiking", "painting", "guitar", "adoption", "pottery", "camping", "charity", "museum")
    return f"{salt} talked about {topics[n % len(topics)]} and item {n} with friends"


def grow(memory: Memory, resource: str) -> None:
    """A bulk save (to the keyword blocks), single saves past a pending merge, in two threads."""
    memory.save_messages(
        thread_id="t-bulk",
        resource_id=resource,
        messages=[words(n, resource) for n in range(80)],
    )
    for n in range(70):
        memory.save_messages(thread_id="t-one", resource_id=resource, messages=[words(n, "one")])


def plans(path: Path, statements: list[str], *, analyzed: bool) -> dict[str, list[str]]:
    """``EXPLAIN QUERY PLAN`` of each distinct read or write statement, on a connection of its own."""
    conn = sqlean.connect(str(path))
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    if analyzed:
        conn.execute("ANALYZE")
    out: dict[str, list[str]] = {}
    try:
        for sql in statements:
            if not re.match(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", sql, re.IGNORECASE) or sql in out:
                continue
            out[sql] = [str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
    finally:
        conn.close()
    return out


@pytest.mark.parametrize("analyzed", [False, True], ids=["no-statistics", "after-ANALYZE"])
def test_given_a_file_of_several_resources_when_saving_and_recalling_then_every_statement_starts_at_the_resource_key(
    tmp_path: Path, traced: list[str], analyzed: bool
) -> None:
    path = tmp_path / "m.db"
    with Memory.local(path, embedder="hash", background="inline") as memory:
        for resource in ("other-1", "other-2", "r1"):
            grow(memory, resource)
        start = len(traced)
        memory.save_messages(thread_id="t-one", resource_id="r1", messages=["I took up pottery in May"])
        for mode in ("hybrid", "vector", "keyword"):
            memory.context(
                thread_id="t-question",
                resource_id="r1",
                message="what did I say about pottery and hiking?",
                options={"semantic_recall": {"mode": mode}},
            )
        statements = traced[start:]
    assert any("search_postings" in s for s in statements), "the keyword search ran"
    assert any("rowid IN (SELECT value FROM json_each" in s for s in statements), "chunks were looked up"

    found = plans(path, statements, analyzed=analyzed)
    wrong: list[str] = []
    for sql, plan in found.items():
        for line in plan:
            table = re.match(r"(SCAN|SEARCH) (\w+)", line)
            if table is None or table.group(2) not in RESOURCE_TABLES + ("c",):
                continue
            if table.group(1) == "SCAN":
                wrong.append(f"{line} <- {sql[:160]}")
            elif ROWID_LOOKUP in line:
                continue
            elif line == "SEARCH search_chunks" and "max(rowid)" in sql:
                continue  # the last rowid: one step down the table's right edge
            elif not RESOURCE_KEYED.search(line):
                wrong.append(f"{line} <- {sql[:160]}")
    assert not wrong, "statements not planned on a resource-keyed index:\n" + "\n".join(wrong)

    # The chunks that scored are read by rowid, never by walking the resource's chunk index.
    lookups = [plan for sql, plan in found.items() if "rowid IN (SELECT value FROM json_each" in sql]
    assert lookups and all(any(ROWID_LOOKUP in line for line in plan) for plan in lookups), lookups
