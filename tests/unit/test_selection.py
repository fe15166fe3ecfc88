"""``selection.count_th_largest`` gives exactly what a partition of the whole array gives: the same floor
and every position reaching it, on random arrays with ties, in orders that defeat a strided sample, and
at sizes on both sides of the sampling threshold."""

from __future__ import annotations

import numpy as np
import pytest

from memstack.adapters.sqlite.selection import SAMPLE_MIN_FACTOR, count_th_largest


def _plain(values: np.ndarray, count: int) -> tuple[float, np.ndarray]:
    floor = float(np.partition(values, len(values) - count)[len(values) - count])
    return floor, np.flatnonzero(values >= floor)


def _orders(values: np.ndarray) -> list[np.ndarray]:
    """The values shuffled, ascending (the largest at the end, between sample points), descending, and
    with the largest on positions the stride skips."""
    ascending = np.sort(values)
    off_stride = values.copy()
    off_stride[1::2] = np.sort(values)[len(values) - len(off_stride[1::2]) :]
    return [values, ascending, ascending[::-1].copy(), off_stride]


@pytest.mark.parametrize("seed", range(12))
def test_given_random_scores_with_ties_when_selecting_then_the_floor_and_positions_equal_a_full_partition(
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 40_000))
    # Few distinct values make large tie groups; BM25 sums of short chunks tie this way.
    distinct = int(rng.integers(1, 60)) if seed % 2 else n
    values = rng.choice(rng.random(distinct) * 10, size=n)
    for count in (1, 2, 17, 40, 101, n - 1):
        if count >= n:
            continue
        for ordered in _orders(values):
            floor, positions = count_th_largest(ordered, count)
            expected_floor, expected_positions = _plain(ordered, count)
            assert floor == expected_floor
            np.testing.assert_array_equal(positions, expected_positions)
            assert len(positions) >= count


def test_given_an_array_above_the_sampling_threshold_when_selecting_then_the_sample_path_is_exact() -> None:
    count = 40
    values = np.random.default_rng(7).random(SAMPLE_MIN_FACTOR * count * 4)
    values[::7] = values.max()  # a tie group of the largest value spread over every stride
    floor, positions = count_th_largest(values, count)
    expected_floor, expected_positions = _plain(values, count)
    assert floor == expected_floor
    np.testing.assert_array_equal(positions, expected_positions)


@pytest.mark.parametrize("count", [0, 10, 11])
def test_given_a_count_outside_the_array_when_selecting_then_it_is_refused(count: int) -> None:
    with pytest.raises(ValueError, match="count must be in 1..9"):
        count_th_largest(np.arange(10, dtype=np.float64), count)
