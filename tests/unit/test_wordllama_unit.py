"""The WordLlama embedder's normalisation (memstack.adapters.wordllama_embed._unit): the exact values of
Python-float arithmetic (squares, ``math.fsum``, quotients), so vectors, and every cosine score built on
them, stay the same number for number."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memstack.adapters.wordllama_embed import _unit
from memstack.errors import Unavailable


def _reference(row: list[float]) -> list[float]:
    norm = math.sqrt(math.fsum(x * x for x in row))
    return [0.0] * len(row) if norm == 0.0 else [x / norm for x in row]


def test_given_float32_rows_when_normalised_then_every_value_equals_python_float_arithmetic() -> None:
    rng = np.random.default_rng(11)
    for scale in (1e-6, 0.01, 1.0, 37.5, 1e4):
        raw = (rng.standard_normal((40, 256)) * scale).astype(np.float32)
        for row in raw:
            assert _unit(row.astype(np.float64)) == _reference(row.tolist())


def test_given_a_zero_row_when_normalised_then_the_zero_vector() -> None:
    assert _unit(np.zeros(256)) == [0.0] * 256


def test_given_a_non_finite_value_when_normalised_then_unavailable() -> None:
    row = np.ones(256)
    row[3] = np.nan
    with pytest.raises(Unavailable, match="non-finite"):
        _unit(row)
