"""Hybrid recall: weighted fusion of the vector and keyword result lists, done in the core so that every
backend fuses the same way (DESIGN.md "Recall goes beyond Mastra").

Plain reciprocal rank fusion lets a weak retriever drag a strong one down: on LoCoMo, RRF of BM25 with a
small embedder recalls less evidence than BM25 alone. Here:

1. each list contributes a weighted reciprocal-rank term ``weight / (rank_constant + rank)``; the vector
   list gets the smaller weight, and a small ``rank_constant`` keeps a retriever's first hits well ahead
   of its tail, so the other list can reorder only close calls;
2. **neighbour support**: a hit shown with ``message_range`` neighbours is worth more when those neighbours
   matched too, so each candidate adds ``neighbour_weight ×`` the fused scores of the other candidates that
   fall inside its window (same thread, within ``before``/``after`` by ``seq``).

3. **spread weighting**: each list's weight is scaled per query by how much its own scores discriminate
   among the candidates it returned (``spread_weights``), so the retriever that separates its best hits
   from the rest for *this* query leads, whichever it is (docs/adr/0011-spread-weighted-fusion.md).

The rank constant and neighbour weight were chosen on two LoCoMo conversations and checked on the three
others (docs/adr/0002-hybrid-fusion.md).

**The relevance floor** (``semantic_recall.threshold``, docs/adr/0005-hybrid-relevance-floor.md): fused
scores are rank-based and say nothing about relevance, so the threshold applies to each retriever's own
score, normalised to 0..1, before fusion — a vector hit needs cosine similarity ``>= threshold``, a keyword
hit ``keyword_relevance(bm25) >= threshold``; a candidate either retriever vouches for goes on to fusion.
In hybrid mode a vector hit without similarity (cosine ``<= 0``) never enters fusion, threshold or not:
nearest-neighbour search always returns ``k`` documents, and the unrelated ones used to fill ``top_k``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memstack.ports import IndexHit

KEYWORD_HALF_SCORE = 4.0
"""The BM25 score (OpenSearch/Lucene scale) that ``keyword_relevance`` maps to 0.5: about one distinctive
word of the query matched (a word in 1 of 50 chunks has an IDF near 4); words in every other chunk
("the", "what") score under 1 each."""


def list_spread(scores: Sequence[float], depth: int) -> float:
    """How much a retriever's scores discriminate among its candidates: ``(best - worst) / best``, in 0..1.

    ``worst`` is the lowest score of the ``depth`` candidates the list was asked for; a list that returned
    fewer found nothing else worth returning, so its missing tail scores 0 (spread 1). Scale-free, so a
    cosine list and a BM25 list compare: a static embedder whose similarities are all alike (every message
    of a chat between the same two people looks the same to it) has a small spread, and so has a BM25 list
    where only common words matched.

    Args:
        scores: the list's scores, best first (cosine similarity or BM25; only positive scores are
            expected, since fusion drops vector hits without similarity).
        depth: how many candidates the list was asked for (>= 1).

    Returns:
        0.0 for an empty list, a best score <= 0, or a full list of equal scores.
    """
    if not scores or scores[0] <= 0:
        return 0.0
    worst = min(scores) if len(scores) >= depth else 0.0
    return max(0.0, min(1.0, (scores[0] - max(0.0, worst)) / scores[0]))


def spread_weights(
    vector: Sequence[float],
    keyword: Sequence[float],
    *,
    vector_weight: float,
    keyword_weight: float,
    depth: int,
) -> tuple[float, float]:
    """The two lists' weights for one query: each prior weight scaled by its list's share of the spreads,
    ``w_v × 2·s_v / (s_v + s_k)`` and ``w_k × 2·s_k / (s_v + s_k)`` (``list_spread``).

    Equal spreads keep the priors; a list whose scores are flat gives way to one that separates a few
    candidates from the rest. When both spreads are 0 (no list discriminates) the priors stand.

    Args:
        vector, keyword: the lists' scores, best first.
        vector_weight, keyword_weight: the prior weights (>= 0).
        depth: how many candidates each list was asked for.

    Returns:
        ``(vector weight, keyword weight)`` for this query.
    """
    sv, sk = list_spread(vector, depth), list_spread(keyword, depth)
    if sv + sk <= 0:
        return vector_weight, keyword_weight
    return vector_weight * 2 * sv / (sv + sk), keyword_weight * 2 * sk / (sv + sk)


def keyword_relevance(score: float) -> float:
    """A BM25 score as relevance in 0..1: ``score / (score + KEYWORD_HALF_SCORE)``.

    BM25 has no upper bound and grows with the number and rarity of the query words matched, so it is
    saturated rather than divided by the list's best score: the best hit of an unrelated query (matching
    only common words) stays low, and a threshold can answer "nothing relevant". Keyword scores are on the
    Lucene scale on every backend (the SQLite index computes FTS5's ``bm25()`` formula and converts it).

    Args:
        score: a keyword ``IndexHit.score`` (>= 0).
    """
    score = max(0.0, score)
    return score / (score + KEYWORD_HALF_SCORE)


@dataclass(frozen=True, slots=True)
class FusedHit:
    """A message chosen by recall, with its score (higher is better) and where it came from.

    Attributes:
        score: the fused score in ``hybrid`` mode; the retriever's own score in ``vector`` or ``keyword``
            mode.
        vector_rank, keyword_rank: the message's rank (from 1) in each retriever's list; ``None`` when that
            retriever did not return it.
        vector_score: the vector retriever's score of its best chunk (cosine similarity, -1..1).
        keyword_score: the keyword retriever's score of its best chunk (BM25, Lucene scale, >= 0).
    """

    message_id: str
    thread_id: str
    score: float
    vector_rank: int | None = None
    keyword_rank: int | None = None
    seq: int = 0
    vector_score: float | None = None
    keyword_score: float | None = None


def neighbour_support(
    base: dict[str, float], hits: Iterable[IndexHit], before: int, after: int
) -> dict[str, float]:
    """For each candidate with another candidate inside its window (same thread, ``seq`` within
    ``before``/``after``), the sum of those candidates' ``base`` scores: what the neighbours shown with it
    matched. A candidate alone in its window is left out (its support is 0)."""
    by_thread: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for hit in hits:
        by_thread[hit.thread_id].append((hit.seq, hit.message_id))
    support: dict[str, float] = {}
    for members in by_thread.values():
        if len(members) < 2:
            continue
        members.sort()
        seqs = [seq for seq, _ in members]
        scores = [base[mid] for _, mid in members]
        last = len(members) - 1
        for i, (seq, mid) in enumerate(members):
            if (i == 0 or seqs[i - 1] < seq - before) and (i == last or seqs[i + 1] > seq + after):
                continue  # its sorted neighbours are both outside the window: alone in it
            lo, hi = bisect_left(seqs, seq - before), bisect_right(seqs, seq + after)
            support[mid] = sum(scores[lo:hi]) - scores[i]  # summed in window order, as always
    return support


def fuse(
    vector: Sequence[IndexHit],
    keyword: Sequence[IndexHit],
    *,
    top_k: int,
    vector_weight: float,
    keyword_weight: float,
    rank_constant: float,
    neighbour_weight: float = 0.0,
    before: int = 0,
    after: int = 0,
    spread_depth: int | None = None,
) -> list[FusedHit]:
    """Fuse two ranked lists into at most ``top_k`` hits.

    Each message scores ``Σ weight / (rank_constant + rank)`` over the lists it appears in (rank from 1),
    plus ``neighbour_weight`` times the scores of candidates ``before``/``after`` it in its thread. Ties break
    by the better keyword rank, then vector rank, then message id, so the order is stable. With
    ``spread_depth`` the two weights are first scaled for this query by ``spread_weights``.

    Args:
        vector: vector hits, best first.
        keyword: keyword hits, best first.
        top_k: how many fused hits to return.
        vector_weight, keyword_weight: non-negative weights of the lists.
        rank_constant: ``k`` of the reciprocal-rank term (> 0).
        neighbour_weight: weight of the support from candidates in a hit's neighbour window (>= 0).
        before, after: the neighbour window, in messages (``message_range``).
        spread_depth: how many candidates each list was asked for; given, the weights follow the lists'
            spreads (``spread_weights``); ``None``: the weights as given.
    """
    if spread_depth is not None:
        vector_weight, keyword_weight = spread_weights(
            [h.score for h in vector],
            [h.score for h in keyword],
            vector_weight=vector_weight,
            keyword_weight=keyword_weight,
            depth=spread_depth,
        )
    base: dict[str, float] = {}
    hits: dict[str, IndexHit] = {}
    vranks: dict[str, int] = {}
    kranks: dict[str, int] = {}
    vscores: dict[str, float] = {}
    kscores: dict[str, float] = {}
    lists = ((vector, vector_weight, vranks, vscores), (keyword, keyword_weight, kranks, kscores))
    for found, weight, ranks, own in lists:
        for rank, hit in enumerate(found, start=1):
            if hit.message_id in ranks:
                continue
            ranks[hit.message_id] = rank
            own[hit.message_id] = hit.score
            hits.setdefault(hit.message_id, hit)
            base[hit.message_id] = base.get(hit.message_id, 0.0) + weight / (rank_constant + rank)
    scores = dict(base)
    if neighbour_weight and (before or after):
        for mid, support in neighbour_support(base, hits.values(), before, after).items():
            scores[mid] += neighbour_weight * support
    worst = len(vector) + len(keyword) + 1

    def order(mid: str) -> tuple[float, int, int, str]:
        return (-scores[mid], kranks.get(mid, worst), vranks.get(mid, worst), mid)

    chosen = sorted(scores, key=order)[:top_k]
    return [
        FusedHit(
            mid,
            hits[mid].thread_id,
            scores[mid],
            vector_rank=vranks.get(mid),
            keyword_rank=kranks.get(mid),
            seq=hits[mid].seq,
            vector_score=vscores.get(mid),
            keyword_score=kscores.get(mid),
        )
        for mid in chosen
    ]
