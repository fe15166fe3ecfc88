"""Recall quality on the LoCoMo dev conversations: evidence recall and mean context messages, Memstack's
vector / keyword / hybrid recall × embedder (hash, local; openai when ``OPENAI_API_KEY`` is set) at top_k 4, 8
and 16 (message_range 1), per LoCoMo category and for questions whose evidence spans several sessions — next
to Mastra 1.x on the same data with the same hash embedder (the shared peer, our growth copy, one process per
conversation).

What is measured is what ``memstack demo`` measures (memstack/demo.py): every conversation is stored under
its own resource, one thread per session; each question with valid evidence (category 5 skipped) is asked
through ``context()`` in a fresh thread of that resource, and the score is the share of its evidence turns
that the assembled context holds. Differences from the demo, for speed only: each session is saved in one
``save_messages`` call (the demo saves turn by turn and assembles a context before each turn; recall does not
depend on it), and each embedder's store is built once and questioned with every (mode, top_k) through
``context(options=...)``; the embedder is wrapped in a cache so a question's text is embedded once.

Mastra's side runs ``benchmarks/mastra/locomo-peer-growth.mjs`` (TOPKS=4,8,16 SCORES=1): ``memory.recall``
with its defaults (lastMessages 10, semanticRecall scope resource, messageRange 1), scored the same way.

Usage: ``python benchmarks/recall_quality.py [--quick] [--embedders hash,local] [--top-k 4,8,16]
[--local-top-k 4,8,16] [--no-mastra] [--out benchmarks/results/recall_quality]``
"""

from __future__ import annotations

import argparse
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
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
GROUPS = ("all", "multi-hop", "temporal", "open-domain", "single-hop", "multi-session")


class CachingEmbedder:
    """Wraps an embedder and remembers every text's vector (documents and queries apart), so one store can be
    questioned with many options while each text is embedded once."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.symmetric = inner.symmetric
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
    multi-session)."""
    groups: dict[str, list[Scored]] = defaultdict(list)
    for r in rows:
        groups["all"].append(r)
        groups[CATEGORY_NAMES.get(r.category, str(r.category))].append(r)
        if r.multi_session:
            groups["multi-session"].append(r)
    return {
        name: {
            "evidence_recall": statistics.fmean(r.recall for r in members),
            "mean_context_messages": statistics.fmean(r.context_messages for r in members),
            "questions": len(members),
        }
        for name, members in groups.items()
    }


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
            for thread_id, turns in conv.sessions.items():
                memory.save_messages(
                    thread_id=thread_id,
                    resource_id=conv.resource_id,
                    messages=[
                        {"id": t.message_id, "role": t.role, "content": t.text, "created_at": t.created_at}
                        for t in turns
                    ],
                )
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
    """The Markdown report: the overview table, per-group tables, what was skipped."""
    lines = [
        "# Recall quality on LoCoMo (evidence recall)",
        "",
        machine_line(result["machine"]),
        f"Data: {result['data']} — {result['conversations']} conversation(s), {result['questions']} questions "
        f"with valid evidence (category 5 skipped); message_range {MESSAGE_RANGE}; deterministic (1 run per configuration).",
        "Evidence recall = share of a question's evidence turns present in the assembled context "
        "(Memstack: `context()` in a fresh thread; Mastra: `memory.recall()` in a fresh thread).",
        "",
    ]
    cfgs = result["configs"]
    headers = [
        "system",
        "embedder",
        "mode",
        "top_k",
        "evidence recall",
        "multi-session",
        "mean context messages",
        "questions",
    ]
    rows = []
    for c in cfgs:
        g = c["groups"]
        rows.append(
            [
                c["system"],
                c["embedder"],
                f"**{c['mode']}**" if c["mode"] == "hybrid" else c["mode"],
                c["top_k"],
                f"{g['all']['evidence_recall']:.3f}",
                f"{g['multi-session']['evidence_recall']:.3f}" if "multi-session" in g else "–",
                f"{g['all']['mean_context_messages']:.1f}",
                g["all"]["questions"],
            ]
        )
    lines += [markdown_table(headers, rows), ""]
    lines += ["## Per category (evidence recall; question counts in the header)", ""]
    if cfgs:
        counts = cfgs[0]["groups"]
        headers = ["system", "embedder", "mode", "top_k"] + [
            f"{name} ({int(counts[name]['questions'])})" for name in GROUPS if name in counts
        ]
        rows = []
        for c in cfgs:
            rows.append(
                [c["system"], c["embedder"], c["mode"], c["top_k"]]
                + [
                    f"{c['groups'][n]['evidence_recall']:.3f}" if n in c["groups"] else "–"
                    for n in GROUPS
                    if n in counts
                ]
            )
        lines += [markdown_table(headers, rows), ""]
    if result.get("ratios"):
        lines += ["## Hybrid vs Mastra, same hash embedder and budget (target: >= 2x)", ""]
        lines += [
            markdown_table(
                ["top_k", "Memstack hybrid", "Mastra 1.x", "ratio"],
                [
                    [r["top_k"], f"{r['memstack']:.3f}", f"{r['mastra']:.3f}", f"{r['ratio']:.2f}x"]
                    for r in result["ratios"]
                ],
            ),
            "",
        ]
    if result.get("mastra_per_conversation"):
        lines += [
            "Mastra per conversation at top_k 4: "
            + ", ".join(
                f"{m['conversation']} {m['evidence_recall']:.3f}" for m in result["mastra_per_conversation"]
            )
            + f" (Node {result['machine'].get('node')}).",
            "",
        ]
    for note in result["notes"]:
        lines.append(f"* {note}")
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> Path | None:
    """Grouped bars: evidence recall per top_k for each hash configuration and Mastra (PNG)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    series: dict[str, dict[int, float]] = defaultdict(dict)
    for c in result["configs"]:
        if c["embedder"] != "hash":
            continue
        label = "Mastra 1.x" if c["system"] != "memstack" else f"Memstack {c['mode']}"
        series[label][c["top_k"]] = c["groups"]["all"]["evidence_recall"]
    if not series:
        return None
    top_ks = sorted({k for s in series.values() for k in s})
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series.items()):
        xs = [j + i * width for j in range(len(top_ks))]
        ax.bar(xs, [values.get(k, 0) for k in top_ks], width, label=label)
    ax.set_xticks(
        [j + width * (len(series) - 1) / 2 for j in range(len(top_ks))], [f"top_k {k}" for k in top_ks]
    )
    ax.set_ylabel("evidence recall")
    ax.set_ylim(0, 1)
    ax.set_title(
        f"LoCoMo evidence recall, hash embedder ({result['conversations']} conv., {result['questions']} q.)"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(
    *,
    data: Path,
    indexes: list[int],
    embedders: Sequence[str],
    top_ks: Sequence[int],
    local_top_ks: Sequence[int],
    mastra: bool,
    peer: MastraPeer | None = None,
    log: Any = sys.stderr,
) -> dict[str, Any]:
    """Run every configuration; returns the result (also what the JSON holds)."""
    from memstack import locomo

    conversations = locomo.load(data, indexes)
    notes: list[str] = []
    configs: list[Config] = []
    timing: dict[str, Any] = {}
    for name in embedders:
        if name == "openai" and not (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
            notes.append("openai embedder: skipped (OPENAI_API_KEY / OPENAI_BASE_URL not set).")
            continue
        ks = local_top_ks if name == "local" else top_ks
        if name == "local" and tuple(local_top_ks) != tuple(top_ks):
            notes.append(f"local embedder: run at top_k {', '.join(map(str, ks))} only (time budget).")
        log.write(f"memstack, {name} embedder: top_k {list(ks)}\n")
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
    peer = peer or MastraPeer()
    if mastra:
        log.write("mastra peer (hash embedder)\n")
        try:
            cfgs, mastra_raw = mastra_configs(peer, data, indexes, conversations, top_ks, log)
            configs += cfgs
            notes.append(
                "Mastra 1.x: `benchmarks/mastra/locomo-peer-growth.mjs` (a copy of ../shared/bench/mastra-peer's "
                "script; same Memory set-up and embedder), one Node process per conversation; its mean context "
                "messages are what `recall()` returned (history of the fresh thread is empty)."
            )
        except PeerUnavailable as exc:
            notes.append(f"Mastra 1.x: not run — {exc}")
    else:
        notes.append("Mastra 1.x: not run (--no-mastra).")
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
    ratios = []
    for k in top_ks:
        ours = [
            c
            for c in out_cfgs
            if c["system"] == "memstack"
            and c["embedder"] == "hash"
            and c["mode"] == "hybrid"
            and c["top_k"] == k
        ]
        theirs = [c for c in out_cfgs if c["system"] != "memstack" and c["top_k"] == k]
        if ours and theirs:
            a, b = ours[0]["groups"]["all"]["evidence_recall"], theirs[0]["groups"]["all"]["evidence_recall"]
            ratios.append({"top_k": k, "memstack": a, "mastra": b, "ratio": a / b if b else float("inf")})
    return {
        "benchmark": "recall_quality",
        "machine": machine(peer.node_version),
        "data": str(data),
        "conversations": len(conversations),
        "questions": sum(len(c.questions) for c in conversations),
        "configs": out_cfgs,
        "ratios": ratios,
        "mastra_per_conversation": mastra_raw,
        "timing": timing,
        "notes": notes,
    }


def headline(result: dict[str, Any]) -> list[list[str]]:
    """Rows for the results README: hash hybrid vs Mastra at top_k 4 (and local hybrid when run)."""
    rows = []
    for r in result.get("ratios", []):
        if r["top_k"] == 4:
            rows.append(
                [
                    "evidence recall, top_k 4 (hash embedder)",
                    f"{r['memstack']:.3f}",
                    f"{r['mastra']:.3f}",
                    f"{r['ratio']:.2f}x more",
                    ">= 2x",
                ]
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    from memstack import locomo

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="conversation 0 only")
    parser.add_argument("--conversations", default=None, help="e.g. 0,3 (default all)")
    parser.add_argument("--embedders", default="hash,local,openai")
    parser.add_argument("--top-k", default="4,8,16")
    parser.add_argument(
        "--local-top-k", default=None, help="top_k values for the local embedder (default: --top-k)"
    )
    parser.add_argument("--no-mastra", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS / "recall_quality")
    args = parser.parse_args(argv)
    data = args.data or bench_data_path()
    indexes = (
        [0]
        if args.quick
        else ([int(x) for x in args.conversations.split(",")] if args.conversations else None)
    )
    if indexes is None:
        indexes = list(range(len(locomo.read_samples(data))))
    top_ks = [int(x) for x in args.top_k.split(",")]
    result = run(
        data=data,
        indexes=indexes,
        embedders=[e for e in args.embedders.split(",") if e],
        top_ks=top_ks,
        local_top_ks=[int(x) for x in args.local_top_k.split(",")] if args.local_top_k else top_ks,
        mastra=not args.no_mastra,
    )
    png = plot(result, args.out.with_suffix(".png"))
    result["plot"] = png.name if png else None
    write_report(args.out, render(result), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
