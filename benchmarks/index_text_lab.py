"""Experiments on what recall indexes and how it re-ranks, replayed like ``benchmarks/fusion_lab.py``.

Three families (issue 17, docs/adr/0015-contextual-keyword-text.md):

* **index text** (``--index``): each message indexed with its predecessor's text in the same thread, on the
  keyword side (``kw``), the vector side (``vec``) or both (``both``); ``plain`` is what recall indexes
  today. The documents are written through the real SQLite index (``SearchIndex.upsert`` replaces a
  message's chunks), so FTS5's scoring is the one measured; the candidate lists are then kept ``--depth``
  deep and replayed as fusion_lab does. ``plain`` reproduces fusion_lab's lists.
* **second stage** (``--rerank``): the union of the two lists re-scored by a cheap function of the query
  and each candidate — ``maxsim`` (WordLlama's token rows: for each query token its best cosine among the
  candidate's tokens, averaged, ColBERT's late interaction), ``rocchio`` (the query vector moved towards
  the mean of the first fused hits' vectors, candidates re-scored by cosine), fused as a third list.
* **depth** (``--candidates``): the lists ``top_k × candidates`` deep before fusion.

Prints evidence recall at the given budget overall, temporal and multi-session, per dataset, so every
variant is read on LoCoMo dev and LongMemEval dev side by side.

Usage: ``python benchmarks/index_text_lab.py [--datasets locomo,longmemeval] [--index plain,kw,vec,both]
[--rerank none,maxsim,rocchio] [--candidates 4] [--cache /tmp/memstack-index-text-lab]``
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import fusion_lab  # noqa: E402
from benchmarks.fusion_lab import Case, Lab, engine_ranker, evaluate  # noqa: E402
from benchmarks.recall_quality import CachingEmbedder  # noqa: E402

from memstack.config import SemanticRecallOptions  # noqa: E402
from memstack.fusion import FusedHit  # noqa: E402
from memstack.model import Message  # noqa: E402
from memstack.ports import IndexHit  # noqa: E402
from memstack.recall.engine import keyword_context, list_depth  # noqa: E402
from memstack.text import searchable_text  # noqa: E402

DEPTH = 64
INDEX_VARIANTS = ("none", "kw", "vec", "both")
"""none: the message alone (the index before ADR 0015); kw: the previous message's text on the keyword side (what
recall indexes); vec: on the vector side only; both: on both sides."""


def collect(dataset_name: str, variant: str, cache: Path, depth: int = DEPTH) -> Lab:
    """The lab of one dataset with the index text ``variant`` (WordLlama, the default embedder)."""
    if variant not in INDEX_VARIANTS:
        raise SystemExit(f"unknown index variant {variant} (one of {', '.join(INDEX_VARIANTS)})")
    prepare = None if variant == "kw" else functools.partial(reindex, variant=variant)
    return fusion_lab.collect(dataset_name, "wordllama", cache, depth, prepare=prepare, tag=variant)


def reindex(engine: Any, resource_id: str, messages: list[Message], *, variant: str) -> None:
    """Rewrite the resource's documents: the previous message's text on the variant's side(s) — the
    keyword side as ``IndexEntry.context``, the vector side embedded before the message's own text."""
    threads: dict[str, list[Message]] = {}
    for m in sorted(messages, key=lambda m: m.seq):
        threads.setdefault(m.thread_id, []).append(m)
    for thread_id, ordered in threads.items():
        thread = engine.store.get_thread(resource_id, thread_id)
        rows: list[tuple[Message, str, str]] = []
        for previous, m in zip([None, *ordered], ordered, strict=False):
            own = searchable_text(m)
            if own:
                context = keyword_context(previous, SemanticRecallOptions())
                embedded = f"{context}\n{own}" if context and variant in ("vec", "both") else own
                rows.append((m, context if variant == "both" else "", embedded))
        vectors = engine.embed_documents([e for _, _, e in rows])
        entries = [
            replace(entry, vector=vec)
            for (m, context, _), vec in zip(rows, vectors, strict=True)
            for entry in engine._entries(thread, [(m, [searchable_text(m)], context, "")])
        ]
        engine.index.upsert(entries)


# second stage -------------------------------------------------------------------------------------------


class TokenRows:
    """WordLlama's token rows of texts, unit length, cached by text."""

    def __init__(self) -> None:
        import wordllama

        model = wordllama.WordLlama.load(
            config="l2_supercat", dim=256, cache_dir=Path(wordllama.__file__).parent, disable_download=True
        )
        self.tokenizer = model.tokenizer
        table = np.asarray(model.embedding, dtype=np.float32)
        norms = np.linalg.norm(table, axis=1, keepdims=True)
        self.table = table / np.where(norms == 0, 1, norms)
        self._cache: dict[str, np.ndarray] = {}
        from memstack.stopwords import STOP_WORDS

        self.stop_ids = {
            i for w in STOP_WORDS for i in self.tokenizer.encode(" " + w, add_special_tokens=False).ids
        }

    def rows(self, text: str, drop_stop: bool = False) -> np.ndarray:
        key = ("s" if drop_stop else "a") + text
        if key not in self._cache:
            ids = [i for i in self.tokenizer.encode(text, add_special_tokens=False).ids]
            if drop_stop:
                ids = [i for i in ids if i not in self.stop_ids] or ids
            self._cache[key] = self.table[ids] if ids else np.zeros((1, self.table.shape[1]), np.float32)
        return self._cache[key]


def maxsim_ranker(
    rows: TokenRows,
    texts: dict[str, str],
    weight: float,
    case: Case,
    options: SemanticRecallOptions,
    want: int,
) -> list[FusedHit]:
    """Fusion of the two lists and a third: the union re-scored by MaxSim of WordLlama token rows."""
    per_list = list_depth(options, want)
    v, k = case.vector[:per_list], case.keyword[:per_list]
    union: dict[str, IndexHit] = {}
    for h in [*v, *k]:
        union.setdefault(h.message_id, h)
    q = rows.rows(case.text, drop_stop=True)
    scored = []
    for mid, h in union.items():
        d = rows.rows(texts[mid])
        scored.append((float((q @ d.T).max(axis=1).mean()), h))
    scored.sort(key=lambda s: -s[0])
    third = [IndexHit(h.message_id, h.thread_id, s, seq=h.seq) for s, h in scored]
    return _fuse3(v, k, third, weight, options, want)


def _fuse3(
    v: list[IndexHit],
    k: list[IndexHit],
    third: list[IndexHit],
    weight: float,
    options: SemanticRecallOptions,
    want: int,
) -> list[FusedHit]:
    """The engine's fusion of ``v`` and ``k``, plus ``third``'s reciprocal ranks at ``weight``."""
    base = engine_ranker(Case("", "", 0, (), False, None, v, k), options, 10_000)
    h = options.hybrid
    extra = {x.message_id: weight / (h.rank_constant + r) for r, x in enumerate(third, start=1)}
    by_id = {f.message_id: f for f in base}
    scores = {mid: f.score + extra.get(mid, 0.0) for mid, f in by_id.items()}
    order = sorted(scores, key=lambda mid: (-scores[mid], mid))[:want]
    return [
        FusedHit(
            mid,
            by_id[mid].thread_id,
            scores[mid],
            by_id[mid].vector_rank,
            by_id[mid].keyword_rank,
            by_id[mid].seq,
        )
        for mid in order
    ]


def rocchio_ranker(
    vectors: Callable[[str], np.ndarray],
    query_vec: Callable[[str], np.ndarray],
    feedback: int,
    weight: float,
    case: Case,
    options: SemanticRecallOptions,
    want: int,
) -> list[FusedHit]:
    """The union re-scored by cosine to the query moved towards the first ``feedback`` fused hits."""
    per_list = list_depth(options, want)
    v, k = case.vector[:per_list], case.keyword[:per_list]
    first = engine_ranker(case, options, feedback)
    q = query_vec(case.text)
    fb = np.mean([vectors(f.message_id) for f in first], axis=0) if first else np.zeros_like(q)
    q2 = q + fb
    q2 = q2 / (np.linalg.norm(q2) or 1.0)
    union: dict[str, IndexHit] = {}
    for h in [*v, *k]:
        union.setdefault(h.message_id, h)
    scored = sorted(((float(vectors(mid) @ q2), h) for mid, h in union.items()), key=lambda s: -s[0])
    third = [IndexHit(h.message_id, h.thread_id, s, seq=h.seq) for s, h in scored]
    return _fuse3(v, k, third, weight, options, want)


def second_stage(
    name: str, texts: dict[str, str], embedder: CachingEmbedder, weight: float, rows: TokenRows | None
) -> Any:
    """The ranker of a ``--rerank`` name: ``none`` (recall's own), ``maxsim``, ``rocchio<N>``."""
    if name == "none":
        return engine_ranker
    if name == "maxsim" and rows is not None:
        return functools.partial(maxsim_ranker, rows, texts, weight)
    if name.startswith("rocchio"):

        def vec(mid: str) -> np.ndarray:
            return np.asarray(embedder.embed_documents([texts[mid]])[0])

        def qvec(text: str) -> np.ndarray:
            return np.asarray(embedder.embed_query(text))

        return functools.partial(rocchio_ranker, vec, qvec, int(name[len("rocchio") :] or 3), weight)
    raise SystemExit(f"unknown rerank {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--datasets", default="locomo,longmemeval")
    parser.add_argument("--index", default="plain")
    parser.add_argument("--rerank", default="none")
    parser.add_argument("--weight", type=float, default=1.0, help="the second stage's list weight")
    parser.add_argument("--candidates", default="4")
    parser.add_argument("--top-k", type=int, default=4)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "memstack-index-text-lab")
    args = parser.parse_args(argv)
    from memstack.bootstrap import make_embedder

    rows: TokenRows | None = None
    embedder = CachingEmbedder(make_embedder("wordllama"))
    for variant in args.index.split(","):
        for ds in args.datasets.split(","):
            lab = collect(ds, variant, args.cache)
            texts = {m.id: searchable_text(m) for msgs in lab.messages.values() for m in msgs}
            for cand in (int(c) for c in args.candidates.split(",")):
                for rerank in args.rerank.split(","):
                    options = SemanticRecallOptions(top_k=args.top_k, hybrid={"candidates": cand})
                    if rerank == "maxsim":
                        rows = rows or TokenRows()
                    ranker = second_stage(rerank, texts, embedder, args.weight, rows)
                    r = evaluate(lab, ranker, options)
                    print(
                        f"{ds:12s} index {variant:5s} cand {cand:2d} rerank {rerank:9s} w {args.weight:.2f} "
                        f"recall {r['all']:.3f}  temporal {r['temporal']:.3f}  multi {r['multi']:.3f}  "
                        f"msgs {r['messages']:.1f}",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
