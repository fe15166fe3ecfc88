"""A save and a ``delete_thread`` of the same thread, racing: whichever order they take effect in, the save
succeeds (a save creates its thread when missing) and nothing of the deleted thread comes back — on the
embedded default and on the AWS backend. The race is made deterministic: the delete lands between the save
reading the thread and writing to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstack import Conflict
from tests.backend_support import BACKENDS, Backend, open_backend

R, T = "user-race", "t-race"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with open_backend(request.param, tmp_path) as opened:
        yield opened


def delete_after_the_next_read(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make the store's next ``get_thread`` delete the thread (``Memory.delete_thread``) right after reading
    it, once; returns the list the deleted thread's id is appended to."""
    read = backend.store.get_thread
    raced: list[str] = []

    def read_then_deleted(resource_id: str, thread_id: str) -> Any:
        found = read(resource_id, thread_id)
        if not raced:
            raced.append(thread_id)
            backend.memory.delete_thread(thread_id=thread_id, resource_id=resource_id)
        return found

    monkeypatch.setattr(backend.store, "get_thread", read_then_deleted)
    return raced


def test_given_the_thread_deleted_after_a_save_read_it_then_the_save_makes_the_thread_anew(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = backend.memory
    memory.save_messages(thread_id=T, resource_id=R, messages=["an old message about sourdough"])
    raced = delete_after_the_next_read(backend, monkeypatch)

    saved = memory.save_messages(thread_id=T, resource_id=R, messages=["a new message about bagels"])
    monkeypatch.undo()

    assert raced == [T]
    assert [m.seq for m in saved] == [1]
    page = memory.list_messages(thread_id=T, resource_id=R)
    assert [m.text for m in page.messages] == ["a new message about bagels"]
    hits = memory.recall(thread_id=T, resource_id=R, query="sourdough bagels").hits
    assert [h.message_id for h in hits] == [saved[0].id]


def test_given_the_thread_deleted_after_the_save_read_it_with_an_expected_seq_then_conflict(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = backend.memory
    memory.save_messages(thread_id=T, resource_id=R, messages=["first"])
    delete_after_the_next_read(backend, monkeypatch)

    with pytest.raises(Conflict):
        memory.save_messages(thread_id=T, resource_id=R, messages=["second"], expected_last_seq=1)
