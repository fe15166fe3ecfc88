"""Exact top-k keyword search over a resource's postings that skips the blocks which cannot reach the top.

``keywords.score`` scores every posting of every query term; in a resource of 100k chunks a term in half of
them (a speaker's name, a year every chunk's date spells) is 50k postings read and scored for a weight near
zero (ADR 0009). :func:`top` returns the same best chunks, with the same scores, from a fraction of the
blocks: MaxScore (Turtle and Flood, 1995) over block-max bounds (Ding and Suel, "Faster top-k document
retrieval using block-max indexes", SIGIR 2011).

Each block of ``search_postings`` keeps its last rowid, largest term frequency and shortest chunk
(``keywords``); its bound is ``keywords.term_weight`` of those two, so no posting in the block weighs more,
whatever BM25's statistics are when the query runs. The search decodes blocks best bound first, in rounds
that double, and after each round takes ``theta``, the ``k``-th best score so far (scores only grow as more
blocks are decoded, so the true ``k``-th best is at least ``theta``). It stops when no undecoded block can
matter:

* a chunk found in no decoded block holds none of the decoded blocks' terms in their ranges, so it scores
  at most its undecoded block's bound plus, for each other term, the largest bound among that term's
  undecoded blocks; a block where that is below ``theta`` holds no chunk of the top;
* a chunk already found but missing the postings of undecoded blocks whose ranges cover it scores at most
  what it has plus their bounds; when that is below ``theta`` it is not in the top, otherwise those blocks
  are decoded.

Then every chunk scoring ``theta`` or more has all its postings decoded and its score is exact: the same
floats ``keywords.score`` computes, since each posting's weight comes from the same function and a chunk's
weights are summed in the same order (query terms in order, blocks in rowid order, pending postings last).
Bounds are compared with a relative slack (``SLACK``) so that rounding never prunes a chunk that ties.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from memstack.adapters.sqlite import keywords

SLACK = 1e-9
"""Relative margin on every bound: the bound of a block and a chunk's summed weights are computed in
different orders, so they may differ in their last bits; a margin far above that keeps pruning exact."""

FIRST_ROUND_BLOCKS = 32
"""Blocks decoded in the first round (best bound first); each later round may decode twice as many."""

GAP_BLOCKS = 8
"""Chosen blocks of a term at most this many blocks apart are read as one range (``_fetch``)."""

_PROBE = 1e12
"""Added to the priority of a block that may complete a candidate, so it is decoded before the others."""

_Ints = npt.NDArray[np.int64]
_Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class TopChunks:
    """The best chunks of a keyword search, and how far below them the rest lies.

    Attributes:
        rowids: the chunks, best first (score descending, then rowid ascending); at least ``k`` of them
            when that many match, more when chunks tie with the ``k``-th.
        scores: their BM25 (FTS5's scale, as ``keywords.score``), exact.
        floor: every matching chunk not listed scores strictly below this; ``0.0`` when every matching
            chunk is listed.
    """

    rowids: _Ints
    scores: _Floats
    floor: float


_EMPTY = TopChunks(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64), 0.0)


@dataclass(slots=True)
class _Blocks:
    """Every block of the query's terms (their postings not read), in term order then rowid order."""

    term: _Ints  # index into the query's distinct terms
    key: _Ints  # the block's key: at most its first rowid, above every rowid of the term's block before it
    end: _Ints  # its last rowid
    max_tf: _Floats  # its largest term frequency
    min_length: _Floats  # its shortest chunk, in tokens
    postings: _Ints  # how many postings it holds
    offsets: _Ints  # term i's blocks are [offsets[i], offsets[i + 1])
    bound: _Floats  # the largest weight (query weight included) any of its postings can have
    decoded: npt.NDArray[np.bool_]


class _Weigher:
    """A query's weight of a term in chunks, from the resource's statistics (``keywords.term_weight``)."""

    def __init__(self, weights: Counter[str], terms: list[str], df: list[int], chunks: int, avgdl: float):
        self.factors = [float(weights[t]) for t in terms]
        self.df, self.chunks, self.avgdl = df, chunks, avgdl

    def __call__(self, i: int, tf: _Floats, length: _Floats) -> _Floats:
        weight = keywords.term_weight(tf, length, df=self.df[i], chunks=self.chunks, avgdl=self.avgdl)
        return self.factors[i] * weight


def top(conn: Any, resource_id: str, query: Sequence[str], k: int) -> TopChunks:
    """The ``k`` best chunks of the resource for these query terms, as exhaustive BM25 ranks them.

    Args:
        conn: a connection reading one snapshot.
        resource_id: the resource searched.
        query: the query's index terms (``keywords.query_tokens``), repeats weighing as often as they occur.
        k: how many chunks at least, when that many match (≥ 1).

    Returns:
        ``TopChunks``: its first ``k`` chunks (and any tying with the ``k``-th) are those
        ``keywords.score`` ranks first, ordered by score then rowid, with the same scores.
    """
    stats = conn.execute(
        "SELECT chunks, tokens FROM search_keyword_stats WHERE resource_id = ?", (resource_id,)
    ).fetchone()
    if stats is None or not query or int(stats[0]) <= 0:
        return _EMPTY
    chunks, avgdl = int(stats[0]), max(int(stats[1]), 1) / int(stats[0])
    weights = Counter(query)
    terms = list(weights)
    pending = keywords.pending_postings(conn, resource_id, terms)
    blocks = _read_blocks(conn, resource_id, terms)
    counts = [
        int(blocks.postings[blocks.offsets[i] : blocks.offsets[i + 1]].sum()) for i in range(len(terms))
    ]
    weigh = _Weigher(
        weights,
        terms,
        [c + len(pending.get(t, ())) for c, t in zip(counts, terms, strict=True)],
        chunks,
        avgdl,
    )
    for i in range(len(terms)):
        at = slice(blocks.offsets[i], blocks.offsets[i + 1])
        blocks.bound[at] = weigh(i, blocks.max_tf[at], blocks.min_length[at])
    runs: list[list[_Decoded]] = [[] for _ in terms]  # per term, its decoded postings
    for i, t in enumerate(terms):
        if t in pending:
            runs[i].append(_Decoded.of(pending[t], weigh, i))
    batch = FIRST_ROUND_BLOCKS
    while True:
        found = _sum(runs)
        n = len(found.rowids)
        theta = float(np.partition(found.known, n - k)[n - k]) if n >= k else 0.0
        priority = _live(blocks, found, theta, weigh)
        chosen = np.flatnonzero(priority > 0)
        if not len(chosen):
            break
        if len(chosen) > batch:
            chosen = chosen[np.argsort(-priority[chosen], kind="stable")[:batch]]
        for i, postings in _fetch(conn, resource_id, terms, blocks, chosen):
            runs[i].append(_Decoded.of(postings, weigh, i))
        batch *= 8
    keep = found.known >= theta
    rowids, known = found.rowids[keep], found.known[keep]
    order = np.lexsort((rowids, -known))
    return TopChunks(rowids[order], known[order], theta)


@dataclass(frozen=True, slots=True)
class _Decoded:
    """A run of one term's postings, decoded: rowids, the chunks' lengths and the term's weights."""

    rowids: _Ints
    lengths: _Floats
    weights: _Floats

    @classmethod
    def of(cls, postings: npt.NDArray[np.void], weigh: _Weigher, term: int) -> _Decoded:
        tf, length = postings["tf"].astype(np.float64), postings["length"].astype(np.float64)
        return cls(postings["rowid"].astype(np.int64), length, weigh(term, tf, length))


@dataclass(frozen=True, slots=True)
class _Found:
    """Every chunk found so far (ascending rowid), its length, and the sum of its weights found so far."""

    rowids: _Ints
    lengths: _Floats
    known: _Floats


def _read_blocks(conn: Any, resource_id: str, terms: list[str]) -> _Blocks:
    """The query terms' blocks, from ``search_block_bounds`` (a few pages: no posting is read)."""
    rows = conn.execute(
        "SELECT term, block, last_rowid, postings, max_tf, min_length FROM search_block_bounds "
        "WHERE resource_id = ? AND term IN (SELECT value FROM json_each(?))",
        (resource_id, json.dumps(terms)),
    ).fetchall()
    position = {t: i for i, t in enumerate(terms)}
    rows.sort(key=lambda r: (position[r[0]], r[1]))
    n = len(rows)
    columns = np.array([r[1:] for r in rows], dtype=np.int64).reshape(n, 5)
    term = np.fromiter((position[r[0]] for r in rows), dtype=np.int64, count=n)
    return _Blocks(
        term=term,
        key=columns[:, 0].copy(),
        end=columns[:, 1].copy(),
        postings=columns[:, 2].copy(),
        max_tf=columns[:, 3].astype(np.float64),
        min_length=columns[:, 4].astype(np.float64),
        offsets=np.searchsorted(term, np.arange(len(terms) + 1)).astype(np.int64),
        bound=np.empty(n, dtype=np.float64),
        decoded=np.zeros(n, dtype=bool),
    )


def _sum(runs: list[list[_Decoded]]) -> _Found:
    """The chunks found so far and their weights summed.

    A chunk has at most one posting per term, so its weights are summed in ``keywords.score``'s order
    (query term by query term) whatever order each term's blocks were decoded in: a chunk whose postings
    are all decoded gets the very float ``keywords.score`` gives it.
    """
    ordered = [run for term in runs for run in term]
    if not ordered:
        return _Found(np.empty(0, dtype=np.int64), np.empty(0), np.empty(0))
    unique, first, inverse = np.unique(
        np.concatenate([r.rowids for r in ordered]), return_index=True, return_inverse=True
    )
    weights = np.concatenate([r.weights for r in ordered])
    known: _Floats = np.bincount(inverse, weights=weights).astype(np.float64)
    return _Found(unique.astype(np.int64), np.concatenate([r.lengths for r in ordered])[first], known)


def _live(blocks: _Blocks, found: _Found, theta: float, weigh: _Weigher) -> _Floats:
    """How much each undecoded block matters: 0 when it holds no chunk that can score ``theta`` or more
    (the module docstring's two rules), else the most such a chunk could score (decode the largest first)."""
    undecoded = ~blocks.decoded
    terms = len(blocks.offsets) - 1
    best = np.zeros(terms)  # per term, the largest bound among its undecoded blocks
    for i in range(terms):
        at = slice(blocks.offsets[i], blocks.offsets[i + 1])
        open_bounds = blocks.bound[at][undecoded[at]]
        best[i] = open_bounds.max() if len(open_bounds) else 0.0
    unseen = (blocks.bound + (best.sum() - best[blocks.term])) * (1 + SLACK)
    # Among blocks live for unseen chunks, the rarest terms' first (the largest own bound): they find the
    # candidates; a block that may complete a candidate comes before them (PROBE + its potential).
    priority: _Floats = np.where(undecoded & (unseen >= theta), blocks.bound, 0.0)
    if not len(found.rowids):
        return priority
    # A chunk found has a known length: the blocks that may still add to it are bounded at that length.
    missing = np.zeros(len(found.rowids))
    covering: list[tuple[_Ints, npt.NDArray[np.bool_]]] = []
    for i in range(terms):
        lo, hi = int(blocks.offsets[i]), int(blocks.offsets[i + 1])
        if lo == hi or not undecoded[lo:hi].any():
            continue
        index = lo + np.searchsorted(blocks.key[lo:hi], found.rowids, side="right") - 1
        inside = index >= lo
        index = np.where(inside, index, lo)
        inside &= (found.rowids <= blocks.end[index]) & undecoded[index]
        if not inside.any():
            continue
        bound = weigh(i, blocks.max_tf[index[inside]], found.lengths[inside])
        missing[inside] += bound
        covering.append((index, inside))
    potential = (found.known + missing) * (1 + SLACK)
    wanted = (missing > 0) & (potential >= theta)
    for index, inside in covering:
        hit = inside & wanted
        np.maximum.at(priority, index[hit], _PROBE + potential[hit])
    return priority


def _fetch(
    conn: Any, resource_id: str, terms: list[str], blocks: _Blocks, chosen: _Ints
) -> list[tuple[int, npt.NDArray[np.void]]]:
    """Decode the chosen blocks (indexes into ``blocks``), and the undecoded ones near them.

    Reading the blocks between two chosen ones of a term costs less than seeking each (a seek in the
    primary key costs about what reading eight neighbouring rows does, measured), and a block decoded
    early is never wrong: so chosen blocks up to ``GAP_BLOCKS`` apart are read as one range. Marks every
    block it decodes; returns each term's new postings as one run.
    """
    fetched: list[tuple[int, npt.NDArray[np.void]]] = []
    for i in np.unique(blocks.term[chosen]).tolist():
        lo = int(blocks.offsets[i])
        mine = np.sort(chosen[blocks.term[chosen] == i])
        starts = np.flatnonzero(np.diff(mine, prepend=-GAP_BLOCKS - 1) > GAP_BLOCKS)
        ends = np.append(starts[1:], len(mine)) - 1
        spans = [
            [int(blocks.key[mine[a]]), int(blocks.key[mine[b]])] for a, b in zip(starts, ends, strict=True)
        ]
        keys = blocks.key[lo : int(blocks.offsets[i + 1])]
        parts: list[bytes] = []
        for block, blob in conn.execute(
            "SELECT p.block, p.postings FROM json_each(?3) AS j CROSS JOIN search_postings AS p "
            "ON p.resource_id = ?1 AND p.term = ?2 AND p.block BETWEEN j.value ->> 0 AND j.value ->> 1",
            (resource_id, terms[i], json.dumps(spans)),
        ):
            index = lo + int(np.searchsorted(keys, block))
            if index < len(blocks.key) and blocks.key[index] == block and not blocks.decoded[index]:
                blocks.decoded[index] = True
                parts.append(bytes(blob))
        blocks.decoded[mine] = True  # a chosen block gone since its bounds were read holds nothing
        fetched.append((i, keywords.unpack(b"".join(parts))))
    return fetched
