"""Recall quality on two datasets — LoCoMo dev (5 conversations) and LongMemEval_S dev (48 haystacks) —
evidence recall and mean context messages, Memstack's vector / keyword / hybrid recall × embedder (hash,
local, wordllama; openai when ``OPENAI_API_KEY`` is set) at top_k 4, 8 and 16 (message_range 1), per category,
temporal questions and questions whose evidence spans several sessions apart — next to Mastra 1.x on the same
data with the same hash embedder (the shared peer, our growth copy, one process per conversation).

What is measured is what ``memstack demo`` measures (memstack/demo.py): every conversation is stored under
its own resource, one thread per session; each question with valid evidence (category 5 skipped) is asked
through ``context()`` in a fresh thread of that resource, and the score is the share of its evidence turns
that the assembled context holds. Differences from the demo, for speed only: each session is saved in one
``save_messages`` call (the demo saves turn by turn and assembles a context before each turn; recall does not
depend on it), and each embedder's store is built once and questioned with every (mode, top_k) through
``context(options=...)``; the embedder is wrapped in a cache so a question's text is embedded once.

Mastra's side runs ``benchmarks/mastra/locomo-peer-growth.mjs`` (TOPKS=4,8,16 SCORES=1): ``memory.recall``
with its defaults (lastMessages 10, semanticRecall scope resource, messageRange 1), scored the same way.

Usage: ``python benchmarks/recall_quality.py [--quick] [--datasets locomo,longmemeval] [--data FILE]
[--embedders hash,local] [--top-k 4,8,16] [--local-top-k 4,8,16] [--no-mastra]
[--out benchmarks/results/recall_quality]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import (  # noqa: E402
    RESULTS,
    MastraPeer,
    PeerUnavailable,
    bench_data_path,
    is_multi_session,
    machine,
    machine_line,
    markdown_table,
    write_report,
)

MODES = ("vector", "keyword", "hybrid")
MESSAGE_RANGE = 1
MULTI_SESSION = "multi-session evidence"
"""The group of questions whose evidence lies in two or more sessions (any category)."""

DATASETS = {
    "locomo": ("LoCoMo dev", Path("locomo") / "locomo-dev.json"),
    "longmemeval": ("LongMemEval_S dev", Path("longmemeval") / "longmemeval-s-dev48.json.gz"),
}
"""The datasets reported by default: a name, its title and its file under ``../shared/data``."""


@dataclass(frozen=True)
class Dataset:
    """One data file to measure: ``name`` (``locomo``, ``longmemeval`` or the file's stem) and its path."""

    name: str
    title: str
    path: Path


def dataset(name: str) -> Dataset:
    """A dataset by name (``DATASETS``, under ``../shared/data``; LoCoMo falls back to the repository's
    subset through ``bench_data_path``) or by path (a LoCoMo-shaped file)."""
    if name in DATASETS:
        title, rel = DATASETS[name]
        path = ROOT.parent / "shared" / "data" / rel
        return Dataset(name, title, bench_data_path() if name == "locomo" and not path.exists() else path)
    path = Path(name)
    return Dataset(path.name.split(".")[0], path.name, path)


class CachingEmbedder:
    """Wraps an embedder and remembers every text's vector (documents and queries apart), so one store can be
    questioned with many options while each text is embedded once."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.symmetric = inner.symmetric
        from memstack.recall.engine import fusion_weight

        self.fusion_weight = fusion_weight(inner)  # hybrid fusion reads the wrapped embedder's prior
        self._docs: dict[str, list[float]] = {}
        self._queries: dict[str, list[float]] = {}
        self.embedded = 0

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of ``texts``; only texts not seen before reach the inner embedder (one batch)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._docs]
        if missing:
            for text, vector in zip(missing, self.inner.embed_documents(missing), strict=True):
                self._docs[text] = list(vector)
            self.embedded += len(missing)
        return [self._docs[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """The query vector of ``text``, embedded once."""
        if text not in self._queries:
            self._queries[text] = list(self.inner.embed_query(text))
            self.embedded += 1
        return self._queries[text]


@dataclass
class Scored:
    """One question's outcome under one configuration."""

    conversation: str
    category: int
    multi_session: bool
    recall: float
    context_messages: int


@dataclass
class Config:
    """A (system, embedder, mode, top_k) configuration and its scored questions."""

    system: str
    embedder: str
    mode: str
    top_k: int
    rows: list[Scored] = field(default_factory=list)
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.system}/{self.embedder}/{self.mode}/top_k={self.top_k}"


def group_scores(rows: Sequence[Scored]) -> dict[str, dict[str, float]]:
    """Evidence recall, mean context messages and question count per group (all, each category,
    multi-session evidence)."""
    from memstack.locomo import CATEGORIES

    groups: dict[str, list[Scored]] = defaultdict(list)
    for r in rows:
        groups["all"].append(r)
        groups[CATEGORIES.get(r.category, str(r.category))].append(r)
        if r.multi_session:
            groups[MULTI_SESSION].append(r)
    return {
        name: {
            "evidence_recall": statistics.fmean(r.recall for r in members),
            "mean_context_messages": statistics.fmean(r.context_messages for r in members),
            "questions": len(members),
        }
        for name, members in groups.items()
    }


def group_names(cfgs: Sequence[dict[str, Any]]) -> list[str]:
    """The groups of a dataset's configs in report order: all, categories by number, multi-session."""
    from memstack.locomo import CATEGORIES

    present = {g for c in cfgs for g in c["groups"]}
    named = [CATEGORIES[k] for k in sorted(CATEGORIES) if CATEGORIES[k] in present]
    others = sorted(present - {"all", MULTI_SESSION, *named})
    return ["all", *named, *others, *([MULTI_SESSION] if MULTI_SESSION in present else [])]


def store_conversation(memory: Any, conv: Any) -> None:
    """Save a conversation into ``memory`` (a ``Memory``): each session in one ``save_messages`` call, under
    the conversation's resource, the session as the thread."""
    for thread_id, turns in conv.sessions.items():
        memory.save_messages(
            thread_id=thread_id,
            resource_id=conv.resource_id,
            messages=[
                {"id": t.message_id, "role": t.role, "content": t.text, "created_at": t.created_at}
                for t in turns
            ],
        )


def memstack_configs(
    embedder_name: str, conversations: list[Any], top_ks: Sequence[int], log: Any = sys.stderr
) -> tuple[list[Config], dict[str, float]]:
    """Store the conversations once with this embedder, then ask every question under every (mode, top_k).
    Returns the configs and timing notes (seconds to store and to question)."""
    from memstack import Memory
    from memstack.bootstrap import make_embedder

    embedder = CachingEmbedder(make_embedder(embedder_name))
    configs = [Config("memstack", embedder_name, mode, k) for k in top_ks for mode in MODES]
    with tempfile.TemporaryDirectory(prefix="memstack-recall-") as tmp:
        memory = Memory.local(Path(tmp) / "recall.db", embedder=embedder)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        for conv in conversations:
            store_conversation(memory, conv)
            log.write(f"  {embedder_name}: stored {conv.resource_id} ({conv.turn_count} messages)\n")
        stored_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for conv in conversations:
            session_of = {t.message_id: thread for thread, turns in conv.sessions.items() for t in turns}
            thread = f"{conv.resource_id}-questions"
            for q in conv.questions:
                multi = is_multi_session(q.evidence, session_of)
                for cfg in configs:
                    options = {
                        "semantic_recall": {
                            "mode": cfg.mode,
                            "top_k": cfg.top_k,
                            "message_range": MESSAGE_RANGE,
                            "now": conv.asked_at,
                        }
                    }
                    ctx = memory.context(
                        thread_id=thread, resource_id=conv.resource_id, message=q.text, options=options
                    )
                    shown = set(ctx.message_ids)
                    cfg.rows.append(
                        Scored(
                            conv.resource_id,
                            q.category,
                            multi,
                            sum(e in shown for e in q.evidence) / len(q.evidence),
                            len(ctx.message_ids),
                        )
                    )
            log.write(
                f"  {embedder_name}: asked {len(conv.questions)} questions of {conv.resource_id} x {len(configs)} configs\n"
            )
        asked_s = time.perf_counter() - t0
        memory.close()
    return configs, {
        "store_s": round(stored_s, 1),
        "question_s": round(asked_s, 1),
        "texts_embedded": embedder.embedded,
    }


def mastra_configs(
    peer: MastraPeer,
    data: Path,
    indexes: Sequence[int],
    conversations: list[Any],
    top_ks: Sequence[int],
    log: Any = sys.stderr,
) -> tuple[list[Config], list[dict[str, Any]]]:
    """Run the Mastra peer per conversation (hash embedder, every top_k in one process).

    Raises:
        PeerUnavailable: the peer cannot run here.
    """
    configs = {k: Config("mastra-1.x", "hash", "vector (Mastra)", k) for k in top_ks}
    raw: list[dict[str, Any]] = []
    for index, conv in zip(indexes, conversations, strict=True):
        t0 = time.perf_counter()
        out = peer.run(
            data, index, {"TOPKS": ",".join(map(str, top_ks)), "SCORES": "1", "TOPK": str(top_ks[0])}
        )
        session_of = {
            t.message_id.split(":", 1)[1]: thread for thread, turns in conv.sessions.items() for t in turns
        }
        for q in out["scores"]:
            multi = is_multi_session(q["evidence"], session_of)
            for k in top_ks:
                configs[k].rows.append(
                    Scored(
                        out["conversation"],
                        int(q["category"]),
                        multi,
                        float(q["scores"][str(k)]),
                        int(q["returned"][str(k)]),
                    )
                )
        out.pop("scores")
        raw.append(out)
        log.write(
            f"  mastra: {out['conversation']} in {time.perf_counter() - t0:.0f} s, recall@4 {out['evidence_recall']}\n"
        )
    return list(configs.values()), raw


def render(result: dict[str, Any]) -> str:
    """The Markdown report: per dataset, the overview table, the per-group table, hybrid vs Mastra."""
    lines = [
        "# Recall quality on LoCoMo and LongMemEval (evidence recall)",
        "",
        machine_line(result["machine"]),
        "Evidence recall = share of a question's evidence turns present in the assembled context "
        "(Memstack: `context()` in a fresh thread; Mastra: `memory.recall()` in a fresh thread); "
        f"message_range {MESSAGE_RANGE}; deterministic (1 run per configuration). "
        f"*{MULTI_SESSION}*: questions whose evidence lies in two or more sessions, whatever their category.",
        "",
    ]
    for ds in result["datasets"]:
        lines += render_dataset(ds)
    for note in result["notes"]:
        lines.append(f"* {note}")
    return "\n".join(lines) + "\n"


def render_dataset(ds: dict[str, Any]) -> list[str]:
    """The report section of one dataset."""
    from memstack.locomo import CATEGORIES, TEMPORAL_CATEGORIES

    temporal_names = [CATEGORIES[c] for c in sorted(TEMPORAL_CATEGORIES)]
    lines = [
        f"## {ds['title']}",
        "",
        f"Data: {ds['data']} — {ds['conversations']} conversation(s), {ds['questions']} questions with valid "
        "evidence (LoCoMo's category 5 skipped).",
        "",
    ]
    cfgs = ds["configs"]
    headers = ["system", "embedder", "mode", "top_k", "evidence recall", "temporal", MULTI_SESSION]
    headers += ["mean context messages", "questions"]
    rows = []
    for c in cfgs:
        g = c["groups"]
        temporal = next((g[n] for n in temporal_names if n in g), None)
        rows.append(
            [
                c["system"],
                c["embedder"],
                f"**{c['mode']}**" if c["mode"] == "hybrid" else c["mode"],
                c["top_k"],
                f"{g['all']['evidence_recall']:.3f}",
                f"{temporal['evidence_recall']:.3f}" if temporal else "–",
                f"{g[MULTI_SESSION]['evidence_recall']:.3f}" if MULTI_SESSION in g else "–",
                f"{g['all']['mean_context_messages']:.1f}",
                g["all"]["questions"],
            ]
        )
    lines += [markdown_table(headers, rows), ""]
    if cfgs:
        names = group_names(cfgs)
        counts = {n: max(int(c["groups"][n]["questions"]) for c in cfgs if n in c["groups"]) for n in names}
        lines += ["### Per category (evidence recall; question counts in the header)", ""]
        headers = ["system", "embedder", "mode", "top_k"] + [f"{n} ({counts[n]})" for n in names]
        rows = [
            [c["system"], c["embedder"], c["mode"], c["top_k"]]
            + [f"{c['groups'][n]['evidence_recall']:.3f}" if n in c["groups"] else "–" for n in names]
            for c in cfgs
        ]
        lines += [markdown_table(headers, rows), ""]
    if ds.get("ratios"):
        lines += ["### Memstack hybrid vs Mastra at the same budget", ""]
        lines += [
            markdown_table(
                ["top_k", "embedder", "Memstack hybrid", "Mastra 1.x (hash)", "ratio"],
                [
                    [
                        r["top_k"],
                        r["embedder"],
                        f"{r['memstack']:.3f}",
                        f"{r['mastra']:.3f}",
                        f"{r['ratio']:.2f}x",
                    ]
                    for r in ds["ratios"]
                ],
            ),
            "",
        ]
    if ds.get("mastra_per_conversation"):
        per = ds["mastra_per_conversation"]
        lines += [
            f"Mastra at top_k 4 over {len(per)} conversation(s): mean per-conversation evidence recall "
            f"{statistics.fmean(m['evidence_recall'] for m in per):.3f}.",
            "",
        ]
    for note in ds.get("notes", []):
        lines.append(f"* {note}")
    if ds.get("notes"):
        lines.append("")
    return lines


def plot(result: dict[str, Any], path: Path) -> Path | None:
    """Grouped bars, one panel per dataset: evidence recall at each top_k for Memstack hybrid with every
    embedder, Memstack keyword, and Mastra (PNG)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    panels = [ds for ds in result["datasets"] if ds["configs"]]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4), squeeze=False)
    for ax, ds in zip(axes[0], panels, strict=True):
        series: dict[str, dict[int, float]] = defaultdict(dict)
        for c in ds["configs"]:
            if c["system"] != "memstack":
                label = "Mastra 1.x (hash)"
            elif c["mode"] == "hybrid":
                label = f"Memstack hybrid ({c['embedder']})"
            elif c["mode"] == "keyword" and c["embedder"] == "hash":
                label = "Memstack keyword"
            else:
                continue
            series[label][c["top_k"]] = c["groups"]["all"]["evidence_recall"]
        top_ks = sorted({k for v in series.values() for k in v})
        width = 0.8 / max(1, len(series))
        for i, (label, values) in enumerate(series.items()):
            xs = [j + i * width for j in range(len(top_ks))]
            ax.bar(xs, [values.get(k, 0) for k in top_ks], width, label=label)
        ax.set_xticks(
            [j + width * (len(series) - 1) / 2 for j in range(len(top_ks))], [f"top_k {k}" for k in top_ks]
        )
        ax.set_ylabel("evidence recall")
        ax.set_ylim(0, 1)
        ax.set_title(f"{ds['title']} ({ds['conversations']} conv., {ds['questions']} q.)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(
    *,
    datasets: Sequence[Dataset],
    embedders: Sequence[str],
    top_ks: Sequence[int],
    local_top_ks: Sequence[int],
    mastra: bool,
    quick: bool = False,
    local_datasets: Sequence[str] | None = None,
    peer: MastraPeer | None = None,
    log: Any = sys.stderr,
) -> dict[str, Any]:
    """Run every configuration on every dataset; returns the result (also what the JSON holds).

    Args:
        quick: the first conversation of each dataset only.
        local_datasets: the datasets the (slow) local e5 embedder runs on; ``None``: all.
    """
    peer = peer or MastraPeer()
    notes: list[str] = []
    results = [
        run_dataset(
            ds,
            embedders=embedders,
            top_ks=top_ks,
            local_top_ks=local_top_ks,
            mastra=mastra,
            quick=quick,
            peer=peer,
            local_datasets=local_datasets,
            log=log,
        )
        for ds in datasets
    ]
    if not mastra:
        notes.append("Mastra 1.x: not run (--no-mastra).")
    return {
        "benchmark": "recall_quality",
        "machine": machine(peer.node_version),
        "datasets": results,
        "notes": notes,
    }


def run_dataset(
    ds: Dataset,
    *,
    embedders: Sequence[str],
    top_ks: Sequence[int],
    local_top_ks: Sequence[int],
    mastra: bool,
    quick: bool,
    peer: MastraPeer,
    local_datasets: Sequence[str] | None = None,
    log: Any = sys.stderr,
) -> dict[str, Any]:
    """Every configuration on one dataset (the local embedder only on ``local_datasets`` when given)."""
    from memstack import locomo

    indexes = [0] if quick else list(range(len(locomo.read_samples(ds.path))))
    conversations = locomo.load(ds.path, indexes)
    notes: list[str] = []
    configs: list[Config] = []
    timing: dict[str, Any] = {}
    for name in embedders:
        if name == "local" and local_datasets is not None and ds.name not in local_datasets:
            notes.append(
                "local (e5) embedder: not run on this dataset (--local-datasets): embedding its long turns "
                "with e5 takes the better part of an hour on a 2-core machine."
            )
            continue
        if name == "openai" and not (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
            notes.append("openai embedder: skipped (OPENAI_API_KEY / OPENAI_BASE_URL not set).")
            continue
        ks = local_top_ks if name == "local" else top_ks
        if name == "local" and tuple(local_top_ks) != tuple(top_ks):
            notes.append(f"local embedder: run at top_k {', '.join(map(str, ks))} only (time budget).")
        log.write(f"{ds.name}: memstack, {name} embedder: top_k {list(ks)}\n")
        try:
            cfgs, timing[name] = memstack_configs(name, conversations, ks, log)
        except Exception as exc:  # an embedder that cannot load here is reported, not fatal
            notes.append(f"{name} embedder: not run ({type(exc).__name__}: {exc}).")
            continue
        configs += cfgs
        notes.append(
            f"{name} embedder: stored in {timing[name]['store_s']} s, questioned ({len(cfgs)} configs) in "
            f"{timing[name]['question_s']} s."
        )
    mastra_raw: list[dict[str, Any]] = []
    if mastra:
        log.write(f"{ds.name}: mastra peer (hash embedder)\n")
        try:
            cfgs, mastra_raw = mastra_configs(peer, ds.path, indexes, conversations, top_ks, log)
            configs += cfgs
            notes.append(
                "Mastra 1.x: `benchmarks/mastra/locomo-peer-growth.mjs` (a copy of ../shared/bench/mastra-peer's "
                "script; same Memory set-up and embedder), one Node process per conversation; its mean context "
                "messages are what `recall()` returned (history of the fresh thread is empty)."
            )
        except PeerUnavailable as exc:
            notes.append(f"Mastra 1.x: not run — {exc}")
    out_cfgs = [
        {
            "system": c.system,
            "embedder": c.embedder,
            "mode": c.mode,
            "top_k": c.top_k,
            "groups": group_scores(c.rows),
        }
        for c in configs
        if c.rows
    ]
    return {
        "name": ds.name,
        "title": ds.title,
        "data": str(ds.path),
        "conversations": len(conversations),
        "questions": sum(len(c.questions) for c in conversations),
        "configs": out_cfgs,
        "ratios": ratios(out_cfgs, top_ks),
        "mastra_per_conversation": mastra_raw,
        "timing": timing,
        "notes": notes,
    }


def ratios(cfgs: Sequence[dict[str, Any]], top_ks: Sequence[int]) -> list[dict[str, Any]]:
    """Memstack hybrid (each embedder) over Mastra (hash embedder) at each top_k, where both ran."""
    out = []
    for k in top_ks:
        theirs = [c for c in cfgs if c["system"] != "memstack" and c["top_k"] == k]
        if not theirs:
            continue
        b = theirs[0]["groups"]["all"]["evidence_recall"]
        for c in cfgs:
            if c["system"] == "memstack" and c["mode"] == "hybrid" and c["top_k"] == k:
                a = c["groups"]["all"]["evidence_recall"]
                out.append(
                    {
                        "top_k": k,
                        "embedder": c["embedder"],
                        "memstack": a,
                        "mastra": b,
                        "ratio": a / b if b else float("inf"),
                    }
                )
    return out


def headline(result: dict[str, Any]) -> list[list[str]]:
    """Rows for the results README: Memstack hybrid vs Mastra at top_k 4 on each dataset, hash embedder and
    the default one."""

    rows = []
    for ds in result.get("datasets", []):
        for r in ds.get("ratios", []):
            if r["top_k"] == 4 and r["embedder"] in ("hash", "wordllama"):
                rows.append(
                    [
                        f"evidence recall, {ds['title']}, top_k 4 ({r['embedder']} embedder)",
                        f"{r['memstack']:.3f}",
                        f"{r['mastra']:.3f}",
                        f"{r['ratio']:.2f}x more",
                        ">= 2x",
                    ]
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--datasets",
        default="locomo,longmemeval",
        help="comma-separated: locomo, longmemeval, or paths of LoCoMo-shaped files (.json, .json.gz)",
    )
    parser.add_argument(
        "--data", type=Path, default=None, help="one LoCoMo-shaped file instead of --datasets"
    )
    parser.add_argument("--quick", action="store_true", help="the first conversation of each dataset only")
    parser.add_argument("--embedders", default="hash,wordllama,local,openai")
    parser.add_argument("--top-k", default="4,8,16")
    parser.add_argument(
        "--local-top-k", default=None, help="top_k values for the local embedder (default: --top-k)"
    )
    parser.add_argument(
        "--local-datasets", default=None, help="datasets the local e5 embedder runs on (default: all)"
    )
    parser.add_argument("--no-mastra", action="store_true")
    parser.add_argument(
        "--mastra-from",
        type=Path,
        default=None,
        help="with --no-mastra: Mastra's rows from an earlier result JSON of the same data (noted in the report)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "recall_quality")
    args = parser.parse_args(argv)
    names = [str(args.data)] if args.data else [n for n in args.datasets.split(",") if n]
    top_ks = [int(x) for x in args.top_k.split(",")]
    result = run(
        datasets=[dataset(n) for n in names],
        embedders=[e for e in args.embedders.split(",") if e],
        top_ks=top_ks,
        local_top_ks=[int(x) for x in args.local_top_k.split(",")] if args.local_top_k else top_ks,
        mastra=not args.no_mastra,
        quick=args.quick,
        local_datasets=args.local_datasets.split(",") if args.local_datasets else None,
    )
    if args.mastra_from is not None:
        splice_mastra(result, json.loads(args.mastra_from.read_text()), top_ks)
    png = plot(result, args.out.with_suffix(".png"))
    result["plot"] = png.name if png else None
    write_report(args.out, render(result), result)
    return 0


def splice_mastra(result: dict[str, Any], earlier: dict[str, Any], top_ks: Sequence[int]) -> None:
    """Put Mastra's configurations of ``earlier`` (a result of this script) beside ``result``'s, per dataset
    of the same data file, recomputing the ratios, and say so in the notes: Mastra's figures do not depend
    on Memstack's code, and its peer takes most of a run's time on a 2-core machine."""
    theirs = {ds["data"]: ds for ds in earlier["datasets"]}
    stamp = earlier.get("machine", {}).get("date", "an earlier run")
    for ds in result["datasets"]:
        old = theirs.get(ds["data"])
        if old is None:
            continue
        mastra = [c for c in old["configs"] if c["system"] != "memstack"]
        ds["configs"] = [c for c in ds["configs"] if c["system"] == "memstack"] + mastra
        ds["ratios"] = ratios(ds["configs"], top_ks)
        ds["mastra_per_conversation"] = old.get("mastra_per_conversation", [])
        ds["notes"].append(
            f"Mastra 1.x rows: from the run of {stamp} on the same data (`--mastra-from`); Mastra's side does "
            "not depend on Memstack's code."
        )
    result["notes"] = [n for n in result["notes"] if n != "Mastra 1.x: not run (--no-mastra)."]


if __name__ == "__main__":
    raise SystemExit(main())
