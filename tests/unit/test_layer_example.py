"""Adding a layer is a package with a ``Layer`` plus one line in ``default_layers`` (docs/architecture.md
"Add a layer"): this tiny layer shows the date to the model and keeps a per-thread tally of saved
messages, and it is told about every lifecycle event like the built-in ones."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from memstack import Memory
from memstack.config import MemoryOptions
from memstack.context import SystemMessage
from memstack.layers import Contribution, LayerBase, ThreadCloned, ThreadDeleted, Turn, TurnReads, defaults
from memstack.model import Message, Thread
from memstack.scope import Scope


class TodayLayer(LayerBase):
    """Shows today's date; counts saved messages per thread; forgets a thread when it is deleted."""

    name = "today"

    def __init__(self) -> None:
        self.saved: Counter[str] = Counter()
        self.events: list[str] = []

    def contribute(self, turn: Turn, reads: TurnReads) -> Contribution:
        return Contribution(system=[SystemMessage(f"Today is {turn.now:%Y-%m-%d}.", "instructions")])

    def after_save(self, thread: Thread, options: MemoryOptions, saved: Sequence[Message]) -> None:
        self.saved[thread.id] += len(saved)

    def on_thread_deleted(self, event: ThreadDeleted) -> Mapping[str, int]:
        self.events.append(f"deleted {event.scope.thread}")
        return {"tallies": int(self.saved.pop(event.scope.thread, 0) > 0)}

    def on_thread_cloned(self, event: ThreadCloned) -> None:
        self.events.append(f"cloned {event.source.id} -> {event.clone.id}")

    def on_resource_erased(self, scope: Scope, options: MemoryOptions) -> Mapping[str, int]:
        self.events.append(f"erased {scope.resource_id}")
        return {}


@pytest.fixture
def today(monkeypatch: pytest.MonkeyPatch) -> TodayLayer:
    layer = TodayLayer()
    built = defaults.default_layers

    def with_today(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
        return (*built(*args, **kwargs), layer)  # the one line a new layer adds to the tuple

    monkeypatch.setattr(defaults, "default_layers", with_today)
    monkeypatch.setattr("memstack.memory.default_layers", with_today)
    return layer


def test_the_built_in_layers_run_in_the_documented_order() -> None:
    with Memory.local(":memory:", "hash") as memory:
        assert [layer.name for layer in memory.layers] == [
            "message_history",
            "working_memory",
            "semantic_recall",
            "observational_memory",
        ]


def test_given_a_fifth_layer_when_a_turn_is_assembled_then_it_contributes_after_the_others(
    today: TodayLayer,
) -> None:
    with Memory.local(":memory:", "hash", working_memory={"enabled": True}) as memory:
        memory.save_messages(thread_id="t1", resource_id="r1", messages=["hello", "hi there"])
        ctx = memory.context(thread_id="t1", resource_id="r1", message="what day is it?")
        assert [s.kind for s in ctx.system] == ["working_memory", "instructions"]
        assert ctx.system[-1].text.startswith("Today is ")
        assert today.saved["t1"] == 2


def test_given_a_fifth_layer_when_threads_live_and_die_then_it_hears_of_each_event(today: TodayLayer) -> None:
    with Memory.local(":memory:", "hash") as memory:
        memory.save_messages(thread_id="t1", resource_id="r1", messages=["hello"])
        memory.clone_thread(source_thread_id="t1", resource_id="r1", new_thread_id="t2")
        memory.delete_thread(thread_id="t1", resource_id="r1")
        receipt = memory.erase_resource(resource_id="r1")
        assert today.events == ["cloned t1 -> t2", "deleted t1", "deleted t2", "erased r1"]
        assert receipt.counts["tallies"] == 1 and receipt.counts["threads"] == 1
