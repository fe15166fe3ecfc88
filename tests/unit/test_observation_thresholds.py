"""Threshold, buffering and activation arithmetic (spec §2.9.1, §2.9.4 steps 3 and 6)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memstack.config import ObservationalMemoryOptions
from memstack.model import BufferedChunk
from memstack.observation.thresholds import Thresholds, activation_count, resolve, should_buffer

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def chunks(*message_tokens: int) -> list[BufferedChunk]:
    out, seq = [], 0
    for i, tokens in enumerate(message_tokens):
        out.append(
            BufferedChunk(
                id=f"c{i}",
                thread_id="t",
                from_seq=seq + 1,
                to_seq=seq + 10,
                observations="x",
                message_tokens=tokens,
                created_at=T0,
            )
        )
        seq += 10
    return out


def test_defaults_resolve_to_mastras_points() -> None:
    t = resolve(ObservationalMemoryOptions())
    assert t == Thresholds(
        message_tokens=30_000,
        buffer_tokens=6_000,
        floor=6_000,
        block_after=36_000,
        observation_tokens=40_000,
        reflection_buffer_at=20_000,
        reflection_block_after=48_000,
    )


def test_resource_scope_and_false_turn_buffering_off() -> None:
    assert resolve(ObservationalMemoryOptions(scope="resource")).buffer_tokens == 0
    t = resolve(ObservationalMemoryOptions.model_validate({"observation": {"buffer_tokens": False}}))
    assert t.buffer_tokens == 0 and t.reflection_buffer_at == 0


def test_absolute_values_and_tokens_to_keep() -> None:
    om = ObservationalMemoryOptions.model_validate(
        {
            "observation": {
                "message_tokens": 10_000,
                "buffer_tokens": 1_500,
                "buffer_activation": 2_000,
                "block_after": 15_000,
            }
        }
    )
    t = resolve(om)
    assert (t.buffer_tokens, t.floor, t.block_after) == (1_500, 2_000, 15_000)


def test_share_token_budget_grows_into_unused_observation_budget() -> None:
    om = ObservationalMemoryOptions.model_validate(
        {"share_token_budget": True, "observation": {"buffer_tokens": False}}
    )
    assert resolve(om, observation_tokens_now=0).message_tokens == 70_000
    assert resolve(om, observation_tokens_now=25_000).message_tokens == 45_000
    assert resolve(om, observation_tokens_now=60_000).message_tokens == 30_000


@pytest.mark.parametrize(
    ("pending", "last", "due"),
    [
        (5_999, 0, False),
        (6_000, 0, True),
        (11_000, 6_000, False),
        (12_000, 6_000, True),
        (30_000, 24_000, False),  # at the threshold: activation's job, not buffering's
        (0, 0, False),
    ],
)
def test_buffer_boundaries(pending: int, last: int, due: bool) -> None:
    assert should_buffer(pending, last, resolve(ObservationalMemoryOptions())) is due


def test_interval_halves_close_to_the_threshold() -> None:
    t = resolve(ObservationalMemoryOptions())
    # 30,000 − 1.1 × 6,000 = 23,400: from there the interval is 3,000
    assert should_buffer(24_000, 23_500, t) is True
    assert should_buffer(20_500, 18_100, t) is False  # below: 6,000 steps, same interval


def test_activation_takes_the_shortest_prefix_reaching_the_target() -> None:
    t = resolve(ObservationalMemoryOptions())
    # pending 30,000, floor 6,000: target 24,000
    assert activation_count(chunks(6_000, 6_000, 6_000, 6_000, 5_000), 30_000, t) == 4
    # 30k overshoots the 24k target by 6k (> 0.95 × 6,000): the 20k prefix under it is taken
    assert activation_count(chunks(10_000, 10_000, 10_000), 30_000, t) == 2
    assert activation_count([], 30_000, t) == 0


def test_activation_refuses_big_overshoot_and_falls_back_under_target() -> None:
    t = resolve(ObservationalMemoryOptions())
    # 12k then 18k: the 30k prefix overshoots 24k by 6k ≤ 5.7k? no (> 0.95 × 6,000): take the 12k prefix
    assert activation_count(chunks(12_000, 18_000), 30_000, t) == 1
    # force_max (above block_after) prefers the over-target boundary
    assert activation_count(chunks(12_000, 18_000), 30_000, t, force_max=True) == 2


def test_activation_keeps_at_least_min_1000_floor() -> None:
    t = resolve(ObservationalMemoryOptions())
    # pending 30,000: a prefix of 29,500 leaves 500 < 1,000
    assert activation_count(chunks(24_000, 5_500), 30_000, t) == 1
    assert activation_count(chunks(29_500), 30_000, t) == 0
    assert activation_count(chunks(29_500), 30_000, t, force_max=True) == 1


def test_activation_below_floor_takes_nothing() -> None:
    t = resolve(ObservationalMemoryOptions())
    assert activation_count(chunks(3_000), 5_000, t) == 0
    assert activation_count(chunks(1_000, 1_000), 8_000, t) == 2  # all under the 2,000 target
