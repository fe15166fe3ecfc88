"""Conformance suite of the ``MemoryStore`` port: every adapter runs it unchanged.

Adapters are registered in ``STORE_FACTORIES`` (tests/contract/conftest.py): SQLite, and DynamoDB under
moto (in-process and as a moto server).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest

from memstack.errors import Conflict, InvalidInput, NotFound, PayloadTooLarge
from memstack.model import (
    MAX_OBSERVATION_RECORD_BYTES,
    BufferedChunk,
    Message,
    ObservationRecord,
    Resource,
    TextPart,
    Thread,
    ToolCallPart,
    ToolResultPart,
)
from memstack.ports import IndexState, MemoryStore, MessageWindow, ThreadErasure, UnindexedMessages

from .conftest import STORE_FACTORIES

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[MemoryStore]:
    with STORE_FACTORIES[request.param](tmp_path) as s:
        yield s
        s.close()


def thread(tid: str = "t1", rid: str = "r1", at: datetime = T0, **kw: object) -> Thread:
    return Thread(id=tid, resource_id=rid, created_at=at, updated_at=at, **kw)  # type: ignore[arg-type]


def msg(
    mid: str, tid: str = "t1", rid: str = "r1", text: str = "hello", at: datetime = T0, **kw: object
) -> Message:
    return Message(
        id=mid,
        thread_id=tid,
        resource_id=rid,
        role=kw.pop("role", "user"),  # type: ignore[arg-type]
        parts=kw.pop("parts", (TextPart(text=text),)),  # type: ignore[arg-type]
        created_at=at,
        **kw,  # type: ignore[arg-type]
    )


# threads ------------------------------------------------------------------------------------------


def test_given_a_created_thread_when_got_by_its_owner_then_it_round_trips(store: MemoryStore) -> None:
    t = thread(title="Trip", metadata={"topic": "travel", "n": 1})
    store.create_thread(t)
    assert store.get_thread("r1", "t1") == t


def test_given_a_thread_of_resource_a_when_got_as_resource_b_then_none(store: MemoryStore) -> None:
    store.create_thread(thread())
    assert store.get_thread("r2", "t1") is None


def test_given_an_existing_thread_id_when_created_again_by_its_resource_then_conflict(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    with pytest.raises(Conflict):
        store.create_thread(thread())


def test_given_a_thread_id_of_another_resource_when_created_then_each_resource_has_its_own_thread(
    store: MemoryStore,
) -> None:
    # ids are per resource: a tenant can neither see nor probe another tenant's ids (no existence leak)
    store.create_thread(thread(title="A's"))
    store.save_messages("r1", "t1", [msg("m1", text="a secret")])
    store.create_thread(thread(rid="r2", title="B's"))
    store.save_messages("r2", "t1", [msg("m1", rid="r2", text="b note"), msg("m2", rid="r2")])
    a, b = store.get_thread("r1", "t1"), store.get_thread("r2", "t1")
    assert a is not None and b is not None and (a.title, b.title) == ("A's", "B's")
    assert [m.text for m in store.list_messages("r1", "t1", limit=10)] == ["a secret"]
    assert [(m.text, m.seq) for m in store.list_messages("r2", "t1", limit=10)] == [
        ("b note", 1),
        ("hello", 2),
    ]
    assert [m.text for m in store.get_messages("r2", ["m1"])] == ["b note"]
    assert [m.id for m in store.delete_messages("r2", ["m1"])] == ["m1"]
    assert [m.text for m in store.get_messages("r1", ["m1"])] == ["a secret"]
    assert store.delete_thread("r2", "t1") is True
    assert store.get_thread("r1", "t1") == a
    assert [m.text for m in store.list_messages("r1", "t1", limit=10)] == ["a secret"]
    assert list(store.list_threads("r1").threads) == [a]


def test_given_threads_when_listed_newest_first_then_pages_cover_all_once(store: MemoryStore) -> None:
    for i in range(17):
        store.create_thread(thread(f"t{i:02d}", at=T0 + timedelta(minutes=i)))
    store.create_thread(thread("other", rid="r2"))
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = store.list_threads("r1", limit=7, cursor=cursor)
        seen += [t.id for t in page.threads]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == 3
    assert seen == [f"t{i:02d}" for i in reversed(range(17))]


def test_given_equal_timestamps_when_listed_then_order_is_stable_by_id(store: MemoryStore) -> None:
    for tid in ("b", "a", "c"):
        store.create_thread(thread(tid))
    first = store.list_threads("r1", limit=2, direction="asc")
    rest = store.list_threads("r1", limit=2, direction="asc", cursor=first.next_cursor)
    assert [t.id for t in first.threads + rest.threads] == ["a", "b", "c"]


def test_given_threads_when_listed_by_updated_at_then_most_recent_activity_first(store: MemoryStore) -> None:
    store.create_thread(thread("old", at=T0))
    store.create_thread(thread("new", at=T0 + timedelta(hours=1)))
    store.save_messages("r1", "old", [msg("m1", "old", at=T0 + timedelta(hours=2))])
    page = store.list_threads("r1", order_by="updated_at")
    assert [t.id for t in page.threads] == ["old", "new"]


def test_given_metadata_when_listing_with_a_filter_then_only_matching_threads(store: MemoryStore) -> None:
    store.create_thread(thread("a", metadata={"kind": "support", "vip": True}))
    store.create_thread(thread("b", metadata={"kind": "sales"}))
    store.create_thread(thread("c", metadata={"kind": "support", "vip": False}))
    page = store.list_threads("r1", metadata={"kind": "support", "vip": True})
    assert [t.id for t in page.threads] == ["a"]


def test_given_a_malformed_cursor_when_listing_then_invalid_input(store: MemoryStore) -> None:
    with pytest.raises(InvalidInput):
        store.list_threads("r1", cursor="not-a-cursor!!")


def test_given_a_thread_when_updated_partially_then_metadata_merges_shallowly(store: MemoryStore) -> None:
    store.create_thread(thread(title="keep", metadata={"a": 1, "b": {"x": 1}}))
    later = T0 + timedelta(minutes=5)
    updated = store.update_thread("r1", "t1", metadata={"b": {"y": 2}, "c": 3}, updated_at=later)
    assert updated.title == "keep"
    assert updated.metadata == {"a": 1, "b": {"y": 2}, "c": 3}
    assert store.get_thread("r1", "t1") == updated
    assert updated.updated_at == later


def test_given_another_resources_thread_when_updated_then_not_found(store: MemoryStore) -> None:
    store.create_thread(thread())
    with pytest.raises(NotFound):
        store.update_thread("r2", "t1", title="x", updated_at=T0)
    assert store.get_thread("r1", "t1").title == ""  # type: ignore[union-attr]


def test_given_a_thread_with_messages_when_deleted_then_both_are_gone(store: MemoryStore) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg("m1"), msg("m2")])
    assert store.delete_thread("r1", "t1") is True
    assert store.get_thread("r1", "t1") is None
    assert store.get_messages("r1", ["m1", "m2"]) == []


def test_given_another_resources_thread_when_deleted_then_nothing_happens(store: MemoryStore) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg("m1")])
    assert store.delete_thread("r2", "t1") is False
    assert len(store.get_messages("r1", ["m1"])) == 1


# messages -----------------------------------------------------------------------------------------


def test_given_a_batch_with_identical_timestamps_when_saved_then_listed_in_insertion_order(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    batch = [
        msg("u", role="user", text="weather?"),
        msg("call", role="assistant", parts=(ToolCallPart(id="c1", name="weather", args={"city": "Oslo"}),)),
        msg(
            "result", role="tool", parts=(ToolResultPart(tool_call_id="c1", name="weather", result={"t": 3}),)
        ),
        msg("a", role="assistant", text="3 degrees"),
    ]
    saved = store.save_messages("r1", "t1", batch)
    assert [m.seq for m in saved] == [1, 2, 3, 4]
    listed = store.list_messages("r1", "t1", limit=10)
    assert [m.id for m in listed] == ["u", "call", "result", "a"]
    assert listed[1].parts == batch[1].parts and listed[2].parts == batch[2].parts


def test_given_a_saved_message_when_saved_again_then_updated_in_place(store: MemoryStore) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg("m1", text="one"), msg("m2", text="two")])
    again = store.save_messages("r1", "t1", [msg("m1", text="ONE", at=T0 + timedelta(days=1))])
    assert again[0].seq == 1
    listed = store.list_messages("r1", "t1", limit=10)
    assert [(m.id, m.text) for m in listed] == [("m1", "ONE"), ("m2", "two")]
    assert listed[0].created_at == T0


def test_given_a_missing_thread_when_saving_with_create_then_thread_and_messages_exist(
    store: MemoryStore,
) -> None:
    store.save_messages("r1", "t1", [msg("m1")], create=thread())
    assert store.get_thread("r1", "t1") is not None
    assert [m.id for m in store.list_messages("r1", "t1", limit=5)] == ["m1"]


def test_given_a_missing_thread_when_saving_without_create_then_not_found(store: MemoryStore) -> None:
    with pytest.raises(NotFound):
        store.save_messages("r1", "t1", [msg("m1")])


def test_given_resource_a_thread_when_resource_b_saves_into_its_id_then_b_gets_its_own_thread(
    store: MemoryStore,
) -> None:
    # ids are per resource: B's save (with create) makes B's own "t1" and never reaches A's
    store.create_thread(thread())
    with pytest.raises(NotFound):
        store.save_messages("r2", "t1", [msg("m1", rid="r2")])
    store.save_messages("r2", "t1", [msg("m1", rid="r2")], create=thread(rid="r2"))
    assert store.list_messages("r1", "t1", limit=5) == []
    assert [m.id for m in store.list_messages("r2", "t1", limit=5)] == ["m1"]


def test_given_a_message_id_of_another_thread_when_saved_here_then_conflict_and_batch_not_written(
    store: MemoryStore,
) -> None:
    store.create_thread(thread("t1"))
    store.create_thread(thread("t2"))
    store.save_messages("r1", "t1", [msg("m1")])
    with pytest.raises(Conflict):
        store.save_messages("r1", "t2", [msg("new", "t2"), msg("m1", "t2")])
    assert store.list_messages("r1", "t2", limit=5) == []


def test_given_messages_when_listing_last_n_then_newest_n_returned(store: MemoryStore) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg(f"m{i}") for i in range(10)])
    newest = store.list_messages("r1", "t1", limit=3, newest_first=True)
    assert [m.id for m in newest] == ["m9", "m8", "m7"]
    page = store.list_messages("r1", "t1", limit=3, after_seq=3)
    assert [m.id for m in page] == ["m3", "m4", "m5"]
    assert [m.id for m in store.list_messages("r1", "t1", limit=10, after_seq=2, before_seq=5)] == [
        "m2",
        "m3",
    ]


def test_given_another_resource_when_listing_messages_then_empty(store: MemoryStore) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg("m1")])
    assert store.list_messages("r2", "t1", limit=5) == []
    assert store.get_messages("r2", ["m1"]) == []


def test_given_windows_when_loaded_then_neighbours_come_from_the_messages_own_thread(
    store: MemoryStore,
) -> None:
    store.create_thread(thread("t1"))
    store.create_thread(thread("t2"))
    store.save_messages("r1", "t1", [msg(f"a{i}", "t1") for i in range(6)])
    store.save_messages("r1", "t2", [msg(f"b{i}", "t2") for i in range(3)])
    found = store.message_windows(
        "r1", [MessageWindow("t1", 3, 1, 1), MessageWindow("t2", 1, 2, 1), MessageWindow("t1", 4, 0, 0)]
    )
    assert [m.id for m in found] == ["a1", "a2", "a3", "b0", "b1"]


def test_given_overlapping_and_adjacent_windows_when_loaded_then_each_message_comes_once(
    store: MemoryStore,
) -> None:
    store.create_thread(thread("t1"))
    store.create_thread(thread("t2"))
    store.save_messages("r1", "t1", [msg(f"a{i}", "t1") for i in range(10)])  # seqs 1..10
    store.save_messages("r1", "t2", [msg(f"b{i}", "t2") for i in range(3)])
    windows = [
        MessageWindow("t1", 5, 1, 1),  # 4-6, overlapping the next
        MessageWindow("t1", 3, 1, 1),  # 2-4
        MessageWindow("t2", 1, 0, 1),
        MessageWindow("t1", 7, 0, 0),  # adjacent to 4-6
        MessageWindow("t1", 10, 1, 1),  # past the thread's end
        MessageWindow("t1", 4, 0, 0),  # inside another
    ]
    found = store.message_windows("r1", windows)
    assert [m.id for m in found] == ["a1", "a2", "a3", "a4", "a5", "a6", "a8", "a9", "b0", "b1"]


def test_given_a_deleted_neighbour_when_windows_loaded_then_the_gap_is_skipped(store: MemoryStore) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg(f"m{i}") for i in range(5)])
    store.delete_messages("r1", ["m1"])
    found = store.message_windows("r1", [MessageWindow("t1", 3, 1, 0)])
    assert [m.id for m in found] == ["m0", "m2"]


def test_given_another_resource_when_loading_windows_then_nothing(store: MemoryStore) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg(f"m{i}") for i in range(3)])
    assert store.message_windows("r2", [MessageWindow("t1", 2, 1, 1)]) == []


def test_given_messages_when_deleted_then_only_this_resources_go(store: MemoryStore) -> None:
    store.create_thread(thread("t1"))
    store.create_thread(thread("t2", rid="r2"))
    store.save_messages("r1", "t1", [msg("m1"), msg("m2")])
    store.save_messages("r2", "t2", [msg("x1", "t2", "r2")])
    deleted = store.delete_messages("r1", ["m1", "x1", "missing"])
    assert [m.id for m in deleted] == ["m1"]
    assert [m.id for m in store.list_messages("r1", "t1", limit=5)] == ["m2"]
    assert len(store.get_messages("r2", ["x1"])) == 1


def test_given_a_deleted_message_when_new_ones_saved_then_seq_never_reused(store: MemoryStore) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg("m1"), msg("m2")])
    store.delete_messages("r1", ["m2"])
    saved = store.save_messages("r1", "t1", [msg("m3")])
    assert saved[0].seq == 3


def test_given_unicode_and_a_100kb_message_when_saved_then_round_trip_unchanged(store: MemoryStore) -> None:
    store.create_thread(thread())
    texts = ["emoji 🎉👩‍👩‍👧 ok", "中文字符 和 日本語のテキスト", "x" * 100_000, "nul\u0000byte", "RTL עברית"]
    store.save_messages("r1", "t1", [msg(f"m{i}", text=t) for i, t in enumerate(texts)])
    assert [m.text for m in store.list_messages("r1", "t1", limit=10)] == texts


def test_given_concurrent_writers_when_saving_to_one_thread_then_seq_is_unique_and_gap_free(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())

    def writer(w: int) -> None:
        for i in range(20):
            store.save_messages("r1", "t1", [msg(f"w{w}-{i}")])

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seqs = [m.seq for m in store.list_messages("r1", "t1", limit=1000)]
    assert seqs == list(range(1, 81))


def test_given_a_thread_when_read_with_history_then_the_thread_and_its_last_messages_in_order(
    store: MemoryStore,
) -> None:
    store.create_thread(thread(title="Head"))
    store.save_messages("r1", "t1", [msg(f"m{i}") for i in range(7)])
    got, history = store.get_thread_with_history("r1", "t1", last=3)
    assert got is not None and got.title == "Head" and got.id == "t1"
    assert [m.id for m in history] == ["m4", "m5", "m6"]
    assert [m.seq for m in history] == [5, 6, 7]
    _, everything = store.get_thread_with_history("r1", "t1", last=100)
    assert [m.id for m in everything] == [f"m{i}" for i in range(7)]
    got, none = store.get_thread_with_history("r1", "t1", last=0)
    assert got is not None and none == []


def test_given_another_resources_or_a_missing_thread_when_read_with_history_then_nothing(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg("m1")])
    assert store.get_thread_with_history("r2", "t1", last=10) == (None, [])
    assert store.get_thread_with_history("r1", "nope", last=10) == (None, [])


def test_given_an_empty_thread_when_read_with_history_then_the_thread_and_no_messages(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    got, history = store.get_thread_with_history("r1", "t1", last=10)
    assert got == thread() and history == []


def test_given_a_resource_and_windows_when_read_together_then_both_come_back(store: MemoryStore) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg(f"m{i}") for i in range(5)])
    store.put_resource(Resource(id="r1", working_memory="# Notes"), expected_version=0)
    resource, messages = store.get_resource_and_windows("r1", [MessageWindow("t1", 3, 1, 1)])
    assert resource is not None and resource.working_memory == "# Notes" and resource.version == 1
    assert [m.id for m in messages] == ["m1", "m2", "m3"]
    assert store.get_resource_and_windows("r2", [MessageWindow("t1", 3, 1, 1)]) == (None, [])
    none, only = store.get_resource_and_windows("r1", [])
    assert none is not None and only == []


def test_given_index_marks_when_set_then_read_back_for_this_resource_only(store: MemoryStore) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg("m1"), msg("m2"), msg("m3")])
    store.set_index_marks("r1", {"m1": "fp-1", "m2": "fp-2", "ghost": "fp-x"})
    assert store.get_index_marks("r1", ["m1", "m2", "m3", "ghost"]) == {"m1": "fp-1", "m2": "fp-2"}
    assert store.get_index_marks("r2", ["m1", "m2"]) == {}
    store.set_index_marks("r2", {"m3": "stolen"})
    assert store.get_index_marks("r1", ["m3"]) == {}


def test_given_index_documents_when_the_message_is_saved_again_then_they_outlive_the_mark(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg("m1"), msg("m2")])
    missed = store.set_index_marks("r1", {"m1": "fp-1", "ghost": "fp-x"}, documents={"m1": ["d1", "d2"]})
    assert missed == ["ghost"]
    assert store.get_index_state("r1", ["m1", "m2"]) == {
        "m1": IndexState("fp-1", ("d1", "d2")),
        "m2": IndexState(None, ()),
    }
    store.save_messages("r1", "t1", [msg("m1", text="edited")])
    assert store.get_index_state("r1", ["m1"]) == {"m1": IndexState(None, ("d1", "d2"))}
    assert store.get_index_state("r2", ["m1"]) == {}


def test_given_an_expected_mark_when_another_indexer_marked_first_then_the_second_is_not_marked(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg("m1"), msg("m2")])
    first = store.set_index_marks("r1", {"m1": "fp-a"}, documents={"m1": ["a"]}, expected={"m1": None})
    second = store.set_index_marks(
        "r1",
        {"m1": "fp-b", "m2": "fp-b"},
        documents={"m1": ["b"], "m2": ["c"]},
        expected={"m1": None, "m2": None},
    )
    assert first == [] and second == ["m1"]
    assert store.get_index_state("r1", ["m1", "m2"]) == {
        "m1": IndexState("fp-a", ("a",)),
        "m2": IndexState("fp-b", ("c",)),
    }
    assert store.set_index_marks("r1", {"m1": "fp-c"}, expected={"m1": "fp-a"}) == []
    assert store.get_index_marks("r1", ["m1"]) == {"m1": "fp-c"}


def test_given_a_marked_message_when_saved_again_or_deleted_then_its_mark_is_gone(store: MemoryStore) -> None:
    store.create_thread(thread())
    store.save_messages("r1", "t1", [msg("m1"), msg("m2")])
    store.set_index_marks("r1", {"m1": "fp-1", "m2": "fp-2"})
    store.save_messages("r1", "t1", [msg("m1", text="edited")])
    store.delete_messages("r1", ["m2"])
    store.save_messages("r1", "t1", [msg("m2")])
    assert store.get_index_marks("r1", ["m1", "m2"]) == {}


def unindexed(store: MemoryStore, limit: int = 100) -> list[tuple[str, str, str]]:
    assert isinstance(store, UnindexedMessages), "every store lists its unindexed messages"
    return store.list_unindexed(limit=limit)


def test_given_saved_messages_of_two_resources_when_listing_unindexed_then_each_unmarked_one_once(
    store: MemoryStore,
) -> None:
    store.save_messages("r1", "t1", [msg("m1"), msg("m2")], create=thread())
    store.save_messages("r2", "t1", [msg("m1", rid="r2")], create=thread(rid="r2"))
    store.set_index_marks("r1", {"m2": "fp-2"})

    listed = unindexed(store)

    assert sorted(listed) == [("r1", "t1", "m1"), ("r2", "t1", "m1")]


def test_given_an_unindexed_message_when_marked_saved_again_or_deleted_then_the_list_follows(
    store: MemoryStore,
) -> None:
    store.save_messages("r1", "t1", [msg("m1"), msg("m2"), msg("m3")], create=thread())
    store.save_messages("r1", "t2", [msg("x1", tid="t2")], create=thread("t2"))
    store.set_index_marks("r1", {"m1": "fp-1", "m2": "fp-2", "m3": "fp-3", "x1": "fp-x"})
    assert unindexed(store) == []

    store.save_messages("r1", "t1", [msg("m1", text="edited")])
    store.delete_messages("r1", ["m2"])
    assert unindexed(store) == [("r1", "t1", "m1")]

    store.erase_thread("r1", "t1")
    store.save_messages("r1", "t2", [msg("x1", tid="t2", text="edited")])
    assert unindexed(store) == [("r1", "t2", "x1")]


def test_given_a_mark_lost_to_another_indexer_when_listing_unindexed_then_only_the_winner_counts(
    store: MemoryStore,
) -> None:
    store.save_messages("r1", "t1", [msg("m1"), msg("m2")], create=thread())
    store.set_index_marks("r1", {"m1": "fp-a"}, expected={"m1": None})

    missed = store.set_index_marks("r1", {"m1": "fp-b", "m2": "fp-b"}, expected={"m1": None, "m2": "fp-0"})

    assert sorted(missed) == ["m1", "m2"]
    assert unindexed(store) == [("r1", "t1", "m2")]


def test_given_more_unindexed_messages_than_the_limit_when_listed_then_the_limit_distinct_ones(
    store: MemoryStore,
) -> None:
    store.save_messages("r1", "t1", [msg(f"m{n}") for n in range(7)], create=thread())

    three = unindexed(store, limit=3)

    assert len(three) == len(set(three)) == 3
    assert set(three) <= {("r1", "t1", f"m{n}") for n in range(7)}
    assert unindexed(store, limit=0) == []
    assert len(unindexed(store, limit=1_000)) == 7


def test_given_more_marks_than_one_transaction_holds_when_set_then_every_one_is_written(
    store: MemoryStore,
) -> None:
    ids = [f"m{n:03d}" for n in range(130)]
    for start in range(0, len(ids), 40):
        store.save_messages("r1", "t1", [msg(i) for i in ids[start : start + 40]], create=thread())

    missed = store.set_index_marks(
        "r1", {i: f"fp-{i}" for i in [*ids, "ghost"]}, documents={i: [f"{i}-0"] for i in ids}
    )

    assert missed == ["ghost"]
    assert store.get_index_state("r1", ids) == {i: IndexState(f"fp-{i}", (f"{i}-0",)) for i in ids}
    assert unindexed(store, limit=1_000) == []


# resources ----------------------------------------------------------------------------------------


def test_given_no_resource_when_got_then_none(store: MemoryStore) -> None:
    assert store.get_resource("r1") is None


def test_given_a_resource_when_put_with_the_read_version_then_version_increases(store: MemoryStore) -> None:
    first = store.put_resource(Resource(id="r1", working_memory="# A"), expected_version=0)
    assert first.version == 1
    second = store.put_resource(first.model_copy(update={"working_memory": "# B"}), expected_version=1)
    assert second.version == 2
    got = store.get_resource("r1")
    assert got is not None and got.working_memory == "# B" and got.version == 2


def test_given_a_stale_version_when_put_then_conflict_and_nothing_written(store: MemoryStore) -> None:
    store.put_resource(Resource(id="r1", working_memory="# A"), expected_version=0)
    with pytest.raises(Conflict):
        store.put_resource(Resource(id="r1", working_memory="# stale"), expected_version=0)
    assert store.get_resource("r1").working_memory == "# A"  # type: ignore[union-attr]


def test_given_a_thread_when_updated_then_its_version_counts_updates(store: MemoryStore) -> None:
    store.create_thread(thread())
    first = store.update_thread("r1", "t1", title="a", updated_at=T0)
    second = store.update_thread("r1", "t1", metadata={"k": 1}, updated_at=T0, expected_version=1)
    assert (first.version, second.version) == (1, 2)
    assert store.get_thread("r1", "t1").version == 2  # type: ignore[union-attr]


def test_given_a_stale_thread_version_when_updated_then_conflict_and_nothing_written(
    store: MemoryStore,
) -> None:
    store.create_thread(thread(metadata={"k": "old"}))
    store.update_thread("r1", "t1", metadata={"k": "first"}, updated_at=T0, expected_version=0)
    with pytest.raises(Conflict):
        store.update_thread("r1", "t1", metadata={"k": "stale"}, updated_at=T0, expected_version=0)
    assert store.get_thread("r1", "t1").metadata == {"k": "first"}  # type: ignore[union-attr]


def test_given_an_expected_title_when_updated_then_only_the_title_is_compared(store: MemoryStore) -> None:
    store.create_thread(thread())
    store.update_thread("r1", "t1", metadata={"working_memory": "# x"}, updated_at=T0)
    titled = store.update_thread("r1", "t1", title="Trip", updated_at=T0, expected_title="")
    assert titled.title == "Trip", "another field's write does not make a title compare-and-set fail"
    with pytest.raises(Conflict) as err:
        store.update_thread("r1", "t1", title="Other", updated_at=T0, expected_title="")
    assert err.value.field == "title"
    assert store.get_thread("r1", "t1").title == "Trip"  # type: ignore[union-attr]


def test_given_expected_messages_when_they_are_all_kept_then_the_update_lands_whatever_was_added(
    store: MemoryStore,
) -> None:
    saved = store.save_messages("r1", "t1", [msg("m1"), msg("m2")], create=thread())
    store.save_messages("r1", "t1", [msg("m3")])
    titled = store.update_thread(
        "r1",
        "t1",
        title="Trip",
        updated_at=T0,
        expected_title="",
        expected_messages={m.id: m.seq for m in saved},
    )
    assert titled.title == store.get_thread("r1", "t1").title == "Trip"  # type: ignore[union-attr]


@pytest.mark.parametrize("removal", ["delete one", "delete the thread and make it again"])
def test_given_expected_messages_when_one_is_gone_then_conflict_and_nothing_written(
    store: MemoryStore, removal: str
) -> None:
    """A title made from messages is never set once one of them is deleted, nor on a thread made again
    under the same id with messages of the same ids (``expected_created_at``)."""
    read = store.save_messages("r1", "t1", [msg("m1"), msg("m2")], create=thread())
    before = store.get_thread("r1", "t1")
    assert before is not None
    if removal == "delete one":
        store.delete_messages("r1", ["m2"])
        field = "messages"
    else:
        store.delete_thread("r1", "t1")
        later = T0 + timedelta(seconds=1)
        store.save_messages("r1", "t1", [msg("m1"), msg("m2")], create=thread(at=later))
        field = "thread_id"
    with pytest.raises(Conflict) as err:
        store.update_thread(
            "r1",
            "t1",
            title="made from the deleted messages",
            updated_at=T0,
            expected_title="",
            expected_created_at=before.created_at,
            expected_messages={m.id: m.seq for m in read},
        )
    assert err.value.field == field
    assert store.get_thread("r1", "t1").title == ""  # type: ignore[union-attr]


def test_given_saves_when_read_then_the_thread_knows_its_last_seq(store: MemoryStore) -> None:
    store.save_messages("r1", "t1", [msg("m1"), msg("m2")], create=thread())
    store.save_messages("r1", "t1", [msg("m1", text="edited")])
    assert store.get_thread("r1", "t1").last_seq == 2  # type: ignore[union-attr]
    store.delete_messages("r1", ["m2"])
    assert store.get_thread("r1", "t1").last_seq == 2  # type: ignore[union-attr]


def test_given_an_expected_last_seq_when_the_thread_moved_then_conflict_and_nothing_written(
    store: MemoryStore,
) -> None:
    store.save_messages("r1", "t1", [msg("m1")], create=thread(), expected_last_seq=0)
    with pytest.raises(Conflict) as err:
        store.save_messages("r1", "t1", [msg("m2")], expected_last_seq=0)
    assert err.value.field == "expected_last_seq"
    store.save_messages("r1", "t1", [msg("m3")], expected_last_seq=1)
    assert [m.id for m in store.list_messages("r1", "t1", limit=10)] == ["m1", "m3"]


def test_given_an_expected_last_seq_on_a_batch_over_one_transaction_then_it_is_checked_before_writing(
    store: MemoryStore,
) -> None:
    store.save_messages("r1", "t1", [msg("m0")], create=thread())
    batch = [msg(f"b{i}") for i in range(120)]
    with pytest.raises(Conflict):
        store.save_messages("r1", "t1", batch, expected_last_seq=0)
    assert len(store.list_messages("r1", "t1", limit=500)) == 1
    saved = store.save_messages("r1", "t1", batch, expected_last_seq=1)
    assert [m.seq for m in saved] == list(range(2, 122))


# observation records (spec §2.9.2) ------------------------------------------------------------------


def obs(
    tid: str | None = "t1", rid: str = "r1", text: str = "* 🔴 (14:30) User prefers tea", **kw: object
) -> ObservationRecord:
    scope = "resource" if tid is None else "thread"
    return ObservationRecord(scope=scope, resource_id=rid, thread_id=tid, active_observations=text, **kw)  # type: ignore[arg-type]


def test_given_an_observation_record_when_put_then_it_round_trips_with_version_and_times(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    assert store.get_observation_record("r1", "t1") is None
    chunk = BufferedChunk(
        id="c1",
        thread_id="t1",
        from_seq=4,
        to_seq=6,
        observations="* 🟡 later",
        token_count=5,
        message_tokens=120,
        created_at=T0,
        current_task="pack",
    )
    record = obs(
        cursor={"t1": 3},
        generation_count=2,
        origin_type="reflection",
        observation_tokens=9,
        pending_message_tokens=140,
        buffered_chunks=(chunk,),
        current_task="plan a trip",
        suggested_response="Ask about dates",
        thread_title="Trip",
    )
    stored = store.put_observation_record(record, expected_version=0)
    assert stored.version == 1 and stored.created_at is not None and stored.updated_at is not None
    got = store.get_observation_record("r1", "t1")
    assert got == stored
    with pytest.raises(InvalidInput):  # the cursor may not pass a buffered chunk: activation drops it
        store.put_observation_record(got.model_copy(update={"cursor": {"t1": 6}}), expected_version=1)
    activated = got.model_copy(update={"cursor": {"t1": 6}, "buffered_chunks": ()})
    again = store.put_observation_record(activated, expected_version=1)
    assert again.version == 2 and again.created_at == stored.created_at
    assert store.get_observation_record("r1", "t1") == again


def test_given_a_stale_version_when_an_observation_record_is_put_then_conflict_and_nothing_written(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    first = store.put_observation_record(obs(text="first"), expected_version=0)
    with pytest.raises(Conflict):
        store.put_observation_record(obs(text="stale"), expected_version=0)
    with pytest.raises(Conflict):
        store.put_observation_record(obs(text="future"), expected_version=5)
    store.put_observation_record(obs(text="second"), expected_version=1)
    with pytest.raises(Conflict):
        store.put_observation_record(obs(text="lost"), expected_version=1)
    got = store.get_observation_record("r1", "t1")
    assert got is not None and (got.active_observations, got.version) == ("second", 2)
    assert first.version == 1


def test_given_racing_writers_of_one_version_when_put_then_exactly_one_wins(store: MemoryStore) -> None:
    store.create_thread(thread())
    results: list[str] = []

    def write(i: int) -> None:
        try:
            store.put_observation_record(obs(text=f"w{i}"), expected_version=0)
            results.append(f"w{i}")
        except Conflict:
            results.append("conflict")

    workers = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    winners = [r for r in results if r != "conflict"]
    got = store.get_observation_record("r1", "t1")
    assert (
        len(winners) == 1 and got is not None and got.active_observations == winners[0] and got.version == 1
    )


def test_given_observation_records_of_two_resources_when_read_then_each_sees_its_own_only(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    store.create_thread(thread(rid="r2"))
    store.put_observation_record(obs(text="A's"), expected_version=0)
    store.put_observation_record(obs(None, text="A's resource"), expected_version=0)
    assert store.get_observation_record("r2", "t1") is None
    assert store.get_observation_record("r2", None) is None
    store.put_observation_record(obs(rid="r2", text="B's"), expected_version=0)
    a, b = store.get_observation_record("r1", "t1"), store.get_observation_record("r2", "t1")
    assert (
        a is not None and b is not None and (a.active_observations, b.active_observations) == ("A's", "B's")
    )


def test_given_another_resources_or_a_missing_thread_when_a_thread_record_is_put_then_not_found(
    store: MemoryStore,
) -> None:
    store.create_thread(thread(rid="r2"))
    with pytest.raises(NotFound):
        store.put_observation_record(obs(), expected_version=0)
    assert store.get_observation_record("r1", "t1") is None


def test_given_thread_and_resource_records_when_read_then_they_are_separate(store: MemoryStore) -> None:
    store.create_thread(thread())
    store.put_observation_record(obs(text="thread log"), expected_version=0)
    assert store.get_observation_record("r1", None) is None
    resource_record = obs(None, text="resource log", cursor={"t1": 4, "t2": 9})
    stored = store.put_observation_record(resource_record, expected_version=0)
    assert stored.version == 1 and stored.cursor == {"t1": 4, "t2": 9}
    t, r = store.get_observation_record("r1", "t1"), store.get_observation_record("r1", None)
    assert t is not None and r is not None
    assert (t.scope, t.active_observations, r.scope, r.active_observations) == (
        "thread",
        "thread log",
        "resource",
        "resource log",
    )


def test_given_a_thread_with_an_observation_record_when_deleted_then_the_record_goes_too(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    store.put_observation_record(obs(), expected_version=0)
    store.put_observation_record(obs(None), expected_version=0)
    assert store.delete_thread("r1", "t1") is True
    assert store.get_observation_record("r1", "t1") is None
    assert store.get_observation_record("r1", None) is not None  # the resource's record stays
    store.create_thread(thread())  # a new thread of the same id starts without observations
    assert store.get_observation_record("r1", "t1") is None
    assert store.put_observation_record(obs(), expected_version=0).version == 1


@pytest.mark.parametrize("messages", [0, 2, 5, 9])
def test_given_an_observation_record_when_the_thread_head_is_read_then_exactly_meta_and_last_n(
    store: MemoryStore, messages: int
) -> None:
    store.create_thread(thread(title="Head"))
    if messages:
        store.save_messages("r1", "t1", [msg(f"m{i}", text=f"x{i}") for i in range(messages)])
    store.put_observation_record(obs(), expected_version=0)
    got, history = store.get_thread_with_history("r1", "t1", last=5)
    assert got is not None and got.title == "Head"
    assert [m.id for m in history] == [f"m{i}" for i in range(max(0, messages - 5), messages)]
    assert [m.id for m in store.list_messages("r1", "t1", limit=20)] == [f"m{i}" for i in range(messages)]


def test_given_a_record_over_the_size_limit_when_put_then_payload_too_large_naming_it(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    big = obs(text="x" * (MAX_OBSERVATION_RECORD_BYTES + 1))
    with pytest.raises(PayloadTooLarge, match=str(MAX_OBSERVATION_RECORD_BYTES)):
        store.put_observation_record(big, expected_version=0)
    assert store.get_observation_record("r1", "t1") is None
    near = obs(text="é" * (MAX_OBSERVATION_RECORD_BYTES // 2 - 2_000))  # ~358 KiB of two-byte text
    assert store.put_observation_record(near, expected_version=0).version == 1
    got = store.get_observation_record("r1", "t1")
    assert got is not None and got.active_observations == near.active_observations


# observation work: the background sweep's query (spec §2.9; MemoryStore.list_observation_work) ---------


def pend(store: MemoryStore, tid: str | None, rid: str, at: datetime | None, *, version: int = 0) -> None:
    """Put the record of ``(rid, tid)`` with ``pending_since = at`` (the thread must exist)."""
    store.put_observation_record(obs(tid, rid=rid, pending_since=at), expected_version=version)


def test_given_records_pending_in_several_resources_when_listing_observation_work_then_the_due_ones_oldest_first(
    store: MemoryStore,
) -> None:
    for rid, tid in (("r1", "t1"), ("r1", "t2"), ("r2", "t1")):
        store.create_thread(thread(tid, rid=rid))
    pend(store, "t1", "r1", T0 + timedelta(minutes=2))
    pend(store, None, "r1", T0 + timedelta(minutes=1))  # resource scope: thread_id None
    pend(store, "t1", "r2", T0 + timedelta(minutes=3))  # another resource: the sweep sees every resource
    pend(store, "t2", "r1", None)  # nothing pending
    pend(store, None, "r2", T0 + timedelta(minutes=10))  # pending, not yet due
    work = store.list_observation_work(due_before=T0 + timedelta(minutes=5), limit=10)
    assert work == [("r1", None), ("r1", "t1"), ("r2", "t1")]


def test_given_a_record_pending_exactly_at_the_cut_when_listing_observation_work_then_it_is_due(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    pend(store, "t1", "r1", T0)
    assert store.list_observation_work(due_before=T0, limit=10) == [("r1", "t1")]
    assert store.list_observation_work(due_before=T0 - timedelta(microseconds=1), limit=10) == []


def test_given_pending_times_in_other_zones_when_listing_observation_work_then_they_compare_as_utc(
    store: MemoryStore,
) -> None:
    plus_two = timezone(timedelta(hours=2))
    store.create_thread(thread("t1"))
    store.create_thread(thread("t2"))
    pend(store, "t1", "r1", datetime(2024, 5, 1, 13, 0, tzinfo=plus_two))  # 11:00 UTC
    pend(store, "t2", "r1", T0 - timedelta(minutes=30))  # 11:30 UTC
    assert store.list_observation_work(due_before=T0, limit=10) == [("r1", "t1"), ("r1", "t2")]
    assert store.list_observation_work(
        due_before=datetime(2024, 5, 1, 13, 15, tzinfo=plus_two), limit=10
    ) == [("r1", "t1")]
    got = store.get_observation_record("r1", "t1")
    assert got is not None and got.pending_since == datetime(2024, 5, 1, 11, 0, tzinfo=UTC)


def test_given_more_due_records_than_the_limit_when_listing_observation_work_then_the_oldest_limit(
    store: MemoryStore,
) -> None:
    for i in (3, 0, 4, 1, 2):
        store.create_thread(thread(f"t{i}"))
        pend(store, f"t{i}", "r1", T0 + timedelta(seconds=i))
    assert store.list_observation_work(due_before=T0 + timedelta(hours=1), limit=2) == [
        ("r1", "t0"),
        ("r1", "t1"),
    ]
    assert store.list_observation_work(due_before=T0 + timedelta(hours=1), limit=1) == [("r1", "t0")]


@pytest.mark.parametrize("limit", [0, -1, 1001])
def test_given_a_limit_out_of_range_when_listing_observation_work_then_invalid_input(
    store: MemoryStore, limit: int
) -> None:
    with pytest.raises(InvalidInput) as caught:
        store.list_observation_work(due_before=T0, limit=limit)
    assert caught.value.field == "limit"


def test_given_the_largest_limit_when_listing_observation_work_then_it_is_accepted(
    store: MemoryStore,
) -> None:
    assert store.list_observation_work(due_before=T0, limit=1000) == []


def test_given_a_pending_record_when_its_pending_is_cleared_or_moved_then_the_observation_work_list_follows(
    store: MemoryStore,
) -> None:
    store.create_thread(thread("t1"))
    store.create_thread(thread("t2"))
    pend(store, "t1", "r1", T0)
    pend(store, "t2", "r1", T0 + timedelta(minutes=1))
    due = T0 + timedelta(minutes=5)
    assert store.list_observation_work(due_before=due, limit=10) == [("r1", "t1"), ("r1", "t2")]
    pend(store, "t1", "r1", T0 + timedelta(minutes=2), version=1)  # left pending again, later
    assert store.list_observation_work(due_before=due, limit=10) == [("r1", "t2"), ("r1", "t1")]
    pend(store, "t1", "r1", None, version=2)  # the work was done
    assert store.list_observation_work(due_before=due, limit=10) == [("r1", "t2")]
    pend(store, "t2", "r1", T0 + timedelta(minutes=9), version=1)  # pending, no longer due
    assert store.list_observation_work(due_before=due, limit=10) == []


def test_given_a_deleted_thread_when_listing_observation_work_then_its_record_is_gone_and_the_resources_stays(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    pend(store, "t1", "r1", T0)
    pend(store, None, "r1", T0 + timedelta(minutes=1))
    assert store.delete_thread("r1", "t1") is True
    assert store.list_observation_work(due_before=T0 + timedelta(hours=1), limit=10) == [("r1", None)]


def test_given_many_due_records_when_listing_observation_work_in_small_limits_then_order_spans_index_pages(
    store: MemoryStore,
) -> None:
    # resource-scoped records of 30 resources (no thread needed), written out of order; a small limit
    # makes the DynamoDB adapter read each shard of its index in several pages
    order = [(i * 7) % 30 for i in range(30)]
    for i in order:
        pend(store, None, f"res-{i:02d}", T0 + timedelta(seconds=i))
    everything = [(f"res-{i:02d}", None) for i in range(30)]
    later = T0 + timedelta(hours=1)
    assert store.list_observation_work(due_before=later, limit=1000) == everything
    assert store.list_observation_work(due_before=later, limit=10) == everything[:10]
    assert store.list_observation_work(due_before=later, limit=29) == everything[:29]
    assert store.list_observation_work(due_before=T0 + timedelta(seconds=17), limit=1000) == everything[:18]


def test_given_an_observation_record_with_failure_fields_when_put_then_they_round_trip(
    store: MemoryStore,
) -> None:
    store.create_thread(thread())
    record = obs(pending_since=T0, failure_count=3, last_error="Unavailable: model throttled")
    stored = store.put_observation_record(record, expected_version=0)
    got = store.get_observation_record("r1", "t1")
    assert got == stored
    assert got is not None and (got.pending_since, got.failure_count, got.last_error) == (
        T0,
        3,
        "Unavailable: model throttled",
    )
    cleared = store.put_observation_record(
        got.model_copy(update={"pending_since": None, "failure_count": 0, "last_error": None}),
        expected_version=1,
    )
    assert store.get_observation_record("r1", "t1") == cleared
    assert (cleared.pending_since, cleared.failure_count, cleared.last_error) == (None, 0, None)


# erasure: erase_thread, delete_resource, delete_observation_record ---------------------------------------

BIG = "x" * 120_000  # over the DynamoDB store's inline limit (100 KiB): its body goes to S3


def fill_thread(store: MemoryStore, rid: str, tid: str) -> None:
    """A thread with everything a store keeps under it: messages (one with a large body), index marks and
    a thread-scope observation record with pending work."""
    store.create_thread(thread(tid, rid, metadata={"owner": rid}))
    store.save_messages(
        rid,
        tid,
        [
            msg(f"{tid}-m1", tid, rid, text="hi"),
            msg(f"{tid}-m2", tid, rid, text=BIG),
            msg(f"{tid}-m3", tid, rid),
        ],
    )
    store.set_index_marks(rid, {f"{tid}-m1": "fp1", f"{tid}-m2": "fp2"})
    store.put_observation_record(obs(tid, rid=rid, pending_since=T0), expected_version=0)


def test_given_a_thread_when_erased_then_the_count_of_its_messages_and_none_the_second_time(
    store: MemoryStore,
) -> None:
    fill_thread(store, "r1", "t1")
    assert store.erase_thread("r2", "t1") is None  # another resource's id: nothing
    assert store.erase_thread("r1", "t1") == ThreadErasure(messages=3, observation_records=1)
    assert store.erase_thread("r1", "t1") is None
    assert store.delete_thread("r1", "t1") is False
    store.create_thread(thread("empty"))
    assert store.erase_thread("r1", "empty") == ThreadErasure(messages=0, observation_records=0)


@pytest.mark.parametrize("how", ["delete_thread", "erase_thread"])
def test_given_a_full_thread_when_deleted_then_nothing_keyed_by_it_remains_and_its_neighbours_stay(
    store: MemoryStore, how: str
) -> None:
    from tests.erase_support import remnants

    rid, other = "erase-r-6b1f", "erase-o-93c2"
    for r, t in ((rid, "thread-a-51"), (rid, "thread-b-72"), (other, "thread-a-51")):
        fill_thread(store, r, t)
    assert remnants(rid, store=store, thread_id="thread-a-51"), "the enumerator must see the thread first"

    getattr(store, how)(rid, "thread-a-51")

    assert remnants(rid, store=store, thread_id="thread-a-51") == []
    assert store.list_observation_work(due_before=T0, limit=10) == sorted(
        [(rid, "thread-b-72"), (other, "thread-a-51")]
    )
    assert remnants(rid, store=store, thread_id="thread-b-72")
    assert remnants(other, store=store, thread_id="thread-a-51")
    assert [m.text for m in store.list_messages(other, "thread-a-51", limit=5)] == ["hi", BIG, "hello"]
    assert store.get_index_marks(other, ["thread-a-51-m1"]) == {"thread-a-51-m1": "fp1"}


def test_given_a_resource_record_when_deleted_then_it_is_gone_and_a_second_delete_is_false(
    store: MemoryStore,
) -> None:
    store.put_resource(Resource(id="r1", working_memory="# Name: Ada", metadata={"a": 1}), expected_version=0)
    store.put_resource(Resource(id="r2", working_memory="# Name: Bo"), expected_version=0)
    store.create_thread(thread())
    store.put_observation_record(obs(None), expected_version=0)

    assert store.delete_resource("r1") is True

    assert store.get_resource("r1") is None
    assert store.delete_resource("r1") is False
    assert store.get_resource("r2") is not None  # another resource's record stays
    assert store.get_thread("r1", "t1") is not None  # threads and records have their own deletes
    assert store.get_observation_record("r1", None) is not None
    assert store.put_resource(Resource(id="r1", working_memory="new"), expected_version=0).version == 1


@pytest.mark.parametrize("scope", ["thread", "resource"])
def test_given_a_pending_observation_record_when_deleted_then_it_leaves_the_work_list_and_others_stay(
    store: MemoryStore, scope: str
) -> None:
    store.create_thread(thread())
    store.create_thread(thread(rid="r2"))
    for rid in ("r1", "r2"):
        pend(store, "t1", rid, T0)
        pend(store, None, rid, T0 + timedelta(minutes=1))
    tid = "t1" if scope == "thread" else None

    assert store.delete_observation_record("r1", tid) is True

    assert store.get_observation_record("r1", tid) is None
    assert store.delete_observation_record("r1", tid) is False
    kept = ("r1", "t1") if scope == "resource" else ("r1", None)
    assert set(store.list_observation_work(due_before=T0 + timedelta(hours=1), limit=10)) == {
        kept,
        ("r2", "t1"),
        ("r2", None),
    }
    assert store.put_observation_record(obs(tid), expected_version=0).version == 1


def test_given_a_new_thread_and_a_nonzero_expected_last_seq_when_saved_then_conflict_and_no_thread(
    store: MemoryStore,
) -> None:
    with pytest.raises(Conflict):
        store.save_messages("r1", "t1", [msg("m1")], create=thread(), expected_last_seq=3)
    assert store.get_thread("r1", "t1") is None


# transfer: export, import, migration (list_resource_ids, restore_*) --------------------------------


def all_resource_ids(store: MemoryStore, limit: int) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = store.list_resource_ids(limit=limit, cursor=cursor)
        assert len(page.ids) <= limit and len(set(page.ids)) == len(page.ids)
        ids += page.ids
        if page.next_cursor is None:
            return sorted(set(ids))
        cursor = page.next_cursor


def test_given_threads_records_and_observations_when_listing_resource_ids_then_every_owner_is_listed(
    store: MemoryStore,
) -> None:
    store.create_thread(thread("t1", "with-thread"))
    store.put_resource(Resource(id="with-record", working_memory="# notes"), expected_version=0)
    store.put_observation_record(
        ObservationRecord(scope="resource", resource_id="with-observations"), expected_version=0
    )
    store.save_messages("with-thread", "t1", [msg("m1", rid="with-thread")])
    wanted = ["with-observations", "with-record", "with-thread"]

    assert all_resource_ids(store, 1) == wanted
    assert all_resource_ids(store, 1000) == wanted


def test_given_an_empty_store_when_listing_resource_ids_then_one_empty_page(store: MemoryStore) -> None:
    page = store.list_resource_ids(limit=10)
    assert page.ids == () and page.next_cursor is None


@pytest.mark.parametrize("limit", [0, 1001, True])
def test_given_a_limit_out_of_range_when_listing_resource_ids_then_invalid_input_naming_it(
    store: MemoryStore, limit: int
) -> None:
    with pytest.raises(InvalidInput) as err:
        store.list_resource_ids(limit=limit)
    assert err.value.field == "limit" and "1000" in err.value.message


def restored_thread(store: MemoryStore) -> Thread:
    t = thread(title="Trip", metadata={"working_memory": "# thread notes"}, version=3, last_seq=7).model_copy(
        update={"updated_at": T0 + timedelta(hours=2)}
    )
    return store.restore_thread(t)


def test_given_a_thread_when_restored_then_it_reads_back_with_its_version_and_last_seq(
    store: MemoryStore,
) -> None:
    t = restored_thread(store)
    assert store.get_thread("r1", "t1") == t
    assert store.restore_thread(t) == t  # again: idempotent


def test_given_a_different_thread_of_that_id_when_restoring_then_conflict(store: MemoryStore) -> None:
    store.create_thread(thread(title="Other"))
    with pytest.raises(Conflict) as err:
        restored_thread(store)
    assert err.value.field == "thread_id"


def test_given_messages_with_gaps_when_restored_then_ids_seqs_and_times_are_kept_and_the_thread_is_not(
    store: MemoryStore,
) -> None:
    t = restored_thread(store)
    call = ToolCallPart(id="c1", name="weather", args={"city": "Oslo", "days": [1, 2.5]})
    result = ToolResultPart(tool_call_id="c1", name="weather", result={"t": -3.5})
    given = [
        msg("m2", seq=2, at=T0 + timedelta(minutes=1), metadata={"k": "v"}),
        msg("m5", seq=5, role="assistant", parts=(call,), at=T0 + timedelta(minutes=2)),
        msg("m7", seq=7, role="tool", parts=(result,), at=T0 + timedelta(minutes=3)),
    ]

    assert store.restore_messages("r1", "t1", given) == 3
    assert store.restore_messages("r1", "t1", given) == 0  # again: all stored exactly so, none written

    assert store.list_messages("r1", "t1", limit=10) == given
    assert store.get_thread("r1", "t1") == t
    assert store.get_index_marks("r1", ["m2", "m5", "m7"]) == {}
    assert [m.seq for m in store.save_messages("r1", "t1", [msg("m8")])] == [8]


def test_given_restored_and_indexed_messages_when_restored_again_then_unchanged_ones_keep_their_marks(
    store: MemoryStore,
) -> None:
    restored_thread(store)
    given = [msg(f"m{i}", seq=i, at=T0 + timedelta(minutes=i), metadata={"n": i}) for i in (1, 2, 3)]
    store.restore_messages("r1", "t1", given)
    store.set_index_marks("r1", {"m1": "fp1", "m2": "fp2", "m3": "fp3"})
    changed = given[1].model_copy(update={"metadata": {"n": 2, "edited": True}})

    written = store.restore_messages("r1", "t1", [given[0], changed, given[2]])

    assert written == 1  # only the changed message is written...
    assert store.get_index_marks("r1", ["m1", "m2", "m3"]) == {"m1": "fp1", "m3": "fp3"}  # ...and unmarked
    assert store.list_messages("r1", "t1", limit=10) == [given[0], changed, given[2]]


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ([msg("m1", seq=0)], InvalidInput),
        ([msg("m1", seq=8)], InvalidInput),
        ([msg("m1", seq=1), msg("m1", seq=2)], InvalidInput),
        ([msg("m1", seq=1, tid="t2")], InvalidInput),
        ([msg("new", seq=2)], Conflict),
        ([msg("m3", seq=4)], Conflict),
    ],
    ids=["seq-0", "past-last-seq", "repeated-id", "other-thread", "seq-held-by-another", "id-at-other-seq"],
)
def test_given_a_bad_batch_when_restoring_messages_then_refused_and_nothing_is_written(
    store: MemoryStore, given: list[Message], error: type[Exception]
) -> None:
    restored_thread(store)
    store.restore_messages("r1", "t1", [msg("held", seq=2), msg("m3", seq=3)])

    with pytest.raises(error):
        store.restore_messages("r1", "t1", given)

    assert [(m.id, m.seq) for m in store.list_messages("r1", "t1", limit=10)] == [("held", 2), ("m3", 3)]


def test_given_no_thread_when_restoring_messages_then_not_found(store: MemoryStore) -> None:
    with pytest.raises(NotFound):
        store.restore_messages("r1", "t1", [msg("m1", seq=1)])


def test_given_a_resource_when_restored_then_it_reads_back_exactly_and_a_different_one_conflicts(
    store: MemoryStore,
) -> None:
    r = Resource(
        id="r1", working_memory="# notes", metadata={"a": 1}, version=4, created_at=T0, updated_at=T0
    )
    assert store.restore_resource(r) == r
    assert store.get_resource("r1") == r
    assert store.restore_resource(r) == r
    with pytest.raises(Conflict):
        store.restore_resource(r.model_copy(update={"working_memory": "# other"}))
    assert store.put_resource(r, expected_version=4).version == 5


def test_given_observation_records_when_restored_then_they_read_back_exactly_and_pending_is_swept(
    store: MemoryStore,
) -> None:
    restored_thread(store)
    chunk = BufferedChunk(id="c1", thread_id="t1", from_seq=3, to_seq=4, observations="- x", created_at=T0)
    own = ObservationRecord(
        scope="thread",
        resource_id="r1",
        thread_id="t1",
        active_observations="- 🟢 likes tea",
        cursor={"t1": 2},
        buffered_chunks=(chunk,),
        generation_count=2,
        pending_since=T0,
        version=6,
        created_at=T0,
        updated_at=T0 + timedelta(seconds=1),
    )
    shared = ObservationRecord(
        scope="resource", resource_id="r1", cursor={"t1": 1}, version=2, created_at=T0, updated_at=T0
    )

    assert store.restore_observation_record(own) == own
    assert store.restore_observation_record(shared) == shared
    assert store.restore_observation_record(own) == own

    assert store.get_observation_record("r1", "t1") == own
    assert store.get_observation_record("r1", None) == shared
    assert store.list_observation_work(due_before=T0 + timedelta(days=1), limit=10) == [("r1", "t1")]
    with pytest.raises(Conflict):
        store.restore_observation_record(own.model_copy(update={"active_observations": "- other"}))
    with pytest.raises(NotFound):
        store.restore_observation_record(
            own.model_copy(update={"thread_id": "gone", "cursor": {}, "buffered_chunks": ()})
        )


class _WriterDuring:
    """The store, with a writer that saves two messages into ``t1`` and moves both observation cursors to
    them the first time the reader calls ``method`` (before that call reads): a live export's race, made
    to happen at one chosen read."""

    def __init__(self, store: MemoryStore, method: str) -> None:
        self.store, self.method, self.fired = store, method, False

    def __getattr__(self, name: str) -> object:
        real = getattr(self.store, name)
        if name != self.method or self.fired:
            return real

        def racing(*args: object, **kwargs: object) -> object:
            self.fired = True
            saved = self.store.save_messages("r1", "t1", [msg("late-1"), msg("late-2")])
            for thread_id in ("t1", None):
                held = self.store.get_observation_record("r1", thread_id)
                assert held is not None
                moved = held.model_copy(update={"cursor": {"t1": saved[-1].seq}})
                self.store.put_observation_record(moved, expected_version=held.version)
            return real(*args, **kwargs)

        return racing


@pytest.mark.parametrize("method", ["get_thread", "list_messages", "get_observation_record"])
def test_given_writers_during_an_export_when_the_file_is_checked_then_it_is_one_consistent_store(
    store: MemoryStore, method: str, tmp_path: object
) -> None:
    """The trial's lost migration: a thread's ``last_seq`` read before its messages, or an observation
    cursor read after them, gave a file that no import accepts. Whatever a store offers (a snapshot on
    SQLite, none on DynamoDB), the file must hold to its own invariants."""
    from pathlib import Path

    from memstack.transfer import Selection, check_file, export_jsonl, import_jsonl
    from tests.backend_support import open_backend

    store.save_messages("r1", "t1", [msg("m1"), msg("m2"), msg("m3")], create=thread())
    store.save_messages("r1", "t2", [msg("other", tid="t2")], create=thread("t2"))
    for thread_id, scope in (("t1", "thread"), (None, "resource")):
        record = ObservationRecord(scope=scope, resource_id="r1", thread_id=thread_id, cursor={"t1": 3})  # type: ignore[arg-type]
        store.put_observation_record(record, expected_version=0)
    racing = _WriterDuring(store, method)

    path = Path(str(tmp_path)) / "live.jsonl"
    lines = list(export_jsonl(racing, Selection()))  # type: ignore[arg-type]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")

    assert racing.fired
    check_file(path)  # raises InvalidInput naming the line that breaks an invariant
    with open_backend("sqlite", Path(str(tmp_path)) / "target") as target:
        import_jsonl(target.memory, path)
        moved = target.store.get_thread("r1", "t1")
        assert moved is not None
        stored = target.store.list_messages("r1", "t1", limit=100)
        assert {"m1", "m2", "m3"} <= {m.id for m in stored}
        assert all(m.seq <= moved.last_seq for m in stored)
        for thread_id in ("t1", None):
            record = target.store.get_observation_record("r1", thread_id)
            assert record is not None and record.observed_seq("t1") <= moved.last_seq
        assert target.store.get_thread("r1", "t2") is not None
