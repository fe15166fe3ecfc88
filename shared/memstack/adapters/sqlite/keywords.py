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
  rowid is the last one whose key is ``<=`` it. ``postings`` is a run of 16-byte little-endian records
  (``int64`` rowid, ``int32`` term frequency, ``int32`` chunk length in tokens), so appending is
  concatenation.
  A search reads a term's blocks as a few BLOBs and scores them with numpy, rather than one row per
  posting.
* ``search_pending_chunks`` — ``(resource_id, rowid)`` → ``counts``, ``length``: recently written chunks
  whose postings are not yet merged into the blocks, one row a chunk (``counts``, a JSON object term →
  frequency; ``add``: a save writes one row, one or two pages).
* ``search_keyword_stats`` — per resource: ``chunks`` (how many indexed chunks) and ``tokens`` (their total
  length), BM25's ``N`` and ``avgdl = tokens / chunks``; ``pending``, the chunks in the pending table.
* ``search_chunks.terms`` (a column of the chunk table): the chunk's distinct terms, space separated, so
  that deleting a chunk finds its postings without the text (the store keeps the text; this index does
  not).

Scores are FTS5's ``bm25()`` formula (k1 = 1.2, b = 0.75, ``idf = ln((N - n + 0.5) / (n + 0.5))``, at least
1e-6), with every statistic taken from the resource: on a file that holds one resource they are the scores
FTS5 gave, and on any file a resource's ranking depends only on its own chunks.

Tokens: :func:`tokens` follows the FTS5 tokenizer the index used (``porter unicode61
remove_diacritics 2``), with a wider fold (:func:`fold`: compatibility forms and case, as OpenSearch's
``asciifolding`` folds Latin letters): runs of letters and digits, diacritics removed, then the Porter stemmer
(``PyStemmer``'s ``porter``, the original algorithm) on words of three letters or more, as SQLite's
``porter`` tokenizer does, with the C reference's two step-2 departures SQLite's stemmer has (``logi`` →
``log``, ``bli`` → ``ble``). The text comes from
``memstack.adapters.search_text`` like OpenSearch's (CJK characters spaced apart, emoji spelled as words).
"""

from __future__ import annotations

import json
import math
import re
import struct
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

MERGE_PENDING = 64
"""Pending chunks of a resource at which they are merged into its blocks (``add``)."""

K1 = 1.2
"""BM25 term-frequency saturation (FTS5's and Lucene's default)."""

B = 0.75
"""BM25 length normalisation (FTS5's and Lucene's default)."""

DENSE_SPAN = 16
"""Scores are summed over the rowid span (``score``) while it is at most this many times the postings."""

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
    """CREATE TABLE IF NOT EXISTS search_pending_chunks (
        resource_id TEXT NOT NULL,
        rowid INTEGER NOT NULL,
        counts TEXT NOT NULL,
        length INTEGER NOT NULL,
        PRIMARY KEY (resource_id, rowid)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS search_keyword_stats (
        resource_id TEXT PRIMARY KEY,
        chunks INTEGER NOT NULL,
        tokens INTEGER NOT NULL,
        pending INTEGER NOT NULL DEFAULT 0
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
    if len(word) < 3:  # as SQLite's porter tokenizer: "is", "as", "us" and the "s" of "it's" stay whole
        return word
    with _stemmer_lock:  # a PyStemmer object is not thread-safe
        stem = str(_stemmer.stemWord(word))
        # The C reference's step-2 departures, which SQLite's porter has and Snowball's lacks
        # ("technologi" → "technolog", "incredibli" → "incredible" → … "incred").
        if stem.endswith("logi") and _measure(stem[:-4]) > 0:
            stem = stem[:-1]
        elif stem.endswith("bli") and _measure(stem[:-3]) > 0:
            stem = str(_stemmer.stemWord(stem[:-1] + "e"))
        return stem


def _measure(stem: str) -> int:
    """Porter's m: how many vowel-consonant sequences ``stem`` has (``y`` after a consonant is a vowel)."""
    pattern = ""
    for i, c in enumerate(stem):
        vowel = c in "aeiou" or (c == "y" and i > 0 and pattern[-1] == "c")
        pattern += "v" if vowel else "c"
    return pattern.replace("vc", "|").count("|") if "vc" in pattern else 0


def fold(text: str) -> str:
    """``text`` as the index compares it: compatibility forms and case folded, diacritics removed.

    Unicode's compatibility caseless matching (NFKD of the case fold of NFKD, Unicode §3.13), then every
    combining mark dropped: "Straße" → "strasse", "ﬁle" → "file", full-width "ＡＢＣ" → "abc", "Café" →
    "cafe", "²" → "2". OpenSearch's ``asciifolding`` filter folds these Latin forms the same way, so both
    backends match them alike. ASCII text only has its case lowered (the same result, without the work).
    """
    if text.isascii():
        return text.lower()
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).casefold())
    return "".join(c for c in folded if not unicodedata.combining(c))


def tokens(text: str) -> list[str]:
    """The index terms of ``text``, in order, repeats kept (see the module docstring).

    Example: ``"Caroline went hiking in the Café"`` → ``["carolin", "went", "hike", "in", "the", "cafe"]``.
    """
    return [_stem(word) for word in _WORD.findall(fold(text))]


def refold(conn: Any) -> set[str]:
    """Re-derive the postings of every resource whose terms ``fold`` now writes differently (an index
    written when only canonical decompositions and lower case were folded: "straße", "ﬁle", full-width
    letters stayed as they were), in the caller's write transaction.

    The text is not kept here, so each changed term is re-tokenized from the term itself (its frequency
    and the chunk's length carried over); a term that now splits into several (``"½"`` → ``1 2``) adds to
    the length. Porter stems of a stem can differ from the word's in rare words; ``memstack reindex``
    rebuilds from the stored messages for an exact index.

    Returns:
        The resources whose postings were rewritten (their generation must be advanced).
    """
    changed_terms: dict[str, set[str]] = defaultdict(set)
    for resource_id, term in conn.execute(
        "SELECT DISTINCT resource_id, term FROM search_postings WHERE term GLOB '*[^ -~]*' UNION "
        "SELECT DISTINCT p.resource_id, j.key FROM search_pending_chunks AS p, json_each(p.counts) AS j "
        "WHERE j.key GLOB '*[^ -~]*'"
    ):
        if tokens(term) != [term]:
            changed_terms[resource_id].add(term)
    for resource_id, changed in changed_terms.items():
        merge(conn, resource_id)
        counts: dict[int, dict[str, int]] = defaultdict(dict)
        for term, blob in conn.execute(
            "SELECT term, postings FROM search_postings WHERE resource_id = ? ORDER BY term, block",
            (resource_id,),
        ):
            postings = unpack(bytes(blob))
            for rowid, tf in zip(postings["rowid"].tolist(), postings["tf"].tolist(), strict=True):
                counts[rowid][term] = tf
        chunks: list[tuple[int, Analysed]] = []
        rows = conn.execute(
            "SELECT rowid, length FROM search_chunks WHERE resource_id = ? ORDER BY rowid", (resource_id,)
        ).fetchall()
        for rowid, length in rows:
            new: Counter[str] = Counter()
            size = int(length)
            for term, tf in counts.get(int(rowid), {}).items():
                if term not in changed:
                    new[term] += tf
                    continue
                parts = tokens(term)
                size += tf * (len(parts) - 1)
                for part in parts:
                    new[part] += tf
            chunks.append((int(rowid), Analysed(dict(new), size)))
        drop_resource(conn, resource_id)
        _append_blocks(conn, resource_id, chunks)
        conn.execute(
            "INSERT INTO search_keyword_stats (resource_id, chunks, tokens) VALUES (?, ?, ?)",
            (resource_id, len(chunks), sum(a.length for _, a in chunks)),
        )
        conn.executemany(
            "UPDATE search_chunks SET terms = ?, length = ? WHERE rowid = ?",
            ((a.terms, a.length, rowid) for rowid, a in chunks),
        )
    return set(changed_terms)


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


POSTING = np.dtype([("rowid", "<i8"), ("tf", "<i4"), ("length", "<i4")])
"""One posting as stored: the chunk's rowid, the term's frequency in it, the chunk's length in tokens."""


_POSTING_STRUCT = struct.Struct("<qii")
"""The same 16 bytes, for packing a few postings without numpy."""


def term_weight(tf: _Floats, length: _Floats, *, df: int, chunks: int, avgdl: float) -> _Floats:
    """BM25 weight of one term in chunks: FTS5's ``bm25()`` term (k1 ``K1``, b ``B``, idf floored at ``MIN_IDF``).

    The one place a term's weight in a chunk is computed, so that a change of the formula reaches every
    caller, and a top-k search that bounds a run of postings by this function of their largest ``tf`` and
    shortest ``length`` (MaxScore, ADR 0010) stays exact: BM25's saturation and length normalisation make it
    non-decreasing in ``tf`` and non-increasing in ``length``, which such a bound needs.

    Args:
        tf: the term's frequency in each chunk (float64, ≥ 1).
        length: each chunk's length in tokens (float64, ≥ 0).
        df: how many chunks of the resource contain the term.
        chunks: how many chunks the resource holds (BM25's ``N``).
        avgdl: the resource's average chunk length in tokens.

    Returns:
        One positive weight per chunk, FTS5's scale (``-bm25()``; the index divides by 2.2 for Lucene's).
    """
    idf = math.log((chunks - df + 0.5) / (df + 0.5))
    idf = idf if idf > 0 else MIN_IDF
    # ``idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl))``, each operation in that order
    # (the same floats), in two buffers instead of a temporary per operation: this runs over every posting
    # of every query term.
    lower = np.multiply(length, B)
    lower /= avgdl
    lower += 1 - B
    lower *= K1
    lower += tf
    weights: _Floats = np.multiply(tf, idf)
    weights *= K1 + 1
    weights /= lower
    return weights


def unpack(blob: bytes) -> npt.NDArray[np.void]:
    """The postings of a BLOB, as a structured array (fields ``rowid``, ``tf``, ``length``)."""
    return np.frombuffer(blob, dtype=POSTING)


def add(conn: Any, resource_id: str, chunks: Sequence[tuple[int, Analysed]]) -> bool:
    """Index these chunks of one resource (inside the caller's write transaction).

    Each chunk goes to ``search_pending_chunks`` as one row (its term counts as JSON), so that a save
    writes one or two pages in one statement (appending to each term's block would dirty a page per term,
    and the commit writes every dirty page; a row per posting cost a B-tree insert per term). Once
    ``MERGE_PENDING`` chunks are pending they are merged into the blocks in one go; a search reads the
    pending postings of its terms besides the blocks. A batch of ``MERGE_PENDING`` chunks or more (a bulk
    write) goes to the blocks directly.

    Args:
        conn: the writer connection, in a transaction.
        resource_id: the owner of every chunk.
        chunks: ``(rowid, analysed)`` pairs; every rowid is above every rowid already indexed for the
            resource (``SqliteSearchIndex`` assigns ``max(rowid) + 1`` onwards), so postings are appended.

    Returns:
        Whether the resource's pending chunks were merged into its blocks (none are pending after it).
    """
    if not chunks:
        return False
    if len(chunks) >= MERGE_PENDING:  # a bulk write: straight to the blocks, after what is pending
        merge(conn, resource_id)
        _append_blocks(conn, resource_id, chunks)
        conn.execute(
            """INSERT INTO search_keyword_stats (resource_id, chunks, tokens) VALUES (?, ?, ?)
            ON CONFLICT (resource_id) DO UPDATE SET chunks = chunks + excluded.chunks,
                tokens = tokens + excluded.tokens""",
            (resource_id, len(chunks), sum(a.length for _, a in chunks)),
        )
        return True
    conn.executemany(
        "INSERT INTO search_pending_chunks (resource_id, rowid, counts, length) VALUES (?, ?, ?, ?)",
        [
            (resource_id, rowid, json.dumps(analysed.counts, ensure_ascii=False), analysed.length)
            for rowid, analysed in chunks
        ],
    )
    pending = conn.execute(
        """INSERT INTO search_keyword_stats (resource_id, chunks, tokens, pending) VALUES (?1, ?2, ?3, ?2)
        ON CONFLICT (resource_id) DO UPDATE SET chunks = chunks + excluded.chunks,
            tokens = tokens + excluded.tokens, pending = pending + excluded.pending
        RETURNING pending""",
        (resource_id, len(chunks), sum(a.length for _, a in chunks)),
    ).fetchone()[0]
    if int(pending) >= MERGE_PENDING:
        merge(conn, resource_id)
        return True
    return False


def merge(conn: Any, resource_id: str) -> None:
    """Move the resource's pending postings into its blocks (in the caller's write transaction)."""
    row = conn.execute(
        "SELECT pending FROM search_keyword_stats WHERE resource_id = ?", (resource_id,)
    ).fetchone()
    if row is None or not row[0]:
        return
    chunks = [
        (int(rowid), Analysed(json.loads(counts), int(length)))
        for rowid, counts, length in conn.execute(
            "DELETE FROM search_pending_chunks WHERE resource_id = ? RETURNING rowid, counts, length",
            (resource_id,),
        ).fetchall()
    ]
    _append_blocks(conn, resource_id, sorted(chunks, key=lambda c: c[0]))
    conn.execute("UPDATE search_keyword_stats SET pending = 0 WHERE resource_id = ?", (resource_id,))


def _append_blocks(conn: Any, resource_id: str, chunks: Sequence[tuple[int, Analysed]]) -> None:
    """Append these chunks' postings to the resource's blocks (rowids above every one in the blocks).

    Three statements whatever the number of terms: one reads each term's last block (its key and size),
    one appends to the blocks with room (``CAST(postings || ? AS BLOB)``, byte for byte in a UTF-8 file:
    postings are fixed-size records, so an append never reads the block), one inserts new blocks.
    """
    if not chunks:
        return
    by_term: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for rowid, analysed in sorted(chunks, key=lambda c: c[0]):
        for term, tf in analysed.counts.items():
            by_term[term].append((rowid, tf, analysed.length))
    # One seek per term (ORDER BY … DESC LIMIT 1 on the primary key); a join on max(block) was planned
    # as a scan of the term's blocks.
    last = {
        term: (int(block), int(size) // POSTING.itemsize)
        for term, block, size in conn.execute(
            "SELECT j.value, "
            "(SELECT block FROM search_postings WHERE resource_id = ?1 AND term = j.value "
            "ORDER BY block DESC LIMIT 1), "
            "(SELECT length(postings) FROM search_postings WHERE resource_id = ?1 AND term = j.value "
            "ORDER BY block DESC LIMIT 1) "
            "FROM json_each(?2) AS j",
            (resource_id, json.dumps(list(by_term))),
        )
        if block is not None
    }
    appends: list[tuple[bytes, str, str, int]] = []
    inserts: list[tuple[str, str, int, bytes]] = []
    for term, postings in by_term.items():
        start = 0
        if term in last:
            block, size = last[term]
            start = max(0, BLOCK_POSTINGS - size)
            if start:
                appends.append((_pack(postings[:start]), resource_id, term, block))
        for i in range(start, len(postings), BLOCK_POSTINGS):
            part = postings[i : i + BLOCK_POSTINGS]
            inserts.append((resource_id, term, part[0][0], _pack(part)))
    conn.executemany(
        "UPDATE search_postings SET postings = CAST(postings || ? AS BLOB) WHERE resource_id = ? AND term = ? AND block = ?",
        appends,
    )
    conn.executemany(
        "INSERT INTO search_postings (resource_id, term, block, postings) VALUES (?, ?, ?, ?)", inserts
    )


def _pack(postings: Sequence[tuple[int, int, int]]) -> bytes:
    return b"".join(_POSTING_STRUCT.pack(*posting) for posting in postings)


def remove(conn: Any, resource_id: str, chunks: Iterable[tuple[int, str | None, int]]) -> None:
    """Remove these chunks of one resource from its postings and statistics (in the caller's transaction).

    Args:
        conn: the writer connection, in a transaction.
        resource_id: the owner of every chunk.
        chunks: ``(rowid, terms, length)`` as ``search_chunks`` holds them (``terms`` space separated).
    """
    by_term: dict[str, list[int]] = defaultdict(list)
    rowids_of: dict[int, None] = {}
    total = 0
    for rowid, terms, length in chunks:
        rowids_of[int(rowid)] = None
        total += int(length or 0)
        for term in (terms or "").split():
            by_term[term].append(int(rowid))
    count = len(rowids_of)
    if not count:
        return
    was_pending = {
        rowid
        for rowid in rowids_of
        if conn.execute(
            "DELETE FROM search_pending_chunks WHERE resource_id = ? AND rowid = ? RETURNING 1",
            (resource_id, rowid),
        ).fetchall()
    }
    for term, rowids in by_term.items():
        rowids = [r for r in rowids if r not in was_pending]
        if not rowids:
            continue
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
            postings = unpack(bytes(blob))
            keep = ~np.isin(postings["rowid"], gone)
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
                    (postings[keep].tobytes(), resource_id, term, int(block)),
                )
    conn.execute(
        "UPDATE search_keyword_stats SET chunks = chunks - ?, tokens = tokens - ?, pending = pending - ? "
        "WHERE resource_id = ?",
        (count, total, len(was_pending), resource_id),
    )
    conn.execute("DELETE FROM search_keyword_stats WHERE resource_id = ? AND chunks <= 0", (resource_id,))


def migrate_pending(conn: Any) -> None:
    """Move an earlier file's pending postings, one row a posting in ``search_keyword_pending``, to one row
    a chunk in ``search_pending_chunks``, then drop the old table (in the caller's write transaction;
    nothing to do on a file without it). The pending counts in ``search_keyword_stats`` stay as they are."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'search_keyword_pending'").fetchone() is None:
        return
    chunks: dict[tuple[str, int], Analysed] = {}
    for resource_id, rowid, term, tf, length in conn.execute(
        "SELECT resource_id, rowid, term, tf, length FROM search_keyword_pending"
    ):
        chunks.setdefault((resource_id, int(rowid)), Analysed({}, int(length))).counts[term] = int(tf)
    conn.executemany(
        "INSERT INTO search_pending_chunks (resource_id, rowid, counts, length) VALUES (?, ?, ?, ?)",
        [
            (resource_id, rowid, json.dumps(analysed.counts, ensure_ascii=False), analysed.length)
            for (resource_id, rowid), analysed in chunks.items()
        ],
    )
    conn.execute("DROP TABLE search_keyword_pending")


def drop_all(conn: Any) -> None:
    """Remove every posting and statistic of every resource (a rebuild, in the caller's transaction)."""
    for statement in SCHEMA:
        conn.execute(f"DELETE FROM {statement.split()[5]}")


def drop_resource(conn: Any, resource_id: str) -> None:
    """Remove every posting and the statistics of the resource (in the caller's transaction)."""
    conn.execute("DELETE FROM search_postings WHERE resource_id = ?", (resource_id,))
    conn.execute("DELETE FROM search_pending_chunks WHERE resource_id = ?", (resource_id,))
    conn.execute("DELETE FROM search_keyword_stats WHERE resource_id = ?", (resource_id,))


def query_tokens(terms: Iterable[str]) -> list[str]:
    """The index terms of a query's words (``search_text.query_terms``), one per word that has one.

    Two words with one stem ("dog", "dogs") count twice, as two ``OR``-ed FTS5 phrases did; a word that
    splits into several tokens contributes each of them.
    """
    return [token for term in terms for token in tokens(term)]


def pending_postings(conn: Any, resource_id: str, terms: Sequence[str]) -> dict[str, npt.NDArray[np.void]]:
    """The resource's pending (not yet merged) postings of these terms, each term's in ascending rowid.

    Returns:
        term → structured array (``POSTING``'s fields); terms without pending postings are absent.
    """
    found: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for term, rowid, tf, length in conn.execute(
        "SELECT j.key, p.rowid, j.value, p.length FROM search_pending_chunks AS p, json_each(p.counts) AS j "
        "WHERE p.resource_id = ? AND j.key IN (SELECT value FROM json_each(?)) ORDER BY j.key, p.rowid",
        (resource_id, json.dumps(list(terms))),
    ):
        found[term].append((rowid, tf, length))
    return {term: np.array(postings, dtype=POSTING) for term, postings in found.items()}


Postings = tuple[_Ints, _Floats, _Floats]
"""A term's postings in one resource as columns: chunk rowids (ascending), term frequencies and chunk
lengths in tokens (both float64, as ``term_weight`` takes them)."""


def stats(conn: Any, resource_id: str) -> tuple[int, int] | None:
    """The resource's BM25 statistics ``(chunks, tokens)``, or ``None`` when it has no indexed chunk."""
    row = conn.execute(
        "SELECT chunks, tokens FROM search_keyword_stats WHERE resource_id = ?", (resource_id,)
    ).fetchone()
    if row is None or int(row[0]) <= 0:
        return None
    return int(row[0]), int(row[1])


def read_postings(conn: Any, resource_id: str, terms: Sequence[str]) -> dict[str, Postings]:
    """Every posting of these terms in the resource (its blocks, then its pending postings), as columns.

    Args:
        conn: a connection reading one snapshot.
        resource_id: the resource read.
        terms: distinct index terms.

    Returns:
        term → ``Postings`` (ascending rowid); a term the resource does not hold maps to empty columns.
    """
    pending = pending_postings(conn, resource_id, terms)
    found: dict[str, Postings] = {}
    for term, postings in read_blocks(conn, resource_id, terms).items():
        if term in pending:
            postings = np.concatenate([postings, pending[term]])
        found[term] = columns(postings)
    return found


def columns(postings: npt.NDArray[np.void]) -> Postings:
    """Structured postings (``POSTING``'s fields) as the columns a search scores (``Postings``)."""
    return (
        postings["rowid"].astype(np.int64),
        postings["tf"].astype(np.float64),
        postings["length"].astype(np.float64),
    )


def read_blocks(conn: Any, resource_id: str, terms: Sequence[str]) -> dict[str, npt.NDArray[np.void]]:
    """The merged postings (blocks) of these terms, each term's in ascending rowid."""
    found = {}
    for term in terms:
        blobs = conn.execute(
            "SELECT postings FROM search_postings WHERE resource_id = ? AND term = ? ORDER BY block",
            (resource_id, term),
        ).fetchall()
        found[term] = unpack(b"".join(b[0] for b in blobs))  # the driver gives each BLOB as bytes
    return found


def pending_chunks(conn: Any, resource_id: str) -> dict[int, Analysed]:
    """The resource's pending chunks, parsed: rowid → ``Analysed``."""
    return {
        int(rowid): Analysed(json.loads(counts), int(length))
        for rowid, counts, length in conn.execute(
            "SELECT rowid, counts, length FROM search_pending_chunks WHERE resource_id = ?", (resource_id,)
        )
    }


def score(conn: Any, resource_id: str, query: Sequence[str]) -> tuple[_Ints, _Floats]:
    """BM25 of every chunk of the resource that contains a query term, from the resource's statistics.

    Every posting of every query term is read (``read_postings``) and scored (``score_postings``).

    Args:
        conn: a connection reading one snapshot.
        resource_id: the resource searched.
        query: the query's index terms (``query_tokens``), repeats weighing as often as they occur.

    Returns:
        ``(rowids, scores)`` as ``score_postings`` gives them.
    """
    counts = stats(conn, resource_id)
    if counts is None or not query:
        return _empty()
    return score_postings(read_postings(conn, resource_id, list(dict.fromkeys(query))), query, *counts)


def _empty() -> tuple[_Ints, _Floats]:
    return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)


def score_postings(
    postings: dict[str, Postings], query: Sequence[str], chunks: int, tokens: int
) -> tuple[_Ints, _Floats]:
    """BM25 of every chunk in these postings for the query, from the resource's statistics.

    Every posting is scored (ADR 0010 measures why block-max pruning did not pay on SQLite). Each
    chunk's weights are summed term by term, in the query's order, so the floats do not depend on where
    the postings came from (the file or ``PostingCache``).

    Args:
        postings: term → ``Postings``, for every distinct term of ``query`` (absent or empty: no chunk).
        query: the query's index terms (``query_tokens``), repeats weighing as often as they occur.
        chunks: the resource's indexed chunks (BM25's ``N``, ≥ 1).
        tokens: their total length in tokens (``avgdl = tokens / chunks``).

    Returns:
        ``(rowids, scores)``: the matching chunks (ascending rowid) and their BM25 (positive, FTS5's scale:
        ``-bm25()``). Empty arrays when nothing matches.
    """
    avgdl = max(tokens, 1) / chunks
    found_rowids: list[_Ints] = []
    found_scores: list[_Floats] = []
    for term, weight in Counter(query).items():
        if term not in postings or not len(postings[term][0]):
            continue
        rowids, tfs, lengths = postings[term]
        found_rowids.append(rowids)
        weights = term_weight(tfs, lengths, df=len(rowids), chunks=chunks, avgdl=avgdl)
        if weight != 1:  # a repeated query term; times 1 would be the same floats
            weights *= weight
        found_scores.append(weights)
    if not found_rowids:
        return _empty()
    if len(found_rowids) == 1:
        return found_rowids[0], found_scores[0]
    everything = np.concatenate(found_rowids)
    weights_in_order = np.concatenate(found_scores)
    low = int(everything.min())
    span = int(everything.max()) - low + 1
    # bincount sums each chunk's weights in input order (term by term) either way. Over the rowid span it
    # needs no sort: zeroing and scanning the span cost less than sorting the postings while the span is
    # within DENSE_SPAN times their number (a resource's rowids are dense unless other resources' writes
    # interleave with its own). Every weight is positive (idf ≥ MIN_IDF, tf ≥ 1), so a chunk matched iff
    # its sum is non-zero.
    if span <= DENSE_SPAN * len(everything) + 65536:
        sums = np.bincount(everything - low, weights=weights_in_order, minlength=span).astype(
            np.float64, copy=False
        )
        # nonzero of a bool mask: ~7x faster than of the float64 sums themselves (measured, ADR 0016)
        present = np.flatnonzero(sums != 0)
        return (present + low).astype(np.int64), sums[present]
    unique, inverse = np.unique(everything, return_inverse=True)
    totals: _Floats = np.bincount(inverse, weights=weights_in_order).astype(np.float64)
    return unique.astype(np.int64), totals
