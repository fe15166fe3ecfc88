"""A deterministic feature-hashing embedder, identical to the Mastra peer benchmark's ``hashEmbed``.

The reference is ``hashEmbed`` in ``shared/bench/mastra-peer/locomo-peer.mjs`` (Node); its vectors for a few
texts are kept in ``hash-embed-vectors.json`` beside it. Using the very same vectors on both sides lets the
benchmark compare the two memory libraries, not two embedders. No model, no network: it also serves as the
fast offline embedder of tests and demos.

The recipe, for a text and a dimension ``D``:

1. Lowercase the text. JavaScript's ``toLowerCase`` and Python's ``str.lower`` both apply the full,
   locale-independent Unicode mapping with the final-sigma rule ("İ" becomes "i" + U+0307, a final "Σ"
   becomes "ς").
2. Tokens are the maximal runs of Unicode letters and numbers (JavaScript ``/[\\p{L}\\p{N}]+/gu``).
3. Features are every token, then for every token ``t`` the character trigrams of ``"#" + t + "#"``, each
   prefixed with ``"3:"``. JavaScript strings are sequences of UTF-16 code units, so a trigram is three code
   units, not three code points.
4. For each feature, ``h`` = MD5 of its UTF-8 bytes; bucket = ``uint32_le(h[0:4]) % D``;
   sign = ``+1`` if ``h[4] & 1`` else ``-1``; weight 1 for a token, 0.5 for a trigram; add sign × weight.
5. Divide by the L2 norm (a zero vector, e.g. of an empty text, stays zero).

Exactness: every sum is a multiple of 0.5 far below 2**52, so float64 addition is exact in any order (the
per-token contributions are cached pre-summed, see ``HashEmbedder``); the norm is ``sqrt`` of the exactly
summed squares and each value is divided by it, as in JavaScript, so the vectors equal Node's bit for bit
(checked on the reference file and on extra cases with non-BMP letters, Greek sigma and Turkish dotted I).

Known differences from Node (documented, not worked around):

* Unicode version. Letters, numbers and case mappings come from Python's ``unicodedata`` (Unicode 14.0 on
  Python 3.11, 15.0 on 3.12, 15.1 on 3.13) while Node 20 uses its ICU's (Unicode 17 for ICU 78). Characters
  assigned after Python's version (e.g. CJK Extension H/I ideographs, scripts added in Unicode 15-17) are
  not letters here, so they split tokens here but not in Node. Everything assigned in Unicode 14 behaves the
  same.
* Lone surrogates in the input are never letters, so they never reach a token on either side.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import math
import operator
import re
import struct
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any, TypeVar

from memstack.errors import InvalidInput
from memstack.ports import Vector

__all__ = ["HashEmbedder"]

# ``\w`` of a ``str`` pattern is ``str.isalnum()`` plus ``_``, so ``[^\W_]`` is exactly the letters (L*) and
# numbers (N*) of the running Python's Unicode database — the JavaScript class ``[\p{L}\p{N}]``.
# (tests/unit/test_hash_embed.py checks the equivalence over every code point.)
_TOKEN = re.compile(r"[^\W_]+")
_SURROGATE = re.compile("[\ud800-\udfff]")
_FIRST_ASTRAL = "\U00010000"

_TOKEN_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.5

# The first 4 digest bytes as a little-endian uint32 (Node's ``readUInt32LE(0)``) and byte 4.
_BUCKET_AND_SIGN = struct.Struct("<IB").unpack_from


def _md5_constructor() -> Callable[[bytes], Any]:
    """CPython's built-in MD5 if present, else ``hashlib``'s (OpenSSL).

    For the short inputs hashed here (3-20 bytes) the built-in is about 4x faster than OpenSSL 3's (0.24 µs
    against 1 µs per digest, measured on Python 3.11 with OpenSSL 3.0), whose per-call context set-up
    dominates. Both compute the same MD5; it is a bucket hash here, not a security function, so FIPS
    restrictions on MD5 do not apply (hence ``usedforsecurity=False`` on the fallback).
    """
    try:
        md5: Callable[[bytes], Any] = importlib.import_module("_md5").md5
    except (ImportError, AttributeError):

        def md5(data: bytes) -> Any:
            return hashlib.md5(data, usedforsecurity=False)

    return md5


_md5 = _md5_constructor()

Contribution = tuple[tuple[int, float], ...]
"""What one token adds to the vector: ``(bucket, amount)`` pairs, one per touched bucket."""

_V = TypeVar("_V")

_MAX_CACHED_TOKEN = 64
"""Longer tokens (hashes, base64 blobs) rarely recur, so they are not cached: their keys would cost memory."""
_MAX_PAIRS = 65_536


def _js_trigrams(token: str) -> list[str]:
    """The UTF-16 code-unit trigrams of ``"#" + token + "#"``, as JavaScript's ``s.slice(i, i + 3)`` gives.

    A trigram that cuts a surrogate pair holds a lone surrogate, which Node's UTF-8 encoder (used by
    ``createHash().update(string)``) writes as U+FFFD; the returned strings already carry that U+FFFD so
    that they encode to the bytes Node hashes.

    Args:
        token: a token (letters and numbers only).

    Returns:
        ``len16(token)`` trigrams, where ``len16`` counts UTF-16 code units.
    """
    s = f"#{token}#"
    if max(s) < _FIRST_ASTRAL:  # BMP only: code points are code units.
        return [s[i : i + 3] for i in range(len(s) - 2)]
    units = s.encode("utf-16-le", "surrogatepass")
    grams = []
    for i in range(0, len(units) - 4, 2):
        piece = units[i : i + 6].decode("utf-16-le", "surrogatepass")  # pairs join, halves stay lone
        grams.append(_SURROGATE.sub("\ufffd", piece))
    return grams


def _share(pairs: dict[tuple[int, float], tuple[int, float]], pair: tuple[int, float]) -> tuple[int, float]:
    """The one stored copy of ``pair`` (kept in ``pairs``), so that cache entries share equal pairs.

    Sharing cuts the caches' memory by about 2.5x: there are only a few thousand distinct (bucket, amount)
    pairs in practice. Past ``_MAX_PAIRS`` new pairs are returned unshared, so ``pairs`` stays bounded.
    """
    shared = pairs.get(pair)
    if shared is not None:
        return shared
    if len(pairs) < _MAX_PAIRS:
        pairs[pair] = pair
    return pair


def _remember(cache: dict[str, _V], key: str, value: _V, size: int) -> None:
    """Store ``value`` under ``key``, first dropping the oldest entry if ``cache`` holds ``size`` entries.

    Safe under concurrent use: each step is one dict operation, and losing a race (another thread evicted
    the same oldest key) only skips an eviction.
    """
    if size <= 0:
        return
    if len(cache) >= size:
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):
            del cache[next(iter(cache))]
    cache[key] = value


class HashEmbedder:
    """Feature-hashing embedder: exactly the vectors of the Mastra peer benchmark's ``hashEmbed``.

    See the module docstring for the recipe and the (Unicode-version) differences from Node.

    Speed: hashing is the cost (about 0.5-1 µs per MD5 feature in CPython, and a 30-word message has about
    180 features), so two bounded caches keep what was hashed: each token's pre-summed contribution, and
    each trigram's bucket and sign (trigrams recur across tokens, so a new word mostly costs one digest).
    Measured on a 2-vCPU VM with CPython 3.11: a 36-word message takes 30-60 µs when its words were seen
    and about 0.25 ms when nothing is cached; a fresh embedder over a LoCoMo conversation (2,760 messages
    of 24 words) averages 45-65 µs per message.

    Thread-safe: the caches are the only mutable state, and each access is a single dict operation.

    Attributes:
        model_id: ``"hash-{dimension}"``, the benchmark's ``modelId``.
        dimension: length of every vector.
        symmetric: ``True``; queries and documents are embedded the same way.
        fusion_weight: 0.5, the vector list's prior weight in hybrid fusion
            (``memstack.recall.engine.fusion_weight``): hashed words and trigrams measure word overlap
            without IDF, a weaker copy of the keyword list, not a second opinion on meaning
            (docs/adr/0011-spread-weighted-fusion.md).
        zero_for_words: ``True``: signed feature sums can cancel to the zero vector for a text with words
            (rarely, e.g. a one-token text whose token and trigrams share a bucket); that zero is this
            embedder's deterministic answer, not a fault (``SemanticRecall.valid_vector``).
        bounded_latency: ``True``: in-process hashing, its time bounded by the text's length, so recall
            calls it on the caller's thread (``SemanticRecall``: no deadline thread).
    """

    fusion_weight: float = 0.5
    zero_for_words: bool = True
    bounded_latency: bool = True

    def __init__(self, dimension: int = 256, *, cache_size: int = 8_192) -> None:
        """Create the embedder.

        Args:
            dimension: vector length ``D`` (the benchmark's ``DIM``, default 256).
            cache_size: how many tokens, and separately how many trigrams, to keep; 0 disables caching. When a
                cache is full its oldest entry is dropped. Both full take about 3.5 MB at the default 8,192
                (measured with ``tracemalloc``); one LoCoMo conversation (2,760 messages) has 3,723 distinct
                tokens and 3,130 trigrams.

        Raises:
            InvalidInput: ``dimension`` is not a positive integer or ``cache_size`` is negative.
        """
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
            raise InvalidInput("dimension must be a positive integer", field="dimension")
        if cache_size < 0:
            raise InvalidInput("cache_size must be >= 0", field="cache_size")
        self.model_id: str = f"hash-{dimension}"
        self.dimension: int = dimension
        self.symmetric: bool = True
        self._cache_size = cache_size
        self._tokens: dict[str, Contribution] = {}
        self._trigrams: dict[str, tuple[int, float]] = {}
        self._pairs: dict[tuple[int, float], tuple[int, float]] = {}

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """Embed texts.

        Args:
            texts: the texts, any length.

        Returns:
            One L2-normalised vector of ``dimension`` floats per text, in order (all zeros for a text
            without letters or numbers).
        """
        return [self._embed(text) for text in texts]

    def embed_query(self, text: str) -> Vector:
        """Embed a search query, the same way as a document (``symmetric``).

        Args:
            text: the query.

        Returns:
            An L2-normalised vector of ``dimension`` floats (all zeros if the text has no letters or numbers).
        """
        return self._embed(text)

    def _embed(self, text: str) -> Vector:
        v = [0.0] * self.dimension
        tokens = self._tokens
        for token in _TOKEN.findall(text.lower()):
            contribution = tokens.get(token)
            if contribution is None:
                contribution = self._contribution(token)
            for bucket, amount in contribution:
                v[bucket] += amount
        # Exact sum (every square is a multiple of 0.25), then division as in JavaScript, not 1/n products.
        norm = math.sqrt(sum(map(operator.mul, v, v))) or 1.0
        return list(map(operator.truediv, v, repeat(norm)))

    def _contribution(self, token: str) -> Contribution:
        """What ``token`` adds: its own feature (weight 1) and its trigrams (weight 0.5), summed per bucket."""
        dim, size, trigrams, pairs = self.dimension, self._cache_size, self._trigrams, self._pairs
        word, sign = _BUCKET_AND_SIGN(_md5(token.encode()).digest())
        sums: dict[int, float] = {word % dim: _TOKEN_WEIGHT if sign & 1 else -_TOKEN_WEIGHT}
        for gram in _js_trigrams(token):
            hit = trigrams.get(gram)
            if hit is None:
                word, sign = _BUCKET_AND_SIGN(_md5(("3:" + gram).encode()).digest())
                hit = (word % dim, _TRIGRAM_WEIGHT if sign & 1 else -_TRIGRAM_WEIGHT)
                if size:
                    hit = _share(pairs, hit)
                    _remember(trigrams, gram, hit, size)
            bucket, amount = hit
            sums[bucket] = sums.get(bucket, 0.0) + amount
        if not size:
            return tuple(sums.items())
        contribution = tuple(_share(pairs, pair) for pair in sums.items())
        if len(token) <= _MAX_CACHED_TOKEN:
            _remember(self._tokens, token, contribution, size)
        return contribution
