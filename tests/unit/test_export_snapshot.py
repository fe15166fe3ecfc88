"""An export of a SQLite database while another process writes to it is one moment of the file: the
whole export is one read transaction (``MemoryStore.read_snapshot``), so writes made after it began —
to a thread it has listed, to a resource's working memory — are in neither the records nor the counts."""

from __future__ import annotations

import json
from pathlib import Path

from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.store import SqliteMemoryStore
from memstack.model import Message, Resource, TextPart, Thread, utcnow
from memstack.transfer import Selection, export_jsonl


def message(mid: str, thread_id: str) -> Message:
    return Message(
        id=mid,
        thread_id=thread_id,
        resource_id="r1",
        role="user",
        parts=(TextPart(text=f"text of {mid}"),),
        created_at=utcnow(),
    )


def test_given_another_writer_when_exporting_then_the_file_is_the_store_as_the_export_began(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.db"
    store = SqliteMemoryStore(SqliteDatabase(path))
    writer = SqliteMemoryStore(SqliteDatabase(path))  # its own connections, as another process has
    now = utcnow()
    for tid in ("t1", "t2"):
        t = Thread(id=tid, resource_id="r1", created_at=now, updated_at=now)
        store.save_messages("r1", tid, [message(f"{tid}-a", tid), message(f"{tid}-b", tid)], create=t)
    store.put_resource(Resource(id="r1", working_memory="# before"), expected_version=0)

    lines = export_jsonl(store, Selection())
    head = next(lines)  # the export has begun: its threads are listed
    writer.save_messages("r1", "t1", [message("t1-late", "t1")])
    writer.save_messages("r1", "t2", [message("t2-late", "t2")])
    held = writer.get_resource("r1")
    assert held is not None
    writer.put_resource(held.model_copy(update={"working_memory": "# after"}), expected_version=held.version)
    records = [json.loads(line) for line in [head, *lines]]

    ids = [r["id"] for r in records if r["type"] == "message"]
    assert ids == ["t1-a", "t1-b", "t2-a", "t2-b"]
    assert [r["last_seq"] for r in records if r["type"] == "thread"] == [2, 2]
    assert [r["working_memory"] for r in records if r["type"] == "resource"] == ["# before"]
    assert records[-1]["counts"]["messages"] == 4
    assert [m.id for m in store.list_messages("r1", "t2", limit=10)][-1] == "t2-late"  # the block has ended
    store.close()
    writer.close()
