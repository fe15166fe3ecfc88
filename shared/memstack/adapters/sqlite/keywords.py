"""The embedded index's keyword search: a BM25 inverted index sharded by resource, in plain SQLite tables.

Why not FTS5 (ADR 0006): FTS5 keeps one inverted index for the whole file, so ``bm25()``'s document
frequencies and average length span every resource (one user's ranking changed with what other users
stored), and a query reads the global posting list of each of its terms (a resource's search cost grew with
the whole file: 0.66 ms at 10k stored messages, 5.1 ms at 1M, for the same 419-message resource). Here every
posting list and every statistic is keyed by resource, so a search reads only its resource's data and ranks
by its resource's statistics.

Tables (in the shared file, beside ``search_chunks``):

* ``search_postings`` — ``(resource_id, term, block)`` → ``postings``: the chunks of the resource that
  contain the term, in blocks of at most ``BLOCK_POSTINGS``, ordered by chunk rowid. A block's key is at
  most the smallest rowid in it and above every rowid of the block before it, so the block that holds a
  rowid is the last one whose key is ``<=`` it. ``postings`` packs three little-endian arrays of the
  block's length ``n``: ``int64`` rowids, ``int32`` term frequencies, ``int32`` chunk lengths (in tokens).
  A search reads a term's blocks as a few BLOBs and scores them with numpy, rather than one row per
  posting.
* ``search_keyword_stats`` — per resource: ``chunks`` (how many indexed chunks) and ``tokens`` (their total
  length), BM25's ``N`` and ``avgdl = tokens / chunks``.
* ``search_chunks.terms`` (a column of the chunk table): the chunk's distinct terms, space separated, so
  that deleting a chunk finds its postings without the text (the store keeps the text; this index does
  not).

Scores are FTS5's ``bm25()`` formula (k1 = 1.2, b = 0.75, ``idf = ln((N - n + 0.5) / (n + 0.5))``, at least
1e-6), with every statistic taken from the resource: on a file that holds one resource they are the scores
FTS5 gave, and on any file a resource's ranking depends only on its own chunks.

Tokens: :func:`tokens` reproduces the FTS5 tokenizer the index used (``porter unicode61
remove_diacritics 2``): runs of letters and digits, diacritics removed, case folded, then the Porter stemmer
(``PyStemmer``'s ``porter``, the original algorithm as in SQLite's ``porter`` tokenizer). The text comes from
``memstack.adapters.search_text`` like OpenSearch's (CJK characters spaced apart, emoji spelled as words).
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
import Stemmer

BLOCK_POSTINGS = 128
"""Most postings in one ``search_postings`` row (2 KiB of BLOB: a row stays within one page)."""

K1 = 1.2
"""BM25 term-frequency saturation (FTS5's and Lucene's default)."""

B = 0.75
"""BM25 length normalisation (FTS5's and Lucene's default)."""

MIN_IDF = 1e-6
"""FTS5's floor for a term in half the chunks or more (its raw idf is zero or negative)."""

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS search_postings (
        resource_id TEXT NOT NULL,
        term TEXT NOT NULL,
        block INTEGER NOT NULL,
        postings BLOB NOT NULL,
        PRIMARY KEY (resource_id, term, block)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS search_keyword_stats (
        resource_id TEXT PRIMARY KEY,
        chunks INTEGER NOT NULL,
        tokens INTEGER NOT NULL
    ) WITHOUT ROWID""",
)

_Ints = npt.NDArray[np.int64]
_Floats = npt.NDArray[np.float64]

_WORD = re.compile(r"[^\W_]+")
"""A token: a run of letters and digits (unicode61's token characters; ``_`` and marks separate)."""

_stemmer_lock = threading.Lock()
_stemmer = Stemmer.Stemmer("porter")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    with _stemmer_lock:  # a PyStemmer object is not thread-safe
        return str(_stemmer.stemWord(word))


def tokens(text: str) -> list[str]:
    """The index terms of ``text``, in order, repeats kept (see the module docstring).

    Example: ``"Caroline went hiking in the Café"`` → ``["carolin", "went", "hike", "in", "the", "cafe"]``.
    """
    folded = unicodedata.normalize("NFKD", text)
    if not folded.isascii():
        folded = "".join(c for c in folded if not unicodedata.combining(c))
    return [_stem(word) for word in _WORD.findall(folded.casefold())]


@dataclass(frozen=True, slots=True)
class Analysed:
    """One chunk as the keyword index stores it: term → frequency, and its length in tokens."""

    counts: dict[str, int]
    length: int

    @classmethod
    def of(cls, text: str) -> Analysed:
        """The chunk's terms (``tokens``) counted."""
        words = tokens(text)
        return cls(dict(Counter(words)), len(words))

    @property
    def terms(self) -> str:
        """The distinct terms, space separated (``search_chunks.terms``)."""
        return " ".join(self.counts)


def _pack(rowids: _Ints, tfs: npt.NDArray[np.int32], lengths: npt.NDArray[np.int32]) -> bytes:
    return (
        rowids.astype("<i8", copy=False).tobytes()
        + tfs.astype("<i4", copy=False).tobytes()
        + lengths.astype("<i4", copy=False).tobytes()
    )


def _unpack(blob: bytes) -> tuple[_Ints, npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    n = len(blob) // 16
    rowids = np.frombuffer(blob, dtype="<i8", count=n)
    tfs = np.frombuffer(blob, dtype="<i4", count=n, offset=8 * n)
    lengths = np.frombuffer(blob, dtype="<i4", count=n, offset=12 * n)
    return rowids, tfs, lengths


def add(conn: Any, resource_id: str, chunks: Sequence[tuple[int, Analysed]]) -> None:
    """Index these chunks of one resource (inside the caller's write transaction).

    Args:
        conn: the writer connection, in a transaction.
        resource_id: the owner of every chunk.
        chunks: ``(rowid, analysed)`` pairs; every rowid is above every rowid already indexed for the
            resource (``SqliteSearchIndex`` assigns ``max(rowid) + 1`` onwards), so postings are appended.
    """
    if not chunks:
        return
    by_term: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for rowid, analysed in sorted(chunks, key=lambda c: c[0]):
        for term, tf in analysed.counts.items():
            by_term[term].append((rowid, tf, analysed.length))
    for term, postings in by_term.items():
        new = np.array(postings, dtype=np.int64).reshape(-1, 3)
        last = conn.execute(
            "SELECT block, postings FROM search_postings WHERE resource_id = ? AND term = ? "
            "ORDER BY block DESC LIMIT 1",
            (resource_id, term),
        ).fetchone()
        start = 0
        if last is not None:
            rowids, tfs, lengths = _unpack(bytes(last[1]))
            room = BLOCK_POSTINGS - len(rowids)
            if room > 0:
                take = new[:room]
                conn.execute(
                    "UPDATE search_postings SET postings = ? WHERE resource_id = ? AND term = ? AND block = ?",
                    (
                        _pack(
                            np.concatenate([rowids, take[:, 0]]),
                            np.concatenate([tfs, take[:, 1].astype(np.int32)]),
                            np.concatenate([lengths, take[:, 2].astype(np.int32)]),
                        ),
                        resource_id,
                        term,
                        int(last[0]),
                    ),
                )
                start = len(take)
        conn.executemany(
            "INSERT INTO search_postings (resource_id, term, block, postings) VALUES (?, ?, ?, ?)",
            (
                (
                    resource_id,
                    term,
                    int(part[0, 0]),
                    _pack(part[:, 0], part[:, 1].astype(np.int32), part[:, 2].astype(np.int32)),
                )
                for part in (new[i : i + BLOCK_POSTINGS] for i in range(start, len(new), BLOCK_POSTINGS))
            ),
        )
    conn.execute(
        """INSERT INTO search_keyword_stats (resource_id, chunks, tokens) VALUES (?, ?, ?)
        ON CONFLICT (resource_id) DO UPDATE SET chunks = chunks + excluded.chunks,
            tokens = tokens + excluded.tokens""",
        (resource_id, len(chunks), sum(a.length for _, a in chunks)),
    )


def remove(conn: Any, resource_id: str, chunks: Iterable[tuple[int, str | None, int]]) -> None:
    """Remove these chunks of one resource from its postings and statistics (in the caller's transaction).

    Args:
        conn: the writer connection, in a transaction.
        resource_id: the owner of every chunk.
        chunks: ``(rowid, terms, length)`` as ``search_chunks`` holds them (``terms`` space separated).
    """
    by_term: dict[str, list[int]] = defaultdict(list)
    count = total = 0
    for rowid, terms, length in chunks:
        count += 1
        total += int(length or 0)
        for term in (terms or "").split():
            by_term[term].append(int(rowid))
    if not count:
        return
    for term, rowids in by_term.items():
        gone = np.array(sorted(rowids), dtype=np.int64)
        if len(gone) <= 8:
            blocks = [
                row
                for rowid in dict.fromkeys(gone.tolist())
                for row in conn.execute(
                    "SELECT block, postings FROM search_postings WHERE resource_id = ? AND term = ? "
                    "AND block <= ? ORDER BY block DESC LIMIT 1",
                    (resource_id, term, rowid),
                )
            ]
            blocks = list({int(b): p for b, p in blocks}.items())
        else:
            blocks = conn.execute(
                "SELECT block, postings FROM search_postings WHERE resource_id = ? AND term = ? "
                "AND block <= ?",
                (resource_id, term, int(gone[-1])),
            ).fetchall()
        for block, blob in blocks:
            rowid_arr, tfs, lengths = _unpack(bytes(blob))
            keep = ~np.isin(rowid_arr, gone)
            if keep.all():
                continue
            if not keep.any():
                conn.execute(
                    "DELETE FROM search_postings WHERE resource_id = ? AND term = ? AND block = ?",
                    (resource_id, term, int(block)),
                )
            else:
                conn.execute(
                    "UPDATE search_postings SET postings = ? WHERE resource_id = ? AND term = ? AND block = ?",
                    (_pack(rowid_arr[keep], tfs[keep], lengths[keep]), resource_id, term, int(block)),
                )
    conn.execute(
        "UPDATE search_keyword_stats SET chunks = chunks - ?, tokens = tokens - ? WHERE resource_id = ?",
        (count, total, resource_id),
    )
    conn.execute("DELETE FROM search_keyword_stats WHERE resource_id = ? AND chunks <= 0", (resource_id,))


def drop_all(conn: Any) -> None:
    """Remove every posting and statistic of every resource (a rebuild, in the caller's transaction)."""
    for statement in SCHEMA:
        conn.execute(f"DELETE FROM {statement.split()[5]}")


def drop_resource(conn: Any, resource_id: str) -> None:
    """Remove every posting and the statistics of the resource (in the caller's transaction)."""
    conn.execute("DELETE FROM search_postings WHERE resource_id = ?", (resource_id,))
    conn.execute("DELETE FROM search_keyword_stats WHERE resource_id = ?", (resource_id,))


def query_tokens(terms: Iterable[str]) -> list[str]:
    """The index terms of a query's words (``search_text.query_terms``), one per word that has one.

    Two words with one stem ("dog", "dogs") count twice, as two ``OR``-ed FTS5 phrases did; a word that
    splits into several tokens contributes each of them.
    """
    return [token for term in terms for token in tokens(term)]


def score(conn: Any, resource_id: str, query: Sequence[str]) -> tuple[_Ints, _Floats]:
    """BM25 of every chunk of the resource that contains a query term, from the resource's statistics.

    Args:
        conn: a connection reading one snapshot.
        resource_id: the resource searched.
        query: the query's index terms (``query_tokens``), repeats weighing as often as they occur.

    Returns:
        ``(rowids, scores)``: the matching chunks (ascending rowid) and their BM25 (positive, FTS5's scale:
        ``-bm25()``). Empty arrays when nothing matches.
    """
    empty = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64))
    stats = conn.execute(
        "SELECT chunks, tokens FROM search_keyword_stats WHERE resource_id = ?", (resource_id,)
    ).fetchone()
    if stats is None or not query or int(stats[0]) <= 0:
        return empty
    chunks, avgdl = int(stats[0]), max(int(stats[1]), 1) / int(stats[0])
    found_rowids: list[_Ints] = []
    found_scores: list[_Floats] = []
    for term, weight in Counter(query).items():
        blobs = conn.execute(
            "SELECT postings FROM search_postings WHERE resource_id = ? AND term = ? ORDER BY block",
            (resource_id, term),
        ).fetchall()
        if not blobs:
            continue
        parts = [_unpack(bytes(b[0])) for b in blobs]
        rowids = np.concatenate([p[0] for p in parts])
        tfs = np.concatenate([p[1] for p in parts]).astype(np.float64)
        lengths = np.concatenate([p[2] for p in parts]).astype(np.float64)
        n = len(rowids)
        idf = math.log((chunks - n + 0.5) / (n + 0.5))
        idf = idf if idf > 0 else MIN_IDF
        found_rowids.append(rowids)
        found_scores.append(weight * idf * tfs * (K1 + 1) / (tfs + K1 * (1 - B + B * lengths / avgdl)))
    if not found_rowids:
        return empty
    if len(found_rowids) == 1:
        return found_rowids[0].astype(np.int64), found_scores[0]
    everything = np.concatenate(found_rowids)
    unique, inverse = np.unique(everything, return_inverse=True)
    totals: _Floats = np.bincount(inverse, weights=np.concatenate(found_scores)).astype(np.float64)
    return unique.astype(np.int64), totals
