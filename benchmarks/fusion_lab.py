"""A fast harness for recall's ranking above the retrievers: fusion, candidate counts and the window.

Each (dataset, embedder) is stored once into a SQLite file under ``--cache`` (reused while it exists), and
each question's two candidate lists — what ``SemanticRecall.search`` asks the index for, ``--depth`` hits
deep — and every stored message are kept in a pickle beside it. Variants of the ranking are then replayed
in-process on those lists through recall's own steps (``memstack.fusion.fuse`` or a variant,
``window.in_range_first``, ``window.select``), so one variant over LoCoMo dev and LongMemEval dev takes
seconds instead of the minutes a ``memstack demo`` run takes. ``default`` replays what ``recall()`` does
with the options' defaults; its figures match ``memstack demo`` (checked when the harness was written).

A retriever returns the same prefix at any depth (its order is total), so truncating the deep lists to the
length recall asks for gives what recall would have seen.

Usage: ``python benchmarks/fusion_lab.py [--datasets locomo,longmemeval] [--embedders wordllama,hash]
[--variants default,...] [--cache /tmp/memstack-fusion-lab]``
"""

from __future__ import annotations

import argparse
import functools
import json
import pickle
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import is_multi_session  # noqa: E402
from benchmarks.recall_quality import CachingEmbedder, dataset, store_conversation  # noqa: E402

from memstack.config import SemanticRecallOptions  # noqa: E402
from memstack.dates import TimeRange, keyword_query  # noqa: E402
from memstack.fusion import FusedHit  # noqa: E402
from memstack.locomo import TEMPORAL_CATEGORIES  # noqa: E402
from memstack.model import Message  # noqa: E402
from memstack.ports import IndexHit  # noqa: E402
from memstack.recall import window  # noqa: E402
from memstack.recall.engine import list_depth  # noqa: E402

DEPTH = 64
"""How deep each candidate list is collected: past what any replayed variant asks for."""


@dataclass
class Case:
    """One question: its text, category, evidence, whether evidence spans sessions, and its candidates."""

    resource_id: str
    text: str
    category: int
    evidence: tuple[str, ...]
    multi_session: bool
    when: TimeRange | None
    vector: list[IndexHit]
    keyword: list[IndexHit]


@dataclass
class Lab:
    """A dataset's questions and messages (by resource) under one embedder."""

    dataset: str
    embedder: str
    cases: list[Case]
    messages: dict[str, list[Message]]


Ranker = Callable[[Case, SemanticRecallOptions, int], list[FusedHit]]
"""A variant's ranking: ``(case, options, how many hits) -> hits, best first``."""


Prepare = Callable[[Any, str, list[Message]], None]
"""Run on each stored conversation before it is questioned: ``(recall engine, resource id, messages)``;
``benchmarks/index_text_lab.py`` rewrites the index documents there."""


def collect(
    dataset_name: str,
    embedder_name: str,
    cache: Path,
    depth: int = DEPTH,
    *,
    prepare: Prepare | None = None,
    tag: str = "",
) -> Lab:
    """The lab of one dataset and embedder, from ``cache`` when it holds one, else stored and searched
    (``prepare``, when given, runs on each stored conversation first; ``tag`` names its variant in the
    cache)."""
    from memstack import Memory, locomo
    from memstack.bootstrap import make_embedder

    cache.mkdir(parents=True, exist_ok=True)
    pick = cache / f"{dataset_name}-{embedder_name}{'-' + tag if tag else ''}-{depth}.pickle"
    if pick.exists():
        with pick.open("rb") as f:
            lab: Lab = _Unpickler(f).load()
        return lab
    ds = dataset(dataset_name)
    conversations = locomo.load(ds.path)
    embedder = CachingEmbedder(make_embedder(embedder_name))
    cases: list[Case] = []
    messages: dict[str, list[Message]] = {}
    with tempfile.TemporaryDirectory(prefix="memstack-fusion-lab-") as tmp:
        memory = Memory.local(Path(tmp) / "lab.db", embedder=embedder)  # type: ignore[arg-type]
        engine = memory.recall_engine
        for conv in conversations:
            store_conversation(memory, conv)
            sys.stderr.write(f"  {dataset_name}/{embedder_name}: stored {conv.resource_id}\n")
            messages[conv.resource_id] = [
                m
                for thread_id in conv.sessions
                for m in engine.store.list_messages(conv.resource_id, thread_id, limit=100_000)
            ]
            if prepare is not None:
                prepare(engine, conv.resource_id, messages[conv.resource_id])
            session_of = {t.message_id: th for th, turns in conv.sessions.items() for t in turns}
            options = SemanticRecallOptions(now=conv.asked_at)
            for q in conv.questions:
                when = engine.time_range(q.text, options)
                keywords = keyword_query(q.text, when)
                vector = engine.embed_query(q.text)
                found = engine.index.search(
                    conv.resource_id, top_k=depth, vector=vector if any(vector) else None, text=keywords
                )
                cases.append(
                    Case(
                        conv.resource_id,
                        q.text,
                        q.category,
                        q.evidence,
                        is_multi_session(q.evidence, session_of),
                        when,
                        list(found.vector or []),
                        list(found.keyword or []),
                    )
                )
        memory.close()
    lab = Lab(dataset_name, embedder_name, cases, messages)
    pick.write_bytes(pickle.dumps(lab))
    return lab


class _Unpickler(pickle.Unpickler):
    """Reads a lab pickled by this file run as a script (its classes then live in ``__main__``)."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "__main__" and name in ("Case", "Lab"):
            return globals()[name]
        return super().find_class(module, name)


def windows_of(lab: Lab) -> dict[str, dict[str, list[Message]]]:
    """Messages by resource, then thread, in ``seq`` order."""
    out: dict[str, dict[str, list[Message]]] = {}
    for rid, msgs in lab.messages.items():
        threads: dict[str, list[Message]] = {}
        for m in msgs:
            threads.setdefault(m.thread_id, []).append(m)
        for members in threads.values():
            members.sort(key=lambda m: m.seq)
        out[rid] = threads
    return out


def fetched(
    threads: dict[str, list[Message]], hits: Sequence[FusedHit], span: tuple[int, int]
) -> list[Message]:
    """What ``message_windows`` answers for the hits' ``fetch_span`` windows."""
    seen: dict[str, Message] = {}
    for h in hits:
        members = threads.get(h.thread_id, [])
        at = next((i for i, m in enumerate(members) if m.seq == h.seq), None)
        if at is None:
            continue
        for m in members[max(0, at - span[0]) : at + span[1] + 1]:
            seen[m.id] = m
    return list(seen.values())


def evaluate(lab: Lab, ranker: Ranker, options: SemanticRecallOptions) -> dict[str, float]:
    """Replay recall with ``ranker`` on every case: evidence recall overall, temporal, multi-session, and
    the mean context messages."""
    threads = windows_of(lab)
    want = window.candidate_count(options)
    span = window.fetch_span(options)
    scores: list[tuple[Case, float, int]] = []
    for case in lab.cases:
        hits = ranker(case, options, want if case.when is None else list_depth(options, want))
        msgs = fetched(threads[case.resource_id], hits, span)
        if case.when is not None:
            hits = window.in_range_first(hits, msgs, case.when)
        chosen = window.select(hits, msgs, options)
        shown = {m.id for m in chosen.messages}
        scores.append((case, sum(e in shown for e in case.evidence) / len(case.evidence), len(shown)))

    def mean(rows: Sequence[tuple[Case, float, int]]) -> float:
        return sum(r for _, r, _ in rows) / len(rows) if rows else float("nan")

    return {
        "all": mean(scores),
        "temporal": mean([s for s in scores if s[0].category in TEMPORAL_CATEGORIES]),
        "multi": mean([s for s in scores if s[0].multi_session]),
        "messages": sum(n for _, _, n in scores) / len(scores),
        "questions": len(scores),
    }


def engine_ranker(
    case: Case, options: SemanticRecallOptions, want: int, prior: float = 1.0
) -> list[FusedHit]:
    """What ``SemanticRecall.search`` ranks, replayed on the case's deep lists (``prior``: the embedder's
    ``fusion_weight``)."""
    from memstack.recall.engine import rank_hits

    per_list = list_depth(options, want)
    return rank_hits(case.vector[:per_list], case.keyword[:per_list], options, limit=want, vector_prior=prior)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--datasets", default="locomo,longmemeval")
    parser.add_argument("--embedders", default="wordllama,hash")
    parser.add_argument("--modes", default="keyword,vector,hybrid")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "memstack-fusion-lab")
    parser.add_argument("--top-k", default="4", help="comma-separated top_k values")
    parser.add_argument(
        "--option", action="append", default=[], help="a hybrid option as NAME=VALUE (repeatable)"
    )
    args = parser.parse_args(argv)
    from memstack.bootstrap import make_embedder
    from memstack.recall.engine import fusion_weight

    hybrid: dict[str, Any] = {}
    for item in args.option:
        name, value = item.split("=", 1)
        try:
            hybrid[name] = json.loads(value)
        except ValueError:
            hybrid[name] = value
    for ds in args.datasets.split(","):
        for emb in args.embedders.split(","):
            lab = collect(ds, emb, args.cache)
            prior = fusion_weight(make_embedder(emb))
            for top_k in (int(k) for k in args.top_k.split(",")):
                for mode in args.modes.split(","):
                    options = SemanticRecallOptions(mode=mode, top_k=top_k, hybrid=hybrid)  # type: ignore[arg-type]
                    r = evaluate(lab, functools.partial(engine_ranker, prior=prior), options)
                    print(
                        f"{ds:12s} {emb:10s} {mode:8s} top_k {top_k:2d}  recall {r['all']:.3f}  "
                        f"temporal {r['temporal']:.3f}  multi-session {r['multi']:.3f}  "
                        f"messages {r['messages']:.1f}  ({r['questions']} q.)"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
