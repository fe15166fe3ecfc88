"""A new resource's save and context cost in files of 10k, 100k and 1M stored messages, with and without
SQLite's memory map (ADR 0012), on corpus files built once and reused.

``--build DIR`` grows one store in ``speed.py``'s bulk regime (other resources, one ``save_messages`` per
whole LoCoMo conversation, hash embedder, each distinct text embedded once) and keeps a copy of it at each
size as ``DIR/corpus-<size>.db`` (1M messages: ~9 minutes and 3.0 GB on a 2-core machine at load 3-4).

``--dir DIR`` measures: each size's corpus is copied once to ``DIR/work-<size>.db`` (the built files stay as
built), then every measurement runs in a fresh process on that copy, with ``PRAGMA mmap_size`` 0 (every
connection reads pages with ``pread`` into its own 2 MB cache: the code before ADR 0012) and the default
(``SqliteDatabase.MMAP_BYTES``), alternating, ``--reps`` times. A measurement saves LoCoMo conversation 0
(419 messages) as a new resource, in two regimes:

* apart (``speed.py``'s corpus regime): every message saved one per call, then the 150 questions asked;
* turns (a chat): each message saved, then a context asked at once (a reader after the writer's commit,
  whose page cache the commit made stale).

It reports p50 wall and CPU ms of a save and of a hybrid ``context()``, and the read calls each made
(``syscr`` of ``/proc/self/io``: Linux only). Each measurement's resource is new, so a work copy grows by
838 messages per measurement.

Usage: ``python benchmarks/corpus_probe.py --build /tmp/corpus2 [--sizes 10000,100000,1000000]`` then
``python benchmarks/corpus_probe.py --dir /tmp/corpus2 [--sizes …] [--reps 3]
[--out benchmarks/results/corpus-probe]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import (  # noqa: E402
    RESULTS,
    bench_data_path,
    machine,
    machine_line,
    markdown_table,
    percentile,
    write_report,
)

MEASURED = 0
"""The conversation saved as the new resource (``speed.py``'s)."""

MAPS = ("off", "on")
"""``PRAGMA mmap_size`` 0, and the default."""


def build(folder: Path, sizes: list[int]) -> None:
    """Grow one store to each size in turn, keeping ``corpus-<size>.db`` copies (SQLite's backup API)."""
    from benchmarks.speed import MemstackSide

    from memstack import locomo

    folder.mkdir(parents=True, exist_ok=True)
    side = MemstackSide(folder, locomo.load(bench_data_path()), bulk=True)
    for size in sorted(sizes):
        side.grow_to(size)
        target = folder / f"corpus-{size}.db"
        with sqlite3.connect(side.path) as source, sqlite3.connect(target) as copy:
            source.backup(copy)
        print(f"{size}: grown in {side.grow_s:.1f} s in all; {target} ({target.stat().st_size / 1e6:.0f} MB)")
    side.memory.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{side.path}{suffix}").unlink(missing_ok=True)


def _reads() -> int | None:
    """Read calls this process made so far (Linux), or None."""
    try:
        fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    except OSError:
        return None
    return int(fields["syscr"])


def _timed(call: Callable[[], Any], wall: list[float], cpu: list[float], reads: list[int]) -> None:
    before = _reads()
    c0, t0 = time.process_time(), time.perf_counter()
    call()
    wall.append((time.perf_counter() - t0) * 1000)
    cpu.append((time.process_time() - c0) * 1000)
    after = _reads()
    if before is not None and after is not None:
        reads.append(after - before)


def measure(path: Path, label: str, mmap: str) -> dict[str, Any]:
    """One fresh process's figures on ``path`` (both regimes; module docstring)."""
    from benchmarks.recall_quality import CachingEmbedder

    from memstack import Memory, locomo
    from memstack.adapters.hash_embed import HashEmbedder
    from memstack.adapters.sqlite import db

    if mmap == "off":
        db.MMAP_BYTES = 0
    conv = locomo.load(bench_data_path())[MEASURED]
    memory = Memory.local(path, embedder=CachingEmbedder(HashEmbedder()))
    figures: dict[str, Any] = {}
    for regime in ("apart", "turns"):
        resource = f"{conv.resource_id}-{label}-{regime}"
        saves: tuple[list[float], list[float], list[int]] = ([], [], [])
        contexts: tuple[list[float], list[float], list[int]] = ([], [], [])
        ask = partial(memory.context, resource_id=resource, options={"semantic_recall": {"mode": "hybrid"}})
        n = 0
        for thread, turns in conv.sessions.items():
            for t in turns:
                message = {"id": t.message_id, "role": t.role, "content": t.text, "created_at": t.created_at}
                save = partial(
                    memory.save_messages, thread_id=thread, resource_id=resource, messages=[message]
                )
                _timed(save, *saves)
                if regime == "turns":
                    question = conv.questions[n % len(conv.questions)].text
                    _timed(partial(ask, thread_id=thread, message=question), *contexts)
                n += 1
        if regime == "apart":
            for q in conv.questions:
                _timed(partial(ask, thread_id="questions", message=q.text), *contexts)
        figures[regime] = {
            "save_ms_p50": percentile(saves[0], 0.5),
            "save_cpu_ms_p50": percentile(saves[1], 0.5),
            "save_reads": statistics.fmean(saves[2]) if saves[2] else None,
            "context_ms_p50": percentile(contexts[0], 0.5),
            "context_cpu_ms_p50": percentile(contexts[1], 0.5),
            "context_reads": statistics.fmean(contexts[2]) if contexts[2] else None,
        }
    memory.close()
    return figures


def probe(folder: Path, sizes: list[int], reps: int) -> dict[str, Any]:
    """Every size × map setting × repetition, each in a fresh process, map settings alternating."""
    runs: list[dict[str, Any]] = []
    for size in sorted(sizes):
        work = folder / f"work-{size}.db"
        if not work.exists():
            shutil.copyfile(folder / f"corpus-{size}.db", work)
        for rep in range(reps):
            for mmap in MAPS:
                load = os.getloadavg()[0]
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--child",
                        str(work),
                        "--map",
                        mmap,
                        "--label",
                        f"{mmap}{rep}",
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                figures = json.loads(out.splitlines()[-1])
                runs.append({"size": size, "mmap": mmap, "rep": rep, "load": load, **figures})
                print(
                    f"{size} mmap {mmap} rep {rep} (load {load:.1f}): "
                    + "; ".join(
                        f"{r} save {f['save_cpu_ms_p50']:.2f} / context {f['context_cpu_ms_p50']:.2f} CPU ms"
                        for r, f in figures.items()
                    ),
                    file=sys.stderr,
                    flush=True,
                )
    return {"benchmark": "corpus-probe", "machine": machine(), "reps": reps, "sizes": sizes, "runs": runs}


def _median(runs: list[dict[str, Any]], regime: str, key: str) -> float | None:
    values = [r[regime][key] for r in runs if r[regime][key] is not None]
    return statistics.median(values) if values else None


def _cell(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def render(result: dict[str, Any]) -> str:
    """The report: medians over repetitions, and each size's ratio to the smallest."""
    runs = result["runs"]
    sizes = sorted({r["size"] for r in runs})
    rows = []
    for regime in ("apart", "turns"):
        for size in sizes:
            for mmap in MAPS:
                these = [r for r in runs if r["size"] == size and r["mmap"] == mmap]
                base = [r for r in runs if r["size"] == sizes[0] and r["mmap"] == mmap]
                cpu = _median(these, regime, "context_cpu_ms_p50")
                cpu0 = _median(base, regime, "context_cpu_ms_p50")
                rows.append(
                    [
                        regime,
                        size,
                        mmap,
                        f"{_cell(_median(these, regime, 'save_ms_p50'))} ({_cell(_median(these, regime, 'save_cpu_ms_p50'))})",
                        f"{_cell(_median(these, regime, 'context_ms_p50'))} ({_cell(cpu)})",
                        f"x{cpu / cpu0:.2f}" if cpu and cpu0 else "n/a",
                        _cell(_median(these, regime, "save_reads"), 1),
                        _cell(_median(these, regime, "context_reads"), 1),
                    ]
                )
    loads = [r["load"] for r in runs]
    return "\n".join(
        [
            "# A new resource's cost as the file grows, with and without SQLite's memory map",
            "",
            machine_line(result["machine"]),
            f"Medians over {result['reps']} fresh-process measurement(s) per cell, map settings alternating; "
            f"load average {min(loads):.1f}–{max(loads):.1f} during the run. Hash embedder, hybrid context, "
            "LoCoMo conversation 0 (419 messages, 150 questions) saved as a new resource in a corpus built in "
            "the bulk regime (`benchmarks/corpus_probe.py`).",
            "",
            markdown_table(
                [
                    "regime",
                    "messages stored",
                    "mmap",
                    "save ms p50 (CPU)",
                    "context ms p50 (CPU)",
                    "context CPU vs smallest file",
                    "read calls per save",
                    "read calls per context",
                ],
                rows,
            ),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--build", type=Path, default=None, help="build the corpus files in this folder")
    parser.add_argument("--dir", type=Path, default=None, help="measure the corpus files in this folder")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "corpus-probe")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--map", choices=MAPS, default="on", help=argparse.SUPPRESS)
    parser.add_argument("--label", default="probe", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    if args.child is not None:
        print(json.dumps(measure(args.child, args.label, args.map)))
        return 0
    if args.build is not None:
        build(args.build, sizes)
        return 0
    if args.dir is None:
        parser.error("give --build DIR or --dir DIR")
    result = probe(args.dir, sizes, args.reps)
    write_report(args.out, render(result), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
