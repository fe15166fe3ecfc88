"""Exact selection of the largest values of a long array without partitioning all of it.

A search in a large resource often needs only the ``count`` best of tens of thousands of scores (the
keyword search's first prefix: ``2 * top_k + 8`` chunks among every chunk that holds a query term).
``np.partition`` over all of them is a selection pass with several reads and writes per element; a
strided sample first gives a threshold that provably keeps the ``count`` best, and one comparison over
the array then leaves a few hundred values to partition (ADR 0016).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

SAMPLE_MIN_FACTOR = 64
"""Arrays shorter than this many times ``count`` are partitioned whole: the sample would not pay."""


def count_th_largest(values: npt.NDArray[np.float64], count: int) -> tuple[float, npt.NDArray[np.intp]]:
    """The ``count``-th largest of ``values`` and the positions of every value at least as large.

    Exact by construction: the ``count``-th largest of a subset (every ``stride``-th value) is at most
    the ``count``-th largest of the whole array, so the values reaching the sample's are at least
    ``count`` in number and include every one of the ``count`` largest; the exact floor is then selected
    among them alone. The stride (about ``sqrt(len / count)``) balances the sample's partition against
    the values that pass its threshold; if the values' order is adversarial (every large value in one
    stretch) more of them pass, never fewer than needed.

    Args:
        values: a 1-D float array without NaN, ``len(values) > count``.
        count: how many of the largest are wanted, ``>= 1``.

    Returns:
        ``(floor, positions)``: ``floor`` the ``count``-th largest value (``np.partition``'s), and the
        ascending positions of every value ``>= floor`` (ties with it included, so possibly more than
        ``count``).

    Raises:
        ValueError: ``count`` is not in ``1 .. len(values) - 1``.
    """
    n = len(values)
    if not 1 <= count < n:
        raise ValueError(f"count must be in 1..{n - 1} for {n} values, got {count}")
    candidates: npt.NDArray[np.intp] | None = None
    pool = values
    if n >= SAMPLE_MIN_FACTOR * count:
        stride = max(2, math.isqrt(n // count))
        sample = values[::stride]
        threshold = np.partition(sample, len(sample) - count)[len(sample) - count]
        candidates = np.flatnonzero(values >= threshold)
        pool = values[candidates]
    floor = float(np.partition(pool, len(pool) - count)[len(pool) - count])
    kept = np.flatnonzero(pool >= floor)
    return floor, kept if candidates is None else candidates[kept]
