"""The embedded index's in-memory keyword postings: each searched term's postings per resource, kept current.

A keyword search in a resource of 100k messages reads about 22,000 postings (~315 KB of BLOBs) for a
question naming a speaker and three common words, and fetching them from SQLite was half its cost (ADR
0013). ``PostingCache`` keeps, per resource, the postings of the terms searched so far as numpy columns
(``keywords.Postings``) with the resource's BM25 statistics, labelled with the resource's generation
(``search_generations``), the counter every write of the resource's chunks bumps in the file:

* a search whose snapshot shows the cached generation reads nothing from the file but the terms it has
  not met yet; one that shows a newer generation (another process wrote) drops the resource's terms and
  reads afresh; one that shows an older generation (a reader behind a commit of this process) reads from
  the file, leaving the cache alone;
* the resource's pending chunks (written, not yet merged into the blocks: ``keywords.add``) are held
  parsed beside its terms once a search has read them, so a search's new terms do not parse every pending
  chunk again; a save by this process adds its chunks to them, or empties them when it merged;
* a save by this process appends its chunks' postings to the cached terms they contain (rowids only grow,
  so every column stays in ascending rowid order; each term has room to append, ``HEADROOM``) and moves the
  statistics, in time proportional to the chunks' distinct terms; any write that removes chunks drops the resource's terms instead (rare: a
  message re-indexed, deleted or erased);
* the cache is bounded in bytes (``TermPostings.nbytes``), least recently searched terms leaving first,
  across resources: past the bound a search reads the terms that left from the file, as it would without
  the cache, so there is no cliff; a term larger than the bound is never held.

The cached columns are the ones ``keywords.read_postings`` returns, so a search scores the same floats
from the cache as from the file (``keywords.score_postings``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from memstack.adapters.sqlite import keywords

POSTING_BYTES = 24
"""Cache bytes per posting: the rowid (int64), the term frequency and the chunk length (float64 each), held
in the form the scoring takes so that a search converts nothing."""

TERM_OVERHEAD_BYTES = 256
"""Estimated cache bytes per term besides its postings (the key, three array headers, the LRU slot)."""

DEFAULT_KEYWORD_CACHE_BYTES = 64 * 1024 * 1024
"""Default bound: about 2.8M postings, every term of a 90k-message resource of chat (31 tokens a chunk)."""


HEADROOM = 4
"""A term read from the file gets room for a quarter more postings (at least ``MIN_HEADROOM``) appended by
saves. A save never grows an array: a term whose room is used up leaves the cache, and the next search that
needs it reads it again with new room (a copy of a common term's postings costs ~1 ms, which belongs on the
search that reads it rather than on a save, ADR 0013)."""

MIN_HEADROOM = 64
"""Least room for appended postings a term is given when it is read."""


class TermPostings:
    """One term's postings in one resource, with room to append (``HEADROOM``).

    Attributes:
        n: postings in use; ``rowids[:n]`` (ascending), ``tfs[:n]`` and ``lengths[:n]``.
    """

    def __init__(self, postings: keywords.Postings) -> None:
        rowids, tfs, lengths = postings
        self.n = len(rowids)
        room = self.n + max(MIN_HEADROOM, self.n // HEADROOM)
        self.rowids = np.zeros(room, dtype=np.int64)
        self.tfs = np.zeros(room, dtype=np.float64)
        self.lengths = np.zeros(room, dtype=np.float64)
        self.rowids[: self.n], self.tfs[: self.n], self.lengths[: self.n] = rowids, tfs, lengths

    @property
    def nbytes(self) -> int:
        """Cache bytes of this term: its room, used or not, and ``TERM_OVERHEAD_BYTES``."""
        return len(self.rowids) * POSTING_BYTES + TERM_OVERHEAD_BYTES

    def view(self) -> keywords.Postings:
        """The postings in use. Appends write past ``n`` or into new arrays, so a view stays as taken."""
        return self.rowids[: self.n], self.tfs[: self.n], self.lengths[: self.n]

    def append(self, rowid: int, tf: int, length: int) -> bool:
        """Add one posting whose rowid is above every one held; ``False`` (nothing added) when full."""
        if self.n == len(self.rowids):
            return False
        self.rowids[self.n] = rowid
        self.tfs[self.n] = tf
        self.lengths[self.n] = length
        self.n += 1
        return True


@dataclass(slots=True)
class _Resource:
    """A resource's cached terms and BM25 statistics, at one generation."""

    generation: int
    chunks: int
    tokens: int
    terms: dict[str, TermPostings] = field(default_factory=dict)
    pending: dict[int, keywords.Analysed] | None = None


class PostingCache:
    """Per-resource keyword postings of searched terms, least recently searched terms first out.

    Thread-safe: one lock guards every table; scoring runs on views taken under it (``TermPostings.view``).

    Args:
        max_bytes: bound of the postings held, in bytes (``TermPostings.nbytes``); ``0`` holds nothing
            (every search reads the file).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, max_bytes)
        self.nbytes = 0
        self._resources: dict[str, _Resource] = {}
        self._recent: OrderedDict[tuple[str, str], int] = OrderedDict()  # (resource, term) → bytes held
        self._lock = threading.Lock()

    def score(
        self, conn: Any, resource_id: str, generation: int, query: Sequence[str]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """BM25 of every chunk of the resource that holds a query term (``keywords.score``'s result).

        Args:
            conn: a connection reading the snapshot that showed ``generation``.
            resource_id: the resource searched.
            generation: the resource's ``search_generations`` value in that snapshot (0 when absent).
            query: the query's index terms (``keywords.query_tokens``), repeats weighing as often.
        """
        if self.max_bytes == 0 or not query:
            return keywords.score(conn, resource_id, query)
        terms = list(dict.fromkeys(query))
        with self._lock:
            entry = self._resources.get(resource_id)
            if entry is not None and entry.generation > generation:
                entry = None  # this snapshot is older than the cache: it is read from the file as it is
            elif entry is None or entry.generation < generation:
                self._drop(resource_id)
                counts = keywords.stats(conn, resource_id)
                if counts is not None:
                    entry = self._resources[resource_id] = _Resource(generation, *counts)
            if entry is None:
                postings: dict[str, keywords.Postings] = {}
            else:
                postings, chunks, tokens = self._held(entry, resource_id, terms), entry.chunks, entry.tokens
        if entry is None:
            return keywords.score(conn, resource_id, query)
        missing = [term for term in terms if term not in postings]
        if missing:
            read = self._read(conn, entry, resource_id, generation, missing)
            postings.update(read)
            with self._lock:
                for term, columns in read.items():
                    # Checked per term: a hold may evict the entry's last term, and with it the entry.
                    if self._resources.get(resource_id) is entry and entry.generation == generation:
                        self._hold(entry, resource_id, term, TermPostings(columns))
                if self._resources.get(resource_id) is entry and not entry.terms:
                    del self._resources[resource_id]  # nothing held: no entry kept for its statistics alone
        return keywords.score_postings(postings, query, chunks, tokens)

    def _read(
        self, conn: Any, entry: _Resource, resource_id: str, generation: int, terms: list[str]
    ) -> dict[str, keywords.Postings]:
        """These terms' postings from the file's blocks and the resource's pending chunks, as columns.

        The pending chunks come from ``entry`` when it holds them at the snapshot's ``generation``; else
        they are read (every pending chunk of the resource, at most ``keywords.MERGE_PENDING``) and, if the
        entry is still at that generation, held for the next search's new terms.
        """
        blocks = keywords.read_blocks(conn, resource_id, terms)
        with self._lock:
            current = self._resources.get(resource_id) is entry and entry.generation == generation
            pending = entry.pending if current else None
        if pending is None:
            pending = keywords.pending_chunks(conn, resource_id)
            with self._lock:
                if self._resources.get(resource_id) is entry and entry.generation == generation:
                    entry.pending = pending
        waiting = sorted(pending.items())
        read: dict[str, keywords.Postings] = {}
        for term in terms:
            found = blocks[term]
            extra = [(rowid, a.counts[term], a.length) for rowid, a in waiting if term in a.counts]
            if extra:
                found = np.concatenate([found, np.array(extra, dtype=keywords.POSTING)])
            read[term] = keywords.columns(found)
        return read

    def _held(self, entry: _Resource, resource_id: str, terms: list[str]) -> dict[str, keywords.Postings]:
        held: dict[str, keywords.Postings] = {}
        for term in terms:
            found = entry.terms.get(term)
            if found is not None:
                self._recent.move_to_end((resource_id, term))
                held[term] = found.view()
        return held

    def _hold(self, entry: _Resource, resource_id: str, term: str, postings: TermPostings) -> None:
        if term in entry.terms or postings.nbytes > self.max_bytes:
            return
        entry.terms[term] = postings
        self._recent[(resource_id, term)] = postings.nbytes
        self.nbytes += postings.nbytes
        self._evict()

    def _evict(self) -> None:
        while self.nbytes > self.max_bytes and self._recent:
            (resource_id, term), size = self._recent.popitem(last=False)
            self.nbytes -= size
            entry = self._resources[resource_id]
            del entry.terms[term]
            if not entry.terms:  # a resource whose every term left keeps no entry
                del self._resources[resource_id]

    def added(
        self,
        resource_id: str,
        generation: int,
        chunks: Sequence[tuple[int, keywords.Analysed]],
        merged: bool | None = None,
    ) -> None:
        """Apply this process's committed write that added ``chunks`` (``(rowid, analysed)``, rowids above
        every one indexed) and removed none, taking the resource to ``generation``.

        Only data exactly one generation behind is patched (nobody else wrote in between); otherwise the
        resource's terms are dropped and the next search reads them. ``merged``: whether the write merged
        the resource's pending chunks into its blocks (``keywords.add``'s answer); the held pending chunks
        then empty, else take these chunks; ``None`` (not known) drops them, read again when needed.
        """
        with self._lock:
            entry = self._resources.get(resource_id)
            if entry is None:
                return
            if entry.generation != generation - 1:
                self._drop(resource_id)
                return
            for rowid, analysed in sorted(chunks, key=lambda c: c[0]):
                for term, tf in analysed.counts.items():
                    held = entry.terms.get(term)
                    if held is not None and not held.append(rowid, tf, analysed.length):
                        del entry.terms[term]  # no room left: the next search reads it again
                        self.nbytes -= self._recent.pop((resource_id, term))
            if not entry.terms:
                del self._resources[resource_id]
                return
            entry.chunks += len(chunks)
            entry.tokens += sum(analysed.length for _, analysed in chunks)
            entry.generation = generation
            # A new dict each time: a search may be reading the one it took.
            if merged is None or entry.pending is None:
                entry.pending = None  # read again by the next search that needs it
            elif merged:
                entry.pending = {}
            else:
                entry.pending = {**entry.pending, **dict(chunks)}

    def held(self, resource_id: str) -> tuple[int, dict[str, int]] | None:
        """What is held for the resource: its generation and each held term's postings count, or ``None``."""
        with self._lock:
            entry = self._resources.get(resource_id)
            if entry is None:
                return None
            return entry.generation, {term: postings.n for term, postings in entry.terms.items()}

    def drop(self, resource_id: str) -> None:
        """Forget the resource's postings (the next search reads them from the file)."""
        with self._lock:
            self._drop(resource_id)

    def clear(self) -> None:
        """Forget every resource's postings."""
        with self._lock:
            self._resources.clear()
            self._recent.clear()
            self.nbytes = 0

    def _drop(self, resource_id: str) -> None:
        entry = self._resources.pop(resource_id, None)
        if entry is None:
            return
        for term in entry.terms:
            self.nbytes -= self._recent.pop((resource_id, term))
