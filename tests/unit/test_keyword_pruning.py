"""Pruned keyword search (``topk.top``) ranks exactly as exhaustive BM25 (``keywords.score``) does."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memstack.adapters.sqlite import keywords, topk
from memstack.adapters.sqlite.db import SqliteDatabase

VOCABULARY = ["a", "b", "c", "d", "e", "f", "g", "h"]
"""Few terms, drawn with skewed weights: common terms span many blocks, rare ones few, and texts repeat,
so chunks tie."""


def _corpus(rng: random.Random, size: int) -> list[keywords.Analysed]:
    texts = [
        rng.choices(VOCABULARY, weights=[40, 20, 10, 6, 3, 2, 1, 1], k=rng.randint(1, 12))
        for _ in range(max(1, size // 4))
    ]
    chosen = [rng.choice(texts) for _ in range(size)]  # repeats: identical chunks tie exactly
    return [keywords.Analysed(dict(Counter(t)), len(t)) for t in chosen]


def _exhaustive_top(conn: Any, query: list[str], k: int) -> tuple[list[int], list[float]]:
    rowids, scores = keywords.score(conn, "r", query)
    order = np.lexsort((rowids, -scores))
    rowids, scores = rowids[order], scores[order]
    if len(scores) > k:
        keep = scores >= scores[k - 1]
        rowids, scores = rowids[keep], scores[keep]
    return rowids.tolist(), scores.tolist()


@pytest.mark.parametrize("seed", range(12))
def test_given_random_corpora_when_searched_pruned_then_the_top_equals_exhaustive_scoring(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    db = SqliteDatabase(tmp_path / "k.db")
    with db.transaction() as conn:
        for statement in keywords.SCHEMA:
            conn.execute(statement)
        chunks = _corpus(rng, rng.choice([50, 700, 3000]))
        rowid = 1
        # Bulk writes straight to the blocks, then saves that stay pending, then some deletions.
        bulk = [(rowid + i, a) for i, a in enumerate(chunks[: len(chunks) * 3 // 4])]
        keywords.add(conn, "r", bulk)
        rowid += len(bulk) + rng.randint(0, 50)  # other resources' rowids in between
        for a in chunks[len(bulk) :]:
            keywords.add(conn, "r", [(rowid, a)])
            rowid += rng.randint(1, 3)
        gone = rng.sample(bulk, k=min(len(bulk), 20))
        keywords.remove(conn, "r", [(r, a.terms, a.length) for r, a in gone])
    with db.read() as conn:
        for _ in range(25):
            query = rng.choices(VOCABULARY, k=rng.randint(1, 5))
            k = rng.choice([1, 4, 32, 100])
            found = topk.top(conn, "r", query, k)
            expected_rowids, expected_scores = _exhaustive_top(conn, query, k)
            assert found.rowids.tolist() == expected_rowids, (seed, query, k)
            assert found.scores.tolist() == expected_scores, "the same floats, not only the same order"
            all_rowids, all_scores = keywords.score(conn, "r", query)
            rest = all_scores[~np.isin(all_rowids, found.rowids)]
            assert (rest < found.floor).all(), "every chunk left out scores below the floor"
    db.close()


def test_given_a_block_when_bounded_then_no_posting_weighs_more_than_its_bound() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        tf = rng.integers(1, 20, size=128).astype(np.float64)
        length = rng.integers(1, 400, size=128).astype(np.float64)
        df, avgdl = int(rng.integers(1, 5000)), float(rng.uniform(3, 60))
        weights = keywords.term_weight(tf, length, df=df, chunks=5000, avgdl=avgdl)
        top = keywords.term_weight(
            np.array([tf.max()]), np.array([length.min()]), df=df, chunks=5000, avgdl=avgdl
        )
        bound = top[0]
        assert (weights <= bound * (1 + topk.SLACK)).all()
