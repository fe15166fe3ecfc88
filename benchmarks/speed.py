"""Speed side by side: Memstack embedded (SQLite, hash embedder) vs Mastra 1.x (LibSQL, the same hash embedder)
on the Mastra peer's workload, in one run, on a fresh store and as the store grows.

The workload (the peer's, mirrored): replay one LoCoMo conversation (conversation 0: 419 messages) on a fresh
resource, one ``save_messages`` per message (timed: save ms per message), then ask each of its questions in a
fresh thread of that resource (timed: Memstack ``context()`` — history + semantic recall, hybrid, top_k 4 —
against Mastra ``memory.recall()`` — history + vector recall, topK 4). p50 and p95 are nearest-rank within a
run; each size is measured ``--runs`` times on fresh resources and reported as the median of the runs' p50 (and
p95) with min–max.

Growth: before measuring at a size, the store is filled to that many messages by replaying all conversations
under new resources (``grow-<k>-<sample>``), one batched save per session — on both sides (Mastra through
``benchmarks/mastra/locomo-peer-growth.mjs``, GROW=N). Sizes: 0 (one conversation), 1k, 10k, 100k; Mastra's
growth costs ~13 ms per message on this machine (1.5 s per 100 messages), so by default it is grown to 10k
only (``--mastra-max`` to change it). Both sides run sequentially (never at the same time: 2 cores).

Targets (DESIGN.md "Performance": faster than Mastra, flat at scale): save and context >= 3x faster than Mastra at p50; context p50 grows sublinearly from 1k to
100k stored messages.

Two per-resource scenarios (``--scenario resource``, report ``speed-resource``; issue 17, ADR 0006):

* A long-lived user: every message in ONE resource. One store is grown through 1k, 10k and 100k messages in
  that resource by replaying all conversations into it (batched, one save per session, ids kept distinct per
  pass); at each size conversation 0 is saved into it one message per call (timed) and its questions asked in
  a fresh thread (timed, in hybrid, vector and keyword mode), on a copy of the store at that size. Mastra
  is grown the same way in one store (``ONE=1 SIZES=…``) and recalls with its vector search; its growth
  (~60 ms per message on a loaded 2-core machine: LibSQL writes each message's vector on its own) stops after
  ``--mastra-budget`` seconds, and the size it reached is measured and reported as such. Targets: each mode's
  context p50 at 100k <= 2x its value at 1k and below Mastra's; save p50 <= 1 ms at every size.
* A 1M-message corpus: one store grown through 10k, 100k and 1M messages spread over other resources
  (``save_messages`` of a whole conversation per call, each distinct text embedded once by the hash
  embedder: the bulk regime, ~0.3 ms of CPU per message); at each size conversation 0 is saved as a new
  resource and questioned (hybrid; wall and CPU ms, p50 and p95). Mastra is grown the same way (new
  resources, one save per session) within ``--mastra-corpus-budget`` seconds. Target: context p50 at 1M
  <= 1.3x its value at 10k.

Memstack's sizes are measured side by side (``run_resource``): a copy of the store is kept at each size as
it grows, and once Mastra (growing in its own process meanwhile) has finished, every copy is opened in one
process and the sizes take turns call by call (``measure_in_turns``), so a change of the machine's load
between sizes does not enter the ratio of one size to another. ``--render run.json`` re-renders the report and plot
from a run's JSON.

Usage: ``python benchmarks/speed.py [--quick] [--runs 3] [--sizes 0,1000,10000,100000] [--mastra-max 10000]
[--no-mastra] [--scenario many|resource] [--one-sizes 1000,10000,100000] [--corpus-sizes 10000,100000,1000000]
[--mastra-budget 1800] [--mastra-corpus-budget 600] [--mastra-db-dir DIR] [--note TEXT] [--render run.json]
[--out benchmarks/results/speed]``
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import sqlean

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import (  # noqa: E402
    RESULTS,
    MastraPeer,
    PeerUnavailable,
    bench_data_path,
    fmt_spread,
    machine,
    machine_line,
    markdown_table,
    percentile,
    rotated,
    spread,
    write_report,
)

MEASURED = 0
"""The conversation replayed at every size (the peer's default)."""


class MemstackSide:
    """One growing Memstack store (SQLite file, hash embedder, Mastra's defaults + hybrid recall).

    Args:
        folder: where the store's file goes.
        conversations: the LoCoMo conversations replayed to grow it.
        one: grow into, and measure in, this one resource (a long-lived user) rather than new resources.
        bulk: grow with one save per conversation (a thread per conversation) rather than per session, with
            each distinct text embedded once (the bulk regime of the 1M-message corpus).
    """

    def __init__(
        self, folder: Path, conversations: list[Any], *, one: str | None = None, bulk: bool = False
    ) -> None:
        from memstack import Memory

        embedder: Any = "hash"
        if bulk:  # the replayed texts repeat: each is embedded once (the measured resource's too, alike)
            from benchmarks.recall_quality import CachingEmbedder

            from memstack.adapters.hash_embed import HashEmbedder

            embedder = CachingEmbedder(HashEmbedder())
        self.path = folder / "speed.db"
        self.memory = Memory.local(self.path, embedder=embedder)
        self.conversations = conversations
        self.one = one
        self.bulk = bulk
        self.stored = 0
        self._next = 0
        self.grow_s = 0.0

    def file_bytes(self) -> int:
        """Bytes of the store's file and its write-ahead log."""
        return sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())

    def grow_to(self, size: int) -> None:
        """Add whole sessions (batched) under new resources (or into ``one``) until ``size`` messages are
        stored (the measured runs' messages count too)."""
        t0 = time.perf_counter()
        while self.stored < size:
            conv = self.conversations[self._next % len(self.conversations)]
            key = f"grow-{self._next}"
            resource = self.one or f"{key}-{conv.resource_id}"
            self._next += 1
            sessions = list(conv.sessions.items())
            if self.bulk:
                sessions = [(conv.resource_id, [t for _, turns in sessions for t in turns])]
            for thread, turns in sessions:
                if self.stored >= size:
                    break
                batch = turns[: size - self.stored]
                self.memory.save_messages(
                    thread_id=f"{key}-{thread}",
                    resource_id=resource,
                    messages=[
                        {
                            "id": f"{key}:{t.message_id}",
                            "role": t.role,
                            "content": t.text,
                            "created_at": t.created_at,
                        }
                        for t in batch
                    ],
                )
                self.stored += len(batch)
        self.grow_s += time.perf_counter() - t0

    def run(self, conv: Any, label: str, modes: Sequence[str] = ("hybrid",)) -> dict[str, float]:
        """The peer's workload on a fresh resource (or, with ``one``, into the grown resource); returns p50/p95
        of save (per message) and of context in each mode (``context_ms_*`` for the first)."""
        resource = self.one or f"{conv.resource_id}-{label}"
        key = f"{conv.resource_id}-{label}"
        save_ms: list[float] = []
        for thread, turns in conv.sessions.items():
            for t in turns:
                t0 = time.perf_counter()
                self.memory.save_messages(
                    thread_id=f"{key}-{thread}",
                    resource_id=resource,
                    messages=[
                        {
                            "id": f"{key}:{t.message_id}",
                            "role": t.role,
                            "content": t.text,
                            "created_at": t.created_at,
                        }
                    ],
                )
                save_ms.append((time.perf_counter() - t0) * 1000)
        self.stored += len(save_ms)
        result = {"save_ms_p50": percentile(save_ms, 0.5), "save_ms_p95": percentile(save_ms, 0.95)}
        # Modes take turns question by question, so a change in the machine's load touches them alike.
        # CPU time (every thread of this process) beside wall time: on a shared machine the wall time also
        # holds the waits for a core that other processes took.
        context_ms: dict[str, list[float]] = {mode: [] for mode in modes}
        cpu_ms: dict[str, list[float]] = {mode: [] for mode in modes}
        for q in conv.questions:
            for mode in modes:
                c0, t0 = time.process_time(), time.perf_counter()
                self.memory.context(
                    thread_id=f"{key}-questions",
                    resource_id=resource,
                    message=q.text,
                    options={"semantic_recall": {"mode": mode}},
                )
                context_ms[mode].append((time.perf_counter() - t0) * 1000)
                cpu_ms[mode].append((time.process_time() - c0) * 1000)
        for n, mode in enumerate(modes):
            suffix = "" if n == 0 else f"_{mode}"
            result[f"context{suffix}_ms_p50"] = percentile(context_ms[mode], 0.5)
            result[f"context{suffix}_ms_p95"] = percentile(context_ms[mode], 0.95)
            result[f"context{suffix}_cpu_ms_p50"] = percentile(cpu_ms[mode], 0.5)
        return result


def peer_runs(peer_result: dict[str, Any]) -> list[dict[str, float]]:
    """The Mastra peer's runs under Memstack's figure names (its recall is the context)."""
    return [
        {
            "save_ms_p50": r["save_ms_p50"],
            "save_ms_p95": r["save_ms_p95"],
            "context_ms_p50": r["recall_ms_p50"],
            "context_ms_p95": r["recall_ms_p95"],
        }
        for r in peer_result["runs"]
    ]


def summarise(runs: Sequence[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per figure (save/context p50/p95): the median over runs with min–max and run count."""
    return {key: spread([r[key] for r in runs]) for key in runs[0]} if runs else {}


def render(result: dict[str, Any]) -> str:
    """The Markdown report."""
    lines = [
        "# Speed side by side: Memstack embedded vs Mastra 1.x (LibSQL), same hash embedder",
        "",
        machine_line(result["machine"]),
        f"Workload: LoCoMo conversation {MEASURED} ({result['messages']} messages saved one per call, "
        f"{result['questions']} questions) on a fresh resource, after growing the store to each size. "
        "Figures: median over runs of each run's p50 / p95 (nearest rank), with min–max and run count. "
        "Memstack context = `context()` (history + hybrid recall, top_k 4); Mastra = `memory.recall()` "
        "(history + vector recall, topK 4). Lower is faster.",
        "",
    ]
    rows = []
    for s in result["sizes"]:
        m, p = s["memstack"], s.get("mastra")
        for system, figures in (("Memstack", m), ("Mastra 1.x", p)):
            if system == "Mastra 1.x" and not figures:
                rows.append([s["stored_before"], system, s.get("mastra_note", "not run"), "", "", ""])
                continue
            rows.append(
                [
                    s["stored_before"],
                    system,
                    fmt_spread(figures["save_ms_p50"]),
                    fmt_spread(figures["save_ms_p95"]),
                    fmt_spread(figures["context_ms_p50"]),
                    fmt_spread(figures["context_ms_p95"]),
                ]
            )
    lines += [
        markdown_table(
            ["stored before", "system", "save ms p50", "save ms p95", "context ms p50", "context ms p95"],
            rows,
        ),
        "",
        "## Ratios (Mastra p50 / Memstack p50, medians of the same run; target >= 3x)",
        "",
    ]
    ratio_rows = [
        [
            r["stored_before"],
            f"{r['save']:.1f}x",
            f"{r['context']:.1f}x",
            "yes" if min(r["save"], r["context"]) >= 3 else "no",
        ]
        for r in result["ratios"]
    ]
    lines += [
        markdown_table(["stored before", "save", "context", "both >= 3x"], ratio_rows)
        if ratio_rows
        else "No ratio: Mastra not run.",
        "",
    ]
    for system, g in result["growth"].items():
        if g:
            lines.append(
                f"* {system}: context p50 {g['from_ms']:.2f} ms at {g['from']} stored → {g['to_ms']:.2f} ms at {g['to']} "
                f"stored: x{g['factor']:.2f} for x{g['size_factor']:.0f} the messages (exponent {g['exponent']:.2f}; "
                f"sublinear: {'yes' if g['sublinear'] else 'no'})."
            )
    for note in result["notes"]:
        lines.append(f"* {note}")
    if result.get("plot"):
        lines += ["", f"![context p50 vs stored messages]({result['plot']})"]
    return "\n".join(lines) + "\n"


def growth(points: Sequence[tuple[int, float]]) -> dict[str, Any] | None:
    """How context p50 grows from the smallest to the largest non-empty store size: factor, the size factor
    and the exponent ``log(factor)/log(size factor)`` (< 1: sublinear)."""
    pts = sorted((n, v) for n, v in points if n > 0)
    if len(pts) < 2:
        return None
    (n0, v0), (n1, v1) = pts[0], pts[-1]
    factor, size_factor = v1 / v0, n1 / n0
    exponent = math.log(factor) / math.log(size_factor) if factor > 0 else 0.0
    return {
        "from": n0,
        "to": n1,
        "from_ms": v0,
        "to_ms": v1,
        "factor": factor,
        "size_factor": size_factor,
        "exponent": exponent,
        "sublinear": exponent < 1,
    }


def plot(result: dict[str, Any], path: Path) -> Path | None:
    """Context p50 (and save p50) against messages stored, log x, both systems (PNG)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, title in (
        (axes[0], "context_ms_p50", "context / recall p50"),
        (axes[1], "save_ms_p50", "save p50 (per message)"),
    ):
        for system, label, marker in (
            ("memstack", "Memstack (SQLite)", "o"),
            ("mastra", "Mastra 1.x (LibSQL)", "s"),
        ):
            pts = [
                (s["stored_before"] + result["messages"], s[system][key])
                for s in result["sizes"]
                if s.get(system)
            ]
            if not pts:
                continue
            xs = [x for x, _ in pts]
            ys = [f["median"] for _, f in pts]
            lo = [f["median"] - f["min"] for _, f in pts]
            hi = [f["max"] - f["median"] for _, f in pts]
            ax.errorbar(xs, ys, yerr=[lo, hi], marker=marker, capsize=3, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("messages stored when measured")
        ax.set_ylabel("ms (median of runs; bars: min–max)")
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Memstack vs Mastra, same hash embedder, LoCoMo conv. 0 workload")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(
    *,
    data: Path,
    sizes: Sequence[int],
    runs: int,
    mastra: bool,
    mastra_max: int,
    peer: MastraPeer | None = None,
    log: Any = sys.stderr,
) -> dict[str, Any]:
    """Measure both systems at every size; returns the result (the JSON)."""
    from memstack import locomo

    conversations = locomo.load(data)
    conv = conversations[MEASURED]
    peer = peer or MastraPeer()
    notes: list[str] = []
    out_sizes: list[dict[str, Any]] = []
    memstack_grow_s = 0.0
    for size in sorted(sizes):
        tmp = tempfile.TemporaryDirectory(prefix="memstack-speed-")
        ours = MemstackSide(Path(tmp.name), conversations)  # a fresh store per size, as the peer's process is
        ours.grow_to(size)
        memstack_grow_s += ours.grow_s
        log.write(
            f"size {size}: memstack store holds {ours.stored} messages (grown in {ours.grow_s:.1f} s)\n"
        )
        m_runs = []
        for r in range(runs):
            m_runs.append(ours.run(conv, f"s{size}-run{r}"))
        entry: dict[str, Any] = {
            "stored_before": size,
            "memstack": summarise(m_runs),
            "memstack_runs": m_runs,
            "memstack_grow_s": round(ours.grow_s, 1),
        }
        log.write(
            f"  memstack: save p50 {entry['memstack']['save_ms_p50']['median']:.2f} ms, context p50 {entry['memstack']['context_ms_p50']['median']:.2f} ms\n"
        )
        if not mastra:
            entry["mastra_note"] = "not run (--no-mastra)"
        elif size > mastra_max:
            entry["mastra_note"] = f"not run: growth above --mastra-max {mastra_max} (~13 ms/message to grow)"
        else:
            t0 = time.perf_counter()
            try:
                p = peer.run(data, MEASURED, {"GROW": str(size), "RUNS": str(runs)})
                p_runs = peer_runs(p)
                entry["mastra"] = summarise(p_runs)
                entry["mastra_runs"] = p_runs
                entry["mastra_grow_s"] = p["grow_s"]
                log.write(
                    f"  mastra: save p50 {entry['mastra']['save_ms_p50']['median']:.2f} ms, recall p50 {entry['mastra']['context_ms_p50']['median']:.2f} ms ({time.perf_counter() - t0:.0f} s)\n"
                )
            except PeerUnavailable as exc:
                entry["mastra_note"] = f"not run: {exc}"
                notes.append(f"Mastra at {size}: not run — {exc}")
        out_sizes.append(entry)
        ours.memory.close()
        tmp.cleanup()
    ratios = [
        {
            "stored_before": s["stored_before"],
            "save": s["mastra"]["save_ms_p50"]["median"] / s["memstack"]["save_ms_p50"]["median"],
            "context": s["mastra"]["context_ms_p50"]["median"] / s["memstack"]["context_ms_p50"]["median"],
        }
        for s in out_sizes
        if s.get("mastra")
    ]
    grow = {
        system: growth(
            [(s["stored_before"], s[system]["context_ms_p50"]["median"]) for s in out_sizes if s.get(system)]
        )
        for system in ("memstack", "mastra")
    }
    notes.append(
        f"Memstack growth: {memstack_grow_s:.1f} s in total (batched saves, one per session; a fresh store per size, "
        "as each Mastra size is a fresh process and file). Runs at one size share the grown store, each on its own fresh resource."
    )
    if mastra and any(s > mastra_max for s in sizes):
        notes.append(
            f"Mastra was grown to {mastra_max} messages at most (--mastra-max): growing it costs ~13 ms per message here."
        )
    return {
        "benchmark": "speed",
        "machine": machine(peer.node_version),
        "data": str(data),
        "conversation": conv.resource_id,
        "messages": conv.turn_count,
        "questions": len(conv.questions),
        "runs": runs,
        "sizes": out_sizes,
        "ratios": ratios,
        "growth": grow,
        "notes": notes,
    }


def headline(result: dict[str, Any]) -> list[list[str]]:
    """Rows for the results README: p50s on a fresh store and at the largest size both ran, with ratios."""
    rows = []
    both = [s for s in result["sizes"] if s.get("mastra")]
    for s in both[:1] + both[-1:] if len(both) > 1 else both:
        for key, name in (("save_ms_p50", "save ms p50"), ("context_ms_p50", "context ms p50")):
            a, b = s["memstack"][key], s["mastra"][key]
            rows.append(
                [
                    f"{name}, {s['stored_before']} stored",
                    fmt_spread(a),
                    fmt_spread(b),
                    f"{b['median'] / a['median']:.1f}x faster",
                    ">= 3x",
                ]
            )
    big = result["sizes"][-1]
    g = result["growth"].get("memstack")
    if g:
        rows.append(
            [
                f"Memstack context p50 growth {g['from']}→{g['to']} stored",
                f"x{g['factor']:.2f} (exponent {g['exponent']:.2f})",
                "–" if not big.get("mastra") else "",
                "sublinear" if g["sublinear"] else "not sublinear",
                "sublinear",
            ]
        )
    return rows


MODES = ("hybrid", "vector", "keyword")
"""The recall modes measured for a long-lived user (the first is ``context_ms_*``)."""


def _mode_key(mode: str, q: str) -> str:
    return f"context_ms_{q}" if mode == MODES[0] else f"context_{mode}_ms_{q}"


def _mastra_growth(
    peer: MastraPeer,
    data: Path,
    sizes: Sequence[int],
    *,
    one: bool,
    runs: int,
    budget_s: float,
) -> dict[str, Any]:
    """Mastra grown through ``sizes`` in one store (``SIZES``; ``ONE=1``: into one resource), its growth
    stopped after ``budget_s`` seconds in all (``BUDGET_S``): ``{"sizes": [...]}`` — per size measured, its
    figures, the messages stored before it, the growth seconds in all and whether the budget stopped it —
    or ``{"note": ...}`` when the peer cannot run."""
    env = {"SIZES": ",".join(str(x) for x in sizes), "RUNS": str(runs), "BUDGET_S": str(int(budget_s))}
    if one:
        env["ONE"] = "1"
    try:
        lines = peer.run_all(data, MEASURED, env, timeout=budget_s + 3600)
    except PeerUnavailable as exc:
        return {"note": f"not run: {exc}"}
    return {
        "sizes": [
            {
                "stored_before": line["stored_before"],
                "mastra": summarise(peer_runs(line)),
                "mastra_grow_s": line["grow_s"],
                "budget_hit": bool(line.get("budget_hit")),
            }
            for line in lines
        ]
    }


def _attach_mastra(entries: list[dict[str, Any]], grown: dict[str, Any], skipped: str) -> None:
    """Put each Mastra size beside the Memstack entry of the same size; a size the budget cut short is
    kept at the size it reached (``mastra_stored``), and sizes it never reached get a note."""
    measured = grown.get("sizes", [])
    for n, entry in enumerate(entries):
        if n < len(measured):
            m = measured[n]
            entry["mastra"] = m["mastra"]
            entry["mastra_grow_s"] = m["mastra_grow_s"]
            entry["mastra_stored"] = m["stored_before"]
            if m["budget_hit"]:
                entry["mastra_note"] = (
                    f"growth budget spent: measured at {m['stored_before']} messages stored "
                    f"({m['mastra_grow_s']:.0f} s of growth)"
                )
        elif "note" in grown:
            entry["mastra_note"] = grown["note"]
        elif measured and measured[-1]["budget_hit"]:
            entry["mastra_note"] = "not reached: growth budget spent"
        else:
            entry["mastra_note"] = skipped


def grow_copies(
    side: MemstackSide, sizes: Sequence[int], folder: Path, tag: str, log: Any = sys.stderr
) -> dict[int, dict[str, Any]]:
    """Grow ``side`` through ``sizes`` (ascending), keeping a copy of its file at each size.

    Returns ``{size: {"path", "grow_s", "file_mb"}}``: the copy (``folder/<tag>-<size>.db``, made with
    SQLite's backup API through the store's own library, so it holds every committed write), the growth's
    seconds up to that size in all, and the copy's size. The growing store is closed and deleted after the
    last size."""
    grown: dict[int, dict[str, Any]] = {}
    for size in sorted(sizes):
        side.grow_to(size)
        target = folder / f"{tag}-{size}.db"
        # The store's own SQLite library: a second library in the process would not share its locks and
        # write-ahead log index, and could copy an older snapshot.
        with closing(sqlean.connect(side.path)) as source, closing(sqlean.connect(target)) as copy:
            source.backup(copy)
        grown[size] = {
            "path": target,
            "grow_s": round(side.grow_s, 1),
            "file_mb": round(target.stat().st_size / 1e6),
        }
        log.write(f"{tag} {size}: grown in {side.grow_s:.1f} s in all, {grown[size]['file_mb']} MB\n")
        log.flush()
    side.memory.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{side.path}{suffix}").unlink(missing_ok=True)
    return grown


def measure_in_turns(
    memories: dict[int, Any], conv: Any, label: str, modes: Sequence[str], resource: str | None = None
) -> dict[int, dict[str, float]]:
    """One run of the workload in every store at once, the stores taking turns call by call.

    Each message of ``conv`` is saved (one per call) into every store before the next message, and each
    question is asked in every mode of ``modes`` in every store before the next question, the store (and
    the mode) that goes first rotating; so a change in a shared machine's load reaches every size alike, where sizes
    measured one after another, minutes apart, differ by the load as much as by their size.

    Args:
        memories: an open ``Memory`` per size.
        conv: the LoCoMo conversation replayed.
        label: distinguishes this run's threads and message ids from other runs'.
        modes: recall modes asked per question (the first is reported as ``context_ms_*``).
        resource: the resource saved into and questioned (a long-lived user's); ``None``: a new resource
            per run.

    Returns:
        ``{size: figures}``, figures as ``MemstackSide.run``'s plus ``save_cpu_ms_p50`` (ms).
    """
    sizes = list(memories)
    key = f"{conv.resource_id}-{label}"
    owner = resource or key
    save_ms: dict[int, list[float]] = {size: [] for size in sizes}
    save_cpu: dict[int, list[float]] = {size: [] for size in sizes}
    n = 0
    for thread, turns in conv.sessions.items():
        for t in turns:
            message = {
                "id": f"{key}:{t.message_id}",
                "role": t.role,
                "content": t.text,
                "created_at": t.created_at,
            }
            for size in rotated(sizes, n):
                c0, t0 = time.process_time(), time.perf_counter()
                memories[size].save_messages(
                    thread_id=f"{key}-{thread}", resource_id=owner, messages=[message]
                )
                save_ms[size].append((time.perf_counter() - t0) * 1000)
                save_cpu[size].append((time.process_time() - c0) * 1000)
            n += 1
    context_ms: dict[tuple[int, str], list[float]] = {(size, mode): [] for size in sizes for mode in modes}
    cpu_ms: dict[tuple[int, str], list[float]] = {(size, mode): [] for size in sizes for mode in modes}
    for i, q in enumerate(conv.questions):
        for mode in rotated(list(modes), i):
            for size in rotated(sizes, i):
                c0, t0 = time.process_time(), time.perf_counter()
                memories[size].context(
                    thread_id=f"{key}-questions",
                    resource_id=owner,
                    message=q.text,
                    options={"semantic_recall": {"mode": mode}},
                )
                context_ms[size, mode].append((time.perf_counter() - t0) * 1000)
                cpu_ms[size, mode].append((time.process_time() - c0) * 1000)
    figures: dict[int, dict[str, float]] = {}
    for size in sizes:
        f = {
            "save_ms_p50": percentile(save_ms[size], 0.5),
            "save_ms_p95": percentile(save_ms[size], 0.95),
            "save_cpu_ms_p50": percentile(save_cpu[size], 0.5),
        }
        for n_mode, mode in enumerate(modes):
            suffix = "" if n_mode == 0 else f"_{mode}"
            f[f"context{suffix}_ms_p50"] = percentile(context_ms[size, mode], 0.5)
            f[f"context{suffix}_ms_p95"] = percentile(context_ms[size, mode], 0.95)
            f[f"context{suffix}_cpu_ms_p50"] = percentile(cpu_ms[size, mode], 0.5)
        figures[size] = f
    return figures


def _measured_side_by_side(
    grown: dict[int, dict[str, Any]],
    conv: Any,
    runs: int,
    modes: Sequence[str],
    resource: str | None,
    tag: str,
    log: Any,
) -> list[dict[str, Any]]:
    """Open every size's copy in this process and measure ``runs`` runs in turns (``measure_in_turns``);
    one entry per size: the median over runs of each figure, the growth seconds and the file's MB."""
    from memstack import Memory

    memories = {size: Memory.local(g["path"], embedder="hash") for size, g in grown.items()}
    try:
        measured = [measure_in_turns(memories, conv, f"{tag}-run{r}", modes, resource) for r in range(runs)]
    finally:
        for memory in memories.values():
            memory.close()
    entries = []
    for size, g in sorted(grown.items()):
        entry = {
            "size": size,
            "memstack": summarise([m[size] for m in measured]),
            "memstack_grow_s": g["grow_s"],
            "file_mb": g["file_mb"],
        }
        log.write(
            f"{tag} {size}: "
            + ", ".join(f"{m} {entry['memstack'][_mode_key(m, 'p50')]['median']:.2f} ms" for m in modes)
            + f" (hybrid CPU {entry['memstack']['context_cpu_ms_p50']['median']:.2f} ms); "
            f"save p50 {entry['memstack']['save_ms_p50']['median']:.2f} ms\n"
        )
        log.flush()
        entries.append(entry)
    return entries


STORE_BYTES_PER_MESSAGE = 4_400
"""Bytes of a grown store per stored message (the hash embedder's 256-d vectors, chat text, the keyword
index): 4.1 GB at 1M messages, 426 MB at 100k in the last full runs."""


def disk_needed(one_sizes: Sequence[int], corpus_sizes: Sequence[int]) -> int:
    """Bytes the resource scenario holds on disk at its peak: a copy of each size's store, and the growing
    store beside the copy of its largest size (``grow_copies`` deletes it after that copy); the long-lived
    user's copies are still there while the corpus grows."""
    growing_one = max(one_sizes, default=0)
    corpus = sum(corpus_sizes) + max(corpus_sizes, default=0)
    return STORE_BYTES_PER_MESSAGE * (sum(one_sizes) + max(growing_one, corpus))


def check_disk(folder: Path, needed: int) -> None:
    """Refuse to start growing when ``folder`` has less than ``needed`` bytes free (a store growing into a
    full disk fails an hour in, after the peer's growth, with SQLite's "database or disk is full").

    Raises:
        SystemExit: naming the folder, both amounts and the ways out.
    """
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise SystemExit(
            f"speed.py --scenario resource needs about {needed / 1e9:.1f} GB free in {folder} for its stores "
            f"({STORE_BYTES_PER_MESSAGE} bytes a message, a copy per size), and {free / 1e9:.1f} GB are free: "
            "free space there (TMPDIR chooses the folder) or ask for smaller --one-sizes / --corpus-sizes"
        )


def run_resource(
    *,
    data: Path,
    one_sizes: Sequence[int],
    corpus_sizes: Sequence[int],
    runs: int,
    mastra: bool,
    mastra_max: int,
    mastra_budget_s: float = 1500.0,
    mastra_corpus_budget_s: float = 600.0,
    peer: MastraPeer | None = None,
    log: Any = sys.stderr,
) -> dict[str, Any]:
    """The per-resource scenarios (module docstring): a long-lived user and a 1M-message corpus.

    Memstack's stores are grown first, a copy kept at each size (``grow_copies``); Mastra grows in its own
    process meanwhile (its growth waits on the disk — LibSQL syncs each batch — more than on a core): one
    resource through the sizes up to ``mastra_max`` within ``mastra_budget_s`` seconds, then the corpus sizes
    within ``mastra_corpus_budget_s``. Memstack measures once Mastra has finished, every size's copy
    open in one process and the sizes taking turns (``measure_in_turns``), so neither the peer's growth nor
    a change in the machine's load between sizes is in the ratios of one size to another."""
    from memstack import locomo

    conversations = locomo.load(data)
    conv = conversations[MEASURED]
    peer = peer or MastraPeer()
    one_sizes, corpus_sizes = sorted(one_sizes), sorted(corpus_sizes)
    mastra_one: dict[str, Any] = {"note": "not run (--no-mastra)"}
    mastra_corpus: dict[str, Any] = {"note": "not run (--no-mastra)"}

    def grow_mastra() -> None:
        nonlocal mastra_one, mastra_corpus
        sizes = [x for x in one_sizes if x <= mastra_max]
        if sizes:
            mastra_one = _mastra_growth(peer, data, sizes, one=True, runs=runs, budget_s=mastra_budget_s)
            log.write(f"mastra, one resource: {_mastra_line(mastra_one)}\n")
        sizes = [x for x in corpus_sizes if x <= mastra_max]
        if sizes:
            mastra_corpus = _mastra_growth(
                peer, data, sizes, one=False, runs=runs, budget_s=mastra_corpus_budget_s
            )
            log.write(f"mastra, corpus: {_mastra_line(mastra_corpus)}\n")

    worker = threading.Thread(target=grow_mastra, name="mastra-peer", daemon=True)
    if mastra:
        worker.start()
    one_resource = f"one-{conv.resource_id}"
    with tempfile.TemporaryDirectory(prefix="memstack-speed-resource-") as tmp:
        folder = Path(tmp)
        check_disk(folder, disk_needed(one_sizes, corpus_sizes))
        for sub in ("one", "corpus"):
            (folder / sub).mkdir()
        one_grown = grow_copies(
            MemstackSide(folder / "one", conversations, one=one_resource), one_sizes, folder, "one", log
        )
        corpus_grown = grow_copies(
            MemstackSide(folder / "corpus", conversations, bulk=True), corpus_sizes, folder, "corpus", log
        )
        if mastra:
            log.write("waiting for Mastra's growth to end before measuring\n")
            log.flush()
            worker.join()
        one = (
            _measured_side_by_side(one_grown, conv, runs, MODES, one_resource, "one", log)
            if one_grown
            else []
        )
        corpus = (
            _measured_side_by_side(corpus_grown, conv, runs, MODES[:1], None, "corpus", log)
            if corpus_grown
            else []
        )
    skipped = "not run (--no-mastra)" if not mastra else f"not run: above --mastra-max {mastra_max}"
    _attach_mastra(one, mastra_one, skipped)
    _attach_mastra(corpus, mastra_corpus, skipped)
    return {
        "benchmark": "speed-resource",
        "machine": machine(peer.node_version),
        "data": str(data),
        "conversation": conv.resource_id,
        "messages": conv.turn_count,
        "questions": len(conv.questions),
        "runs": runs,
        "protocol": "side by side",
        "one": one,
        "corpus": corpus,
        "checks": resource_checks(one, corpus),
    }


def _mastra_line(grown: dict[str, Any]) -> str:
    if "note" in grown:
        return str(grown["note"])
    return "; ".join(
        f"{m['stored_before']} stored: recall p50 {m['mastra']['context_ms_p50']['median']:.2f} ms "
        f"(grown in {m['mastra_grow_s']:.0f} s in all{', budget spent' if m['budget_hit'] else ''})"
        for m in grown["sizes"]
    )


def resource_checks(one: Sequence[dict[str, Any]], corpus: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's targets, each with the figures it compares and whether it holds in this run. Where
    Mastra's growth budget stopped it short of a size, Memstack at the size is compared with Mastra at the
    smaller size it reached (a comparison that can only favour Mastra)."""
    checks: list[dict[str, Any]] = []
    if len(one) >= 2:
        small, big = one[0], one[-1]
        for mode in MODES:
            key = _mode_key(mode, "p50")
            a, b = small["memstack"][key]["median"], big["memstack"][key]["median"]
            checks.append(
                {
                    "target": f"{mode} context p50 at {big['size']} <= 2x at {small['size']} (one resource)",
                    "figures": f"{a:.2f} → {b:.2f} ms (x{b / a:.2f})",
                    "holds": b <= 2 * a,
                }
            )
    for entry in one:
        if entry.get("mastra"):
            mastra_p50 = entry["mastra"]["context_ms_p50"]["median"]
            at = entry.get("mastra_stored", entry["size"])
            where = f"at {entry['size']}" if at == entry["size"] else f"at {entry['size']} (Mastra at {at})"
            for mode in MODES:
                ours = entry["memstack"][_mode_key(mode, "p50")]["median"]
                checks.append(
                    {
                        "target": f"{mode} context p50 below Mastra's recall {where} (one resource)",
                        "figures": f"{ours:.2f} vs {mastra_p50:.2f} ms (Mastra / Memstack {mastra_p50 / ours:.1f}x)",
                        "holds": ours < mastra_p50,
                    }
                )
    for entry in one:
        save = entry["memstack"]["save_ms_p50"]["median"]
        checks.append(
            {
                "target": f"save p50 <= 1 ms at {entry['size']} (one resource)",
                "figures": f"{save:.2f} ms",
                "holds": save <= 1.0,
            }
        )
    if len(corpus) >= 2:
        first = corpus[0]
        a = first["memstack"]["context_ms_p50"]["median"]
        for entry in corpus[1:]:
            b = entry["memstack"]["context_ms_p50"]["median"]
            checks.append(
                {
                    "target": f"context p50 at {entry['size']} stored <= 1.3x at {first['size']} (a new resource)",
                    "figures": f"{a:.2f} → {b:.2f} ms (x{b / a:.2f})",
                    "holds": b <= 1.3 * a,
                }
            )
            if "context_cpu_ms_p50" in entry["memstack"] and "context_cpu_ms_p50" in first["memstack"]:
                ca = first["memstack"]["context_cpu_ms_p50"]["median"]
                cb = entry["memstack"]["context_cpu_ms_p50"]["median"]
                checks.append(
                    {
                        "target": f"context CPU ms p50 at {entry['size']} stored <= 1.3x at {first['size']} (a new resource)",
                        "figures": f"{ca:.2f} → {cb:.2f} ms (x{cb / ca:.2f})",
                        "holds": cb <= 1.3 * ca,
                    }
                )
    return checks


def _mastra_cell(entry: dict[str, Any], key: str) -> str:
    """Mastra's figure beside a Memstack size: the figure, its size when the budget stopped it short, or the
    note saying why there is none."""
    mastra = entry.get("mastra")
    if not mastra:
        return str(entry.get("mastra_note", ""))
    cell = fmt_spread(mastra[key])
    if entry.get("mastra_stored", entry["size"]) != entry["size"]:
        cell += f" at {entry['mastra_stored']}"
    return cell


def render_resource(result: dict[str, Any]) -> str:
    """The Markdown report of the per-resource scenarios."""
    lines = [
        "# Speed per resource: a long-lived user, and a 1M-message corpus",
        "",
        machine_line(result["machine"]),
        f"Workload: LoCoMo conversation {MEASURED} ({result['messages']} messages saved one per call, "
        f"{result['questions']} questions). Figures: median over {result['runs']} run(s) of each run's p50 "
        "(nearest rank), min–max in brackets. Hash embedder on both sides. Lower is faster.",
        "",
        "## A long-lived user: every message in ONE resource",
        "",
        "One store per system is grown through the sizes, every message in one resource (all conversations "
        "replayed into it, one save per session). Memstack keeps a copy of its store at each size and measures "
        "once Mastra has finished, every size's copy open in one process: the measured conversation is saved "
        "into the resource one message per call, then its questions are asked in a new thread, the sizes "
        "taking turns call by call (each run adds its messages to every copy), so the machine's load reaches "
        "every size alike. Mastra grows and measures size after size in its own process, beside Memstack's "
        "growth. Memstack context = `context()` in each recall mode; Mastra = `memory.recall()` (vector). A "
        "Mastra figure 'at N' was measured at the N messages its growth reached within its budget.",
        "",
    ]
    rows = []
    for e in result["one"]:
        m = e["memstack"]
        rows.append(
            [
                e["size"],
                fmt_spread(m["save_ms_p50"]),
                *(fmt_spread(m[_mode_key(mode, "p50")]) for mode in MODES),
                fmt_spread(m.get("context_cpu_ms_p50")),
                _mastra_cell(e, "save_ms_p50"),
                _mastra_cell(e, "context_ms_p50") if e.get("mastra") else "",
            ]
        )
    lines += [
        markdown_table(
            [
                "messages in the resource",
                "Memstack save ms p50",
                *(f"Memstack {mode} context ms p50" for mode in MODES),
                "Memstack hybrid context CPU ms p50",
                "Mastra save ms p50",
                "Mastra recall ms p50",
            ],
            rows,
        ),
        "",
        "## A 1M-message corpus: one resource's cost as the file grows",
        "",
        "One store is grown through the sizes with other resources (one save per whole conversation, texts "
        "embedded once: the bulk regime), a copy kept at each size; then, the copies taking turns as above, "
        "the measured conversation is saved as a new resource one message per call and questioned (hybrid). "
        "CPU ms: the process's CPU time per context call (on a shared machine the wall time also holds waits "
        "for a core). Grown in: seconds of growth up to that size, in all. Mastra: the same workload on its "
        "store grown the same way (new resources, one save per session), recall (vector).",
        "",
        markdown_table(
            [
                "messages stored before",
                "save ms p50",
                "context ms p50",
                "context CPU ms p50",
                "context ms p95",
                "file MB",
                "grown in s (in all)",
                "Mastra save ms p50",
                "Mastra recall ms p50",
            ],
            [
                [
                    e["size"],
                    fmt_spread(e["memstack"].get("save_ms_p50")),
                    fmt_spread(e["memstack"]["context_ms_p50"]),
                    fmt_spread(e["memstack"].get("context_cpu_ms_p50")),
                    fmt_spread(e["memstack"].get("context_ms_p95")),
                    e.get("file_mb", ""),
                    e["memstack_grow_s"],
                    _mastra_cell(e, "save_ms_p50"),
                    _mastra_cell(e, "context_ms_p50") if e.get("mastra") else "",
                ]
                for e in result["corpus"]
            ],
        ),
        "",
        "## Targets (issue 17)",
        "",
        markdown_table(
            ["target", "figures", "holds"],
            [[c["target"], c["figures"], "yes" if c["holds"] else "no"] for c in result["checks"]],
        ),
        "",
    ]
    lines += [f"* {note}" for note in result.get("notes", [])]
    if result.get("plot"):
        lines += ["", f"![context p50 as one resource grows, and in a growing file]({result['plot']})", ""]
    return "\n".join(lines)


def plot_resource(result: dict[str, Any], path: Path) -> Path | None:
    """Context p50 against messages, both scenarios (one resource; a new resource in a growing file), both
    systems (Memstack per recall mode, Mastra's vector recall), log-log."""
    try:
        import matplotlib
        import matplotlib.ticker

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    scenarios = (
        (
            axes[0],
            "one",
            MODES,
            "one long-lived user: all messages in ONE resource",
            "messages in the resource",
        ),
        (
            axes[1],
            "corpus",
            MODES[:1],
            "a 419-message resource in a growing file",
            "messages stored in the file",
        ),
    )
    for ax, key, modes, title, xlabel in scenarios:
        entries = result[key]
        if not entries:  # a run of one scenario only (--one-sizes '' or --corpus-sizes '')
            ax.set_axis_off()
            ax.set_title(title, fontsize=10)
            ax.text(0.5, 0.5, "not measured in this run", ha="center", va="center", transform=ax.transAxes)
            continue
        for mode, marker in zip(modes, "o^v", strict=False):
            pts = [(e["size"], e["memstack"][_mode_key(mode, "p50")]["median"]) for e in entries]
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker=marker, label=f"Memstack {mode}")
        pts = [(e["size"], e["memstack"]["context_cpu_ms_p50"]["median"]) for e in entries]
        ax.plot(
            [x for x, _ in pts],
            [y for _, y in pts],
            marker="o",
            linestyle="--",
            color="tab:blue",
            alpha=0.6,
            label="Memstack hybrid, CPU ms",
        )
        pts = [
            (e.get("mastra_stored", e["size"]), e["mastra"]["context_ms_p50"]["median"])
            for e in entries
            if e.get("mastra")
        ]
        if pts:
            ax.plot(
                [max(x, 1) for x, _ in pts],
                [y for _, y in pts],
                marker="s",
                color="black",
                label="Mastra 1.x recall (vector)",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("context p50, ms (median of runs)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle("Memstack (SQLite) vs Mastra 1.x (LibSQL), same hash embedder, LoCoMo conv. 0 workload")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="sizes 0 and 1000, 1 run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="0,1000,10000,100000")
    parser.add_argument("--mastra-max", type=int, default=10_000, help="largest size Mastra is grown to")
    parser.add_argument("--no-mastra", action="store_true")
    parser.add_argument("--scenario", choices=("many", "resource"), default="many")
    parser.add_argument("--one-sizes", default="1000,10000,100000")
    parser.add_argument("--corpus-sizes", default="10000,100000,1000000")
    parser.add_argument(
        "--mastra-budget", type=float, default=1800.0, help="seconds Mastra may grow its one resource"
    )
    parser.add_argument(
        "--mastra-corpus-budget", type=float, default=600.0, help="seconds Mastra may grow its corpus"
    )
    parser.add_argument(
        "--mastra-db-dir", type=Path, default=None, help="folder of Mastra's file (e.g. a tmpfs)"
    )
    parser.add_argument("--note", action="append", default=[], help="a line for the report's notes")
    parser.add_argument(
        "--render", type=Path, default=None, help="re-render the report and plot from this run's JSON"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.scenario == "resource":
        out = args.out or RESULTS / "speed-resource"
        out.parent.mkdir(parents=True, exist_ok=True)
        if args.render is not None:  # the figures of a run, with this code's report and plot
            result = json.loads(args.render.read_text())
            result["checks"] = resource_checks(result["one"], result["corpus"])
            result["notes"] = [
                *result.get("notes", []),
                *(n for n in args.note if n not in result.get("notes", [])),
            ]
            png = plot_resource(result, out.with_suffix(".png"))
            result["plot"] = png.name if png else None
            write_report(out, render_resource(result), result)
            return 0
        result = run_resource(
            data=args.data or bench_data_path(),
            one_sizes=[int(x) for x in args.one_sizes.split(",") if x],
            corpus_sizes=[int(x) for x in args.corpus_sizes.split(",") if x],
            runs=1 if args.quick else args.runs,
            mastra=not args.no_mastra,
            mastra_max=args.mastra_max,
            mastra_budget_s=args.mastra_budget,
            mastra_corpus_budget_s=args.mastra_corpus_budget,
            peer=MastraPeer(args.mastra_db_dir),
        )
        result["notes"] = [*result.get("notes", []), *args.note]
        write_report(out, render_resource(result), result)  # first: a run is never lost to its plot
        png = plot_resource(result, out.with_suffix(".png"))
        result["plot"] = png.name if png else None
        write_report(out, render_resource(result), result)
        return 0
    args.out = args.out or RESULTS / "speed"
    sizes = [0, 1000] if args.quick else [int(x) for x in args.sizes.split(",")]
    result = run(
        data=args.data or bench_data_path(),
        sizes=sizes,
        runs=1 if args.quick else args.runs,
        mastra=not args.no_mastra,
        mastra_max=args.mastra_max,
    )
    png = plot(result, args.out.with_suffix(".png"))
    result["plot"] = png.name if png else None
    write_report(args.out, render(result), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
