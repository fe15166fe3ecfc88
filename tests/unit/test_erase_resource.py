"""``Memory.erase_resource``: nothing of the resource remains in any store, on the embedded default (one
SQLite file) and on the AWS backend (DynamoDB + S3 under moto, OpenSearch on its double in both modes);
another resource is untouched; a second erasure reports zeros; a failed erasure is finished by the next.

What remains is found by ``tests.erase_support.remnants``, which reads everything stored (every table,
item, object and document), not the adapters' idea of what they wrote.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memstack import EraseReceipt, Memory
from memstack.errors import InvalidInput, Unavailable
from memstack.model import ObservationRecord
from tests.backend_support import BACKENDS, open_backend
from tests.erase_support import remnants
from tests.opensearch_double import OpenSearchDouble

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
BIG = "a long letter about the harbour " * 4_000  # ~128 KB: over the DynamoDB store's inline limit → S3
WM_THREAD = {"working_memory": {"enabled": True, "scope": "thread"}}
WM_RESOURCE = {"working_memory": {"enabled": True, "scope": "resource"}}


@dataclass
class Backend:
    memory: Memory
    double: OpenSearchDouble | None = None

    def __post_init__(self) -> None:
        self.store = self.memory.store  # the real one, whatever a test wraps around it

    def remnants(self, resource_id: str) -> list[str]:
        return remnants(resource_id, store=self.store, double=self.double)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with open_backend(request.param, tmp_path) as opened:
        yield Backend(opened.memory, opened.double)


def fill(memory: Memory, rid: str) -> None:
    """Two threads with messages (one large), thread- and resource-scope working memory, thread- and
    resource-scope observation records (one with pending work), and their index documents."""
    memory.create_thread(resource_id=rid, thread_id="trip", title="Trip", metadata={"k": "v"})
    memory.save_messages(
        resource_id=rid,
        thread_id="trip",
        messages=[
            {"id": "m1", "role": "user", "content": "I am flying to Lisbon on Friday"},
            {"id": "m2", "role": "assistant", "content": "Noted: Lisbon, Friday."},
            {"id": "m3", "role": "user", "content": BIG},
        ],
    )
    memory.save_messages(
        resource_id=rid, thread_id="diet", messages=[{"id": "d1", "role": "user", "content": "I am vegan"}]
    )
    memory.update_working_memory(
        thread_id="trip", resource_id=rid, working_memory="# Trip\n- Lisbon", options=WM_THREAD
    )
    memory.update_working_memory(
        thread_id="trip", resource_id=rid, working_memory="# User\n- vegan", options=WM_RESOURCE
    )
    store = memory.store
    store.put_observation_record(
        ObservationRecord(
            scope="thread",
            resource_id=rid,
            thread_id="trip",
            active_observations="* flies Friday",
            pending_since=T0,
        ),
        expected_version=0,
    )
    store.put_observation_record(
        ObservationRecord(scope="thread", resource_id=rid, thread_id="diet", active_observations="* vegan"),
        expected_version=0,
    )
    store.put_observation_record(
        ObservationRecord(scope="resource", resource_id=rid, active_observations="* vegan, flies"),
        expected_version=0,
    )


def ids() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"erase-a-{suffix}", f"erase-b-{suffix}"


def two_filled(backend: Backend) -> tuple[str, str, list[str]]:
    """Two full resources, ``a`` to erase and ``b`` to keep, and what is stored of ``b``."""
    a, b = ids()
    fill(backend.memory, a)
    fill(backend.memory, b)
    return a, b, sorted(backend.remnants(b))


def test_given_two_full_resources_when_one_is_erased_then_nothing_of_it_remains_and_the_other_is_untouched(
    backend: Backend,
) -> None:
    memory = backend.memory
    a, b, before_b = two_filled(backend)
    assert backend.remnants(a), "the enumerator must see the resource before the erasure"

    receipt = memory.erase_resource(resource_id=a)

    assert backend.remnants(a) == []
    assert sorted(backend.remnants(b)) == before_b
    counts = receipt.counts
    assert receipt.resource_id == a
    assert {k: counts[k] for k in ("threads", "messages", "working_memory", "observation_records")} == {
        "threads": 2,
        "messages": 4,
        "working_memory": 1,
        "observation_records": 3,  # each thread's own (trip, diet) and the resource's
    }
    assert counts["index_documents"] >= 4  # one chunk a message at least; the large one has several
    assert memory.store.list_observation_work(due_before=T0, limit=10) == [(b, "trip")]
    assert [t.id for t in memory.list_threads(resource_id=b).threads] == ["diet", "trip"]
    hits = memory.recall(resource_id=b, thread_id="diet", query="Lisbon Friday").hits
    assert {h.message_id for h in hits} >= {"m1"}


def test_given_a_full_thread_when_deleted_then_nothing_keyed_by_it_remains_in_any_store(
    backend: Backend,
) -> None:
    a, _ = ids()
    fill(backend.memory, a)
    assert remnants(a, store=backend.store, double=backend.double, thread_id="trip")

    backend.memory.delete_thread(thread_id="trip", resource_id=a)

    assert remnants(a, store=backend.store, double=backend.double, thread_id="trip") == []
    assert remnants(a, store=backend.store, double=backend.double, thread_id="diet")


def test_given_an_erased_resource_when_erased_again_then_every_count_is_zero(backend: Backend) -> None:
    a, _ = ids()
    fill(backend.memory, a)
    backend.memory.erase_resource(resource_id=a)

    again = backend.memory.erase_resource(resource_id=a)

    assert again == EraseReceipt(resource_id=a)
    assert again.to_dict() == {
        "resource_id": a,
        "counts": {
            "threads": 0,
            "messages": 0,
            "working_memory": 0,
            "observation_records": 0,
            "index_documents": 0,
        },
    }


def test_given_a_resource_that_never_existed_when_erased_then_zeros() -> None:
    with Memory.local(":memory:", embedder="hash") as memory:
        assert memory.erase_resource(resource_id="nobody") == EraseReceipt(resource_id="nobody")


@pytest.mark.parametrize("bad", ["", " ", "x" * 257, "a\nb"])
def test_given_a_bad_resource_id_when_erased_then_invalid_input(bad: str) -> None:
    with Memory.local(":memory:", embedder="hash") as memory, pytest.raises(InvalidInput) as caught:
        memory.erase_resource(resource_id=bad)
    assert caught.value.field == "resource_id"


class FailsOnce:
    """A store that delegates to ``inner`` and raises ``Unavailable`` once, on the ``nth`` call of
    ``method`` (a backend failing midway through an erasure)."""

    def __init__(self, inner: Any, method: str, nth: int) -> None:
        self.inner, self.method, self.left = inner, method, nth

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != self.method:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.left -= 1
            if self.left == 0:
                raise Unavailable("the store failed midway (injected)")
            return attr(*args, **kwargs)

        return call


@pytest.mark.parametrize(
    ("method", "nth"),
    [("erase_thread", 2), ("delete_observation_record", 1), ("delete_resource", 1)],
    ids=["second-thread", "resource-record", "working-memory"],
)
def test_given_an_erasure_that_failed_midway_when_called_again_then_it_finishes(
    backend: Backend, method: str, nth: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = backend.memory
    a, b, before_b = two_filled(backend)
    real = memory.store
    failing = FailsOnce(real, method, nth)
    with monkeypatch.context() as patch:
        patch.setattr(real, method, getattr(failing, method))
        with pytest.raises(Unavailable):
            memory.erase_resource(resource_id=a)
    assert backend.remnants(a), "the injected failure must leave part of the resource"

    second = memory.erase_resource(resource_id=a)

    assert backend.remnants(a) == []
    assert sorted(backend.remnants(b)) == before_b
    assert sum(second.counts.values()) > 0
    assert memory.erase_resource(resource_id=a) == EraseReceipt(resource_id=a)
