"""The embedded index's in-memory vector search: one growable matrix per resource, searched exactly.

``VectorCache`` keeps, per resource, the L2-normalised float32 vectors of its chunks (``ResourceVectors``)
within a byte bound, least recently used resources leaving first. Writes of this process are applied in
place in time proportional to what they change (appended rows; deleted rows are marked dead and compacted
away once they are half the rows), so a save never copies or re-reads the resource; a write by anyone else
bumps the resource's generation in the file and the next search reloads it. Which rows can be vector hits
(alive, not all-zero) is kept as a mask, updated with the rows, rather than recomputed per search.

Search is exact. A small resource (below ``QUANTISED_MIN_ROWS`` rows) is ranked by one float32 matrix-vector
product. A larger one is first scored on int8 copies of its rows (a quarter of the bytes, read by SimSIMD's
int8 dot-product kernels), each score with a proven error bound; only the rows whose upper bound reaches the
``top_k``-th message's lower bound are then scored in float32 (ADR 0009). The result is the float32 search's
own (the bound is Cauchy–Schwarz, not a guess), at the cost of a scan of ``dimension`` bytes per row plus a
few dozen exact products; from ``PARALLEL_MIN_ROWS`` rows the scan is split over the process's cores
(ADR 0018). Approximate indexes were measured and rejected (ADR 0006, ADR 0009): on the hash
embedder's vectors an HNSW graph found 0.69–0.94 of the exact top 8 and cost 5 ms per insert.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from memstack.ports import IndexHit

_Floats = npt.NDArray[np.float32]
_Ints = npt.NDArray[np.int64]

ROW_OVERHEAD_BYTES = 72
"""Estimated cache bytes per chunk besides its vectors (rowid, message code, flags, int8 scale and error
bound, ids in lists)."""

QUANTISED_MIN_ROWS = 4096
"""Rows from which a search first scans the int8 copy (ADR 0009). Below it the float32 product costs under
half a millisecond and the bound's extra passes would not pay; the result is the same either way."""

_ROUNDING = 1e-5
"""Added to every int8 error bound: float32 sums of 256–1024 products differ from exact ones by less."""


def row_bytes(dimension: int) -> int:
    """Cache bytes per chunk of ``dimension`` floats: the float32 row, its int8 copy and the overhead."""
    return dimension * 5 + ROW_OVERHEAD_BYTES


def compact_row_bytes(dimension: int) -> int:
    """Cache bytes per chunk of a resource held in int8 only (``ResourceVectors.keeps_floats`` false)."""
    return dimension + ROW_OVERHEAD_BYTES


@dataclass(frozen=True, slots=True)
class Added:
    """One chunk written by this process, as the cache takes it."""

    rowid: int
    message_id: str
    thread_id: str
    seq: int
    vector: npt.NDArray[Any]


def unit_rows(matrix: npt.NDArray[Any]) -> _Floats:
    """The rows scaled to unit length, as float32 (a zero row stays zero)."""
    rows = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.where(norms == 0, 1, norms)).astype(np.float32)


def quantise(rows: npt.NDArray[Any]) -> tuple[npt.NDArray[np.int8], _Floats, _Floats]:
    """Each row as ``scale * codes`` with int8 codes in [-127, 127] (symmetric, per row), and the error.

    Args:
        rows: an ``(n, d)`` float array.

    Returns:
        ``(codes, scales, errors)``: ``codes`` ``(n, d)`` int8; ``scales`` ``(n,)`` float32, the row's
        largest magnitude over 127 (0 for a zero row); ``errors`` ``(n,)`` float32, the Euclidean norm of
        ``row - scale * codes`` computed in float64 and rounded up, so that ``|row · q - scale * (codes ·
        q)| <= errors * |q|`` holds for any ``q`` (Cauchy–Schwarz).
    """
    wide = np.asarray(rows, dtype=np.float64)
    peak = np.abs(wide).max(axis=1) if wide.shape[1] else np.zeros(len(wide))
    scales = (peak / 127.0).astype(np.float32)  # the residual is taken against the scale as stored
    wide_scales = scales.astype(np.float64)
    codes = np.clip(np.rint(wide / np.where(scales == 0, 1.0, wide_scales)[:, None]), -127, 127).astype(
        np.int8
    )
    residual = wide - codes * wide_scales[:, None]
    errors = np.nextafter(np.linalg.norm(residual, axis=1).astype(np.float32), np.float32(np.inf))
    return codes, scales, errors.astype(np.float32)


def _int8_dots(codes: npt.NDArray[np.int8], query: npt.NDArray[np.int8]) -> _Floats:
    """``codes @ query`` as float32, by SimSIMD's int8 kernels (AVX2, AVX-512 VNNI, NEON), in a new array.

    The sums are integers, exact in float32 below 2**24 (1040 dimensions at full scale); above, their
    rounding is far inside ``_ROUNDING`` once scaled. From ``PARALLEL_MIN_ROWS`` rows the rows are split
    over ``scan_threads()`` cores (the same sums: each row's product is computed whole by one thread).

    numpy has no int8 product that accumulates in int32 without first widening every row (slower than
    the float32 product it would replace, measured), hence the library.
    """
    if len(codes) == 0:
        return np.zeros(0, dtype=np.float32)
    threads = scan_threads() if len(codes) >= PARALLEL_MIN_ROWS else 1
    dots: _Floats = np.asarray(
        _simsimd().cdist(query[None, :], codes, metric="dot", out_dtype="float32", threads=threads)
    )[0]
    return dots


_SPIN_SETTINGS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")


def _simsimd() -> Any:
    """SimSIMD, imported with its OpenMP threads set to sleep as soon as a split scan ends.

    GNU OpenMP's threads otherwise spin for a while after every parallel region, waiting for the next:
    ~8 ms of a core burnt after each split scan (measured: CPU time over a 50 ms pause after one), taken
    from the turn's other threads and from a server's other requests. The runtime reads its settings once,
    when the library is loaded, so ``GOMP_SPINCOUNT=0`` is set for that import only, and only if the
    caller set neither it nor ``OMP_WAIT_POLICY`` (SimSIMD ships its own copy of the runtime, so other
    OpenMP libraries of the process keep their settings). Already imported by someone else, SimSIMD keeps
    the settings it was loaded with.
    """
    if "simsimd" in sys.modules:
        return sys.modules["simsimd"]
    quiet = not any(name in os.environ for name in _SPIN_SETTINGS)
    if quiet:
        os.environ["GOMP_SPINCOUNT"] = "0"
    try:
        import simsimd
    finally:
        if quiet:
            os.environ.pop("GOMP_SPINCOUNT", None)
    return simsimd


PARALLEL_MIN_ROWS = 32_768
"""Rows from which the int8 scan is split over several cores. The scan reads ``dimension`` bytes a row and
is bound by one core's memory bandwidth, so two cores take ~60% of the time for the same CPU time; waking
the sleeping second thread costs ~0.05–0.1 ms, more than it saves below this. Measured on the 2-core build
machine, 256-d codes, one process, split and whole interleaved on one array scanned again and again (so
partly in the cache), wall p50 whole → split: 100k rows 1.77 → 1.05 ms (CPU +0.06 ms), 32k 0.56 → 0.39, 16k
0.17 → 0.22, 8k 0.09 → 0.14. With other work evicting the codes between scans (stores taking turns), a 100k
context gained only 0.1–0.3 ms (ADR 0018)."""

MAX_SCAN_THREADS = 4
"""At most this many threads split one scan: a turn's other work waits for the scan, and other turns of a
server need cores too."""

_scan_pid: int | None = None
_scan_cores = 1


def scan_threads() -> int:
    """How many threads split a large int8 scan in this process: the cores it may run on (its CPU
    affinity), at most ``MAX_SCAN_THREADS``; 1 in a process forked from one that has already split a scan.

    SimSIMD splits a scan with OpenMP, and GNU OpenMP's thread pool does not survive ``fork()``: a child
    that uses a pool its parent started waits for threads that do not exist in it. So the first split scan
    records its process, and a forked child (another process id, the pool inherited) scans on one thread.
    """
    global _scan_pid, _scan_cores
    pid = os.getpid()
    if _scan_pid is None:
        _scan_pid = pid
        cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
        _scan_cores = max(1, min(MAX_SCAN_THREADS, len(cores)))
    return _scan_cores if pid == _scan_pid else 1


class ResourceVectors:
    """The chunks of one resource in memory, for vector search; mutated in place under ``lock``.

    Rows are kept in ascending rowid order (the index assigns rowids above every existing one, and a load
    reads them in order), so a rowid is found by binary search. Messages have codes: ``names[code]`` is the
    message id, ``threads[code]`` and ``seqs[code]`` its thread and seq; a rewritten message gets a new code.

    Attributes:
        generation: the resource's ``search_generations`` value this data corresponds to.
        n: rows in use; ``matrix[:n]`` (unit rows), ``codes8[:n]``, ``scales[:n]`` and ``errors[:n]``
            (their int8 form, ``quantise``), ``rowids[:n]``, ``codes[:n]``, ``usable[:n]`` (alive and
            not all-zero).
        keeps_floats: whether ``matrix`` is held. Without it (a resource too large for the cache's bound
            at 5 bytes a dimension, ``compact_row_bytes``) every search takes the int8 path and reads the
            float32 rows of the few survivors from the file (``search``'s ``floats``).
    """

    def __init__(
        self,
        dimension: int,
        generation: int,
        rowids: _Ints,
        message_ids: Sequence[str],
        thread_ids: Sequence[str],
        seqs: Sequence[int],
        vectors: npt.NDArray[Any],
        *,
        keeps_floats: bool = True,
    ) -> None:
        self.lock = threading.RLock()
        self.keeps_floats = keeps_floats
        self.generation = generation
        self.dimension = dimension
        self.n = 0
        self.dead = 0
        self.matrix: _Floats = np.empty((0, dimension), dtype=np.float32)
        self.rowids: _Ints = np.empty(0, dtype=np.int64)
        self.codes: _Ints = np.empty(0, dtype=np.int64)
        self.usable: npt.NDArray[np.bool_] = np.empty(0, dtype=bool)
        self.codes8: npt.NDArray[np.int8] = np.empty((0, dimension), dtype=np.int8)
        self.scales: _Floats = np.empty(0, dtype=np.float32)
        self.errors: _Floats = np.empty(0, dtype=np.float32)
        self.live_scales: _Floats = np.empty(0, dtype=np.float32)
        self.max_error = 0.0
        self.quantised_min_rows = QUANTISED_MIN_ROWS
        self.names: list[str] = []
        self.threads: list[str] = []
        self.seqs: list[int] = []
        self.code_of: dict[str, int] = {}
        self._append(rowids, message_ids, thread_ids, seqs, unit_rows(vectors))

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.codes8.nbytes) + len(self.rowids) * ROW_OVERHEAD_BYTES

    @property
    def live(self) -> int:
        return self.n - self.dead

    # ---------------------------------------------------------------------------------------- writes

    def _grow(self, need: int) -> None:
        if need <= len(self.rowids):
            return
        capacity = max(need, 2 * len(self.rowids), 64)
        for name, row_type in (("matrix", np.float32), ("codes8", np.int8)):
            if name == "matrix" and not self.keeps_floats:
                continue
            rows = np.empty((capacity, self.dimension), dtype=row_type)
            rows[: self.n] = getattr(self, name)[: self.n]
            setattr(self, name, rows)
        for name, dtype in (
            ("rowids", np.int64),
            ("codes", np.int64),
            ("usable", bool),
            ("scales", np.float32),
            ("errors", np.float32),
            ("live_scales", np.float32),
        ):
            grown = np.zeros(capacity, dtype=dtype)
            grown[: self.n] = getattr(self, name)[: self.n]
            setattr(self, name, grown)

    def _append(
        self,
        rowids: _Ints,
        message_ids: Sequence[str],
        thread_ids: Sequence[str],
        seqs: Sequence[int],
        units: _Floats | None,
        quantised: tuple[npt.NDArray[np.int8], _Floats, _Floats] | None = None,
    ) -> None:
        """Append rows: their unit float32 vectors (``units``; ``None`` only without ``keeps_floats``),
        their int8 form (``quantised``, else computed from ``units``) and their messages."""
        extra = len(rowids)
        if not extra:
            return
        start = self.n
        self._grow(start + extra)
        span = slice(start, start + extra)
        if quantised is None:
            if units is None:
                raise ValueError("rows need their float32 vectors or their int8 form")
            quantised = quantise(units)
        if self.keeps_floats:
            if units is None:
                raise ValueError("this resource holds float32 rows: pass them")
            self.matrix[span] = units
        self.codes8[span], self.scales[span], self.errors[span] = quantised
        self.rowids[start : start + extra] = rowids
        codes = self.codes
        for i, (message_id, thread_id, seq) in enumerate(zip(message_ids, thread_ids, seqs, strict=True)):
            code = self.code_of.get(message_id)
            if code is None:
                code = self.code_of[message_id] = len(self.names)
                self.names.append(message_id)
                self.threads.append(thread_id)
                self.seqs.append(seq)
            codes[start + i] = code
        self.usable[span] = self.scales[span] > 0  # a zero row has no direction: never a hit
        self.live_scales[span] = np.where(self.usable[span], self.scales[span], np.float32(np.nan))
        self.max_error = max(self.max_error, float(self.errors[span].max()))
        self.n += extra

    def apply(
        self,
        generation: int,
        *,
        messages: set[str],
        thread_id: str | None,
        added: Sequence[Added],
    ) -> None:
        """Drop the rows of ``messages`` (or of ``thread_id``), then append ``added`` (rowids above every
        row held); the data is then at ``generation``."""
        if messages or thread_id is not None:
            doomed = [self.code_of.pop(m) for m in messages if m in self.code_of]
            if thread_id is not None:
                in_thread = [m for m, code in self.code_of.items() if self.threads[code] == thread_id]
                doomed += [self.code_of.pop(m) for m in in_thread]
            if doomed:
                rows = np.flatnonzero(np.isin(self.codes[: self.n], doomed))
                self.usable[rows] = False
                self.live_scales[rows] = np.nan
                self.dead += len(rows)
        if added:
            self._append(
                np.fromiter((a.rowid for a in added), dtype=np.int64, count=len(added)),
                [a.message_id for a in added],
                [a.thread_id for a in added],
                [a.seq for a in added],
                unit_rows(np.stack([a.vector for a in added])),
            )
        self.generation = generation
        if self.dead > 1024 and 2 * self.dead > self.n:
            self._compact()

    def _compact(self) -> None:
        """Rebuild without dead rows (their codes are gone from ``code_of``)."""
        live_codes = set(self.code_of.values())
        keep = np.fromiter((c in live_codes for c in self.codes[: self.n].tolist()), dtype=bool, count=self.n)
        rowids, codes = self.rowids[: self.n][keep], self.codes[: self.n][keep]
        matrix = self.matrix[: self.n][keep] if self.keeps_floats else None
        quantised = (self.codes8[: self.n][keep], self.scales[: self.n][keep], self.errors[: self.n][keep])
        names, threads, seqs = self.names, self.threads, self.seqs
        self.n = self.dead = 0
        self.names, self.threads, self.seqs, self.code_of = [], [], [], {}
        self.matrix = np.empty((0, self.dimension), dtype=np.float32)
        self.codes8 = np.empty((0, self.dimension), dtype=np.int8)
        self.rowids = np.empty(0, dtype=np.int64)
        self.codes = np.empty(0, dtype=np.int64)
        self.usable = np.empty(0, dtype=bool)
        self.scales = np.empty(0, dtype=np.float32)
        self.errors = np.empty(0, dtype=np.float32)
        self.live_scales = np.empty(0, dtype=np.float32)
        self.max_error = 0.0
        code_list = codes.tolist()
        self._append(
            rowids,
            [names[c] for c in code_list],
            [threads[c] for c in code_list],
            [seqs[c] for c in code_list],
            matrix,
            quantised,
        )

    # ---------------------------------------------------------------------------------------- search

    def positions_of(self, allowed: _Ints) -> _Ints:
        """The positions of these rowids among the rows held (rowids not held are skipped)."""
        rowids = self.rowids[: self.n]
        index = np.searchsorted(rowids, allowed)
        inside = index < self.n
        index, allowed = index[inside], allowed[inside]
        found: _Ints = index[rowids[index] == allowed].astype(np.int64)
        return found

    def chunk_messages(
        self, rowids: Sequence[int], thread_id: str | None
    ) -> list[tuple[int, str, str, int]] | None:
        """What the keyword search reads of these chunks in ``search_chunks``, from memory: the
        ``(rowid, message_id, thread_id, seq)`` of each one (of ``thread_id``'s only, when given), in the
        order asked; ``None`` when one of them is not held alive (the caller reads the file instead).
        Call with ``lock`` held, on data at the generation of the snapshot the rowids come from."""
        n = self.n
        wanted = np.asarray(rowids, dtype=np.int64)
        at = np.searchsorted(self.rowids[:n], wanted)
        if len(wanted) and (int(at.max()) >= n or bool((self.rowids[at] != wanted).any())):
            return None
        names, threads, seqs, code_of = self.names, self.threads, self.seqs, self.code_of
        found = []
        for rowid, code in zip(rowids, self.codes[at].tolist(), strict=True):
            name = names[code]
            if code_of.get(name) != code:  # a dead row: its chunk is gone, yet the snapshot names it
                return None
            if thread_id is None or threads[code] == thread_id:
                found.append((rowid, name, threads[code], seqs[code]))
        return found

    def search(
        self,
        query: _Floats,
        allowed: _Ints | None,
        top_k: int,
        floats: Callable[[_Ints], npt.NDArray[Any]] | None = None,
    ) -> list[IndexHit]:
        """The ``top_k`` best messages among the ``allowed`` chunk rowids (all chunks when ``None``).

        A message scores by its best chunk (exact cosine similarity); equal scores are ordered by message
        id. ``floats`` gives the stored float32 vectors of some rowids, in that order (read in the same
        snapshot as this data); it is called only without ``keeps_floats``. Call with ``lock`` held.

        Raises:
            ValueError: the rows are not held in float32 and ``floats`` is ``None``.
        """
        unit = (query / np.float32(np.linalg.norm(query))).astype(np.float32)
        positions = None if allowed is None else self.positions_of(allowed)
        if not self.keeps_floats:
            if floats is None:
                raise ValueError("this resource's float32 rows are not held: pass floats")
            chosen = self._candidates(unit, positions, top_k)
            scores = np.einsum("ij,j->i", unit_rows(floats(self.rowids[chosen])), unit)
            return self._ranked(self.codes[chosen], scores, top_k)
        return self._exact(unit, positions, top_k)

    def _exact(self, unit: _Floats, positions: _Ints | None, top_k: int) -> list[IndexHit]:
        if (self.n if positions is None else len(positions)) >= self.quantised_min_rows:
            positions = self._candidates(unit, positions, top_k)
        if positions is None:
            # einsum rather than BLAS: OpenBLAS would spread a product this small over threads that then
            # spin, slowing the SQL that runs next.
            scores = np.einsum("ij,j->i", self.matrix[: self.n], unit)
            usable = self.usable[: self.n]
            return self._ranked(self.codes[: self.n][usable], scores[usable], top_k)
        positions = positions[self.usable[positions]]
        scores = np.einsum("ij,j->i", self.matrix[positions], unit)
        return self._ranked(self.codes[positions], scores, top_k)

    def _candidates(self, unit: _Floats, positions: _Ints | None, top_k: int) -> _Ints:
        """The positions (among ``positions``, or all rows) of the usable rows that can belong to a
        ``top_k`` message, found by the int8 scan (ADR 0009).

        With ``x = s·c + r`` (a row, its int8 codes and residual) and ``q = t·b + e`` (the query's), the
        exact score is within ``|e| + |r|(1 + |e|)`` of ``s·t·(c·b)`` for unit ``x`` and ``q``. Every
        message of the exact top ``top_k`` has a row scoring at least the ``top_k``-th message's lower
        bound, so a row whose upper bound is below it is never needed.

        Two passes keep the work over every row to a scan and three comparisons (ADR 0013): first with
        one bound for all rows (``max_error`` for ``|r|``), whose floor is at most the per-row floor, then
        with each row's own bound over the rows the first pass kept — the same rows as the per-row test
        over all of them, since a row the first pass drops has an upper bound below both floors.
        """
        t = float(np.abs(unit).max()) / 127.0
        query = np.rint(unit.astype(np.float64) / t).astype(np.int8)
        query_error = float(np.linalg.norm(unit.astype(np.float64) - query * t))
        rows = slice(0, self.n) if positions is None else positions
        approx = _int8_dots(self.codes8[rows], query)
        approx *= self.live_scales[rows]  # NaN on rows that cannot be hits: they fail every comparison
        codes = self.codes[rows]
        # At least every row's float32 slack: float32 rounding of the scores is ~1e-7 of them.
        spread = self.max_error * (1.0 + query_error) + query_error + _ROUNDING + 1e-5
        top = _message_floor(approx, codes, top_k, margin=1 / (32 * t))
        if top == -np.inf:  # fewer than top_k messages: every usable row
            kept = np.flatnonzero(~np.isnan(approx))
        else:  # the rows whose shared upper bound reaches the top_k-th message's shared lower bound
            kept = np.flatnonzero(approx >= top - 2 * spread / t)
        exact = approx[kept] * np.float32(t)
        slack = self.errors[kept if positions is None else positions[kept]] * np.float32(1.0 + query_error)
        slack += np.float32(query_error + _ROUNDING)
        floor = _message_floor(exact - slack, codes[kept], top_k)
        exact += slack
        chosen: _Ints = kept[exact >= floor]
        return chosen if positions is None else positions[chosen]

    def _ranked(self, codes: _Ints, scores: npt.NDArray[Any], top_k: int) -> list[IndexHit]:
        """The ``top_k`` messages of these rows (``codes``, ``scores``), each scored by its best row, best
        first and ties by message id.

        One sort of the rows by score, walked down until ``top_k`` messages are met and the next row scores
        below the last of them (every message tied with it is still met); only the first rows of the
        order are taken out of numpy unless the walk needs more (a resource's rows are mostly other
        messages' weaker chunks)."""
        n = len(scores)
        if n == 0:
            return []
        order = np.argsort(-scores, kind="stable")
        best: dict[int, float] = {}
        kth: float | None = None  # the top_k-th message's score, once met
        done = 0
        for count in (min(n, 4 * top_k + 16), n):
            rows = order[done:count]
            walked = zip(scores[rows].astype(np.float64).tolist(), codes[rows].tolist(), strict=True)
            stopped = False
            for value, code in walked:
                if kth is not None and value < kth:
                    stopped = True
                    break
                if code not in best:
                    best[code] = value
                    if len(best) == top_k:
                        kth = value
            if stopped or count == n:
                break
            done = count
        names = self.names
        ranked = sorted(best.items(), key=lambda item: (-item[1], names[item[0]]))[:top_k]
        return [
            IndexHit(
                message_id=names[code],
                thread_id=self.threads[code],
                score=max(-1.0, min(1.0, value)),
                seq=self.seqs[code],
            )
            for code, value in ranked
        ]


def _message_floor(lows: _Floats, codes: _Ints, top_k: int, *, margin: float = 1 / 32) -> float:
    """A value that at least ``top_k`` messages reach with some row's lower bound (``lows``, one per row,
    ``-inf`` or NaN for rows that cannot be hits; ``codes`` the rows' messages), or ``-inf`` if fewer do.

    Only the rows within ``margin`` of the best are sorted (the margin quadruples until they name
    ``top_k`` messages): a comparison over every row costs far less than a partition of them.
    """
    best = float(np.fmax.reduce(lows)) if len(lows) else -np.inf  # fmax: NaN only if every row is NaN
    if not best > -np.inf:
        return -np.inf
    for _ in range(8):  # 4**7 / 32 > 500: past the span of every finite bound (within [-1.1, 1.1])
        near = np.flatnonzero(lows >= best - margin)
        seen: set[int] = set()
        for i in near[np.argsort(-lows[near], kind="stable")].tolist():
            seen.add(int(codes[i]))
            if len(seen) == top_k:
                return float(lows[i])
        margin *= 4
    return -np.inf


class VectorCache:
    """Per-resource ``ResourceVectors``, least recently used first out, within a byte bound.

    Thread-safe: the cache's lock guards the table of resources and their byte total; each resource's own
    lock guards its data, held by writes and by searches (``ResourceVectors.search``).
    """

    def __init__(
        self, dimension: int, max_bytes: int, *, quantised_min_rows: int = QUANTISED_MIN_ROWS
    ) -> None:
        self.dimension = dimension
        self.max_bytes = max_bytes
        self.quantised_min_rows = quantised_min_rows
        self.entries: OrderedDict[str, ResourceVectors] = OrderedDict()
        self.sizes: dict[str, int] = {}
        self.nbytes = 0
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()
            self.sizes.clear()
            self.nbytes = 0

    def get(self, conn: Any, resource_id: str, generation: int | None = None) -> ResourceVectors | None:
        """The resource's current vectors (loaded if stale or absent), or ``None`` to use SQL instead.

        ``conn`` reads in one snapshot (``SqliteDatabase.read``), and the generation is read before the
        rows: data is never labelled newer than it is (a reader on an older snapshot may replace a newer
        entry with its own; the next search at the newer generation reloads it, never the reverse).
        ``generation``, when given, is the resource's ``search_generations`` value already read in that
        snapshot (0 when it has none).
        """
        if self.max_bytes == 0:
            return None
        with self._lock:
            if generation is None:
                row = conn.execute(
                    "SELECT generation FROM search_generations WHERE resource_id = ?", (resource_id,)
                ).fetchone()
                generation = 0 if row is None else int(row[0])
            entry = self.entries.get(resource_id)
            if entry is not None and entry.generation == generation:
                self.entries.move_to_end(resource_id)
                return entry
            count = int(
                conn.execute(
                    "SELECT count(*) FROM search_chunks WHERE resource_id = ?", (resource_id,)
                ).fetchone()[0]
            )
            keeps_floats = count * row_bytes(self.dimension) <= self.max_bytes
            if not keeps_floats and (
                count < self.quantised_min_rows or count * compact_row_bytes(self.dimension) > self.max_bytes
            ):
                self._drop(resource_id)
                return None
            rows = conn.execute(
                "SELECT rowid, message_id, thread_id, embedding, seq FROM search_chunks "
                "WHERE resource_id = ? ORDER BY rowid",
                (resource_id,),
            ).fetchall()
            matrix = np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").reshape(
                len(rows), self.dimension
            )
            entry = ResourceVectors(
                self.dimension,
                generation,
                np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
                [r[1] for r in rows],
                [r[2] for r in rows],
                [r[4] for r in rows],
                matrix,
                keeps_floats=keeps_floats,
            )
            entry.quantised_min_rows = self.quantised_min_rows
            self._store(resource_id, entry)
            return entry if resource_id in self.entries else None

    def patch(
        self,
        resource_id: str,
        generation: int,
        *,
        messages: set[str] | None = None,
        thread_id: str | None = None,
        added: Sequence[Added] = (),
    ) -> None:
        """Apply this process's own committed write to a cached resource: drop the chunks of ``messages``
        or of ``thread_id``, then add ``added``.

        Only data exactly one generation behind is patched (nobody else wrote in between); otherwise it is
        dropped and the next search reloads it.
        """
        with self._lock:
            entry = self.entries.get(resource_id)
            if entry is None:
                return
            if entry.generation != generation - 1:
                self._drop(resource_id)
                return
            with entry.lock:
                entry.apply(generation, messages=messages or set(), thread_id=thread_id, added=added)
            self._store(resource_id, entry)

    def _store(self, resource_id: str, entry: ResourceVectors) -> None:
        self._drop(resource_id)
        if entry.nbytes > self.max_bytes:
            return
        self.entries[resource_id] = entry
        self.sizes[resource_id] = entry.nbytes
        self.nbytes += entry.nbytes
        while self.nbytes > self.max_bytes:
            evicted, _ = self.entries.popitem(last=False)
            self.nbytes -= self.sizes.pop(evicted)

    def drop(self, resource_id: str) -> None:
        """Forget the resource's vectors (the next search reloads them)."""
        with self._lock:
            self._drop(resource_id)

    def _drop(self, resource_id: str) -> None:
        if self.entries.pop(resource_id, None) is not None:
            self.nbytes -= self.sizes.pop(resource_id)
