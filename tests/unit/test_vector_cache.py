"""The SQLite index's vector cache on large resources: the int8 scan with error bounds (ADR 0009) must return
exactly what the float32 search returns, stay right through in-place writes, restarts and another process's
writes, and never keep a deleted vector."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memstack.adapters.sqlite import vector_cache
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.index import SqliteSearchIndex
from memstack.adapters.sqlite.vector_cache import Added, ResourceVectors, quantise, unit_rows
from memstack.ports import IndexEntry, IndexHit

DIM = 64
T0 = datetime(2024, 5, 1, tzinfo=UTC)


def _rows(seed: int, n: int, dim: int = DIM) -> np.ndarray:
    """Unit rows with some structure: noisy copies of a few directions, exact duplicates and sparse rows
    (like the hash embedder's), so that many scores are close and some tie."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(8, dim))
    rows = centres[rng.integers(0, 8, n)] + rng.normal(scale=0.7, size=(n, dim))
    twins = np.arange(0, n - 1, 7)
    rows[twins] = rows[twins + 1]
    sparse = rng.random((n, dim)) < 0.8
    rows[::5] = np.where(sparse[::5], 0.0, np.sign(rows[::5]))
    return unit_rows(rows)


def _vectors(rows: np.ndarray, messages: int, threshold: int) -> ResourceVectors:
    """A resource of ``len(rows)`` chunks over ``messages`` messages (several chunks each) in two threads."""
    n = len(rows)
    entry = ResourceVectors(
        rows.shape[1],
        1,
        np.arange(1, n + 1, dtype=np.int64),
        [f"m{i % messages:05d}" for i in range(n)],
        [f"t{i % messages % 2}" for i in range(n)],
        [i % messages for i in range(n)],
        rows,
    )
    entry.quantised_min_rows = threshold
    return entry


def _key(hits: list[IndexHit]) -> list[tuple[str, float]]:
    return [(h.message_id, round(h.score, 6)) for h in hits]


def test_given_random_rows_when_quantised_then_the_error_bound_holds_for_any_query() -> None:
    rows = _rows(1, 2000)
    codes, scales, errors = quantise(rows)
    queries = _rows(2, 200)
    exact = queries.astype(np.float64) @ rows.T.astype(np.float64)
    for q, want in zip(queries, exact, strict=True):
        approx = (codes.astype(np.float64) @ q.astype(np.float64)) * scales
        assert np.all(np.abs(want - approx) <= errors * np.linalg.norm(q) + 1e-9), "bound broken"
    assert errors.max() < 0.05, "int8 codes should keep rows within a few percent"


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("top_k", [1, 4, 17])
def test_given_a_large_resource_when_searched_through_int8_bounds_then_results_equal_the_float32_search(
    seed: int, top_k: int
) -> None:
    rows = _rows(seed, 3000)
    queries = _rows(100 + seed, 40)
    quantised, exact = _vectors(rows, 1100, threshold=0), _vectors(rows, 1100, threshold=10**9)
    allowed = np.arange(1, 3001, 3, dtype=np.int64)  # a filter's share of the rows
    for q in queries:
        assert _key(quantised.search(q, None, top_k)) == _key(exact.search(q, None, top_k))
        assert _key(quantised.search(q, allowed, top_k)) == _key(exact.search(q, allowed, top_k))


def test_given_duplicated_rows_when_searched_through_int8_bounds_then_ties_break_by_message_id() -> None:
    rows = np.repeat(_rows(7, 50), 40, axis=0)  # every vector 40 times, under 40 different messages
    entry = _vectors(rows, len(rows), threshold=0)
    for q in _rows(8, 10):
        hits = entry.search(q, None, 6)
        assert _key(hits) == _key(_vectors(rows, len(rows), threshold=10**9).search(q, None, 6))
        assert len({round(h.score, 6) for h in hits}) == 1, "the six best are copies of one row"
        assert [h.message_id for h in hits] == sorted(h.message_id for h in hits)


def test_given_rows_added_and_deleted_in_place_when_searched_then_results_follow_the_changes() -> None:
    rows = _rows(3, 3000)
    entry = _vectors(rows[:2000], 2000, threshold=0)
    target = rows[2500]
    entry.apply(
        2,
        messages={"m00010", "m00011"},
        thread_id=None,
        added=[Added(3000 + i, f"new{i}", "t9", i, rows[2000 + i]) for i in range(1000)],
    )
    best = entry.search(target, None, 3)
    assert best[0].message_id == "new500" and best[0].score == pytest.approx(1.0, abs=1e-6)
    everything = {h.message_id for h in entry.search(target, None, 3000)}
    assert not everything & {"m00010", "m00011"}, "a deleted message's vectors must never rank"
    entry.apply(3, messages=set(), thread_id="t9", added=[])
    assert not {h.message_id for h in entry.search(target, None, 3000)} & {"new500", "new1"}


def _entries(rows: np.ndarray, start: int, resource: str = "r1") -> list[IndexEntry]:
    return [
        IndexEntry(
            message_id=f"m{start + i:05d}",
            chunk=0,
            thread_id=f"t{(start + i) % 3}",
            resource_id=resource,
            role="user",
            seq=start + i,
            created_at=T0,
            text="words",
            vector=row.tolist(),
        )
        for i, row in enumerate(rows)
    ]


def _ranking(index: SqliteSearchIndex, query: np.ndarray, **kwargs: object) -> list[tuple[str, float]]:
    return _key(index.search("r1", top_k=10, vector=query.tolist(), **kwargs).vector or [])  # type: ignore[arg-type]


def _stored(path: Path, seed: int, n: int) -> tuple[SqliteDatabase, SqliteSearchIndex]:
    """A file holding ``n`` chunks of resource ``r1``, and an index on it that always takes the int8 path."""
    db = SqliteDatabase(path)
    index = SqliteSearchIndex(db, DIM, quantised_min_rows=0)
    index.upsert(_entries(_rows(seed, n), 0))
    return db, index


def test_given_a_large_resource_when_the_index_restarts_then_the_rebuilt_cache_ranks_as_before(
    tmp_path: Path,
) -> None:
    db, index = _stored(tmp_path / "m.db", 4, 1500)
    query = _rows(5, 1)[0]
    before = _ranking(index, query)
    index.delete_messages("r1", [before[0][0]])
    after_delete = _ranking(index, query)
    db.close()

    reopened = SqliteDatabase(tmp_path / "m.db")
    again = SqliteSearchIndex(reopened, DIM, quantised_min_rows=0)
    assert _ranking(again, query) == after_delete == before[1:] + after_delete[-1:]
    sql_only = SqliteSearchIndex(reopened, DIM, vector_cache_bytes=0)
    assert _ranking(sql_only, query) == after_delete
    assert _ranking(again, query, thread_id="t1") == _ranking(sql_only, query, thread_id="t1")
    reopened.close()


def _write_in_another_process(path: str, rows: list[list[float]], erase: str) -> None:
    db = SqliteDatabase(path)
    index = SqliteSearchIndex(db, DIM)
    index.upsert(_entries(np.asarray(rows, dtype=np.float32), 90_000))
    index.delete_messages("r1", [erase])
    db.close()


def test_given_a_cached_large_resource_when_another_process_writes_then_the_next_search_sees_it(
    tmp_path: Path,
) -> None:
    db, index = _stored(tmp_path / "m.db", 6, 1200)
    query = _rows(9, 1)[0]
    first = _ranking(index, query)[0][0]  # the resource is now cached

    context = multiprocessing.get_context("spawn")
    writer = context.Process(
        target=_write_in_another_process, args=(str(tmp_path / "m.db"), [query.tolist()], first)
    )
    writer.start()
    writer.join(60)
    assert writer.exitcode == 0

    ranking = _ranking(index, query)
    assert ranking[0] == ("m90000", 1.0), "the other process's new chunk must be found"
    assert first not in [m for m, _ in _ranking(index, query)], "its delete must be seen too"
    db.close()


def test_given_a_resource_held_in_int8_only_when_searched_then_results_equal_the_float32_search() -> None:
    rows = _rows(11, 3000)
    full = _vectors(rows, 1500, threshold=10**9)
    compact = ResourceVectors(
        DIM,
        1,
        np.arange(1, 3001, dtype=np.int64),
        [f"m{i % 1500:05d}" for i in range(3000)],
        [f"t{i % 1500 % 2}" for i in range(3000)],
        [i % 1500 for i in range(3000)],
        rows,
        keeps_floats=False,
    )
    reads: list[int] = []

    def floats(rowids: np.ndarray) -> np.ndarray:
        reads.append(len(rowids))
        found: np.ndarray = rows[rowids - 1]
        return found

    assert compact.matrix.nbytes == 0 and compact.nbytes < full.nbytes / 2
    allowed = np.arange(2, 3001, 2, dtype=np.int64)
    for q in _rows(12, 30):
        assert _key(compact.search(q, None, 5, floats)) == _key(full.search(q, None, 5))
        assert _key(compact.search(q, allowed, 5, floats)) == _key(full.search(q, allowed, 5))
    assert max(reads) < 300, "only the rows the bounds keep are read back"
    with pytest.raises(ValueError, match="floats"):
        compact.search(rows[0], None, 5)


def test_given_a_resource_too_large_for_float32_in_the_cache_bound_when_searched_then_int8_rows_serve_it(
    tmp_path: Path,
) -> None:
    from memstack.adapters.sqlite.vector_cache import compact_row_bytes, row_bytes

    rows, query = _rows(13, 5000), _rows(14, 1)[0]
    db = SqliteDatabase(tmp_path / "m.db")
    # int8 rows fit (with room for their capacity to double on a save), float32 ones do not
    bound = 12_000 * compact_row_bytes(DIM)
    assert 5000 * row_bytes(DIM) > bound
    index = SqliteSearchIndex(db, DIM, vector_cache_bytes=bound)
    # The float32 cache is the reference (SQL's sqlite-vec distances round differently in the last bit).
    reference = SqliteSearchIndex(db, DIM, quantised_min_rows=10**9)
    index.upsert(_entries(rows, 0))

    assert _ranking(index, query) == _ranking(reference, query)
    cached = index._cache.entries["r1"]
    assert not cached.keeps_floats, "the resource is held in int8 only, not dropped to SQL"
    index.upsert(_entries(query[None, :], 70_000))  # patched in place, at 5001 rows
    index.delete_messages("r1", ["m00001"])
    assert index._cache.entries["r1"] is cached
    assert _ranking(index, query)[0] == ("m70000", 1.0)
    assert _ranking(index, query) == _ranking(reference, query)
    assert _ranking(index, query, thread_id="t2") == _ranking(reference, query, thread_id="t2")
    db.close()


def _per_row_candidates(
    entry: ResourceVectors, unit: np.ndarray, positions: np.ndarray, top_k: int
) -> list[int]:
    """ADR 0009's rule with each row's own bound over every row: the rows whose upper bound reaches the
    ``top_k``-th message's best lower bound (computed in float64 here, with float32's slack to spare)."""
    t = float(np.abs(unit).max()) / 127.0
    query = np.rint(unit.astype(np.float64) / t)
    query_error = float(np.linalg.norm(unit.astype(np.float64) - query * t))
    approx = entry.codes8[positions].astype(np.float64) @ query * entry.scales[positions] * t
    slack = entry.errors[positions] * (1.0 + query_error) + query_error + 1e-5
    usable = entry.usable[positions]
    lows = np.where(usable, approx - slack, -np.inf)
    best: dict[int, float] = {}
    for code, low in zip(entry.codes[positions].tolist(), lows.tolist(), strict=True):
        best[code] = max(best.get(code, -np.inf), low)
    ranked = sorted(best.values(), reverse=True)
    floor = ranked[top_k - 1] if len(ranked) >= top_k else -np.inf
    kept: list[int] = positions[usable & (approx + slack >= floor - 1e-6)].tolist()
    return kept


@pytest.mark.parametrize("top_k", [1, 4, 16])
def test_given_a_large_resource_when_the_int8_scan_keeps_candidates_then_they_are_every_row_the_per_row_bound_keeps(
    top_k: int,
) -> None:
    rows = _rows(21, 6000)
    entry = _vectors(rows, 1500, threshold=0)
    entry.apply(2, messages={f"m{i:05d}" for i in range(0, 1500, 11)}, thread_id=None, added=[])  # dead rows
    queries = np.concatenate([_rows(22, 12), rows[[3, 600, 5999]]])
    everything = np.arange(entry.n, dtype=np.int64)
    some = np.arange(0, entry.n, 3, dtype=np.int64)
    for unit in queries:
        for positions in (None, some):
            kept = entry._candidates(unit, positions, top_k).tolist()
            reference = _per_row_candidates(
                entry, unit, everything if positions is None else positions, top_k
            )
            # Two passes keep the per-row rule's rows (float32 may keep a hair more, never fewer).
            assert set(reference) <= set(kept), "a row the per-row bound needs was dropped"
            assert len(kept) <= len(reference) + 2


def test_given_rows_with_many_ties_when_ranked_then_each_message_scores_by_its_best_row_ties_by_id() -> None:
    rng = np.random.default_rng(11)
    entry = _vectors(_rows(12, 400), 90, threshold=10_000)
    for _ in range(300):
        n = int(rng.integers(1, 400))
        codes = rng.integers(0, 90, n).astype(np.int64)
        scores = np.round(rng.normal(size=n), 1).astype(np.float32)  # one decimal: ties within and across
        top_k = int(rng.integers(1, 40))
        best: dict[int, float] = {}
        for code, score in zip(codes.tolist(), scores.astype(np.float64).tolist(), strict=True):
            best[code] = max(best.get(code, -np.inf), score)
        expected = sorted(best.items(), key=lambda item: (-item[1], entry.names[item[0]]))[:top_k]
        ranked = entry._ranked(codes, scores, top_k)
        assert [(h.message_id, h.score) for h in ranked] == [
            (entry.names[c], max(-1.0, min(1.0, s))) for c, s in expected
        ]


def test_given_a_scan_large_enough_to_split_when_run_then_every_sum_is_the_exact_int32_product() -> None:
    rng = np.random.default_rng(7)
    rows = vector_cache.PARALLEL_MIN_ROWS + 1234
    codes = rng.integers(-127, 128, (rows, 256), dtype=np.int8)
    query = rng.integers(-127, 128, 256, dtype=np.int8)
    want = codes.astype(np.int64) @ query.astype(np.int64)
    assert np.array_equal(vector_cache._int8_dots(codes, query), want.astype(np.float32))
    assert np.array_equal(vector_cache._int8_dots(codes[:100], query), want[:100].astype(np.float32))


def _split_scan_input() -> tuple[np.ndarray, np.ndarray]:
    """Codes of ``PARALLEL_MIN_ROWS`` rows (a scan that splits) and a query, the same in every process."""
    rng = np.random.default_rng(8)
    codes = rng.integers(-127, 128, (vector_cache.PARALLEL_MIN_ROWS, 64), dtype=np.int8)
    return codes, rng.integers(-127, 128, 64, dtype=np.int8)


def _scan_in_child(conn: Any) -> None:
    dots = vector_cache._int8_dots(*_split_scan_input())
    conn.send((vector_cache.scan_threads(), float(dots.sum())))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX-only")
def test_given_a_process_that_split_a_scan_when_it_forks_then_the_child_scans_on_one_thread() -> None:
    rng = np.random.default_rng(9)
    codes = rng.integers(-127, 128, (vector_cache.PARALLEL_MIN_ROWS, 64), dtype=np.int8)
    vector_cache._int8_dots(codes, codes[0])  # the parent's OpenMP pool, if it has two cores, now exists
    parent, child = multiprocessing.Pipe()
    worker = multiprocessing.get_context("fork").Process(target=_scan_in_child, args=(child,))
    worker.start()
    worker.join(60)
    if worker.exitcode is None:  # hung in OpenMP's inherited pool
        worker.kill()
    assert worker.exitcode == 0, "a forked child must be able to scan"
    threads, total = parent.recv()
    assert threads == 1
    codes, query = _split_scan_input()
    assert total == float((codes.astype(np.int64) @ query.astype(np.int64)).astype(np.float32).sum())


_IDLE_AFTER_SCAN = """
import os, sys, time
import numpy as np
from memstack.adapters.sqlite import vector_cache
codes = np.random.default_rng(0).integers(-127, 128, (vector_cache.PARALLEL_MIN_ROWS * 2, 64), dtype=np.int8)
for _ in range(3):
    vector_cache._int8_dots(codes, codes[0])
start = time.process_time()
time.sleep(0.05)
print(vector_cache.scan_threads(), (time.process_time() - start) * 1000, os.environ.get("GOMP_SPINCOUNT"))
"""


def test_given_a_split_scan_when_it_has_ended_then_its_threads_burn_no_cpu_while_the_process_waits() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    out = subprocess.run(
        [sys.executable, "-c", _IDLE_AFTER_SCAN],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    threads, idle_cpu_ms, left = int(out[0]), float(out[1]), out[2]
    assert threads == min(vector_cache.MAX_SCAN_THREADS, len(os.sched_getaffinity(0)))
    assert idle_cpu_ms < 4.0, f"{idle_cpu_ms:.1f} ms of CPU in a 50 ms pause: OpenMP threads spin"
    assert left == "None", "the OpenMP setting is for SimSIMD's import only, not left in the environment"
