"""HashEmbedder produces exactly the vectors of the Mastra peer benchmark's ``hashEmbed`` (Node).

Reference data: ``tests/data/hash-embed-vectors.json`` is a verbatim copy of
``shared/bench/mastra-peer/hash-embed-vectors.json`` (the repository's sibling folder). ``EXTRA_CASES`` were
computed with the same ``hashEmbed`` function under Node 20 (ICU 78), printing ``2 * v`` before
normalisation, so each entry is ``bucket: count of halves``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from memstack.adapters import hash_embed
from memstack.adapters.hash_embed import HashEmbedder
from memstack.errors import InvalidInput
from memstack.ports import Embedder

DATA = Path(__file__).resolve().parents[1] / "data" / "hash-embed-vectors.json"
BENCH_ORIGINAL = Path(__file__).resolve().parents[3] / "shared" / "bench" / "mastra-peer" / DATA.name
ORIGINAL_SHA256 = "128bbf02693f98a25210431d1d3b1faecc830ba64772d8bad167ee1a6ececbea"
"""SHA-256 of the peer's ``hash-embed-vectors.json`` when it was copied: the copy is checked against it
everywhere, the original too where the sibling folder exists."""

# fmt: off
EXTRA_CASES: list[tuple[int, str, dict[int, int]]] = [
    # Math alphanumerics (non-BMP letters and digits, no lowercase): trigrams cut surrogate pairs.
    (
        256,
        "a\U0001d400 \U0001d400 ab\U0001d400cd \U0001d400\U0001d400\U0001d400 \U0001d7cf\U0001d7d0",
        {0: 1, 21: 1, 63: -1, 66: -2, 67: 1, 76: 1, 91: 3, 93: 1, 109: -2, 114: -1, 120: 1, 123: -1,
         133: 2, 134: 2, 139: -2, 144: 2, 164: -2, 183: -1, 225: -1, 246: 2, 255: -1},
    ),
    # Deseret capitals (non-BMP, lowercased to non-BMP), CJK Extension B, BMP CJK.
    (
        256,
        "\U00010400\U00010401 Deseret \U00020000\U00020001 \u6771\u4eac",
        {1: 1, 3: -2, 30: 1, 35: -1, 48: -1, 55: 1, 64: -1, 93: 1, 95: 1, 107: 2, 108: -1, 112: -2, 119: 1,
         150: -1, 154: -1, 174: -1, 213: 1, 225: 2, 232: -1, 237: 1, 240: 1},
    ),
    # Special casing: dotted capital I lowercases to i + U+0307 (a mark, so it splits the token); final sigma.
    (
        256,
        "\u0130stanbul \u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3 \u03c3\u03bf\u03c6\u03cc\u03c2 Stra\u00dfe",
        {15: 3, 27: -1, 38: -1, 41: -1, 65: -2, 70: 1, 73: -1, 82: 1, 89: -1, 93: 1, 94: 1, 99: 1, 100: 1,
         101: 1, 103: -1, 109: 1, 114: -1, 134: -2, 135: -1, 151: 2, 168: 1, 177: -1, 182: 2, 198: 1, 221: -2,
         227: 1, 232: -1, 242: 1, 247: 1, 255: 1},
    ),
    # Letter-numbers (Nl), other numbers (No), Arabic-Indic digits, combining mark, underscore.
    (
        256,
        "\u216b \u00bd \u0663 e\u0301 snake_case",
        {34: -2, 49: -1, 80: -1, 116: 2, 129: 1, 136: -1, 146: 1, 151: -1, 170: -1, 176: 1, 184: 2, 185: 1,
         205: -2, 222: 2, 225: 3, 226: -1},
    ),
    (7, "What is the name of my cat?", {0: 2, 1: 3, 2: 5, 3: -2}),
    (
        384,
        "What is the name of my cat?",
        {15: 1, 16: 1, 30: -1, 34: 2, 69: 1, 77: 1, 104: 2, 137: -1, 139: 2, 152: 1, 162: 1, 176: -2, 186: 2,
         202: -2, 204: -1, 208: -2, 211: 1, 218: -1, 219: 1, 229: 1, 252: -1, 304: 1, 315: 1, 341: -1, 355: 1},
    ),
]
# fmt: on


def load_reference() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def expected_from_halves(dim: int, halves: dict[int, int]) -> list[float]:
    raw = [0.0] * dim
    for bucket, count in halves.items():
        raw[bucket] = count * 0.5
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [x / norm for x in raw]


def assert_close(actual: list[float], expected: list[float], tol: float = 1e-12) -> None:
    assert len(actual) == len(expected)
    worst = max((abs(a - e), i) for i, (a, e) in enumerate(zip(actual, expected, strict=True)))
    assert worst[0] <= tol, f"bucket {worst[1]} differs by {worst[0]}"


@pytest.mark.parametrize("case", load_reference()["cases"], ids=lambda c: repr(c["text"][:24]))
def test_given_reference_text_when_embedded_then_matches_node_vector(case: dict[str, Any]) -> None:
    embedder = HashEmbedder(load_reference()["dim"])

    vector = embedder.embed_query(case["text"])

    assert_close(vector, case["vector"])


@pytest.mark.parametrize(("dim", "text", "halves"), EXTRA_CASES, ids=lambda x: repr(x)[:24])
def test_given_tricky_unicode_when_embedded_then_matches_node_vector(
    dim: int, text: str, halves: dict[int, int]
) -> None:
    vector = HashEmbedder(dim).embed_query(text)

    assert_close(vector, expected_from_halves(dim, halves))


def test_given_reference_file_when_hashed_then_it_is_the_verbatim_copy_of_the_peer_original() -> None:
    copy = hashlib.sha256(DATA.read_bytes()).hexdigest()

    assert copy == ORIGINAL_SHA256, "tests/data/hash-embed-vectors.json is not the copy it was made as"
    # on machines with the sibling folder, the original must not have moved on either
    if BENCH_ORIGINAL.exists():
        original = hashlib.sha256(BENCH_ORIGINAL.read_bytes()).hexdigest()
        assert original == ORIGINAL_SHA256, f"{BENCH_ORIGINAL} changed: copy it again and update the hash"


def test_given_no_letters_or_numbers_when_embedded_then_zero_vector() -> None:
    embedder = HashEmbedder()

    for text in ["", "   \n\t", "!?.,", "\U0001f3a8\U0001f680"]:
        assert embedder.embed_query(text) == [0.0] * 256, repr(text)


def test_given_text_when_embedded_then_unit_norm_floats_of_dimension() -> None:
    vectors = HashEmbedder(64).embed_documents(["hello world", "a", "x" * 10_000])

    for vector in vectors:
        assert len(vector) == 64
        assert all(type(x) is float for x in vector)
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, abs_tol=1e-12)


def test_given_same_text_when_embedded_twice_or_by_another_instance_then_identical() -> None:
    text = "Melanie: Wow! What did you paint? \U0001f3a8"
    first = HashEmbedder()

    a = first.embed_query(text)
    b = first.embed_documents([text])[0]  # now served from the caches
    c = HashEmbedder(cache_size=0).embed_query(text)

    assert a == b == c


def test_given_tiny_cache_when_many_words_then_evicts_and_stays_exact() -> None:
    words = " ".join(f"word{i}" for i in range(50))
    cached = HashEmbedder(cache_size=4)

    vector = cached.embed_query(words)

    assert vector == HashEmbedder(cache_size=0).embed_query(words)
    assert len(cached._tokens) <= 4 and len(cached._trigrams) <= 4


def test_given_long_token_when_embedded_then_not_cached_but_correct() -> None:
    token = "z" * 100
    embedder = HashEmbedder()

    vector = embedder.embed_query(token)

    assert token not in embedder._tokens
    assert vector == HashEmbedder(cache_size=0).embed_query(token)


def test_given_embedder_then_it_satisfies_the_port() -> None:
    embedder = HashEmbedder(128)

    assert isinstance(embedder, Embedder)
    assert (embedder.model_id, embedder.dimension, embedder.symmetric) == ("hash-128", 128, True)


@pytest.mark.parametrize("dimension", [0, -3, True])
def test_given_bad_dimension_when_constructed_then_invalid_input(dimension: int) -> None:
    with pytest.raises(InvalidInput) as raised:
        HashEmbedder(dimension)
    assert raised.value.field == "dimension"


def test_given_every_code_point_then_token_class_is_unicode_letters_and_numbers() -> None:
    # The JavaScript class is [\p{L}\p{N}]; the implementation uses [^\W_]. Check they agree under the
    # running Python's Unicode database.
    everything = "".join(chr(cp) for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF)

    matched = "".join(hash_embed._TOKEN.findall(everything))

    assert matched == "".join(ch for ch in everything if unicodedata.category(ch)[0] in "LN")
