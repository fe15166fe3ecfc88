"""Export → import between backends is lossless: SQLite → AWS (DynamoDB under moto, OpenSearch on its
double) → SQLite gives the same file, record for record and byte for byte after the header — threads,
messages with every kind of part and their authors, working memory at both scopes, observation records at
both scopes — and recall works on each target."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memstack import Memory
from memstack.errors import Conflict, InvalidInput
from memstack.model import (
    Author,
    BufferedChunk,
    FilePart,
    ImagePart,
    Message,
    ModelUsage,
    ObservationRecord,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from memstack.transfer import Selection, export_jsonl, import_jsonl
from tests.backend_support import open_backend

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def message(mid: str, role: str, *parts: object, minutes: int = 0, **kw: object) -> Message:
    return Message(
        id=mid,
        thread_id="trip",
        resource_id="user-a",
        role=role,  # type: ignore[arg-type]
        parts=parts,  # type: ignore[arg-type]
        created_at=T0 + timedelta(minutes=minutes),
        **kw,  # type: ignore[arg-type]
    )


def fill(memory: Memory) -> None:
    """Two resources; threads with every kind of part, authors, a deleted message (a seq gap), working
    memory at both scopes, and observation records at both scopes."""
    alice = Author(id="u-1", name="Alice", role="owner")
    memory.save_messages(
        resource_id="user-a",
        thread_id="trip",
        messages=[
            message(
                "m1", "user", TextPart(text="We sail to Bergen in June"), author=alice, metadata={"k": [1]}
            ),
            message("gone", "user", TextPart(text="deleted later"), minutes=1),
            message(
                "m3",
                "assistant",
                ReasoningPart(text="they want weather"),
                ToolCallPart(id="c1", name="weather", args={"city": "Bergen", "days": [1, 2.5]}),
                minutes=2,
            ),
            message("m4", "tool", ToolResultPart(tool_call_id="c1", result={"rain": 0.7}), minutes=3),
            message(
                "m5",
                "user",
                ImagePart(url="s3://b/fjord.png", caption="the fjord at dawn"),
                FilePart(url="s3://b/route.gpx", media_type="application/gpx+xml", name="route"),
                TextPart(text="ünïcode ✓ and emoji 🌊"),
                minutes=4,
            ),
        ],
    )
    memory.delete_messages(resource_id="user-a", message_ids=["gone"])
    memory.update_thread(resource_id="user-a", thread_id="trip", title="Bergen trip", metadata={"tag": "sea"})
    memory.update_working_memory(
        resource_id="user-a", working_memory="# Alice\n- sails", options={"working_memory": True}
    )
    memory.update_working_memory(
        resource_id="user-a",
        thread_id="trip",
        working_memory="# This trip\n- June",
        options={"working_memory": {"enabled": True, "scope": "thread"}},
    )
    memory.save_messages(resource_id="user-b", thread_id="t1", messages=["I bake sourdough bread"])
    store = memory.store
    chunk = BufferedChunk(
        id="c1", thread_id="trip", from_seq=4, to_seq=5, observations="- 🟡 image of a fjord", created_at=T0
    )
    record = ObservationRecord(
        scope="thread",
        resource_id="user-a",
        thread_id="trip",
        active_observations="- 🔴 sails to Bergen in June",
        cursor={"trip": 3},
        buffered_chunks=(chunk,),
        generation_count=1,
        origin_type="reflection",
        pending_since=T0,
        last_error="Unavailable: throttled",
        failure_count=1,
        usage=ModelUsage(observer_calls=2, observer_input_tokens=900),
    )
    store.put_observation_record(record, expected_version=0)
    store.put_observation_record(
        ObservationRecord(scope="resource", resource_id="user-a", cursor={"trip": 1}), expected_version=0
    )


def export(memory: Memory, path: Path, selection: Selection | None = None) -> list[str]:
    lines = list(export_jsonl(memory.store, selection or Selection()))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return lines


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Memory]:
    with open_backend("sqlite", tmp_path / "source") as backend:  # type: ignore[arg-type]
        fill(backend.memory)
        yield backend.memory


def test_given_a_sqlite_database_when_moved_to_aws_and_back_then_every_record_is_the_same(
    tmp_path: Path, source: Memory
) -> None:
    (tmp_path / "aws").mkdir()
    (tmp_path / "back").mkdir()
    first = export(source, tmp_path / "a.jsonl")

    with open_backend("aws-managed", tmp_path / "aws") as aws:
        imported = import_jsonl(aws.memory, tmp_path / "a.jsonl")
        second = export(aws.memory, tmp_path / "b.jsonl")
        hits = aws.memory.recall(resource_id="user-a", thread_id="new", query="sail Bergen June").hits
    with open_backend("sqlite", tmp_path / "back") as back:
        import_jsonl(back.memory, tmp_path / "b.jsonl")
        third = export(back.memory, tmp_path / "c.jsonl")
        again = back.memory.recall(resource_id="user-b", thread_id="new", query="sourdough").hits

    assert imported.counts == {"resources": 1, "threads": 2, "messages": 5, "observation_records": 2}
    assert imported.chunks_indexed > 0
    assert first[1:] == second[1:] == third[1:]
    kinds = [line.split('"', 4)[3] for line in first]
    assert kinds.count("message") == 5 and kinds[-1] == "end"
    assert "m1" in {h.message_id for h in hits} and again[0].message_id
    assert '"seq":5' in "".join(first) and '"seq":2' not in "".join(first)  # the deleted message's gap


def test_given_an_import_done_when_run_again_then_nothing_changes(tmp_path: Path, source: Memory) -> None:
    export(source, tmp_path / "a.jsonl")
    with open_backend("sqlite", tmp_path / "target") as target:  # type: ignore[arg-type]
        import_jsonl(target.memory, tmp_path / "a.jsonl")
        before = export(target.memory, tmp_path / "b.jsonl")
        import_jsonl(target.memory, tmp_path / "a.jsonl")
        assert export(target.memory, tmp_path / "c.jsonl")[1:] == before[1:]


def test_given_a_target_with_other_content_under_an_id_when_importing_then_conflict_and_nothing_written(
    tmp_path: Path, source: Memory
) -> None:
    export(source, tmp_path / "a.jsonl")
    with open_backend("sqlite", tmp_path / "target") as target:  # type: ignore[arg-type]
        target.memory.save_messages(resource_id="user-b", thread_id="t1", messages=["something else"])
        with pytest.raises(Conflict) as err:
            import_jsonl(target.memory, tmp_path / "a.jsonl")
        assert err.value.message.startswith("line ")
        assert target.memory.list_threads(resource_id="user-a").threads == ()


def test_given_one_thread_when_exported_then_the_file_holds_it_alone(tmp_path: Path, source: Memory) -> None:
    lines = export(source, tmp_path / "t.jsonl", Selection(resource_id="user-a", thread_id="trip"))
    kinds = [line.split('"', 4)[3] for line in lines]
    assert kinds == [
        "header",
        "thread",
        "message",
        "message",
        "message",
        "message",
        "observation_record",
        "end",
    ]


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda lines: lines[1:], "line 1: not a Memstack export"),
        (lambda lines: lines[:-1], "truncated"),
        (lambda lines: [lines[0], "{not json", *lines[1:]], "line 2: not JSON"),
        (lambda lines: [lines[0], '{"type":"thing"}', *lines[1:]], "line 2: unknown record type 'thing'"),
        (lambda lines: [lines[0].replace('"version":1', '"version":99'), *lines[1:]], "version 99"),
        (lambda lines: [lines[0], *lines[2:]], "the end record counts"),
        (lambda lines: [lines[0], lines[3], *lines[1:3], *lines[4:]], "does not follow its thread"),
    ],
    ids=["no-header", "no-end", "not-json", "unknown-type", "later-version", "counts", "order"],
)
def test_given_a_bad_file_when_importing_then_invalid_input_naming_the_line_and_nothing_written(
    tmp_path: Path, source: Memory, mangle: object, reason: str
) -> None:
    lines = export(source, tmp_path / "a.jsonl")
    (tmp_path / "bad.jsonl").write_text("\n".join(mangle(lines)) + "\n")  # type: ignore[operator]
    with open_backend("sqlite", tmp_path / "target") as target:  # type: ignore[arg-type]
        with pytest.raises(InvalidInput) as err:
            import_jsonl(target.memory, tmp_path / "bad.jsonl")
        assert reason in err.value.message
        assert target.memory.list_threads(resource_id="user-a").threads == ()


def _edited(kind: str, change: object) -> object:
    """A mangle that applies ``change`` (a function of the record's dict) to the first record of ``kind``."""
    import json

    def mangle(lines: list[str]) -> list[str]:
        out, done = [], False
        for line in lines:
            record = json.loads(line)
            if not done and record["type"] == kind:
                change(record)  # type: ignore[operator]
                line, done = json.dumps(record), True
            out.append(line)
        return out

    return mangle


WORDS = " ".join(f"w{i}" for i in range(2_500))
"""Working memory within the character limit (13,889 of 16,000) and over its target's default
``max_tokens`` of 2,000 (6,500 tokens)."""


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (_edited("message", lambda r: r.update(parts=[])), "parts must be a non-empty list"),
        (_edited("message", lambda r: r.update(parts=[{"type": "text", "text": ""}])), "has no content"),
        (_edited("message", lambda r: r.update(parts=[{"type": "text", "text": "x"}] * 1001)), "1000 parts"),
        (
            _edited("message", lambda r: r.update(parts=[{"type": "text", "text": "x" * 1_000_001}])),
            "limit of 1000000 characters",
        ),
        (_edited("message", lambda r: r.update(role="system")), "system messages are not stored"),
        (_edited("message", lambda r: r.update(metadata={"k": "\ud800"})), "metadata"),
        (_edited("thread", lambda r: r.update(id="a/b")), "the HTTP API must be able to route it"),
        (_edited("thread", lambda r: r.update(resource_id="ü🙂")), "the HTTP API must be able to route it"),
        (_edited("thread", lambda r: r.update(title="t" * 1001)), "limit of 1000 characters"),
        (_edited("thread", lambda r: r.update(metadata={"bad key": 1})), "metadata keys start with a letter"),
        (_edited("resource", lambda r: r.update(working_memory="w" * 20_000)), "limit of 16000 characters"),
        (_edited("resource", lambda r: r.update(working_memory="# \ud800")), "working_memory"),
        (_edited("resource", lambda r: r.update(working_memory=WORDS)), "working_memory.max_tokens"),
        (
            _edited("thread", lambda r: r["metadata"].update(working_memory=WORDS)),
            "working_memory.max_tokens",
        ),
    ],
    ids=[
        "no-parts",
        "no-content",
        "too-many-parts",
        "message-too-long",
        "system-role",
        "message-metadata-surrogate",
        "unroutable-thread-id",
        "unroutable-resource-id",
        "title-too-long",
        "thread-metadata-key",
        "working-memory-too-long",
        "working-memory-surrogate",
        "working-memory-over-max-tokens",
        "thread-working-memory-over-max-tokens",
    ],
)
def test_given_a_record_that_no_write_path_accepts_when_importing_then_refused_by_line_and_nothing_written(
    tmp_path: Path, source: Memory, mangle: object, reason: str
) -> None:
    """An import applies the rules of the paths that write what it restores (``save_messages``,
    ``create_thread``, ``update_working_memory``), with the target's options where they set a limit."""
    lines = export(source, tmp_path / "a.jsonl")
    (tmp_path / "bad.jsonl").write_text("\n".join(mangle(lines)) + "\n")  # type: ignore[operator]
    with open_backend("sqlite", tmp_path / "target") as target:  # type: ignore[arg-type]
        with pytest.raises(InvalidInput) as err:
            import_jsonl(target.memory, tmp_path / "bad.jsonl")
        assert reason in err.value.message and err.value.message.startswith("line ")
        assert err.value.field == "line"
        assert target.memory.store.list_resource_ids(limit=10).ids == ()


def _second_thread_reusing_m1(lines: list[str]) -> list[str]:
    """A thread ``trip2`` of user-a whose one message reuses the id ``m1`` of thread ``trip``."""
    other = lines[9].replace('"id":"t1","resource_id":"user-b"', '"id":"trip2","resource_id":"user-a"')
    reused = lines[3].replace('"thread_id":"trip"', '"thread_id":"trip2"')
    return [*lines[:9], other, reused, *lines[9:]]


@pytest.mark.parametrize("backend", ["sqlite", "aws-managed"])
@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda lines: [*lines[:4], lines[3], *lines[4:]], "line 5: message id 'm1' is already in this"),
        (
            lambda lines: [*lines[:4], lines[3].replace('"id":"m1"', '"id":"m1b"'), *lines[4:]],
            "line 5: message 'm1b' has seq 1, not after seq 1 of line 4",
        ),
        (
            lambda lines: [*lines[:6], lines[6].replace('"seq":5', '"seq":9'), *lines[7:]],
            "line 7: message 'm5' has seq 9, outside 1..5",
        ),
        (
            lambda lines: [*lines[:3], lines[4], lines[3], *lines[5:]],
            "line 5: message 'm1' has seq 1, not after seq 3 of line 4",
        ),
        (_second_thread_reusing_m1, "line 11: message id 'm1' is already in this resource on line 4"),
        (
            lambda lines: [
                *lines[:8],
                lines[8].replace('"cursor":{"trip":1}', '"cursor":{"trip":6}'),
                *lines[9:],
            ],
            "line 9: the observation record's cursor reaches seq 6 of thread 'trip', past its last_seq 5",
        ),
        (lambda lines: [*lines[:9], lines[2], *lines[9:]], "line 10: a second thread of the same owner"),
        (
            lambda lines: [*lines[:9], lines[7], *lines[9:]],
            "line 10: a second observation record of the same",
        ),
    ],
    ids=[
        "repeated-line",
        "repeated-seq",
        "seq-above-last-seq",
        "seq-order",
        "id-in-two-threads",
        "cursor-past-last-seq",
        "thread-twice",
        "observation-record-twice",
    ],
)
def test_given_a_file_breaking_a_store_invariant_when_importing_then_refused_by_line_before_any_write(
    tmp_path: Path, source: Memory, mangle: object, reason: str, backend: str
) -> None:
    """The trial's half-written imports: a repeated message line, a repeated seq or one above the thread's
    last_seq passed the first pass and stopped the write part way, naming ``messages[1]``."""
    lines = export(source, tmp_path / "a.jsonl")
    (tmp_path / "bad.jsonl").write_text("\n".join(mangle(lines)) + "\n")  # type: ignore[operator]
    (tmp_path / "target").mkdir()
    with open_backend(backend, tmp_path / "target") as target:  # type: ignore[arg-type]
        with pytest.raises(InvalidInput) as err:
            import_jsonl(target.memory, tmp_path / "bad.jsonl")
        assert reason in err.value.message
        assert err.value.field == "line"
        store = target.memory.store
        assert store.list_resource_ids(limit=10).ids == ()
        assert store.get_thread("user-b", "t1") is None and store.get_resource("user-a") is None


@pytest.mark.parametrize("backend", ["sqlite", "aws-managed"])
def test_given_a_target_using_a_message_id_elsewhere_when_importing_then_conflict_naming_the_batch_lines(
    tmp_path: Path, source: Memory, backend: str
) -> None:
    export(source, tmp_path / "a.jsonl")
    (tmp_path / "target").mkdir()
    with open_backend(backend, tmp_path / "target") as target:  # type: ignore[arg-type]
        target.memory.save_messages(
            resource_id="user-a", thread_id="elsewhere", messages=[{"id": "m1", "content": "mine"}]
        )
        with pytest.raises(Conflict) as err:
            import_jsonl(target.memory, tmp_path / "a.jsonl")
        assert err.value.message.startswith("lines 4-7: message 'm1' is stored in another thread")
        assert "the lines before 4 are imported" in err.value.message and err.value.field == "line"
        assert target.memory.store.list_messages("user-a", "trip", limit=10) == []
