"""Vector helpers shared by the embedding adapters."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from memstack.errors import Unavailable
from memstack.ports import Vector

__all__ = ["normalised"]


def normalised(vector: Sequence[Any], what: str) -> Vector:
    """``vector`` as floats of length 1 (a zero vector stays zero): the ``Embedder`` port promises unit
    vectors whatever a backend returns.

    Args:
        vector: the backend's numbers.
        what: the backend and model for messages, e.g. ``"OpenAI embeddings"``.

    Raises:
        Unavailable: a value is not a finite number.
    """
    try:
        values = [float(x) for x in vector]
    except (TypeError, ValueError):
        raise Unavailable(f"{what} returned a vector with non-numeric values") from None
    norm = math.sqrt(math.fsum(x * x for x in values))
    if not math.isfinite(norm):
        raise Unavailable(f"{what} returned a vector with non-finite values")
    return [x / norm for x in values] if norm else values
