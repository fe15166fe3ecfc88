"""The main job: replay LoCoMo conversations through the public API exactly as an agent would, then
measure how much of each question's evidence the assembled context holds.

For every turn: assemble the context for it, then save it. Each session is a thread of the conversation's
resource. Then, for every question with valid evidence (category 5 skipped), assemble the context in a
fresh thread of that resource and check which evidence turns it holds.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memstack.errors import InvalidInput
from memstack.locomo import CATEGORIES, Conversation, Turn
from memstack.memory import Memory
from memstack.observation.prompts import request_kind
from memstack.ports import ChatModel, ChatResult
from memstack.transfer.progress import NoProgress, Progress

DEMO_MESSAGE_TOKENS = 2_000
"""``--observational``: the Observer's threshold in the demo. Mastra's 30,000 is more than a whole LoCoMo
conversation (15,000-25,000 tokens), so the demo observes sooner to show the layer working; each
conversation is then replayed as one thread (``replay_threads`` says why)."""

DEMO_OBSERVATION_TOKENS = 4_000
"""``--observational``: the Reflector's threshold in the demo (Mastra: 40,000)."""


def replay_threads(conv: Conversation, *, one_thread: bool = False) -> dict[str, list[Turn]]:
    """The threads a conversation is replayed in: one per session (the default), or with ``one_thread``
    every session in order in one thread, ``<resource>-all``.

    ``--observational`` replays one thread per conversation: the Observer's trigger counts one thread's
    unobserved tokens, and a LoCoMo session holds 300-1,500 tokens, so no session thread ever reaches the
    demo's 2,000-token threshold, whereas a conversation (15,000-25,000 tokens) crosses it many times —
    as one long-running chat per user does. The turns, ids and dates are the same either way, so the
    questions check the same evidence."""
    if not one_thread:
        return dict(conv.sessions)
    return {f"{conv.resource_id}-all": [turn for turns in conv.sessions.values() for turn in turns]}


def observational_options(message_tokens: int = DEMO_MESSAGE_TOKENS) -> dict[str, Any]:
    """Observational memory for the demo: resource scope (the questions thread sees what every session
    taught), observing every ``message_tokens`` tokens, reflecting at ``DEMO_OBSERVATION_TOKENS``."""
    return {
        "scope": "resource",
        "observation": {"message_tokens": message_tokens},
        "reflection": {"observation_tokens": max(DEMO_OBSERVATION_TOKENS, message_tokens * 2)},
    }


class CountingChat:
    """A ``ChatModel`` wrapper that counts Observer, Reflector and title calls and their tokens."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.calls: dict[str, int] = defaultdict(int)
        self.input_tokens = 0
        self.output_tokens = 0

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        self.calls[request_kind(messages)] += 1
        result = self.inner.complete(
            messages, tools=tools, max_output_tokens=max_output_tokens, temperature=temperature
        )
        self.input_tokens += result.input_tokens
        self.output_tokens += result.output_tokens
        return result


def observation_line(memory: Memory, conversations: list[Conversation], chat: CountingChat) -> str:
    """The machine-readable observational-memory line: what the layer did over the run."""
    observed = tokens = reflections = failures = 0
    for conv in conversations:
        threads = replay_threads(conv, one_thread=True)
        for thread_id in threads:
            rec = memory.get_observation_record(resource_id=conv.resource_id, thread_id=thread_id)
            if rec is not None:
                observed += rec.observed_seq(thread_id)
        rec = memory.get_observation_record(resource_id=conv.resource_id, thread_id=next(iter(threads)))
        if rec is not None:
            tokens += rec.observation_tokens
            reflections += rec.generation_count
            failures += rec.failure_count
    return (
        f"OBSERVATIONAL observed_messages={observed} observation_tokens={tokens} reflections={reflections} "
        f"failures={failures} observer_calls={chat.calls['observer']} reflector_calls={chat.calls['reflector']} "
        f"model_input_tokens={chat.input_tokens} model_output_tokens={chat.output_tokens}"
    )


@dataclass
class DemoResult:
    """Figures of one demo run (times in milliseconds)."""

    conversations: int = 0
    messages: int = 0
    scores: list[tuple[str, int, float]] = field(default_factory=list)  # (resource, category, recall)
    context_sizes: list[int] = field(default_factory=list)
    save_ms: list[float] = field(default_factory=list)
    context_ms: list[float] = field(default_factory=list)

    @property
    def evidence_recall(self) -> float:
        """Mean share of evidence turns found, over questions."""
        return statistics.fmean(s for _, _, s in self.scores) if self.scores else 0.0

    def result_line(self) -> str:
        """The machine-readable last line of the demo."""
        mean_ctx = statistics.fmean(self.context_sizes) if self.context_sizes else 0.0
        return (
            f"RESULT conversations={self.conversations} messages={self.messages} questions={len(self.scores)} "
            f"evidence_recall={self.evidence_recall:.3f} mean_context_messages={mean_ctx:.1f} "
            f"save_ms_p50={_p50(self.save_ms):.2f} context_ms_p50={_p50(self.context_ms):.2f}"
        )


def _p50(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def run(
    memory: Memory,
    conversations: list[Conversation],
    *,
    progress: Progress | None = None,
    one_thread: bool = False,
) -> DemoResult:
    """Replay and question every conversation through ``memory``; returns the figures. ``progress``
    counts turns saved and questions asked (``memstack.cli.progress.ProgressBar`` shows it); ``one_thread``:
    each conversation in one thread instead of a thread per session (``replay_threads``)."""
    result = DemoResult(conversations=len(conversations))
    progress = progress or NoProgress()
    progress.start(sum(c.turn_count + len(c.questions) for c in conversations), "steps")
    for conv in conversations:
        total = conv.turn_count
        for thread_id, turns in replay_threads(conv, one_thread=one_thread).items():
            for turn in turns:
                t0 = time.perf_counter()
                memory.context(thread_id=thread_id, resource_id=conv.resource_id, message=turn.text)
                t1 = time.perf_counter()
                memory.save_messages(
                    thread_id=thread_id,
                    resource_id=conv.resource_id,
                    messages=[
                        {
                            "id": turn.message_id,
                            "role": turn.role,
                            "content": turn.text,
                            "created_at": turn.created_at,
                        }
                    ],
                )
                t2 = time.perf_counter()
                result.context_ms.append((t1 - t0) * 1000)
                result.save_ms.append((t2 - t1) * 1000)
                progress.advance(1)
        result.messages += total
        question_thread = f"{conv.resource_id}-questions"
        for q in conv.questions:
            ctx = memory.context(
                thread_id=question_thread,
                resource_id=conv.resource_id,
                message=q.text,
                options={"semantic_recall": {"now": conv.asked_at}},
            )
            shown = ctx.message_ids
            result.context_sizes.append(len(shown))
            result.scores.append(
                (conv.resource_id, q.category, sum(e in shown for e in q.evidence) / len(q.evidence))
            )
            progress.advance(1)
    return result


def table(result: DemoResult) -> str:
    """Evidence recall per category and per conversation, as a plain-text table."""
    by_cat: dict[int, list[float]] = defaultdict(list)
    by_conv: dict[str, list[float]] = defaultdict(list)
    for resource, cat, score in result.scores:
        by_cat[cat].append(score)
        by_conv[resource].append(score)
    lines = [f"{'category':<16}{'questions':>10}{'evidence_recall':>17}"]
    for cat in sorted(by_cat):
        name = f"{cat} {CATEGORIES.get(cat, '?')}"
        lines.append(f"{name:<16}{len(by_cat[cat]):>10}{statistics.fmean(by_cat[cat]):>17.3f}")
    lines.append(f"{'all':<16}{len(result.scores):>10}{result.evidence_recall:>17.3f}")
    lines.append("")
    lines.append(f"{'conversation':<16}{'questions':>10}{'evidence_recall':>17}")
    for resource, scores in by_conv.items():
        lines.append(f"{resource:<16}{len(scores):>10}{statistics.fmean(scores):>17.3f}")
    return "\n".join(lines)


REPO_DATA = Path("data") / "locomo" / "locomo-dev-2.json.gz"
"""The LoCoMo subset the repository ships (two conversations, CC BY-NC 4.0; data/locomo/README.md),
relative to the repository's root."""

FULL_DATA = Path("shared") / "data" / "locomo" / "locomo-dev.json"
"""The five-conversation development file, relative to the folder that holds the repository (the sibling
``shared`` folder of the project's machines; not part of the repository)."""


def _repo_roots() -> list[Path]:
    """The repository this package was installed from (an editable install), then the working directory."""
    package_repo = Path(__file__).resolve().parents[2]
    return list(dict.fromkeys([package_repo, Path.cwd()]))


def default_data_path() -> Path:
    """The LoCoMo file ``memstack demo`` and the tests read: the repository's own subset,
    ``data/locomo/locomo-dev-2.json.gz``, from the repository this package was installed from or the working
    directory; else the full ``../shared/data/locomo/locomo-dev.json`` beside either (``full_data_path``).

    Raises:
        InvalidInput: neither is found (field ``data``): the message names the paths tried and ``--data``.
    """
    tried = [root / REPO_DATA for root in _repo_roots()]
    for path in tried:
        if path.is_file():
            return path
    full = full_data_path()
    if full is not None:
        return full
    raise InvalidInput(
        "no LoCoMo data found (tried "
        + ", ".join(str(p) for p in tried)
        + "): run from a clone of the repository, or pass a LoCoMo JSON file with --data",
        field="data",
    )


def full_data_path() -> Path | None:
    """The full development file ``locomo-dev.json`` in the sibling ``shared`` folder of the repository or
    of the working directory (``make bench``'s data), or ``None`` when it is not there."""
    for root in _repo_roots():
        path = root.parent / FULL_DATA
        if path.is_file():
            return path
    return None
