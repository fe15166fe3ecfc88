"""Answer quality: answer each question from the context Memstack assembles, with a chat model, and judge the
answer against the gold one with a fixed LLM-as-judge prompt. Runs only when ``OPENAI_API_KEY`` (or
``OPENAI_BASE_URL``, any OpenAI-compatible endpoint) is set; otherwise it says it skipped and why.

Data: LoCoMo (``locomo-dev.json``; categories 1–4, category 5 skipped as in the demo) or LongMemEval
(``--longmemeval FILE``: its JSON list of instances with ``haystack_sessions``; each instance is its own
resource). The flow per conversation: save every session as a thread of the resource, then for each question
``context()`` in a fresh thread (hash embedder by default, hybrid recall, top_k 4), answer with
``memstack.bootstrap.make_chat_model()`` (``MEMSTACK_CHAT_MODEL``, default gpt-4o-mini, temperature 0), then
judge with the same model. Reported: accuracy per category and overall, and input/output tokens per question
(answer and judge apart).

The judge prompt follows the published practice of LoCoMo-style evaluations (Mem0's and LongMemEval's
LLM-as-judge: a lenient semantic match against the gold answer, dates matching in any format, one word out),
written here in our own words and fixed: changing it changes the benchmark.

Usage: ``python benchmarks/answer_quality.py [--quick] [--longmemeval FILE] [--limit N] [--embedder hash]
[--out benchmarks/results/answer_quality]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import RESULTS, bench_data_path, machine, machine_line, markdown_table, write_report  # noqa: E402

ANSWER_INSTRUCTIONS = (
    "You answer questions about a long conversation between two people, using only the memory shown to you "
    "(earlier messages with their dates). Answer in a short phrase — a name, a date, a place, a few words. "
    "When a question asks when something happened, give the date as precisely as the memory allows. If the "
    "memory does not hold the answer, say you do not know."
)
"""The answering model's instructions (the question arrives as the user message after the context)."""

JUDGE_PROMPT = """You grade an answer to a question about a conversation, given the correct (gold) answer.

Question: {question}
Gold answer: {gold}
Answer to grade: {answer}

Grade it CORRECT when it conveys the same fact as the gold answer, even if it is worded differently, longer,
or more specific; a date or time counts as the same when it points at the same day, month or period in any
format. Grade it WRONG when it contradicts the gold answer, names something else, misses the point, or says
it does not know. Reply with exactly one word: CORRECT or WRONG."""
"""The judge's fixed prompt: LoCoMo/Mem0/LongMemEval-style lenient semantic match, in our own words."""


@dataclass(frozen=True)
class QA:
    """One question with its gold answer and category name."""

    question: str
    answer: str
    category: str


@dataclass
class Corpus:
    """A resource's sessions (thread id → messages as save_messages takes them) and its questions."""

    resource_id: str
    sessions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    questions: list[QA] = field(default_factory=list)


def read_locomo(path: Path, indexes: list[int] | None = None) -> list[Corpus]:
    """LoCoMo conversations with their gold answers (category 5 and questions without valid evidence are left
    out, exactly as ``memstack.locomo`` leaves them out)."""
    from memstack import locomo

    raw = locomo.read_samples(path)
    chosen = indexes if indexes is not None else list(range(len(raw)))
    out = []
    for conv, i in zip(locomo.load(path, chosen), chosen, strict=True):
        corpus = Corpus(conv.resource_id)
        valid = set()
        for thread, turns in conv.sessions.items():
            corpus.sessions[thread] = [
                {"id": t.message_id, "role": t.role, "content": t.text, "created_at": t.created_at}
                for t in turns
            ]
            valid |= {t.message_id.split(":", 1)[1] for t in turns}
        for qa in raw[i].get("qa", []):
            if qa.get("category") == 5 or not locomo.evidence_ids(qa.get("evidence"), valid):
                continue
            category = locomo.CATEGORIES.get(int(qa["category"]), str(qa["category"]))
            corpus.questions.append(QA(str(qa["question"]), str(qa.get("answer", "")), category))
        out.append(corpus)
    return out


def _longmemeval_date(value: str) -> datetime:
    """LongMemEval dates look like ``2023/05/20 (Sat) 02:21``; anything else gives 2023-01-01 UTC."""
    try:
        return datetime.strptime(
            value.split(" (")[0] + " " + value.split(") ")[-1], "%Y/%m/%d %H:%M"
        ).replace(tzinfo=UTC)
    except (ValueError, IndexError):
        try:
            return datetime.strptime(value[:10], "%Y/%m/%d").replace(tzinfo=UTC)
        except ValueError:
            return datetime(2023, 1, 1, tzinfo=UTC)


def read_longmemeval(path: Path, limit: int | None = None) -> list[Corpus]:
    """LongMemEval instances (Wu et al., 2024: ``longmemeval_s.json`` / ``_m`` / ``_oracle``): a JSON list of
    ``{question_id, question_type, question, answer, question_date, haystack_session_ids, haystack_dates,
    haystack_sessions: [[{role, content, has_answer?}, ...], ...]}``. Each instance becomes one resource
    (``lme-<question_id>``) whose sessions are threads; its one question is asked after them. Abstention
    questions (``question_id`` ending ``_abs``) are kept with category ``<type> (abstention)``."""
    from memstack import locomo

    raw = locomo.read_samples(path)
    if not isinstance(raw, list):
        raise ValueError("LongMemEval data must be a JSON list of instances")
    out = []
    for item in raw[:limit] if limit else raw:
        qid = str(item["question_id"])
        corpus = Corpus(f"lme-{qid}")
        ids = item.get("haystack_session_ids") or [f"s{n}" for n in range(len(item["haystack_sessions"]))]
        dates = item.get("haystack_dates") or [""] * len(ids)
        for sid, date, session in zip(ids, dates, item["haystack_sessions"], strict=True):
            start = _longmemeval_date(str(date))
            thread = f"{corpus.resource_id}-{sid}"
            corpus.sessions[thread] = [
                {
                    "id": f"{sid}:{n}",
                    "role": turn["role"] if turn.get("role") in ("user", "assistant") else "user",
                    "content": str(turn.get("content", "")),
                    "created_at": start + timedelta(seconds=n),
                }
                for n, turn in enumerate(session)
                if str(turn.get("content", "")).strip()
            ]
        category = str(item.get("question_type", "unknown")) + (
            " (abstention)" if qid.endswith("_abs") else ""
        )
        question = str(item["question"])
        if item.get("question_date"):
            question = f"(Today is {item['question_date']}.) {question}"
        corpus.questions.append(QA(question, str(item.get("answer", "")), category))
        out.append(corpus)
    return out


def configured() -> str | None:
    """Why the benchmark cannot run (no key, no endpoint), or ``None`` when it can."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return None
    return "OPENAI_API_KEY / OPENAI_BASE_URL not set: answering and judging need a chat model"


def judge_verdict(text: str) -> bool:
    """The judge's one-word reply → correct? (``CORRECT`` anywhere and no ``WRONG`` first)."""
    upper = text.strip().upper()
    return upper.startswith("CORRECT") or ("CORRECT" in upper and "WRONG" not in upper)


def evaluate(corpora: list[Corpus], *, embedder: str, top_k: int, log: Any = sys.stderr) -> dict[str, Any]:
    """Store, ask, answer and judge; returns accuracy per category and token counts."""
    from memstack import Memory
    from memstack.bootstrap import make_chat_model

    chat = make_chat_model()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memstack-answers-") as tmp:
        memory = Memory.local(Path(tmp) / "answers.db", embedder=embedder)
        for corpus in corpora:
            for thread, messages in corpus.sessions.items():
                for start in range(0, len(messages), 500):
                    memory.save_messages(
                        thread_id=thread,
                        resource_id=corpus.resource_id,
                        messages=messages[start : start + 500],
                    )
            for qa in corpus.questions:
                ctx = memory.context(
                    thread_id=f"{corpus.resource_id}-questions",
                    resource_id=corpus.resource_id,
                    message=qa.question,
                    instructions=ANSWER_INSTRUCTIONS,
                    options={"semantic_recall": {"top_k": top_k}, "read_only": True},
                )
                answer = chat.complete(ctx.to_openai()["messages"], temperature=0.0, max_output_tokens=200)
                verdict = chat.complete(
                    [
                        {
                            "role": "user",
                            "content": JUDGE_PROMPT.format(
                                question=qa.question, gold=qa.answer, answer=answer.text
                            ),
                        }
                    ],
                    temperature=0.0,
                    max_output_tokens=5,
                )
                rows.append(
                    {
                        "resource": corpus.resource_id,
                        "category": qa.category,
                        "correct": judge_verdict(verdict.text),
                        "answer_input_tokens": answer.input_tokens,
                        "answer_output_tokens": answer.output_tokens,
                        "judge_tokens": verdict.input_tokens + verdict.output_tokens,
                        "context_tokens": ctx.token_count,
                    }
                )
            log.write(f"  {corpus.resource_id}: {len(corpus.questions)} questions answered and judged\n")
        memory.close()
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by[r["category"]].append(r)
        by["all"].append(r)
    return {
        "chat_model": chat.model_id,
        "groups": {
            name: {
                "questions": len(rs),
                "accuracy": statistics.fmean(r["correct"] for r in rs),
                "answer_input_tokens_per_question": statistics.fmean(r["answer_input_tokens"] for r in rs),
                "answer_output_tokens_per_question": statistics.fmean(r["answer_output_tokens"] for r in rs),
                "context_tokens_per_question": statistics.fmean(r["context_tokens"] for r in rs),
                "judge_tokens_per_question": statistics.fmean(r["judge_tokens"] for r in rs),
            }
            for name, rs in by.items()
        },
    }


def render(result: dict[str, Any]) -> str:
    """The Markdown report (or the reason it skipped)."""
    lines = ["# Answer quality (LLM-as-judge)", "", machine_line(result["machine"]), ""]
    if result.get("skipped"):
        return "\n".join(lines + [f"Skipped: {result['skipped']}."]) + "\n"
    lines.append(
        f"Data: {result['data']} ({result['dataset']}); embedder {result['embedder']}, hybrid recall top_k "
        f"{result['top_k']}; answers and judge: {result['chat_model']}, temperature 0; 1 run."
    )
    lines.append("")
    rows = [
        [
            name,
            int(g["questions"]),
            f"{g['accuracy']:.3f}",
            f"{g['context_tokens_per_question']:.0f}",
            f"{g['answer_input_tokens_per_question']:.0f}",
            f"{g['answer_output_tokens_per_question']:.0f}",
            f"{g['judge_tokens_per_question']:.0f}",
        ]
        for name, g in result["groups"].items()
    ]
    lines.append(
        markdown_table(
            [
                "category",
                "questions",
                "accuracy",
                "context tokens / q",
                "answer input tokens / q",
                "answer output tokens / q",
                "judge tokens / q",
            ],
            rows,
        )
    )
    return "\n".join(lines) + "\n"


def run(
    *,
    data: Path,
    longmemeval: Path | None,
    indexes: list[int] | None,
    limit: int | None,
    embedder: str,
    top_k: int,
) -> dict[str, Any]:
    """Run the benchmark, or return why it skipped."""
    result: dict[str, Any] = {"benchmark": "answer_quality", "machine": machine()}
    reason = configured()
    if reason:
        result["skipped"] = reason
        return result
    corpora = read_longmemeval(longmemeval, limit) if longmemeval else read_locomo(data, indexes)
    if limit and not longmemeval:
        for c in corpora:
            c.questions = c.questions[:limit]
    result.update(
        {
            "data": str(longmemeval or data),
            "dataset": "LongMemEval" if longmemeval else "LoCoMo",
            "embedder": embedder,
            "top_k": top_k,
        }
    )
    result.update(evaluate(corpora, embedder=embedder, top_k=top_k))
    return result


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=None, help="LoCoMo JSON")
    parser.add_argument("--longmemeval", type=Path, default=None, help="a LongMemEval JSON file instead")
    parser.add_argument("--quick", action="store_true", help="LoCoMo conversation 0 only")
    parser.add_argument(
        "--limit", type=int, default=None, help="questions per conversation (LongMemEval: instances)"
    )
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--top-k", type=int, default=4)
    parser.add_argument("--out", type=Path, default=RESULTS / "answer_quality")
    args = parser.parse_args(argv)
    result = run(
        data=args.data or bench_data_path(),
        longmemeval=args.longmemeval,
        indexes=[0] if args.quick else None,
        limit=args.limit,
        embedder=args.embedder,
        top_k=args.top_k,
    )
    write_report(args.out, render(result), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
