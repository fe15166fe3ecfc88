"""Observational-memory options (spec §2.9.1) and the observation record (spec §2.9.2): defaults,
ranges, cross-field rules, size limits."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from memstack.config import MemoryOptions, ObservationalMemoryOptions
from memstack.errors import InvalidInput, PayloadTooLarge
from memstack.model import (
    MAX_BUFFERED_CHUNKS,
    MAX_OBSERVATION_RECORD_BYTES,
    BufferedChunk,
    ObservationRecord,
)

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def om(data: dict[str, Any]) -> ObservationalMemoryOptions:
    return MemoryOptions.parse({"observational_memory": data}).observational_memory


def test_given_no_options_then_observational_memory_is_disabled_with_mastras_defaults() -> None:
    o = MemoryOptions.parse({}).observational_memory
    assert o.enabled is False and o.scope == "thread"
    obs, ref = o.observation, o.reflection
    assert (obs.message_tokens, obs.buffer_tokens, obs.buffer_activation, obs.block_after) == (
        30_000,
        0.2,
        0.8,
        1.2,
    )
    assert (ref.observation_tokens, ref.buffer_activation, ref.block_after) == (40_000, 0.5, 1.2)
    assert obs.previous_observer_tokens == 2_000 and obs.max_tokens_per_batch == 10_000
    assert (obs.resolved_buffer_tokens, obs.retention_floor, obs.resolved_block_after) == (
        6_000,
        6_000,
        36_000,
    )
    assert ref.resolved_block_after == 48_000
    assert (obs.model_settings.temperature, ref.model_settings.temperature) == (0.3, 0.0)
    assert obs.continuation_hints.current_task and ref.continuation_hints.suggested_response
    assert o.retrieval.enabled is False and o.buffering is True and o.effective_obscure_thread_ids is False


def test_given_true_or_an_object_then_enabled_and_false_in_the_object_disables() -> None:
    assert MemoryOptions.parse({"observational_memory": True}).observational_memory.enabled
    assert om({"scope": "thread"}).enabled
    assert not om({"enabled": False}).enabled
    base = MemoryOptions.parse({})
    assert base.merged(
        {"observational_memory": {"observation": {"message_tokens": 1_000}}}
    ).observational_memory.enabled
    assert not base.merged({"observational_memory": False}).observational_memory.enabled


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"observation": {"message_tokens": 0}}, "observational_memory.observation.message_tokens"),
        ({"reflection": {"observation_tokens": -1}}, "observational_memory.reflection.observation_tokens"),
        ({"observation": {"buffer_tokens": 0}}, "observational_memory.observation.buffer_tokens"),
        ({"observation": {"buffer_tokens": True}}, "observational_memory.observation.buffer_tokens"),
        ({"observation": {"buffer_activation": 0}}, "observational_memory.observation.buffer_activation"),
        ({"observation": {"buffer_activation": 1.5}}, "observational_memory.observation.buffer_activation"),
        ({"reflection": {"buffer_activation": 1.5}}, "observational_memory.reflection.buffer_activation"),
        ({"observation": {"block_after": 0.9}}, "observational_memory.observation"),
        ({"reflection": {"block_after": 0.5}}, "observational_memory.reflection"),
        (
            {"observation": {"previous_observer_tokens": -1}},
            "observational_memory.observation.previous_observer_tokens",
        ),
        ({"observation": {"message_tokens": "30000"}}, "observational_memory.observation.message_tokens"),
        ({"activate_after_idle": "soon"}, "observational_memory.activate_after_idle"),
        ({"unknown": 1}, "observational_memory.unknown"),
    ],
)
def test_given_an_out_of_range_option_then_invalid_input_naming_it(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        om(data)
    assert err.value.field == field


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"model": "a", "observation": {"model": "b"}}, "sets both agents"),
        ({"scope": "resource", "observation": {"buffer_tokens": 0.3}}, "disables async buffering"),
        ({"share_token_budget": True}, "requires observation.buffer_tokens: false"),
        ({"observation": {"buffer_tokens": 30_000}}, "fewer than observation.message_tokens"),
        ({"observation": {"block_after": 20_000}}, "must exceed its threshold"),
        ({"reflection": {"block_after": 40_000}}, "must exceed its threshold"),
        ({"observation": {"buffer_activation": 40_000}}, "fewer than message_tokens"),
    ],
)
def test_given_options_breaking_a_cross_field_rule_then_a_clear_error(
    data: dict[str, Any], words: str
) -> None:
    with pytest.raises(InvalidInput, match=words):
        om(data)


def test_given_resource_scope_then_buffering_is_off_and_thread_ids_are_obscured() -> None:
    o = om({"scope": "resource"})
    assert o.buffering is False and o.effective_obscure_thread_ids is True
    assert om({"scope": "resource", "obscure_thread_ids": False}).effective_obscure_thread_ids is False
    assert om({"scope": "resource", "observation": {"buffer_tokens": False}}).buffering is False
    merged = MemoryOptions.parse({"observational_memory": {"scope": "resource"}}).merged(
        {"observational_memory": {"reflection": {"observation_tokens": 50_000}}}
    )
    assert merged.observational_memory.reflection.observation_tokens == 50_000


def test_given_absolute_values_then_they_resolve_as_tokens() -> None:
    obs = om(
        {"observation": {"buffer_tokens": 5_000, "buffer_activation": 4_000, "block_after": 45_000}}
    ).observation
    assert (obs.resolved_buffer_tokens, obs.retention_floor, obs.resolved_block_after) == (
        5_000,
        4_000,
        45_000,
    )
    assert om({"share_token_budget": True, "observation": {"buffer_tokens": False}}).share_token_budget


def test_given_models_then_they_resolve_top_level_own_other_default() -> None:
    assert om({}).models("gpt") == ("gpt", "gpt")
    assert om({"model": "m"}).models("gpt") == ("m", "m")
    assert om({"observation": {"model": "o"}}).models("gpt") == ("o", "o")
    assert om({"observation": {"model": "o"}, "reflection": {"model": "r"}}).models("gpt") == ("o", "r")


@pytest.mark.parametrize(
    ("value", "ms"), [(90_000, 90_000), ("5m", 300_000), ("1hr", 3_600_000), ("auto", "auto")]
)
def test_given_activate_after_idle_then_milliseconds(value: Any, ms: Any) -> None:
    assert om({"activate_after_idle": value}).activate_after_idle_ms == ms


# the record -------------------------------------------------------------------------------------


def chunk(cid: str, lo: int, hi: int, tid: str = "t1") -> BufferedChunk:
    return BufferedChunk(id=cid, thread_id=tid, from_seq=lo, to_seq=hi, observations="o", created_at=T0)


def test_given_a_thread_record_then_scope_owner_and_cursor_rules_hold() -> None:
    r = ObservationRecord(
        scope="thread",
        resource_id="r1",
        thread_id="t1",
        cursor={"t1": 3},
        buffered_chunks=(chunk("a", 4, 6), chunk("b", 8, 9)),
    )
    assert r.observed_seq("t1") == 3 and r.observed_seq("t9") == 0
    for bad in (
        {"scope": "thread", "thread_id": None},
        {"scope": "resource", "thread_id": "t1"},
        {"scope": "thread", "thread_id": "t1", "cursor": {"t2": 1}},
        {"scope": "thread", "thread_id": "t1", "cursor": {"t1": 5}, "buffered_chunks": (chunk("a", 4, 6),)},
        {"scope": "thread", "thread_id": "t1", "buffered_chunks": (chunk("a", 4, 6), chunk("b", 6, 7))},
        {"scope": "thread", "thread_id": "t1", "buffered_chunks": (chunk("a", 1, 2, tid="t2"),)},
    ):
        with pytest.raises(ValidationError):
            ObservationRecord(resource_id="r1", **bad)
    with pytest.raises(ValidationError):
        chunk("a", 5, 4)


def test_given_a_resource_record_then_its_cursor_maps_threads_to_seqs() -> None:
    r = ObservationRecord(
        scope="resource",
        resource_id="r1",
        cursor={"t1": 3, "t2": 7},
        buffered_chunks=(chunk("a", 8, 9, "t2"), chunk("b", 1, 2, "t3")),
    )
    assert (r.observed_seq("t2"), r.observed_seq("t3")) == (7, 0)


def test_given_an_oversized_record_then_payload_too_large_names_the_limit() -> None:
    r = ObservationRecord(
        scope="thread",
        resource_id="r1",
        thread_id="t1",
        active_observations="x" * MAX_OBSERVATION_RECORD_BYTES,
    )
    with pytest.raises(PayloadTooLarge, match="MAX_OBSERVATION_RECORD_BYTES"):
        r.check_size()
    with pytest.raises(ValidationError):
        ObservationRecord(
            scope="resource",
            resource_id="r1",
            buffered_chunks=tuple(chunk(f"c{i}", i + 1, i + 1) for i in range(MAX_BUFFERED_CHUNKS + 1)),
        )
    with pytest.raises(ValidationError):
        ObservationRecord(scope="resource", resource_id="r1", active_observations="\ud800")
