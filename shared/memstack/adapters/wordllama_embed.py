"""A static embedder that ships its weights: WordLlama ``l2_supercat`` (256-d) through ``wordllama``.

WordLlama (github.com/dleemiller/WordLlama, MIT) is a token-embedding table distilled from large language
models' input embeddings: a text's vector is the mean of its tokens' rows, so embedding costs a table lookup
(about 0.1 ms a message on one core) instead of a transformer pass (the e5 model's 10–40 ms). The package
carries the ``l2_supercat`` weights (256-d, 16 MB) and their tokenizer, so it is loaded from the package's
own folder with downloads disabled: nothing reaches the network, ever.

Symmetric: queries and documents are embedded the same way (a query's vector is reused when the same text
is saved). The measurement that made it the default of the embedded backend is in
docs/adr/0007-default-local-embedder.md.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memstack.errors import Unavailable
from memstack.ports import Vector

__all__ = ["WordLlamaEmbedder"]

_SURROGATE = re.compile("[\ud800-\udfff]")
"""Lone surrogates: Python strings can hold them, the Rust tokenizer cannot (they become U+FFFD)."""

_CONFIG = "l2_supercat"
_DIMENSION = 256
_BATCH = 16
"""Texts per table lookup: the lookup pads a batch to its longest text (a 16,384-character chunk is about
4,000 tokens, 4 MB of rows per text), so batches are small and made of texts of similar length."""


class WordLlamaEmbedder:
    """WordLlama ``l2_supercat`` 256-d embeddings, offline, from the weights inside the ``wordllama`` package.

    The table is loaded on the first embedding (about 0.2 s), not at import or construction. Text without
    any token (empty, whitespace) gets the zero vector, as the ``Embedder`` port allows.

    Attributes:
        model_id: ``"wordllama-l2_supercat-256"``.
        dimension: 256.
        symmetric: ``True``.
        bounded_latency: ``True``: in-process table lookups, their time bounded by the texts' length (after
            the one load), so recall calls it on the caller's thread (``SemanticRecall``: no deadline thread).
    """

    model_id: str = f"wordllama-{_CONFIG}-{_DIMENSION}"
    dimension: int = _DIMENSION
    symmetric: bool = True
    bounded_latency: bool = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._model: Any = None

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """Embed texts; the same text gets the same vector in any batch.

        Args:
            texts: the texts; an empty sequence returns ``[]`` without loading the table.

        Returns:
            One vector of 256 floats per text, in order: unit length, or zero for a text without tokens.

        Raises:
            Unavailable: the package or its weights are missing, or the lookup failed.
        """
        if not texts:
            return []
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[Vector] = [[] for _ in texts]
        for start in range(0, len(order), _BATCH):
            batch = order[start : start + _BATCH]
            for i, row in zip(batch, self._run([texts[i] for i in batch]), strict=True):
                out[i] = row
        return out

    def embed_query(self, text: str) -> Vector:
        """Embed a search query (the same as a document: the model is symmetric).

        Raises:
            Unavailable: as ``embed_documents``.
        """
        return self._run([text])[0]

    def _load(self) -> Any:
        if self._model is None:
            from pathlib import Path

            import wordllama

            # Its own folder: the package ships l2_supercat's weights and tokenizer there.
            self._model = wordllama.WordLlama.load(
                config=_CONFIG,
                dim=_DIMENSION,
                cache_dir=Path(wordllama.__file__).parent,
                disable_download=True,
            )
        return self._model

    def _run(self, texts: list[str]) -> list[Vector]:
        with self._lock:
            try:
                clean = [_SURROGATE.sub("\ufffd", text) for text in texts]
                raw: Any = self._load().embed(clean, norm=False, batch_size=len(clean))
                # float32 → float64 is exact: the same numbers as the floats of ``raw.tolist()``
                rows = np.asarray(raw, dtype=np.float64)
            except Exception as exc:  # ImportError, FileNotFoundError (no weights), tokenizer errors ...
                raise Unavailable(f"wordllama embedder failed: {type(exc).__name__}: {exc}") from exc
        return [_unit(row) for row in rows]


def _unit(row: npt.NDArray[np.float64]) -> Vector:
    """``row`` scaled to unit length; the zero vector stays zero (a text without tokens).

    The squares and the quotients are float64 operations element by element, the sum an exactly rounded
    ``math.fsum``: the same values as the same arithmetic on Python floats, at a third of its cost.

    Raises:
        Unavailable: a value is not finite (the table never holds one; a corrupted file could).
    """
    norm = math.sqrt(math.fsum((row * row).tolist()))
    if not math.isfinite(norm):
        raise Unavailable("wordllama embedder answered a non-finite value")
    if norm == 0.0:
        return [0.0] * len(row)
    vector: Vector = (row / norm).tolist()
    return vector
