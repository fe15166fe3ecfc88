"""``keywords.term_weight`` computes FTS5's ``bm25()`` term in place, operation by operation in the order
of the formula, so its floats equal the one-expression formula's on random chunks and statistics (a
ranking tie or a score compared across back ends depends on the last bit)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memstack.adapters.sqlite.keywords import K1, MIN_IDF, B, term_weight


@pytest.mark.parametrize("seed", range(5))
def test_given_random_postings_when_weighed_then_the_floats_equal_the_formula_written_as_one_expression(
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n = int(rng.integers(1, 2000))
        tf = rng.integers(1, 12, n).astype(np.float64)
        length = rng.integers(0, 500, n).astype(np.float64)
        df = int(rng.integers(1, 5000))
        chunks = int(rng.integers(df, 200_000))
        avgdl = float(rng.random() * 80 + 0.25)
        idf = math.log((chunks - df + 0.5) / (df + 0.5))
        idf = idf if idf > 0 else MIN_IDF
        formula = idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl))
        weights = term_weight(tf, length, df=df, chunks=chunks, avgdl=avgdl)
        assert weights.tolist() == formula.tolist()


def test_given_postings_when_weighed_then_the_inputs_are_left_as_they_were() -> None:
    tf = np.array([1.0, 3.0, 2.0])
    length = np.array([10.0, 4.0, 0.0])
    term_weight(tf, length, df=2, chunks=50, avgdl=6.0)
    assert tf.tolist() == [1.0, 3.0, 2.0]
    assert length.tolist() == [10.0, 4.0, 0.0]
