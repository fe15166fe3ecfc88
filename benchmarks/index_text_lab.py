"""Experiments on what recall indexes and how it re-ranks, replayed like ``benchmarks/fusion_lab.py``.

Three families (issue 17, docs/adr/0014-contextual-index-text-and-reranking.md):

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
import pickle
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import is_multi_session  # noqa: E402
from benchmarks.fusion_lab import Case, Lab, engine_ranker, evaluate  # noqa: E402
from benchmarks.recall_quality import CachingEmbedder, dataset, store_conversation  # noqa: E402

from memstack.config import SemanticRecallOptions  # noqa: E402
from memstack.dates import keyword_query  # noqa: E402
from memstack.fusion import FusedHit, fuse  # noqa: E402
from memstack.model import Message  # noqa: E402
from memstack.ports import IndexEntry, IndexHit  # noqa: E402
from memstack.recall.engine import entry_metadata, list_depth  # noqa: E402
from memstack.text import searchable_text  # noqa: E402

DEPTH = 64
INDEX_VARIANTS = ("plain", "kw", "vec", "both")


def contextual(message: Message, previous: Message | None) -> str:
    """The message's searchable text preceded by its predecessor's (the turn it answers), when it has one."""
    own = searchable_text(message)
    if previous is None:
        return own
    before = searchable_text(previous)
    return f"{before}\n{own}" if before else own


def collect(dataset_name: str, variant: str, cache: Path, depth: int = DEPTH) -> Lab:
    """The lab of one dataset with the index text ``variant`` (WordLlama, the default embedder)."""
    from memstack import Memory, locomo
    from memstack.bootstrap import make_embedder

    cache.mkdir(parents=True, exist_ok=True)
    pick = cache / f"{dataset_name}-{variant}-{depth}.pickle"
    if pick.exists():
        with pick.open("rb") as f:
            lab: Lab = pickle.load(f)
        return lab
    ds = dataset(dataset_name)
    conversations = locomo.load(ds.path)
    embedder = CachingEmbedder(make_embedder("wordllama"))
    cases: list[Case] = []
    messages: dict[str, list[Message]] = {}
    with tempfile.TemporaryDirectory(prefix="memstack-index-text-lab-") as tmp:
        memory = Memory.local(Path(tmp) / "lab.db", embedder=embedder)  # type: ignore[arg-type]
        engine = memory.recall_engine
        for conv in conversations:
            store_conversation(memory, conv)
            msgs: list[Message] = []
            for thread_id in conv.sessions:
                thread_msgs = engine.store.list_messages(conv.resource_id, thread_id, limit=100_000)
                msgs.extend(thread_msgs)
                if variant != "plain":
                    thread = engine.store.get_thread(conv.resource_id, thread_id)
                    assert thread is not None
                    reindex(engine, thread, thread_msgs, variant)
            messages[conv.resource_id] = msgs
            sys.stderr.write(f"  {dataset_name}/{variant}: stored {conv.resource_id}\n")
            session_of = {t.message_id: th for th, turns in conv.sessions.items() for t in turns}
            options = SemanticRecallOptions(now=conv.asked_at)
            for q in conv.questions:
                when = engine.time_range(q.text, options)
                vector = engine.embed_query(q.text)
                found = engine.index.search(
                    conv.resource_id,
                    top_k=depth,
                    vector=vector if any(vector) else None,
                    text=keyword_query(q.text, when),
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
    lab = Lab(dataset_name, "wordllama", cases, messages)
    pick.write_bytes(pickle.dumps(lab))
    return lab


def reindex(engine: Any, thread: Any, msgs: list[Message], variant: str) -> None:
    """Rewrite the thread's documents with contextual text on the variant's side(s)."""
    ordered = sorted(msgs, key=lambda m: m.seq)
    entries: list[IndexEntry] = []
    texts: list[tuple[Message, str, str]] = []
    previous: Message | None = None
    for m in ordered:
        own = searchable_text(m)
        if own:
            ctx = contextual(m, previous)
            texts.append((m, ctx if variant in ("kw", "both") else own, ctx if variant in ("vec", "both") else own))
        previous = m
    vectors = engine.embed_documents([v for _, _, v in texts])
    for (m, kw, _), vec in zip(texts, vectors, strict=True):
        entries.append(
            IndexEntry(
                message_id=m.id,
                chunk=0,
                thread_id=thread.id,
                resource_id=thread.resource_id,
                role=m.role,
                seq=m.seq,
                created_at=m.created_at,
                text=kw,
                vector=vec,
                metadata=entry_metadata(thread, m),
            )
        )
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
    rows: TokenRows, texts: dict[str, str], weight: float, case: Case, options: SemanticRecallOptions, want: int
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
        FusedHit(mid, by_id[mid].thread_id, scores[mid], by_id[mid].vector_rank, by_id[mid].keyword_rank, by_id[mid].seq)
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
                    if rerank == "none":
                        ranker: Any = engine_ranker
                    elif rerank == "maxsim":
                        rows = rows or TokenRows()
                        ranker = functools.partial(maxsim_ranker, rows, texts, args.weight)
                    elif rerank.startswith("rocchio"):
                        feedback = int(rerank[len("rocchio") :] or 3)

                        def vec(mid: str) -> np.ndarray:
                            return np.asarray(embedder.embed_documents([texts[mid]])[0])

                        def qvec(text: str) -> np.ndarray:
                            return np.asarray(embedder.embed_query(text))

                        ranker = functools.partial(rocchio_ranker, vec, qvec, feedback, args.weight)
                    else:
                        raise SystemExit(f"unknown rerank {rerank}")
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
