"""Reading LoCoMo conversations (Maharana et al., ACL 2024; CC BY-NC 4.0) as turns and questions.

Format (``data/locomo/README.md``): a list of samples, each with ``conversation`` (speakers,
``session_<n>`` turn lists and ``session_<n>_date_time``) and ``qa`` (question, answer, evidence dia ids,
category 1–5). Malformed evidence ids ("D8:6; D9:17", "D10:", ids that do not exist) are split or skipped,
never fatal.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memstack.dates import MONTHS
from memstack.errors import InvalidInput

CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
    11: "single-session-user",
    12: "single-session-assistant",
    13: "single-session-preference",
    14: "temporal-reasoning",
    15: "knowledge-update",
    16: "multi-session",
}
"""Category numbers: 1–5 are LoCoMo's, named as in LoCoMo's own code; 11–16 are LongMemEval's question types
as the LoCoMo-shaped LongMemEval file codes them (``shared/data/longmemeval/README.md``)."""

TEMPORAL_CATEGORIES = frozenset({2, 14})
"""The categories whose questions are about time (LoCoMo's temporal, LongMemEval's temporal-reasoning)."""

_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.IGNORECASE)
_MONTHS = {m: i + 1 for i, m in enumerate(MONTHS)}
_DIA = re.compile(r"D\d+:\d+")
_NO_DATE = datetime(2023, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn: ``message_id`` is ``<sample_id>:<dia_id>``; ``text`` carries the speaker and caption."""

    message_id: str
    thread_id: str
    role: str
    text: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Question:
    """A question with its valid evidence message ids (category 5 is never included)."""

    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    """One LoCoMo sample: its resource id, sessions (thread id → turns, in order) and questions."""

    resource_id: str
    sessions: dict[str, list[Turn]]
    questions: list[Question]

    @property
    def turn_count(self) -> int:
        """Number of turns over all sessions."""
        return sum(len(t) for t in self.sessions.values())

    @property
    def asked_at(self) -> datetime:
        """When the questions are asked: the time of the last turn (the replay's "now"; the data gives no
        question dates)."""
        return max((t.created_at for turns in self.sessions.values() for t in turns), default=_NO_DATE)


def parse_date(value: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` → aware UTC datetime; an unreadable date gives 2023-01-01."""
    m = _DATE.search(value or "")
    if not m or m.group(5).lower() not in _MONTHS:
        return _NO_DATE
    hour = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "pm" else 0)
    return datetime(
        int(m.group(6)), _MONTHS[m.group(5).lower()], int(m.group(4)), hour, int(m.group(2)), tzinfo=UTC
    )


def evidence_ids(raw: Any, valid: set[str]) -> list[str]:
    """Dia ids in ``raw`` (a list of possibly malformed strings) that exist in ``valid``, in order, once."""
    found: list[str] = []
    for item in raw if isinstance(raw, list) else []:
        for dia in _DIA.findall(str(item)):
            if dia in valid and dia not in found:
                found.append(dia)
    return found


def parse_sample(sample: dict[str, Any]) -> Conversation:
    """One sample of the JSON list as a ``Conversation``."""
    resource = str(sample.get("sample_id") or "conversation")
    conv = sample["conversation"]
    names = sorted(
        (k for k in conv if re.fullmatch(r"session_\d+", k) and isinstance(conv[k], list)),
        key=lambda k: int(k.split("_")[1]),
    )
    sessions: dict[str, list[Turn]] = {}
    valid: set[str] = set()
    for name in names:
        start = parse_date(str(conv.get(f"{name}_date_time", "")))
        thread = f"{resource}-{name}"
        turns = []
        for i, t in enumerate(conv[name]):
            text = f"{t['speaker']}: {t.get('text', '')}"
            if t.get("blip_caption"):
                text += f" [shares an image: {t['blip_caption']}]"
            role = "user" if t["speaker"] == conv.get("speaker_a") else "assistant"
            turns.append(Turn(f"{resource}:{t['dia_id']}", thread, role, text, start + timedelta(seconds=i)))
            valid.add(t["dia_id"])
        sessions[thread] = turns
    questions = []
    for qa in sample.get("qa", []):
        if qa.get("category") == 5:
            continue
        ev = evidence_ids(qa.get("evidence"), valid)
        if ev:
            questions.append(
                Question(str(qa["question"]), int(qa["category"]), tuple(f"{resource}:{e}" for e in ev))
            )
    return Conversation(resource, sessions, questions)


def read_samples(path: str | Path) -> list[Any]:
    """The raw samples of a LoCoMo-shaped JSON file: ``.json``, or gzip-compressed when the name ends in
    ``.gz`` (the repository's ``data/locomo/locomo-dev-2.json.gz``).

    Raises:
        InvalidInput: the file is missing, unreadable, not JSON, or not a JSON list (field ``data``).
    """
    p = Path(path)
    try:
        raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, EOFError) as exc:
        raise InvalidInput(f"cannot read LoCoMo data at {p}: {exc}", field="data") from None
    if not isinstance(data, list):
        raise InvalidInput("LoCoMo data must be a JSON list of samples", field="data")
    return data


def load(path: str | Path, indexes: list[int] | None = None) -> list[Conversation]:
    """The conversations of a LoCoMo JSON file (``.json``, or gzip-compressed ``.json.gz``), all or those at
    ``indexes``.

    Raises:
        InvalidInput: the file is missing, not LoCoMo JSON, or an index is out of range or listed twice (the
            same conversation replayed twice would be counted, and its questions scored, twice).
    """
    data = read_samples(path)
    chosen = range(len(data)) if indexes is None else indexes
    out = []
    for n, i in enumerate(chosen):
        if i in chosen[:n]:
            raise InvalidInput(f"conversation {i} is listed twice", field="conversations")
        if not 0 <= i < len(data):
            raise InvalidInput(
                f"conversation {i} is out of range (0..{len(data) - 1})", field="conversations"
            )
        try:
            out.append(parse_sample(data[i]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidInput(
                f"sample {i} is not LoCoMo data: {type(exc).__name__} {exc}", field="data"
            ) from None
    return out
