"""A new resource's save and context cost in files of 10k, 100k and 1M stored messages, measured side by
side in one process (ADR 0012), on corpus files built once and reused.

``--build DIR`` grows one store in ``speed.py``'s bulk regime (other resources, one ``save_messages`` per
whole LoCoMo conversation, hash embedder, each distinct text embedded once) and keeps a copy of it at each
size as ``DIR/corpus-<size>.db`` (1M messages: ~9 minutes and 3.0 GB on a 2-core machine at load 3-4).

``--dir DIR`` measures: each size's corpus is copied once to ``DIR/work-<size>.db`` (the built files stay as
built) and every copy is opened in this one process. LoCoMo conversation 0 (419 messages) is saved as a new
resource into every file, message by message with the files taking turns (the first file rotating), and its
questions are asked the same way, so a change in the machine's load reaches every size alike: on a shared
machine, sizes measured one after another (``speed.py``'s corpus scenario, minutes apart while the file
grows) differ by the load as much as by the file. Two regimes, each ``--reps`` times on new resources:

* apart (``speed.py``'s corpus regime): every message saved one per call, then the 150 questions asked;
* turns (a chat): each message saved, then a context asked at once (a reader after the writer's commit,
  whose page cache the commit made stale).

It reports p50 wall and CPU ms of a save and of a hybrid ``context()`` per size (the median of the
repetitions' p50s), each size's CPU over the smallest file's, and the read calls each operation made
(``syscr`` of ``/proc/self/io``: Linux only). A work copy grows by 838 messages per repetition.

Usage: ``python benchmarks/corpus_probe.py --build /tmp/corpus2 [--sizes 10000,100000,1000000]`` then
``python benchmarks/corpus_probe.py --dir /tmp/corpus2 [--sizes …] [--reps 3]
[--out benchmarks/results/corpus-probe]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
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
    rotated,
    write_report,
)

MEASURED = 0
"""The conversation saved as the new resource (``speed.py``'s)."""


def build(folder: Path, sizes: list[int]) -> None:
    """Grow one store to each size in turn, keeping ``corpus-<size>.db`` copies (``speed.grow_copies``)."""
    from benchmarks.speed import MemstackSide, grow_copies

    from memstack import locomo

    folder.mkdir(parents=True, exist_ok=True)
    side = MemstackSide(folder, locomo.load(bench_data_path()), bulk=True)
    grow_copies(side, sizes, folder, "corpus", sys.stdout)


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


REGIMES = ("apart", "turns")

Samples = tuple[list[float], list[float], list[int]]
"""Wall ms, CPU ms and read calls of each timed call."""


def _figures(saves: Samples, contexts: Samples) -> dict[str, Any]:
    return {
        "save_ms_p50": percentile(saves[0], 0.5),
        "save_cpu_ms_p50": percentile(saves[1], 0.5),
        "save_reads": statistics.fmean(saves[2]) if saves[2] else None,
        "context_ms_p50": percentile(contexts[0], 0.5),
        "context_cpu_ms_p50": percentile(contexts[1], 0.5),
        "context_reads": statistics.fmean(contexts[2]) if contexts[2] else None,
    }


def measure(memories: dict[int, Any], conv: Any, regime: str, label: str) -> dict[int, dict[str, Any]]:
    """One repetition of a regime (module docstring) in every file, the files taking turns."""
    sizes = list(memories)
    saves: dict[int, Samples] = {size: ([], [], []) for size in sizes}
    contexts: dict[int, Samples] = {size: ([], [], []) for size in sizes}
    resource = f"{conv.resource_id}-{label}-{regime}"
    options = {"semantic_recall": {"mode": "hybrid"}}
    n = 0
    for thread, turns in conv.sessions.items():
        for t in turns:
            message = {"id": t.message_id, "role": t.role, "content": t.text, "created_at": t.created_at}
            question = conv.questions[n % len(conv.questions)].text
            for size in rotated(sizes, n):
                memory = memories[size]
                save = partial(
                    memory.save_messages, thread_id=thread, resource_id=resource, messages=[message]
                )
                _timed(save, *saves[size])
                if regime == "turns":
                    ask = partial(
                        memory.context,
                        thread_id=thread,
                        resource_id=resource,
                        message=question,
                        options=options,
                    )
                    _timed(ask, *contexts[size])
            n += 1
    if regime == "apart":
        for i, q in enumerate(conv.questions):
            for size in rotated(sizes, i):
                ask = partial(
                    memories[size].context,
                    thread_id="questions",
                    resource_id=resource,
                    message=q.text,
                    options=options,
                )
                _timed(ask, *contexts[size])
    return {size: _figures(saves[size], contexts[size]) for size in sizes}


def probe(folder: Path, sizes: list[int], reps: int) -> dict[str, Any]:
    """Every regime ``reps`` times, all sizes side by side in this process."""
    from benchmarks.recall_quality import CachingEmbedder

    from memstack import Memory, locomo
    from memstack.adapters.hash_embed import HashEmbedder

    conv = locomo.load(bench_data_path())[MEASURED]
    embedder = CachingEmbedder(HashEmbedder())  # one embedding of each text, whichever file asks first
    memories: dict[int, Any] = {}
    files: dict[int, int] = {}
    for size in sorted(sizes):
        work = folder / f"work-{size}.db"
        if not work.exists():
            shutil.copyfile(folder / f"corpus-{size}.db", work)
        files[size] = work.stat().st_size
        memories[size] = Memory.local(work, embedder=embedder)
    stamp = int(time.time())
    runs: list[dict[str, Any]] = []
    for rep in range(reps):
        for regime in REGIMES:
            load = os.getloadavg()[0]
            figures = measure(memories, conv, regime, f"probe{stamp}-{rep}")
            for size, f in figures.items():
                runs.append({"size": size, "regime": regime, "rep": rep, "load": load, **f})
            print(
                f"rep {rep} {regime} (load {load:.1f}): "
                + "; ".join(
                    f"{size} save {f['save_cpu_ms_p50']:.2f} / context {f['context_cpu_ms_p50']:.2f} CPU ms"
                    for size, f in figures.items()
                ),
                file=sys.stderr,
                flush=True,
            )
    for memory in memories.values():
        memory.close()
    return {
        "benchmark": "corpus-probe",
        "machine": machine(),
        "reps": reps,
        "sizes": sorted(sizes),
        "file_mb": {str(k): round(v / 1e6) for k, v in files.items()},
        "runs": runs,
    }


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r[key] is not None]
    return statistics.median(values) if values else None


def _cell(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def render(result: dict[str, Any]) -> str:
    """The report: medians over repetitions, and each size's CPU over the smallest file's."""
    runs = result["runs"]
    sizes = result["sizes"]
    rows = []
    for regime in REGIMES:
        base = [r for r in runs if r["size"] == sizes[0] and r["regime"] == regime]
        save0, context0 = _median(base, "save_cpu_ms_p50"), _median(base, "context_cpu_ms_p50")
        for size in sizes:
            these = [r for r in runs if r["size"] == size and r["regime"] == regime]
            save, context = _median(these, "save_cpu_ms_p50"), _median(these, "context_cpu_ms_p50")
            rows.append(
                [
                    regime,
                    size,
                    result["file_mb"][str(size)],
                    f"{_cell(_median(these, 'save_ms_p50'))} ({_cell(save)})",
                    f"{_cell(_median(these, 'context_ms_p50'))} ({_cell(context)})",
                    f"x{save / save0:.2f} / x{context / context0:.2f}"
                    if save and save0 and context and context0
                    else "n/a",
                    _cell(_median(these, "save_reads"), 1),
                    _cell(_median(these, "context_reads"), 1),
                ]
            )
    loads = [r["load"] for r in runs]
    return "\n".join(
        [
            "# A new resource's cost as the file grows, sizes side by side in one process",
            "",
            machine_line(result["machine"]),
            f"Medians over {result['reps']} repetition(s) of each regime; load average {min(loads):.1f}–"
            f"{max(loads):.1f} during the run. Hash embedder, hybrid context, LoCoMo conversation 0 (419 "
            "messages, 150 questions) saved as a new resource into every file, the files taking turns call by "
            "call; the corpora were built in the bulk regime (`benchmarks/corpus_probe.py`).",
            "",
            markdown_table(
                [
                    "regime",
                    "messages stored",
                    "file MB",
                    "save ms p50 (CPU)",
                    "context ms p50 (CPU)",
                    "save / context CPU vs the smallest file",
                    "read calls per save",
                    "read calls per context",
                ],
                rows,
            ),
            "",
            *(f"* {note}" for note in result.get("notes", [])),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--build", type=Path, default=None, help="build the corpus files in this folder")
    parser.add_argument("--dir", type=Path, default=None, help="measure the corpus files in this folder")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--note", action="append", default=[], help="a line for the report's notes")
    parser.add_argument("--out", type=Path, default=RESULTS / "corpus-probe")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    if args.build is not None:
        build(args.build, sizes)
        return 0
    if args.dir is None:
        parser.error("give --build DIR or --dir DIR")
    result = probe(args.dir, sizes, args.reps)
    result["notes"] = args.note
    write_report(args.out, render(result), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
