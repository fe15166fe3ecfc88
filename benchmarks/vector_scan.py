"""Vector search in ONE large resource, float32 product vs the int8 scan with error bounds (ADR 0009), side by
side in one run, for the hash embedder and wordllama (the embedded default).

The resource holds the texts of LoCoMo dev and LongMemEval_S dev (``../shared/data``, or the repository's
LoCoMo subset), replayed under new message ids up to each size, one chunk per message; queries are their
questions. For each size and embedder it times ``ResourceVectors.search`` (top_k 4 and 16, no filter) both
ways on the same cached rows, counts the rows the bounds leave to float32 scoring, and checks that both ways
return the same messages with the same scores (the int8 path is exact by construction: a mismatch is a bug).
What it does not time: the SQL read of the generation and the hits' use (``speed.py --scenario resource``
measures ``context()`` end to end).

Usage: ``python benchmarks/vector_scan.py [--sizes 1000,10000,100000] [--queries 200]
[--embedders hash,wordllama] [--out benchmarks/results/vector-scan]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import RESULTS, machine, machine_line, markdown_table, percentile, write_report  # noqa: E402

TOP_KS = (4, 16)


def _texts_and_questions() -> tuple[list[str], list[str]]:
    from benchmarks.common import bench_data_path

    from memstack import locomo

    paths = [bench_data_path()]
    longmemeval = ROOT.parent / "shared" / "data" / "longmemeval" / "longmemeval-s-dev48.json.gz"
    if longmemeval.exists():
        paths.append(longmemeval)
    texts: list[str] = []
    questions: list[str] = []
    for path in paths:
        for conv in locomo.load(path):
            texts += [t.text for turns in conv.sessions.values() for t in turns]
            questions += [q.text for q in conv.questions]
    return list(dict.fromkeys(texts)), questions


def _embedder(name: str) -> Any:
    if name == "hash":
        from memstack.adapters.hash_embed import HashEmbedder

        return HashEmbedder()
    from memstack.adapters.wordllama_embed import WordLlamaEmbedder

    return WordLlamaEmbedder()


def _resource(vectors: np.ndarray, size: int) -> Any:
    from memstack.adapters.sqlite.vector_cache import ResourceVectors

    rows = vectors[np.arange(size) % len(vectors)]
    return ResourceVectors(
        vectors.shape[1],
        1,
        np.arange(1, size + 1, dtype=np.int64),
        [f"m{i:07d}" for i in range(size)],
        [f"t{i // 20}" for i in range(size)],
        [i % 20 for i in range(size)],
        rows,
    )


def _timed(entry: Any, queries: np.ndarray, top_k: int) -> dict[str, tuple[list[float], list[Any]]]:
    """Each query by the float32 product, then by the int8 scan: the paths take turns, so a change in the
    machine's load touches both alike."""
    out: dict[str, tuple[list[float], list[Any]]] = {"float32": ([], []), "int8": ([], [])}
    for q in queries:
        for path, threshold in (("float32", 10**12), ("int8", 0)):
            entry.quantised_min_rows = threshold
            t0 = time.perf_counter()
            hits = entry.search(q, None, top_k)
            out[path][0].append((time.perf_counter() - t0) * 1000)
            out[path][1].append([(h.message_id, h.score) for h in hits])
    return out


def measure(
    embedder_name: str, sizes: list[int], n_queries: int, log: Any = sys.stderr
) -> list[dict[str, Any]]:
    """Rows of the report for one embedder (see the module docstring)."""
    texts, questions = _texts_and_questions()
    embedder = _embedder(embedder_name)
    t0 = time.perf_counter()
    vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    log.write(f"{embedder_name}: embedded {len(texts)} texts in {time.perf_counter() - t0:.1f} s\n")
    picked = np.random.default_rng(0).choice(len(questions), min(n_queries, len(questions)), replace=False)
    queries = np.asarray([embedder.embed_query(questions[i]) for i in picked], dtype=np.float32)
    queries = queries[queries.any(axis=1)]
    out = []
    for size in sizes:
        entry = _resource(vectors, size)
        for top_k in TOP_KS:
            _timed(entry, queries[:5], top_k)  # warm both paths
            timed = _timed(entry, queries, top_k)
            (exact_ms, exact), (int8_ms, int8) = timed["float32"], timed["int8"]
            units = [(q / np.linalg.norm(q)).astype(np.float32) for q in queries]
            candidates = [len(entry._candidates(u, None, top_k)) for u in units]
            same = sum(a == b for a, b in zip(exact, int8, strict=True))
            row = {
                "embedder": embedder_name,
                "rows": size,
                "distinct_texts": min(size, len(vectors)),
                "top_k": top_k,
                "float32_ms_p50": percentile(exact_ms, 0.5),
                "int8_ms_p50": percentile(int8_ms, 0.5),
                "int8_ms_p95": percentile(int8_ms, 0.95),
                "candidates_p50": percentile([float(c) for c in candidates], 0.5),
                "candidates_p95": percentile([float(c) for c in candidates], 0.95),
                "same_results": same / len(queries),
                "queries": len(queries),
            }
            log.write(f"  {row}\n")
            log.flush()
            out.append(row)
    return out


def render(result: dict[str, Any]) -> str:
    rows = result["rows"]
    base = {(r["embedder"], r["top_k"]): r for r in rows if r["rows"] == min(x["rows"] for x in rows)}
    table = markdown_table(
        [
            "embedder",
            "rows in the resource",
            "top_k",
            "float32 ms p50",
            "int8 + bounds ms p50 (p95)",
            "float32 / int8",
            "int8 p50 / its value at the smallest size",
            "rows scored in float32 p50 (p95)",
            "same results as float32",
        ],
        [
            [
                r["embedder"],
                r["rows"],
                r["top_k"],
                f"{r['float32_ms_p50']:.2f}",
                f"{r['int8_ms_p50']:.2f} ({r['int8_ms_p95']:.2f})",
                f"{r['float32_ms_p50'] / r['int8_ms_p50']:.1f}x",
                f"{r['int8_ms_p50'] / base[(r['embedder'], r['top_k'])]['int8_ms_p50']:.1f}x",
                f"{r['candidates_p50']:.0f} ({r['candidates_p95']:.0f})",
                f"{r['same_results']:.3f} of {r['queries']}",
            ]
            for r in rows
        ],
    )
    return (
        "# Vector search in one large resource: float32 vs the int8 scan with error bounds\n\n"
        f"{machine_line(result['machine'])}\n\n"
        "One resource, one chunk per message; its texts are LoCoMo dev's and LongMemEval_S dev's, replayed "
        "under new ids past their count (so larger sizes hold copies that tie). `ResourceVectors.search` "
        "alone, no filter; both paths on the same rows in one process, each query by one path then the other. "
        f"Queries: {rows[0]['queries']} questions of the same files.\n\n{table}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedders", default="hash,wordllama")
    parser.add_argument("--out", type=Path, default=RESULTS / "vector-scan")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    rows: list[dict[str, Any]] = []
    for name in [x for x in args.embedders.split(",") if x]:
        rows += measure(name, sizes, args.queries)
    result = {"benchmark": "vector-scan", "machine": machine(None), "rows": rows}
    write_report(args.out, render(result), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
