"""A message's keyword text carries the previous message's text (docs/adr/0015-contextual-keyword-text.md):
a reply is found by the words of the turn it answers, on the embedded default and on the AWS backend
(DynamoDB under moto, OpenSearch on its double in both modes) with the same hits; an edit or a deletion of
the previous message refreshes it, so no deleted text stays searchable; marks of the earlier index text read
as stale and ``memstack reindex`` rewrites them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstack import Memory
from memstack.adapters.search_text import keyword_text
from memstack.config import SemanticRecallOptions
from memstack.model import Message, TextPart
from memstack.recall import engine
from memstack.recall.engine import keyword_context
from memstack.transfer.reindex import reindex
from memstack.transfer.walk import Selection
from tests.backend_support import BACKENDS, Backend, open_backend

R, T = "r1", "t1"
KEYWORD = {"semantic_recall": {"mode": "keyword", "top_k": 5, "message_range": 0, "scope": "resource"}}
CHAT = [
    "What did you research last week?",
    "Adoption agencies, mostly.",
    "Why those?",
    "I want to give a child a loving home.",
    "How is the garden doing?",
    "The tomatoes are finally red.",
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with open_backend(request.param, tmp_path) as opened:
        yield opened


def found(memory: Memory, query: str) -> list[str]:
    """The texts of the keyword hits for ``query``, best first."""
    hits = memory.recall(thread_id=T, resource_id=R, query=query, options=KEYWORD).hits
    by_id = {m.id: m for m in memory.list_messages(thread_id=T, resource_id=R, limit=100).messages}
    return [text_of(by_id[h.message_id]) for h in hits]


def text_of(message: Message) -> str:
    return "".join(p.text for p in message.parts if isinstance(p, TextPart))


def save_chat(memory: Memory) -> list[Message]:
    return memory.save_messages(
        thread_id=T,
        resource_id=R,
        messages=[{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(CHAT)],
    )


def test_given_a_reply_when_searching_the_words_of_the_turn_it_answers_then_the_reply_is_found(
    backend: Backend,
) -> None:
    save_chat(backend.memory)

    texts = found(backend.memory, "research")

    assert "Adoption agencies, mostly." in texts, "the reply is indexed with the question it answers"
    assert texts[0] == CHAT[0], "the turn holding the word itself stays first (shorter keyword text)"
    assert found(backend.memory, "tomatoes") == [CHAT[5]], "a message is not indexed with the one after it"


def test_given_one_conversation_when_searched_on_every_backend_then_the_keyword_hits_are_the_same(
    tmp_path: Path,
) -> None:
    queries = ["research", "adoption child", "garden tomatoes", "why loving home", "week"]
    seen: dict[str, list[list[str]]] = {}
    for name in BACKENDS:
        with open_backend(name, tmp_path / name) as opened:
            save_chat(opened.memory)
            seen[name] = [found(opened.memory, q) for q in queries]

    assert seen["sqlite"][0], "the queries find something"
    for name in BACKENDS[1:]:
        assert seen[name] == seen["sqlite"], name


def test_given_a_message_saved_in_its_own_batch_when_searched_then_its_context_was_read_from_the_store(
    backend: Backend,
) -> None:
    memory = backend.memory
    memory.save_messages(thread_id=T, resource_id=R, messages=["Which city did you move to?"])
    memory.save_messages(thread_id=T, resource_id=R, messages=[{"role": "assistant", "content": "Lisbon!"}])

    assert "Lisbon!" in found(memory, "city")


def test_given_the_previous_message_edited_when_searching_then_the_reply_follows_its_new_text(
    backend: Backend,
) -> None:
    memory = backend.memory
    saved = save_chat(memory)

    memory.save_messages(
        thread_id=T,
        resource_id=R,
        messages=[{"id": saved[0].id, "role": "user", "content": "What did you bake?"}],
    )

    assert "Adoption agencies, mostly." not in found(memory, "research"), "the old question's words are gone"
    assert "Adoption agencies, mostly." in found(memory, "bake")
    health = memory.index_health(resource_id=R)
    assert (health.indexed, health.stale) == (len(CHAT), 0)


def test_given_the_previous_message_deleted_when_searching_its_words_then_nothing_is_found(
    backend: Backend,
) -> None:
    memory = backend.memory
    saved = save_chat(memory)

    memory.delete_messages(resource_id=R, message_ids=[saved[0].id, saved[2].id])

    assert found(memory, "research") == [], "a deleted message's words do not stay in its successor's text"
    assert found(memory, "why") == []
    assert "I want to give a child a loving home." in found(memory, "adoption"), "context from before the gap"
    health = memory.index_health(resource_id=R)
    assert (health.indexed, health.stale) == (len(CHAT) - 2, 0)


WORDS = ["walrus", "trumpet", "glacier", "lantern", "saffron", "harbour"]
"""One word per message of a thread, found in no other message's own text."""


@pytest.mark.parametrize(
    "removed", [{0}, {2}, {5}, {1, 2}, {0, 1, 2}, {1, 3}, {3, 4, 5}, {0, 5}, {0, 2, 4}], ids=str
)
def test_given_messages_removed_from_the_store_when_the_index_is_told_then_their_words_find_nothing(
    backend: Backend, removed: set[int]
) -> None:
    """A TTL expiry (or any removal the index hears of after the store, e.g. a stream's REMOVE records) has
    no ``delete_messages`` call: ``index_removed`` with the messages' places re-indexes what now follows
    each, so no removed text stays searchable through a successor's keyword text."""
    memory = backend.memory
    saved = memory.save_messages(thread_id=T, resource_id=R, messages=[f"the {word} story" for word in WORDS])
    gone = [saved[i] for i in sorted(removed)]
    backend.store.delete_messages(R, [m.id for m in gone])  # the store alone, as DynamoDB's TTL does

    memory.index_removed(
        resource_id=R, message_ids=[m.id for m in gone], positions=[(m.thread_id, m.seq) for m in gone]
    )

    for i, word in enumerate(WORDS):
        hits = found(memory, word)
        if i in removed:
            assert hits == [], f"{word} (removed message {i}) after removing {sorted(removed)}"
        else:
            assert f"the {word} story" in hits, f"{word} (message {i}) after removing {sorted(removed)}"
    health = memory.index_health(resource_id=R)
    assert (health.indexed, health.stale) == (len(WORDS) - len(removed), 0)


def test_given_positions_that_are_not_places_when_told_then_invalid_input_naming_them(
    tmp_path: Path,
) -> None:
    from memstack.errors import InvalidInput

    with Memory.local(tmp_path / "m.db", embedder="hash", background="inline") as memory:
        for bad, field in (
            ([("t1", -1)], "positions[0].seq"),
            ([("t1", True)], "positions[0].seq"),
            ([("t1", "3")], "positions[0].seq"),
            ([("t1",)], "positions[0]"),
            (["t1"], "positions[0]"),
            ([("", 2)], "positions[0].thread_id"),
        ):
            with pytest.raises(InvalidInput) as caught:
                memory.index_removed(resource_id=R, message_ids=["m1"], positions=bad)  # type: ignore[arg-type]
            assert caught.value.field == field


def test_given_marks_of_the_earlier_index_text_when_checked_then_stale_and_reindex_mends_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory.local(tmp_path / "m.db", embedder="hash", background="inline") as memory:
        monkeypatch.setattr(engine, "INDEX_TEXT_VERSION", 1)
        save_chat(memory)
        monkeypatch.setattr(engine, "INDEX_TEXT_VERSION", 2)

        before = memory.index_health(resource_id=R)
        report = reindex(memory, Selection(resource_id=R))
        after = memory.index_health(resource_id=R)

    assert (before.indexed, before.stale) == (0, len(CHAT))
    assert report.chunks == len(CHAT)
    assert (after.indexed, after.stale) == (len(CHAT), 0)


def test_keyword_context_is_the_last_chunk_of_the_previous_messages_text() -> None:
    options = SemanticRecallOptions(chunk_chars=256)
    at = datetime(2024, 5, 1, tzinfo=UTC)
    long = Message(
        id="m1",
        thread_id=T,
        resource_id=R,
        role="user",
        parts=(TextPart(text="word " * 100 + "tail"),),
        created_at=at,
    )

    context = keyword_context(long, options)

    assert context.endswith("tail") and len(context) <= 256
    assert keyword_context(None, options) == ""
    assert keyword_text("reply", at, "question") == "question\nreply\nMay 1 2024"
    assert keyword_text("reply", at) == "reply\nMay 1 2024"


@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
def test_given_top_k_and_message_range_at_their_limits_when_recalling_then_the_hits_come_back(
    backend: Backend, mode: str
) -> None:
    memory = backend.memory
    save_chat(memory)
    limits = {"semantic_recall": {"mode": mode, "top_k": 100, "message_range": 50, "scope": "resource"}}

    found = memory.recall(thread_id="elsewhere", resource_id=R, query="adoption agencies", options=limits)
    context = memory.context(
        thread_id="elsewhere", resource_id=R, message="adoption agencies", options=limits
    )

    assert found.hits and len(context.recalled) == len(CHAT)
